#!/usr/bin/env bash
# The HTTP service rows of bench/compare.sh, on a `corral serve` started on loopback and stopped.
#
#   bench/service.sh RAW_DIR CORRAL CORRAL_BENCH QUICK(0|1) [SMOKE(0|1)]
#
# Writes into RAW_DIR: http_run.json (`POST /run` of /bin/true under `wrk`, 2 connections over many
# student tokens, so no token's rate limit is what stops the load; after an untimed warm-up that
# fills the server's kept sandboxes and its pool, so the timed part builds none; with the CPU the
# server's own threads spent per request), ws_echo.json (stdin line in → `cat`'s echo out over the WebSocket,
# from corral-bench's `ws` section) and queue.json (judged/s through /submissions against a suite,
# vs the same gradings through `corral check` in a loop). The server runs 2 at once (the same
# parallelism as the warm-pool row it is compared with).
set -euo pipefail
cd "$(dirname "$0")/.."
RAW=$1 CORRAL=$2 BENCH=$3 QUICK=$4 SMOKE=${5:-0}
# A student token may make 60 requests at once and 2 a second after (the default rate limit):
# enough tokens that wrk's load, ~1,500 req/s spread over all of them, never reaches that limit.
if [ "$SMOKE" = 1 ]; then
  TOKENS=32 WARM_RUNS=20 LOAD_S=1 WS_LINES=5 QUEUE_N=2
elif [ "$QUICK" = 1 ]; then
  TOKENS=128 WARM_RUNS=100 LOAD_S=3 WS_LINES=20 QUEUE_N=4
else
  TOKENS=400 WARM_RUNS=100 LOAD_S=10 WS_LINES=100 QUEUE_N=20
fi
PARALLEL=2
command -v wrk >/dev/null || {
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends wrk >/dev/null 2>&1 \
    || { apt-get update -qq >/dev/null && apt-get install -y --no-install-recommends wrk >/dev/null; }
}

. bench/serve_lib.sh
work=$(mktemp -d /tmp/corral-service-bench.XXXXXX)
cleanup() {
  stop_server
  rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/data/suites"
cp -r examples/hello "$work/data/suites/hello"
# No slots reserved for programs: POST /run is compared with the pool at the same parallelism.
cat >"$work/config.toml" <<TOML
parallelism = $PARALLEL
reserved_run_slots = 0
[submissions]
workers = $PARALLEL
TOML
start_server "$CORRAL" "$work"

# Student tokens, made through the API: $TOKENS for wrk, and one each for the WebSocket and queue
# rows, whose budgets wrk's load must not have spent.
python3 - "http://$addr" "$admin" "$((TOKENS + 2))" >"$work/all_tokens" <<'PY'
import json, sys, urllib.request
base, admin, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
for i in range(n):
    req = urllib.request.Request(base + "/tokens", method="POST", data=json.dumps({"role": "student", "name": f"bench{i}"}).encode(),
                                 headers={"Authorization": f"Bearer {admin}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        print(json.loads(r.read())["token"])
PY
head -n "$TOKENS" "$work/all_tokens" >"$work/tokens"
ws_token=$(sed -n "$((TOKENS + 1))p" "$work/all_tokens")
queue_token=$(sed -n "$((TOKENS + 2))p" "$work/all_tokens")

echo "POST /run /bin/true: wrk, $PARALLEL connections, $TOKENS tokens, $WARM_RUNS runs of warm-up + ${LOAD_S}s" >&2
export TOKENS_FILE="$work/tokens"
# Warm-up by count, not time: every `/run` keeps its sandbox, so until the server holds its
# maximum of kept sandboxes (64) each run builds a new one. Past that, each run gives one back.
python3 - "http://$addr" "$work/tokens" "$WARM_RUNS" "$PARALLEL" <<'PY'
import json, sys, threading, urllib.request
base, tokens, n, par = sys.argv[1], open(sys.argv[2]).read().split(), int(sys.argv[3]), int(sys.argv[4])
def worker(k):
    for i in range(k, n, par):
        req = urllib.request.Request(base + "/run", method="POST", data=b'{"cmd":["/bin/true"]}',
                                     headers={"Authorization": f"Bearer {tokens[i % len(tokens)]}",
                                              "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            assert json.loads(r.read())["status"] == "ok"
ts = [threading.Thread(target=worker, args=(k,)) for k in range(par)]
[t.start() for t in ts]
[t.join() for t in ts]
PY
# The server's own CPU (its threads: HTTP and the runs' supervision; the sandboxes' processes are
# not its children) over the timed part, per request.
server_cpu_ticks() { awk '{print $14 + $15}' "/proc/$server_pid/stat"; }
cpu_before=$(server_cpu_ticks)
OUT_JSON="$RAW/http_run.json" wrk -t1 -c"$PARALLEL" -d"${LOAD_S}s" --timeout 10s -s bench/run_load.lua "http://$addr" >&2
cpu_after=$(server_cpu_ticks)
python3 - "$RAW/http_run.json" "$cpu_before" "$cpu_after" "$(getconf CLK_TCK)" <<'PY'
import json, sys
path, before, after, hz = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
d = json.load(open(path))
d["server_cpu_ms_per_req"] = round((after - before) * 1000 / hz / max(d["requests"], 1), 3)
with open(path, "w") as f:
    f.write(json.dumps(d) + "\n")
PY
cat "$RAW/http_run.json" >&2

echo "WebSocket: $WS_LINES lines through cat" >&2
"$BENCH" --corral "$CORRAL" --sections ws --ws-url "ws://$addr/ws" --ws-token "$ws_token" \
  --ws-lines "$WS_LINES" >"$RAW/ws_echo.json" 2>"$work/ws.err" || { cat "$work/ws.err" >&2; }
cat "$RAW/ws_echo.json" >&2

echo "queue: $QUEUE_N submissions of examples/hello's correct one, /submissions vs corral check in a loop" >&2
python3 bench/queue_vs_check.py "http://$addr" "$queue_token" hello examples/hello/suite.yaml \
  examples/hello/submissions/correct "$CORRAL" "$QUEUE_N" | tee "$RAW/queue.json" >&2
