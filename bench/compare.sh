#!/usr/bin/env bash
# corral next to its peers, measured side by side in one run on this machine.
#
#   bench/compare.sh [--quick] [--debug] [--out DIR]
#
# Builds release, then measures: bare fork+exec of /bin/true (the physical floor), corral's warm
# pool and fresh sandboxes (in-process, crates/bench), bubblewrap, Python subprocess.run with
# rlimits in preexec_fn (the ADR-0003 design), gVisor's `runsc do` when it installs; the same
# /bin/true batch through `corral run --batch --parallel 2` and `xargs -P 2` over bwrap; a C and
# a Python grading loop bare, through corral and through bwrap; time-limit precision; idle memory;
# and the service (bench/service.sh): `POST /run` under wrk, WebSocket echo, the submission queue.
# Prints a table and writes bench/results/latest.{json,csv,md,txt} and docs/bench.png, each target
# of issue 13 with its verdict. --out DIR writes them (and bench.png) into DIR instead; --debug
# measures the debug build and installs nothing optional (scripts/test runs `--quick --debug --out`
# so the script cannot silently break; its numbers mean nothing). Exits 3 when a measurement failed
# or a target could not be computed. Needs root (sandboxes use namespaces and cgroups). Nothing
# here is a test of speed: it only reports.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
START=$(date +%s)

QUICK=0 DEBUG=0 OUT=bench/results PLOT=docs/bench.png
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1; shift ;;
    --debug) DEBUG=1; shift ;;
    --out) OUT=$2; PLOT=$2/bench.png; shift 2 ;;
    -h | --help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench/compare.sh: unknown argument $1 (try --help)" >&2; exit 2 ;;
  esac
done
if [ "$QUICK" = 1 ] && [ "$DEBUG" = 1 ]; then
  # The smoke run of scripts/test: every row once, as small as still means anything.
  N_BARE=100 N_BWRAP=20 N_PY=40 N_RUNSC=2 N_PYSTART=10 BATCH=100
  BENCH_FLAGS=(--quick --n 50 --n-fresh 5 --throughput-runs 100 --limit-runs 3 --submissions 2)
elif [ "$QUICK" = 1 ]; then
  N_BARE=500 N_BWRAP=100 N_PY=200 N_RUNSC=6 N_PYSTART=40 BATCH=400 BENCH_FLAGS=(--quick)
else
  N_BARE=2000 N_BWRAP=400 N_PY=500 N_RUNSC=16 N_PYSTART=200 BATCH=2000 BENCH_FLAGS=()
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "bench/compare.sh: corral builds sandboxes with namespaces and cgroups; run as root" >&2
  exit 1
fi
say() { printf '\n== %s\n' "$*" >&2; }

# --- tools -----------------------------------------------------------------------------------
if ! command -v bwrap >/dev/null || ! command -v gcc >/dev/null || ! command -v pkg-config >/dev/null \
  || ! pkg-config --exists libseccomp 2>/dev/null; then
  scripts/setup
fi
if [ "$DEBUG" = 0 ] && ! command -v runsc >/dev/null; then
  # gVisor is optional: measured when Debian's package installs, skipped otherwise.
  export DEBIAN_FRONTEND=noninteractive
  { apt-get install -y --no-install-recommends runsc >/dev/null 2>&1 \
    || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y --no-install-recommends runsc >/dev/null 2>&1; }; } \
    || echo "bench/compare.sh: runsc (gVisor) is not installable here; skipped" >&2
fi
PY=python3
if [ "$DEBUG" = 0 ] && ! $PY -c 'import matplotlib' 2>/dev/null; then
  $PY -m pip install --quiet --disable-pip-version-check matplotlib >/dev/null 2>&1 \
    || echo "bench/compare.sh: matplotlib is not installable; the plot will be skipped" >&2
fi

TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
if [ -n "${CORRAL_BIN_DIR:-}" ]; then
  # Binaries built already (scripts/test's side lane: a build here would replace the `corral`
  # under the tests running beside it).
  CORRAL="$CORRAL_BIN_DIR/corral" BENCH="$CORRAL_BIN_DIR/corral-bench"
elif [ "$DEBUG" = 1 ]; then
  say "building (debug: a smoke run, its numbers mean nothing)"
  cargo build -p corral-cli -p corral-bench >&2
  CORRAL="$TARGET/debug/corral" BENCH="$TARGET/debug/corral-bench"
else
  say "building (release)"
  cargo build --release -p corral-cli -p corral-bench >&2
  CORRAL="$TARGET/release/corral" BENCH="$TARGET/release/corral-bench"
fi

RAW=$OUT/raw.tmp
rm -rf "$RAW"
mkdir -p "$RAW"
gcc -O2 -Wall -pthread -o "$RAW/spawn_bench" bench/spawn_bench.c -lm
SPAWN="$RAW/spawn_bench"
BWRAP="$(command -v bwrap)"
BWRAP_CMD=("$BWRAP" --unshare-all --die-with-parent --ro-bind /usr /usr --symlink usr/lib /lib
  --symlink usr/lib64 /lib64 --symlink usr/bin /bin --proc /proc --dev /dev --tmpfs /tmp -- /bin/true)
SYSPY=/usr/bin/python3
[ -x "$SYSPY" ] || SYSPY="$(command -v python3)"

COMMIT="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
# Uncommitted changes to what is measured (the crates other than this benchmark) make it another build.
DIRTY="$( (git status --porcelain -- crates ':!crates/bench' 2>/dev/null || true) | head -c 1 | wc -c)"
$PY - "$RAW/machine.json" "$QUICK" "$COMMIT" "$DIRTY" <<'EOF'
import json, os, platform, sys, datetime
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
json.dump({"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "kernel": platform.release(), "cpus": os.cpu_count(), "cpu_model": cpu,
           "mem_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
           "loadavg_start": os.getloadavg()[0], "quick": sys.argv[2] == "1",
           "commit": sys.argv[3], "uncommitted_changes": sys.argv[4] != "0"}, open(sys.argv[1], "w"))
EOF

# --- spawn latency and runs/s: the same C driver for every process-per-run peer ---------------
for p in 1 2 8; do
  say "bare fork+exec /bin/true, parallel $p"
  "$SPAWN" "$N_BARE" "$p" 50 -- /bin/true | tee "$RAW/bare_p$p.json" >&2
done
say "bare fork+exec python3 -c pass"
"$SPAWN" "$N_PYSTART" 1 5 -- "$SYSPY" -c pass | tee "$RAW/bare_python.json" >&2
for p in 1 2 8; do
  say "bwrap /bin/true, parallel $p"
  "$SPAWN" "$N_BWRAP" "$p" 10 -- "${BWRAP_CMD[@]}" | tee "$RAW/bwrap_p$p.json" >&2
done
for p in 1 2 8; do
  say "python subprocess.run + preexec_fn rlimits, parallel $p"
  "$SYSPY" bench/py_spawn.py "$N_PY" "$p" 10 -- /bin/true | tee "$RAW/pyrlimit_p$p.json" >&2
done
if command -v runsc >/dev/null && timeout 60 runsc --network=none do /bin/true >/dev/null 2>&1; then
  RUNSC="$(command -v runsc)"
  # corral-bench adds the gVisor runtime's rows (fresh, warm lease, pre-started, runsc do) in its run.
  BENCH_FLAGS+=(--sections rss,latency,throughput,limits,image,grading,gvisor)
  for p in 1 2 8; do
    say "runsc do /bin/true, parallel $p"
    "$SPAWN" "$N_RUNSC" "$p" 1 -- "$RUNSC" --network=none do /bin/true | tee "$RAW/runsc_p$p.json" >&2
  done
else
  echo "bench/compare.sh: runsc missing or unable to run here; gVisor skipped" >&2
fi

# --- the test image (a minimal Debian root), for pooled runs in an image next to the host root ---
IMAGE_TAR="${CORRAL_BENCH_IMAGE_TAR:-/var/tmp/corral-test-cache/mmdebstrap-minbase-python3-bookworm.tar}"
if [ -f "$IMAGE_TAR" ]; then
  say "importing the test image $IMAGE_TAR"
  "$CORRAL" env --data "$RAW/image-data" import --name bench/debian "$IMAGE_TAR" >&2
  BENCH_FLAGS+=(--image-data "$RAW/image-data" --image bench/debian)
else
  echo "bench/compare.sh: no test image at $IMAGE_TAR (the image tests cache one); the image row is skipped" >&2
fi

# --- corral in-process: pool, fresh, throughput, limits, idle memory, grading loops -----------
say "corral-bench (pool, fresh, throughput, limits, idle RSS, grading: corral / bare / bwrap)"
"$BENCH" --corral "$CORRAL" --bwrap "$BWRAP" "${BENCH_FLAGS[@]}" >"$RAW/corral.json" 2>"$RAW/corral.err" || {
  cat "$RAW/corral.err" >&2
  echo "bench/compare.sh: corral-bench failed" >&2
  exit 1
}
grep '^corral-bench' "$RAW/corral.err" >&2 || true
rm -rf "$RAW/image-data"

# --- the same batch of /bin/true, whole process: corral run --batch vs xargs over bwrap ----------
say "$BATCH x /bin/true: corral run --batch --parallel 2  vs  xargs -P 2 bwrap"
for _ in $(seq "$BATCH"); do
  echo '{"argv":["/bin/true"],"limits":{"cpu_time":"1s","wall_time":"1s"}}'
done >"$RAW/batch.jsonl"
now() { echo "${EPOCHREALTIME/./}"; } # microseconds
t0=$(now)
"$CORRAL" run --batch "$RAW/batch.jsonl" --parallel 2 >"$RAW/batch.out" 2>"$RAW/batch.err"
t1=$(now)
ok=$(grep -c '"status":"ok"' "$RAW/batch.out" || true)
echo "{\"runs\": $BATCH, \"elapsed_us\": $((t1 - t0)), \"ok\": $ok}" | tee "$RAW/batch_corral.json" >&2
t0=$(now)
fail=0
seq "$BATCH" | xargs -P 2 -I{} "${BWRAP_CMD[@]}" || fail=$?
t1=$(now)
echo "{\"runs\": $BATCH, \"elapsed_us\": $((t1 - t0)), \"xargs_exit\": $fail}" | tee "$RAW/batch_bwrap.json" >&2

# --- the service: POST /run under load, WebSocket echo, the submission queue ------------------
say "corral serve on loopback: POST /run (wrk), WebSocket echo, /submissions vs corral check"
bench/service.sh "$RAW" "$CORRAL" "$BENCH" "$QUICK" "$DEBUG" || echo "bench/compare.sh: bench/service.sh failed" >&2

# --- report ----------------------------------------------------------------------------------
$PY -c 'import json,os,sys; m=json.load(open(sys.argv[1])); m["loadavg_end"]=os.getloadavg()[0]; m["script_s"]=int(sys.argv[2]); json.dump(m, open(sys.argv[1],"w"))' \
  "$RAW/machine.json" "$(($(date +%s) - START))"
mkdir -p "$(dirname "$PLOT")"
$PY bench/report.py "$RAW" "$OUT" "$PLOT"
