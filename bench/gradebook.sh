#!/usr/bin/env bash
# What a large suite's gradebook costs (a script, not a test).
#
#   bench/gradebook.sh [--students N] [--each K]
#
# Builds release, starts `corral serve` once to make its SQLite store, stops it, writes N student
# tokens and K finished submissions of suite `big` each straight into the store (as workers
# would have left them), starts it again and times `GET /suites/big/gradebook` three times (the
# first after the start, then warm). Prints each time and the rows answered. Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
STUDENTS=2000
EACH=10
while [ $# -gt 0 ]; do
  case "$1" in
    --students) STUDENTS=$2; shift 2 ;;
    --each) EACH=$2; shift 2 ;;
    -h | --help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench/gradebook.sh: unknown argument $1 (try --help)" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "bench/gradebook.sh: run as root" >&2; exit 1; }
target="${CARGO_TARGET_DIR:-$PWD/target}"
echo "bench/gradebook.sh: building release" >&2
cargo build --release -q -p corral-cli
. bench/serve_lib.sh
work=$(mktemp -d /tmp/corral-gradebook-bench.XXXXXX)
cleanup() {
  stop_server
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/data/suites/big"
printf 'name: big\nchecks:\n  - id: a\n    steps:\n      - run: "true"\n' >"$work/data/suites/big/suite.yaml"
printf '[submissions]\nworkers = 0\n' >"$work/config.toml"
start_server "$target/release/corral" "$work"
token=$admin
stop_server
python3 - "$work/data/corral.db" "$STUDENTS" "$EACH" <<'PY'
import json, sqlite3, sys, time
db, students, each = sqlite3.connect(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
now = int(time.time() * 1000)
owners = [f"{i:016x}" for i in range(students)]
db.executemany("INSERT INTO tokens (id, secret_hash, role, name, created_at) VALUES (?, ?, 'student', ?, 0)",
               [(o, f"bench-{o}", f"student {i}") for i, o in enumerate(owners)])
verdict = json.dumps({"verdict": "accepted", "score": 1.0, "max_score": 1.0})
spec = json.dumps({"suite": {"id": "big"}})
db.executemany(
    "INSERT INTO submissions (id, owner, state, spec, result, attempts, max_attempts, created_ms, "
    "started_ms, finished_ms, callback_state, suite) VALUES (?, ?, 'done', ?, ?, 1, 3, ?, ?, ?, 'none', 'big')",
    [(f"{k:032x}", owners[k % students], spec, verdict, now, now, now) for k in range(students * each)])
db.commit()
PY
start_server "$target/release/corral" "$work"
for round in 1 2 3; do
  curl -sS -o "$work/book.json" -w "round $round: %{http_code} in %{time_total} s\n" \
    -H "Authorization: Bearer $token" "http://$addr/suites/big/gradebook"
done
python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))['rows']), 'rows')" "$work/book.json"
echo "($STUDENTS students, $((STUDENTS * EACH)) finished submissions of one suite, SQLite)"
