def fib(n):
    # one step too many: right for fib(1) by luck, wrong after
    a, b = 0, 1
    for _ in range(n + 1):
        a, b = b, a + b
    return a
