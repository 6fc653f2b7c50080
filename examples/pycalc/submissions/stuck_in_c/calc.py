import hashlib


def add(a, b):
    return a + b


def mean(xs):
    # Minutes of work inside OpenSSL: the test timeout's SIGALRM handler cannot run until the
    # call returns, so only corral's watchdog stops it.
    hashlib.pbkdf2_hmac("sha256", b"x", b"y", 10**9)
    return sum(xs) / len(xs) if xs else 0.0


def clamp(x, lo, hi):
    return max(lo, min(x, hi))
