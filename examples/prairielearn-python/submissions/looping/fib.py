def fib(n):
    # exponential: fine for small n, never finishes for 90
    return n if n < 2 else fib(n - 1) + fib(n - 2)
