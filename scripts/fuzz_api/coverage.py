"""Per-operation coverage of a fuzz run: for every operation of the OpenAPI document, how many
calls it got, how many were answered 2xx (reached with valid data), and which statuses came back.
Exits 1 when an operation was never answered 2xx, or, for one whose document says no 2xx answer
(`DELETE /judge0/submissions/{token}`: always refused, as Judge0 refuses it), never called.

    python3 coverage.py OPENAPI_JSON CALLS_JSONL
"""

import collections
import json
import sys

METHODS = ("get", "put", "post", "delete", "patch")


def main():
    doc = json.load(open(sys.argv[1]))
    ops = [f"{m.upper()} {p}" for p, item in doc["paths"].items() for m in METHODS if m in item]
    always_refused = {
        f"{m.upper()} {p}"
        for p, item in doc["paths"].items()
        for m in METHODS
        if m in item and not any(str(s)[0] in "12" for s in item[m]["responses"])
    }
    statuses = collections.defaultdict(collections.Counter)
    for line in open(sys.argv[2]):
        call = json.loads(line)
        statuses[call["op"]][call["status"]] += 1
    missed = []
    width = max(len(o) for o in ops)
    print(f"{'operation':<{width}}  calls   2xx  statuses")
    for op in sorted(ops):
        got = statuses.get(op, collections.Counter())
        ok = sum(n for s, n in got.items() if 200 <= s < 300)
        # The WebSocket's upgrade (101) is its success.
        if op == "GET /ws":
            ok += got.get(101, 0)
        # An operation that never succeeds (its document says so) is reached when it is called.
        if op in always_refused:
            ok = sum(got.values())
        listing = " ".join(f"{s}:{n}" for s, n in sorted(got.items()))
        print(f"{op:<{width}}  {sum(got.values()):5}  {ok:4}  {listing}")
        if ok == 0:
            missed.append(op)
    unknown = sorted(set(statuses) - set(ops))
    if unknown:
        print(f"calls to operations not in the document: {', '.join(unknown)}")
    if missed:
        print(f"never reached with valid data (no 2xx): {', '.join(missed)}", file=sys.stderr)
        sys.exit(1)
    print(f"all {len(ops)} operations reached with valid data")


if __name__ == "__main__":
    main()
