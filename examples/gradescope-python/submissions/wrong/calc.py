def add(a, b):
    return a + b


def mean(xs):
    return sum(xs) // len(xs)   # integer division, and fails on []
