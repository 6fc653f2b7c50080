def fib(n):
    # off by one: starts at 1
    a, b = 1, 1
    for _ in range(n):
        a, b = b, a + b
    return a
