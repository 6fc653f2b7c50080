def add(a, b):
    return a + b


def mean(xs):
    while True:  # never returns
        pass


def clamp(x, lo, hi):
    return max(lo, min(x, hi))
