"""Load driver of bench/queue.sh: submits N submissions to a corral, waits for all, prints a
Markdown table row from the server's own timestamps (created_at, started_at, finished_at)."""

import json
import sys
import time
import urllib.request

base, token, workload, n, workers = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]

C = "#include <stdio.h>\nint main(void){long a,b;if(scanf(\"%ld %ld\",&a,&b)!=2)return 1;printf(\"%ld\\n\",a+b);return 0;}\n"
PY = "a, b = map(int, input().split())\nprint(a + b)\n"


def call(method, path, body=None):
    req = urllib.request.Request(base + path, method=method,
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
                                 data=None if body is None else json.dumps(body).encode())
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read() or b"null")


def item(i):
    src, lang = (C, "c") if workload == "c" else (PY, "python")
    return {"language": lang, "source_code": src, "stdin": f"{i} {i}", "expected_output": str(2 * i)}


ids = []
t0 = time.time()
for start in range(0, n, 50):
    r = call("POST", "/submissions/batch", {"submissions": [item(i) for i in range(start, min(n, start + 50))]})
    ids += [x["id"] for x in r["submissions"]]
t_submitted = time.time() - t0
views = {}
deadline = time.time() + 1800
while len(views) < len(ids):
    for i in ids:
        if i in views:
            continue
        v = call("GET", f"/submissions/{i}?wait=true&timeout=5")
        if v["status"] in ("done", "failed"):
            views[i] = v
    if time.time() > deadline:
        sys.exit("bench: submissions not finished after 30 minutes")
bad = [v for v in views.values() if v["verdict"] != "accepted"]
if bad:
    sys.exit(f"bench: {len(bad)} submissions not accepted, e.g. {bad[0]}")


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


waits = [v["started_at"] - v["created_at"] for v in views.values()]
e2e = [v["finished_at"] - v["created_at"] for v in views.values()]
first = min(v["created_at"] for v in views.values())
last = max(v["finished_at"] for v in views.values())
judged_per_s = n / max((last - first) / 1000, 1e-3)
ms = lambda x: f"{x / 1000:.2f} s" if x >= 1000 else f"{x} ms"
print(f"| {workload} | {workers} | {n / max(t_submitted, 1e-3):.0f} | {judged_per_s:.1f} | {ms(pct(waits, 50))} | {ms(pct(waits, 95))} | {ms(pct(e2e, 50))} | {ms(pct(e2e, 95))} |")
