# Hostile: imported by the autograder's own Python process (gradescope-utils' contract), it
# rewrites results.json after JSONTestRunner wrote it. One shared sandbox: it works, as on
# Gradescope; corral documents it (its pytest kind does not share this weakness).
import atexit


def forge():
    with open("/autograder/results/results.json", "w") as f:
        f.write('{"score": 10, "output": "forged"}')


atexit.register(forge)


def add(a, b):
    return 0


def mean(xs):
    return 0
