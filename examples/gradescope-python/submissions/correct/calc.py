def add(a, b):
    return a + b


def mean(xs):
    return sum(xs) / len(xs) if xs else 0.0
