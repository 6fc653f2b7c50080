"""A PrairieLearn external grader for a Python question, written from PrairieLearn's documented
/grade layout: the student's fib.py is in /grade/student, the question's parameters in
/grade/data/data.json, and the results go to /grade/results/results.json.

Each test runs the student's code in a child process with a time limit, so a crash or a loop
fails that test only."""

import json
import os
import subprocess
import sys

sys.path.insert(0, "/grade/serverFilesCourse")
from pl_helpers import clip  # noqa: E402  (the course's shared helpers)

RESULTS = "/grade/results/results.json"
# PrairieLearn does not make /grade/results: the grader does.
os.makedirs("/grade/results", exist_ok=True)
data = json.load(open("/grade/data/data.json"))
n_max = data["params"]["n_max"]

if not os.path.isfile("/grade/student/fib.py"):
    json.dump({"gradable": False, "message": "no file named fib.py was submitted"}, open(RESULTS, "w"))
    sys.exit(0)

CASES = [
    ("fib(0)", "the first number", 0, 0, 1),
    ("fib(1)", "the second number", 1, 1, 1),
    ("fib(10)", "a small number", 10, 55, 2),
    (f"fib({n_max})", "a large number, quickly", n_max, None, 2),
]


def fib(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


tests = []
for name, description, n, expected, points in CASES:
    expected = fib(n) if expected is None else expected
    code = f"import sys; sys.path.insert(0, '/grade/student'); from fib import fib; print(fib({n}))"
    try:
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=2)
        got = p.stdout.strip()
        if p.returncode != 0:
            ok, message = False, "raised: " + clip(p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit code {p.returncode}")
        else:
            ok = got == str(expected)
            message = "correct" if ok else f"expected {expected}, got {clip(got)}"
    except subprocess.TimeoutExpired:
        ok, message = False, "took longer than 2 seconds"
    tests.append({"name": name, "description": description, "points": points if ok else 0,
                  "max_points": points, "message": message})

earned = sum(t["points"] for t in tests)
possible = sum(t["max_points"] for t in tests)
json.dump({"gradable": True, "score": earned / possible,
           "message": f"{earned}/{possible} points", "tests": tests}, open(RESULTS, "w"))
