"""Runs as the unprivileged user `ag` (see run.sh): imports the student's fib.py in this very
process, as PrairieLearn's Python grader does, and writes the results to the random file name
run.sh left in /grade/filenames, which it deletes before the student's code runs."""

import json
import os
import sys

NAME_FILE = "/grade/filenames/output-fname.txt"
with open(NAME_FILE) as f:
    secret = f.read()
os.remove(NAME_FILE)
print("[grade.py] running as uid", os.getuid())
sys.path.insert(0, "/grade/run")
tests = []


def case(name, n, expected, points):
    try:
        got = fib(n)
        ok = got == expected
        message = "correct" if ok else f"expected {expected}, got {got!r}"
    except Exception as e:  # the student's code failing fails this test only
        ok, message = False, f"raised {type(e).__name__}"
    tests.append({"name": name, "points": points if ok else 0, "max_points": points, "message": message})


try:
    from fib import fib
except Exception as e:
    json.dump({"gradable": False, "message": f"fib.py could not be imported: {type(e).__name__}"}, open(secret, "w"))
    sys.exit(0)

case("fib(1)", 1, 1, 1)
case("fib(10)", 10, 55, 1)
case("fib(50)", 50, 12586269025, 2)
earned = sum(t["points"] for t in tests)
json.dump({"gradable": True, "score": earned / 4, "tests": tests}, open(secret, "w"))
