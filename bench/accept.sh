#!/usr/bin/env bash
# What accepting a graded submission costs the server (a script, not a test).
#
#   bench/accept.sh [--jobs N]
#
# Builds release, starts `corral serve` with no queue workers (nothing is judged: only the
# acceptance is timed) and the suites folder holding examples/sum (plain checks) and
# examples/check50-mario (a check50 problem, whose loading compiles Python) and sum-20m
# (examples/sum with 20 MB of data files beside it: pinning a folder suite reads it), then for each:
# N single `POST /submissions`, then one `POST /submissions/batch` of N, and the same for a
# plain `language: c` submission. Prints ms per accepted submission. Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=50
while [ $# -gt 0 ]; do
  case "$1" in
    --jobs) JOBS=$2; shift 2 ;;
    -h | --help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench/accept.sh: unknown argument $1 (try --help)" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "bench/accept.sh: run as root" >&2; exit 1; }
target="${CARGO_TARGET_DIR:-$PWD/target}"
echo "bench/accept.sh: building release" >&2
cargo build --release -q -p corral-cli
. bench/serve_lib.sh
work=$(mktemp -d /tmp/corral-accept-bench.XXXXXX)
cleanup() {
  stop_server
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/data/suites"
for s in sum check50-mario; do
  cp -r "examples/$s" "$work/data/suites/$s"
  rm -rf "$work/data/suites/$s/submissions"
done
cp -r "$work/data/suites/sum" "$work/data/suites/sum-20m"
mkdir "$work/data/suites/sum-20m/data"
for i in $(seq 1 20); do head -c 1000000 /dev/urandom >"$work/data/suites/sum-20m/data/f$i.bin"; done
# A folder changed within 2 s is read at every submission (its times may not tell the next edit).
sleep 2.5
printf '[submissions]\nworkers = 0\nbatch_max = 1000\nmax_pending_per_owner = 100000\n[upload]\nmax_bytes = "100M"\n' > "$work/config.toml"
start_server "$target/release/corral" "$work"
python3 - "http://$addr" "$admin" "$JOBS" <<'PY'
import json, sys, time, urllib.request
base, token, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
def call(path, body):
    req = urllib.request.Request(base + path, method="POST", data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())
src = "int main(void) { return 0; }\n"
for name, item in [
    ("suite sum (plain checks)", {"suite": "sum", "files": [{"path": "sum.c", "content": src}]}),
    ("suite check50-mario", {"suite": "check50-mario", "files": [{"path": "mario.c", "content": src}]}),
    ("suite sum-20m (20 MB folder)", {"suite": "sum-20m", "files": [{"path": "sum.c", "content": src}]}),
    ("language c", {"language": "c", "source_code": src}),
]:
    t0 = time.time()
    for _ in range(n):
        call("/submissions", item)
    single = (time.time() - t0) / n * 1000
    t0 = time.time()
    r = call("/submissions/batch", {"submissions": [item] * n})
    batch = (time.time() - t0) / n * 1000
    bad = [x for x in r["submissions"] if "id" not in x]
    if bad:
        sys.exit(f"bench: a batch item was refused: {bad[0]}")
    print(f"{name}: {single:.1f} ms per single POST, {batch:.1f} ms per batch item ({n} each)")
PY
