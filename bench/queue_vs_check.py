"""Queue row of bench/service.sh: N submissions of one folder against one suite through a running
server's /submissions (all submitted at once, then waited for), then the same N gradings with
`corral check` run one after another. Prints one JSON object.

    python3 bench/queue_vs_check.py URL TOKEN SUITE_ID SUITE_FILE SUBMISSION_DIR CORRAL N
"""

import json
import os
import subprocess
import sys
import time
import urllib.request

base, token, suite_id, suite_file, sub_dir, corral, n = sys.argv[1:8]
n = int(n)


def call(method, path, body=None):
    req = urllib.request.Request(base + path, method=method,
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
                                 data=None if body is None else json.dumps(body).encode())
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read() or b"null")


files = []
for root, _, names in os.walk(sub_dir):
    for name in names:
        path = os.path.join(root, name)
        files.append({"path": os.path.relpath(path, sub_dir), "content": open(path).read()})
item = {"suite": suite_id, "files": files}

# One untimed submission first: the workers' first sandboxes are built outside the timing.
first = call("POST", "/submissions", item)["id"]
call("GET", f"/submissions/{first}?wait=true&timeout=60")

t0 = time.monotonic()
ids = []
for start in range(0, n, 50):
    r = call("POST", "/submissions/batch", {"submissions": [item] * min(50, n - start)})
    ids += [x["id"] for x in r["submissions"]]
views = {}
while len(views) < len(ids):
    for i in ids:
        if i not in views:
            v = call("GET", f"/submissions/{i}?wait=true&timeout=30")
            if v["status"] in ("done", "failed"):
                views[i] = v
    if time.monotonic() - t0 > 600:
        sys.exit("queue_vs_check: submissions not judged after 10 minutes")
queue_s = time.monotonic() - t0
verdicts = sorted({str(v.get("verdict")) for v in views.values()})

# The same gradings through the CLI, one after another (each builds its own sandboxes).
t0 = time.monotonic()
check_failures = 0
for _ in range(n):
    p = subprocess.run([corral, "check", suite_file, sub_dir, "--json", "-o", os.devnull],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    check_failures += p.returncode != 0
check_s = time.monotonic() - t0

print(json.dumps({"n": n, "queue_s": round(queue_s, 3), "queue_judged_per_s": round(n / queue_s, 2),
                  "check_s": round(check_s, 3), "check_per_s": round(n / check_s, 2),
                  "queue_verdicts": verdicts, "check_failures": check_failures}))
