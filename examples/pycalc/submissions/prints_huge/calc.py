import sys


def add(a, b):
    # Floods standard output (pytest captures it) before answering.
    chunk = "x" * 65536 + "\n"
    for _ in range(2000):
        sys.stdout.write(chunk)
    return a + b


def mean(xs):
    return sum(xs) / len(xs) if xs else 0.0


def clamp(x, lo, hi):
    print("y" * 10_000_000)
    return max(lo, min(x, hi))
