def add(a, b):
    return a + b


def mean(xs):
    while True:
        pass
