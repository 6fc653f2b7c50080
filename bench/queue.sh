#!/usr/bin/env bash
# The submission queue under load, on this machine (a script, not a test).
#
#   bench/queue.sh [--jobs N] [--workers "1 2 4"]
#
# Builds release, then for each in-process worker count and for a C and a Python workload:
# starts `corral serve --workers W`, submits N submissions as fast as it can (batches of 50),
# waits until all are judged, and reports submissions/s accepted by the API, judged/s sustained,
# and p50/p95 of the queue wait (submitted -> claimed) and of the end-to-end time (submitted ->
# verdict recorded), from the server's own timestamps. Prints a Markdown table (the one in
# docs/deploy.md) and writes bench/results/queue.md. Needs root (real sandboxes).
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=100
WORKERS="1 2 4"
while [ $# -gt 0 ]; do
  case "$1" in
    --jobs) JOBS=$2; shift 2 ;;
    --workers) WORKERS=$2; shift 2 ;;
    -h | --help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench/queue.sh: unknown argument $1 (try --help)" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "bench/queue.sh: run as root (sandboxes need namespaces and cgroups)" >&2; exit 1; }
target="${CARGO_TARGET_DIR:-$PWD/target}"
echo "bench/queue.sh: building release" >&2
cargo build --release -q -p corral-cli
corral="$target/release/corral"
. bench/serve_lib.sh
work=$(mktemp -d /tmp/corral-queue-bench.XXXXXX)
cleanup() {
  stop_server
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p bench/results
out=bench/results/queue.md
{
  echo "| workload | workers | submitted/s | judged/s | queue wait p50 | p95 | end-to-end p50 | p95 |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
} > "$out"
for w in $WORKERS; do
  for workload in c python; do
    rm -rf "$work/data"
    mkdir -p "$work/data"
    printf '[submissions]\nworkers = %s\nbatch_max = 100\nmax_pending_per_owner = 100000\n' "$w" > "$work/config.toml"
    start_server "$corral" "$work" --parallelism "$w"
    python3 bench/queue_driver.py "http://$addr" "$admin" "$workload" "$JOBS" "$w" | tee -a "$out"
    stop_server
  done
done
echo >&2
echo "bench/queue.sh: $JOBS submissions per row on $(nproc) CPUs; written to $out" >&2
