# Hostile: leaves a score outside 0-1 and kills the grader: the check must error, not pass.
import json
import os
import signal

json.dump({"gradable": True, "score": 7}, open("/grade/results/results.json", "w"))
os.kill(-1, signal.SIGKILL)
