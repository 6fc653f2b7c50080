"""The ADR-0003 design as a peer: Python's subprocess.run with a preexec_fn that sets rlimits.

    python3 bench/py_spawn.py N PARALLEL WARMUP -- /abs/program [args...]

No namespaces, no cgroup, no seccomp: only the rlimits a grader would set (CPU seconds, address
space, file size, open files, processes). Prints one JSON object like spawn_bench.
"""

import json
import math
import resource
import subprocess
import sys
import threading
import time


def limits():
    resource.setrlimit(resource.RLIMIT_CPU, (5, 6))
    resource.setrlimit(resource.RLIMIT_AS, (256 << 20, 256 << 20))
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 20, 64 << 20))
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
    resource.setrlimit(resource.RLIMIT_NPROC, (64, 64))


def one(argv):
    r = subprocess.run(
        argv,
        preexec_fn=limits,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={"PATH": "/usr/bin:/bin"},
        check=False,
    )
    return r.returncode == 0


def pct(sorted_ms, p):
    rank = max(1, min(len(sorted_ms), math.ceil(p / 100 * len(sorted_ms))))
    return sorted_ms[rank - 1]


def main():
    n, parallel, warmup = (int(a) for a in sys.argv[1:4])
    assert sys.argv[4] == "--"
    argv = sys.argv[5:]
    failures = sum(not one(argv) for _ in range(warmup))
    lat = [0.0] * n
    counter = iter(range(n))
    lock = threading.Lock()
    fails = [0]

    def worker():
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            t = time.perf_counter()
            ok = one(argv)
            lat[i] = (time.perf_counter() - t) * 1000
            if not ok:
                with lock:
                    fails[0] += 1

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(parallel)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    s = sorted(lat)
    print(json.dumps({
        "n": n, "parallel": parallel,
        "p50_ms": round(pct(s, 50), 4), "p99_ms": round(pct(s, 99), 4),
        "mean_ms": round(sum(s) / n, 4), "runs_per_s": round(n / elapsed, 1),
        "elapsed_s": round(elapsed, 3), "failures": failures + fails[0],
    }))


if __name__ == "__main__":
    main()
