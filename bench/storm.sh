#!/usr/bin/env bash
# An editor's run during a storm of checks (a script, not a test).
#
#   bench/storm.sh [--checks N] [--runs M]
#
# Builds release, then twice starts `corral serve` (parallelism 2) with the suites folder holding
# examples/check50-mario: once with `reserved_run_slots = 0` (runs and checks share the two
# slots) and once with the default 1. Each time N students post `/check` of mario's correct
# solution at once, and while they are graded one more student posts `/run`s of `echo hi`, one
# after another (at least M, and on until the storm is over). Prints the runs' latency (p50, mean,
# max) and how long the storm took, then the ratios between the two servers. Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
CHECKS=12
RUNS=20
while [ $# -gt 0 ]; do
  case "$1" in
    --checks) CHECKS=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    -h | --help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench/storm.sh: unknown argument $1 (try --help)" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "bench/storm.sh: run as root" >&2; exit 1; }
target="${CARGO_TARGET_DIR:-$PWD/target}"
echo "bench/storm.sh: building release" >&2
cargo build --release -q -p corral-cli
. bench/serve_lib.sh
work=$(mktemp -d /tmp/corral-storm-bench.XXXXXX)
cleanup() {
  stop_server
  rm -rf "$work"
}
trap cleanup EXIT

results=()
for reserved in 0 1; do
  rm -rf "$work/data"
  mkdir -p "$work/data/suites"
  cp -r examples/check50-mario "$work/data/suites/mario"
  rm -rf "$work/data/suites/mario/submissions"
  # Room for the whole storm from many tokens; nothing here is rate limited.
  cat >"$work/config.toml" <<TOML
parallelism = 2
reserved_run_slots = $reserved
[rate_limit.student]
per_minute = 100000
burst = 100000
TOML
  start_server "$target/release/corral" "$work"
  line=$(python3 - "http://$addr" "$admin" "$CHECKS" "$RUNS" "$reserved" \
    examples/check50-mario/submissions/correct/mario.c <<'PY'
import json, statistics, sys, threading, time, urllib.request
base, admin, checks, runs, reserved, source = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]

def call(path, body, token, timeout=600):
    req = urllib.request.Request(base + path, method="POST", data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())

def student(i):
    return call("/tokens", {"role": "student", "name": f"storm{i}"}, admin)["token"]

def upload(token):
    boundary = "corralstormbench"
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; filename=\"mario.c\"\r\n\r\n"
            + open(source).read() + f"\r\n--{boundary}--\r\n").encode()
    req = urllib.request.Request(base + "/upload", method="POST", data=body,
        headers={"Authorization": f"Bearer {token}",
                 "Content-Type": f"multipart/form-data; boundary={boundary}"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())["id"]

tokens = [student(i) for i in range(checks)]
uploads = [upload(t) for t in tokens]
editor = student(checks)
failed = []
def check(t, u):
    try:
        r = call("/check", {"checks": "mario", "sandbox": {"homedir": u}}, t)
        if not r["results"]:
            failed.append(r)
    except Exception as e:
        failed.append(str(e))
threads = [threading.Thread(target=check, args=(t, u)) for t, u in zip(tokens, uploads)]
t0 = time.time()
for th in threads:
    th.start()
time.sleep(0.5)  # the storm has taken every shared slot and queued the rest
waits = []
# At least `runs` runs, and on until the storm is over.
while len(waits) < runs or any(th.is_alive() for th in threads):
    s = time.time()
    r = call("/run", {"cmd": "echo hi"}, editor)
    waits.append((time.time() - s) * 1000)
    if r["stdout"] != "hi\n":
        sys.exit(f"bench: the editor's run said {r}")
    time.sleep(0.05)
for th in threads:
    th.join()
storm = time.time() - t0
if failed:
    sys.exit(f"bench: a check failed: {failed[0]}")
print(json.dumps({"reserved_run_slots": int(reserved), "checks": checks, "runs": len(waits),
                  "run_p50_ms": round(statistics.median(waits), 1),
                  "run_mean_ms": round(statistics.mean(waits), 1),
                  "run_max_ms": round(max(waits), 1), "storm_s": round(storm, 1)}))
PY
  )
  stop_server
  echo "$line"
  results+=("$line")
done
python3 - "${results[@]}" <<'PY'
import json, sys
shared, reserved = (json.loads(a) for a in sys.argv[1:3])
def ratio(k):
    return f"{reserved[k]} ms vs {shared[k]} ms ({reserved[k] / shared[k]:.3f}x)"
print(f"editor runs during the storm, with a reserved slot vs without: mean {ratio('run_mean_ms')}, "
      f"max {ratio('run_max_ms')}, p50 {ratio('run_p50_ms')}; "
      f"storm {reserved['storm_s']} s vs {shared['storm_s']} s")
PY
