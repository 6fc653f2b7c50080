#!/usr/bin/env bash
# What requests waiting for verdicts cost the server (a script, not a test).
#
#   bench/waiters.sh [--waiters N] [--seconds S]
#
# Builds release, starts `corral serve` with no queue workers (nothing is judged), submits N
# jobs and holds a `GET /submissions/{id}?wait=true` open on each for S seconds (S < 30, the
# longest wait), then prints the server's CPU time over those seconds: idle first (no waiters,
# the baseline), then with the N waiters, as a share of one core. Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
WAITERS=300
SECONDS_=10
while [ $# -gt 0 ]; do
  case "$1" in
    --waiters) WAITERS=$2; shift 2 ;;
    --seconds) SECONDS_=$2; shift 2 ;;
    -h | --help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench/waiters.sh: unknown argument $1 (try --help)" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "bench/waiters.sh: run as root" >&2; exit 1; }
target="${CARGO_TARGET_DIR:-$PWD/target}"
echo "bench/waiters.sh: building release" >&2
cargo build --release -q -p corral-cli
. bench/serve_lib.sh
work=$(mktemp -d /tmp/corral-waiters-bench.XXXXXX)
cleanup() {
  stop_server
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/data"
printf '[submissions]\nworkers = 0\nmax_pending_per_owner = 100000\nbatch_max = 100000\n' >"$work/config.toml"
start_server "$target/release/corral" "$work"
python3 - "http://$addr" "$admin" "$WAITERS" "$SECONDS_" "$server_pid" <<'PY'
import json, os, sys, threading, time, urllib.request
base, token, n, secs, pid = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
tick = os.sysconf("SC_CLK_TCK")

def cpu_s():
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / tick  # utime + stime

def post(path, body):
    req = urllib.request.Request(base + path, method="POST", data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())

ids = [x["id"] for x in post("/submissions/batch", {"submissions": [{"cmd": "true"}] * n})["submissions"]]
time.sleep(1)
c0 = cpu_s(); time.sleep(secs); idle = (cpu_s() - c0) / secs

def wait(i):
    req = urllib.request.Request(f"{base}/submissions/{i}?wait=true&timeout={secs + 5}",
        headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=secs + 60) as r:
        r.read()

threads = [threading.Thread(target=wait, args=(i,), daemon=True) for i in ids]
for t in threads:
    t.start()
time.sleep(2)  # every request has arrived and waits
c0 = cpu_s(); time.sleep(secs); busy = (cpu_s() - c0) / secs
print(json.dumps({"waiters": n, "seconds": secs, "idle_core_share": round(idle, 4),
                  "waiting_core_share": round(busy, 4),
                  "per_waiter_core_share": round((busy - idle) / n, 6)}))
PY
