import hashlib
import os
import time


def add(a, b):
    return a + b


def mean(xs):
    # Fills the pids limit (each child sleeps), then minutes of work inside OpenSSL, where the
    # test timeout's SIGALRM handler cannot run: only corral's watchdog stops it, and it says
    # the processes filled the limit rather than guessing at C code.
    while True:
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            time.sleep(1000)
            os._exit(0)
    hashlib.pbkdf2_hmac("sha256", b"x", b"y", 10**9)
    return sum(xs) / len(xs) if xs else 0.0


def clamp(x, lo, hi):
    return max(lo, min(x, hi))
