def add(a, b):
    return 0


def mean(xs):
    return 0


def clamp(x, lo, hi):
    return 0
