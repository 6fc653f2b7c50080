"""Turns the raw measurements of bench/compare.sh into the table, latest.json, latest.csv and the plot.

    python3 bench/report.py RAW_DIR OUT_DIR PLOT_PNG

RAW_DIR holds one JSON file per measurement (see compare.sh). Every ratio and verdict is computed
from numbers of this one run.
"""

import csv
import json
import os
import sys

RAW, OUT, PLOT = sys.argv[1], sys.argv[2], sys.argv[3]


def load(name):
    path = os.path.join(RAW, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def rnd(v, nd=3):
    return None if v is None else round(v, nd)


def ratio(a, b):
    return None if a is None or b in (None, 0) else a / b


machine = load("machine.json") or {}
corral = load("corral.json") or {}
r = {}  # latest.json: flat
r.update({k: v for k, v in machine.items()})

# Process-per-run peers, measured by the same driver (bare, bwrap, runsc) or py_spawn.py.
PEERS = [("bare", "bare fork+exec"), ("bwrap", "bubblewrap"), ("pyrlimit", "Python subprocess + rlimits"),
         ("runsc", "gVisor runsc do")]
for key, _ in PEERS:
    for p in (1, 2, 8):
        d = load(f"{key}_p{p}.json")
        if d is None:
            continue
        if p == 1:
            r[f"{key}_p50_ms"] = rnd(d["p50_ms"])
            r[f"{key}_p99_ms"] = rnd(d["p99_ms"])
            r[f"{key}_n"] = d["n"]
        r[f"{key}_runs_per_s_p{p}"] = round(d["runs_per_s"])
        r[f"{key}_run_p50_ms_p{p}"] = rnd(d["p50_ms"])
        if d.get("failures"):
            r.setdefault("errors", []).append(f"{key} p{p}: {d['failures']} runs failed")

d = load("bare_python.json")
if d:
    r["bare_python_p50_ms"], r["bare_python_p99_ms"] = rnd(d["p50_ms"]), rnd(d["p99_ms"])

# corral-bench: everything it measured, as is.
for k, v in corral.items():
    if k == "errors":
        r.setdefault("errors", []).extend(v)
    elif "runs_per_s" in k and isinstance(v, float):
        r[k] = round(v)
    elif k != "quick":
        r[k] = v

bc, bb = load("batch_corral.json"), load("batch_bwrap.json")
if bc:
    s = bc["elapsed_us"] / 1e6
    r.update(batch_runs=bc["runs"], batch_corral_elapsed_s=rnd(s), batch_corral_runs_per_s_p2=round(bc["runs"] / s),
             batch_corral_ok=bc["ok"])
    if bc["ok"] != bc["runs"]:
        r.setdefault("errors", []).append(f"corral batch: {bc['runs'] - bc['ok']} runs not ok")
if bb:
    s = bb["elapsed_us"] / 1e6
    r.update(batch_bwrap_elapsed_s=rnd(s), batch_bwrap_runs_per_s_p2=round(bb["runs"] / s))
    if bb["xargs_exit"]:
        r.setdefault("errors", []).append(f"xargs bwrap batch exited {bb['xargs_exit']}")

# The service (bench/service.sh): POST /run under wrk, WebSocket echo, the queue.
d = load("http_run.json")
if d:
    r.update(http_run_req_per_s=round(d["req_per_s"]), http_run_p50_ms=rnd(d["p50_ms"]),
             http_run_p99_ms=rnd(d["p99_ms"]), http_run_requests=d["requests"], http_run_tokens=d["tokens"],
             http_run_server_cpu_ms_per_req=rnd(d.get("server_cpu_ms_per_req")))
    if d["not_ok"] or d["socket_errors"]:
        r.setdefault("errors", []).append(f"POST /run: {d['not_ok']} answers not ok, {d['socket_errors']} socket errors")
d = load("ws_echo.json")
if d:
    r.update({k: v for k, v in d.items() if k.startswith("ws_echo")})
    r.setdefault("errors", []).extend(d.get("errors", []))
d = load("queue.json")
if d:
    r.update(queue_n=d["n"], queue_judged_per_s=d["queue_judged_per_s"], check_loop_per_s=d["check_per_s"])
    if d["queue_verdicts"] != ["accepted"] or d["check_failures"]:
        r.setdefault("errors", []).append(f"queue: verdicts {d['queue_verdicts']}, {d['check_failures']} corral check failures")

# Ratios and targets.
g = r.get


def overhead(lang):
    # The paired figure (each corral submission against the bare one taken right next to it, the
    # median over rounds) when the bench gave it: a load swing between rounds cancels out of it,
    # while the ratio of two p50s of a few submissions each mostly measures that swing (one busy
    # run: +27 % from the p50s, +1.9 % paired, same samples). The p50s stay in the tables.
    paired = g(f"grading_{lang}_corral_over_bare_paired_pct")
    if paired is not None:
        return paired
    c, b = g(f"grading_{lang}_corral_p50_ms"), g(f"grading_{lang}_bare_p50_ms")
    return None if c is None or not b else (c / b - 1) * 100


def p50_overhead(lang):
    c, b = g(f"grading_{lang}_corral_p50_ms"), g(f"grading_{lang}_bare_p50_ms")
    return None if c is None or not b else (c / b - 1) * 100


r["pooled_p50_over_bare"] = rnd(ratio(g("pooled_p50_ms"), g("bare_p50_ms")), 2)
r["fresh_p50_over_bare"] = rnd(ratio(g("fresh_p50_ms"), g("bare_p50_ms")), 2)
r["pooled_runs_per_s_p2_over_bare"] = rnd(ratio(g("pooled_runs_per_s_p2"), g("bare_runs_per_s_p2")), 2)
r["fresh_p50_over_bwrap"] = rnd(ratio(g("fresh_p50_ms"), g("bwrap_p50_ms")), 2)
r["http_run_req_per_s_over_pooled_p2"] = rnd(ratio(g("http_run_req_per_s"), g("pooled_runs_per_s_p2")), 2)
r["queue_over_check_loop"] = rnd(ratio(g("queue_judged_per_s"), g("check_loop_per_s")), 2)
r["pooled_runs_per_s_p2_over_bwrap"] = rnd(ratio(g("pooled_runs_per_s_p2"), g("bwrap_runs_per_s_p2")), 2)
r["batch_p2_corral_over_bwrap"] = rnd(ratio(g("batch_corral_runs_per_s_p2"), g("batch_bwrap_runs_per_s_p2")), 2)
for lang in ("c", "py"):
    r[f"grading_{lang}_overhead_pct"] = rnd(overhead(lang), 1)
    r[f"grading_{lang}_p50_overhead_pct"] = rnd(p50_overhead(lang), 1)
    bw, b = g(f"grading_{lang}_bwrap_p50_ms"), g(f"grading_{lang}_bare_p50_ms")
    bw_paired = g(f"grading_{lang}_bwrap_over_bare_paired_pct")
    r[f"grading_{lang}_bwrap_overhead_pct"] = rnd(
        bw_paired if bw_paired is not None else None if bw is None or not b else (bw / b - 1) * 100, 1)
ovs = [v for v in (g("grading_c_overhead_pct"), g("grading_py_overhead_pct")) if v is not None]
r["grading_overhead_pct"] = max(ovs) if ovs else None

# Issue 13's targets, each a ratio (or a figure) from this one run.
TARGETS = [
    ("warm pool p50 <= 1.3x bare fork+exec p50", "pooled_p50_over_bare", "x", lambda v: v <= 1.3),
    ("runs/s at parallel 2 >= 0.7x bare's", "pooled_runs_per_s_p2_over_bare", "x", lambda v: v >= 0.7),
    ("fresh sandbox p50 <= 1.0x bubblewrap p50", "fresh_p50_over_bwrap", "x", lambda v: v <= 1.0),
    ("grading overhead <= 5% over bare (worse of C, Python; paired median)", "grading_overhead_pct", "%", lambda v: v <= 5.0),
    ("CPU and wall limit overshoot p99 <= 2 ms (worse)", "limit_overshoot_p99_ms", "ms", lambda v: v <= 2.0),
    ("POST /run req/s >= 0.8x warm-pool runs/s at parallel 2", "http_run_req_per_s_over_pooled_p2", "x",
     lambda v: v >= 0.8),
    ("POST /run p99 <= 10 ms", "http_run_p99_ms", "ms", lambda v: v <= 10.0),
    ("WebSocket stdin line -> echo p50 <= 1 ms", "ws_echo_p50_ms", "ms", lambda v: v <= 1.0),
    ("queue judged/s >= 0.9x corral check in a loop", "queue_over_check_loop", "x", lambda v: v >= 0.9),
    ("idle RSS with 8 warm sandboxes <= 40 MiB", "idle_rss_mib", "MiB", lambda v: v <= 40.0),
    ("pooled /bin/true in an image <= 1.1x on the host root", "image_p50_over_host", "x", lambda v: v <= 1.1),
]
r["targets"] = []
for name, key, unit, ok in TARGETS:
    v = g(key)
    r["targets"].append({"target": name, "key": key, "value": v, "unit": unit, "met": None if v is None else ok(v)})
r.setdefault("errors", [])
# A failed measurement or a target without a value fails the script (CI runs it in quick mode).
missing = [t["key"] for t in r["targets"] if t["value"] is None]
STATUS = 3 if r["errors"] or missing else 0
if missing:
    r["errors"].append(f"targets without a value: {', '.join(missing)}")
busy = max(g("loadavg_start") or 0, g("loadavg_end") or 0)
r["busy_machine"] = busy > (g("cpus") or 1)

os.makedirs(OUT, exist_ok=True)
with open(os.path.join(OUT, "latest.json"), "w") as f:
    json.dump(r, f, indent=2, sort_keys=True)
    f.write("\n")

# --- table -------------------------------------------------------------------------------------


def fmt(v, nd=2):
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{nd}f}"
    return str(v)


rows = [("bare fork+exec (floor)", "bare"), ("corral, warm pool", "pooled"), ("corral, fresh sandbox", "fresh"),
        ("bubblewrap", "bwrap"), ("Python subprocess + rlimits", "pyrlimit"), ("gVisor runsc do", "runsc")]
SHORT = {"bare": "bare\n(floor)", "pooled": "corral\npool", "fresh": "corral\nfresh", "bwrap": "bwrap",
         "pyrlimit": "Python\nrlimits", "runsc": "gVisor\nrunsc"}
lines = []
w = lines.append
w(f"corral benchmark — {g('date', '?')} — {g('cpus', '?')} CPUs ({g('cpu_model', '?')}), Linux {g('kernel', '?')}, "
  f"cgroup {g('cgroup_version', '?')}, load {fmt(g('loadavg_start'))} -> {fmt(g('loadavg_end'))}"
  + f" — commit {g('commit', '?')}" + (" + uncommitted changes" if g("uncommitted_changes") else "")
  + (" — QUICK" if g("quick") else ""))
if r["busy_machine"]:
    w(f"WARNING: load average {busy:.1f} on {g('cpus')} CPUs: other work competed with every measurement; "
      "the ratios are noisier than on an idle machine.")
w("")
w(f"{'/bin/true, one run':<30} {'p50 ms':>8} {'p99 ms':>8} {'x bare':>7} {'runs/s p1':>10} {'p2':>7} {'p8':>7}")
for label, key in rows:
    if g(f"{key}_p50_ms") is None:
        w(f"{label:<30} {'(not measured)':>17}")
        continue
    x = ratio(g(f"{key}_p50_ms"), g("bare_p50_ms"))
    w(f"{label:<30} {fmt(g(f'{key}_p50_ms')):>8} {fmt(g(f'{key}_p99_ms')):>8} {fmt(x, 1):>7} "
      f"{fmt(g(f'{key}_runs_per_s_p1')):>10} {fmt(g(f'{key}_runs_per_s_p2')):>7} {fmt(g(f'{key}_runs_per_s_p8')):>7}")
w("")
w(f"{g('batch_runs', '?')} x /bin/true, whole process, parallel 2:  corral run --batch {fmt(g('batch_corral_elapsed_s'))} s "
  f"({fmt(g('batch_corral_runs_per_s_p2'))} runs/s)  |  xargs -P 2 bwrap {fmt(g('batch_bwrap_elapsed_s'))} s "
  f"({fmt(g('batch_bwrap_runs_per_s_p2'))} runs/s)  -> {fmt(g('batch_p2_corral_over_bwrap'))}x")
w("")
w(f"{'grading, per submission (p50 ms)':<34} {'bare':>8} {'corral':>8} {'bwrap':>8} {'corral +%':>10} {'bwrap +%':>9} "
  f"{'corral +% paired':>17}")
for lang, label in (("c", "C: gcc + 10 runs"), ("py", "Python: 10 runs")):
    w(f"{label:<34} {fmt(g(f'grading_{lang}_bare_p50_ms'), 1):>8} {fmt(g(f'grading_{lang}_corral_p50_ms'), 1):>8} "
      f"{fmt(g(f'grading_{lang}_bwrap_p50_ms'), 1):>8} {fmt(g(f'grading_{lang}_p50_overhead_pct'), 1):>10} "
      f"{fmt(g(f'grading_{lang}_bwrap_overhead_pct'), 1):>9} {fmt(g(f'grading_{lang}_corral_over_bare_paired_pct'), 1):>17}")
w("")
w(f"limits (reported minus 100 ms): CPU p50 {fmt(g('limit_cpu_overshoot_p50_ms'), 1)} / p99 "
  f"{fmt(g('limit_cpu_overshoot_p99_ms'), 1)} ms; wall p50 {fmt(g('limit_wall_overshoot_p50_ms'), 1)} / p99 "
  f"{fmt(g('limit_wall_overshoot_p99_ms'), 1)} ms (caller waited p50 {fmt(g('limit_wall_host_overshoot_p50_ms'), 1)} ms past the wall limit); "
  f"the floor: a bare `sleep 5` killed by its parent at 100 ms is reaped p50 {fmt(g('limit_bare_wall_overshoot_p50_ms'), 1)} / p99 "
  f"{fmt(g('limit_bare_wall_overshoot_p99_ms'), 1)} ms late")
w(f"idle pool of {g('idle_sandboxes', 8)} warm sandboxes: holder process RSS {fmt(g('idle_rss_mib'))} MiB; "
  f"{g('idle_init_processes', '?')} sandbox processes RSS {fmt(g('idle_rss_inits_mib'))} MiB "
  f"(PSS {fmt(g('idle_pss_inits_mib'))}); total RSS {fmt(g('idle_rss_with_inits_mib'))} MiB, "
  f"PSS {fmt(g('idle_pss_with_inits_mib'))} MiB; sandbox cgroups charged {fmt(g('idle_cgroup_memory_mib'))} MiB")
w(f"python3 -c pass: bare p50 {fmt(g('bare_python_p50_ms'))} ms, corral warm pool p50 {fmt(g('pooled_python_p50_ms'))} ms "
  f"(+{fmt(None if g('pooled_python_p50_ms') is None or g('bare_python_p50_ms') is None else g('pooled_python_p50_ms') - g('bare_python_p50_ms'))} ms; /bin/true: "
  f"+{fmt(None if g('pooled_p50_ms') is None or g('bare_p50_ms') is None else g('pooled_p50_ms') - g('bare_p50_ms'))} ms)")
w(f"POST /run /bin/true (wrk, 2 connections, {g('http_run_tokens', '?')} student tokens): "
  f"{fmt(g('http_run_req_per_s'))} req/s (warm pool p2 {fmt(g('pooled_runs_per_s_p2'))} runs/s -> "
  f"{fmt(g('http_run_req_per_s_over_pooled_p2'))}x), p50 {fmt(g('http_run_p50_ms'))} / p99 {fmt(g('http_run_p99_ms'))} ms; "
  f"the server's own threads {fmt(g('http_run_server_cpu_ms_per_req'), 3)} ms CPU per request")
w(f"WebSocket stdin line -> cat's echo: p50 {fmt(g('ws_echo_p50_ms'))} / p99 {fmt(g('ws_echo_p99_ms'))} ms "
  f"({g('ws_echo_n', '?')} lines)")
w(f"queue: {g('queue_n', '?')} submissions of examples/hello: /submissions {fmt(g('queue_judged_per_s'))} judged/s, "
  f"corral check in a loop {fmt(g('check_loop_per_s'))}/s -> {fmt(g('queue_over_check_loop'))}x")
w(f"fresh sandbox: build p50 {fmt(g('fresh_build_p50_ms'))} ms, teardown p50 {fmt(g('fresh_teardown_p50_ms'))} ms; "
  f"pooled with a single sandbox (waits for its reset) p50 {fmt(g('pooled_1sbx_p50_ms'))} ms")
w("")
w(f"pooled /bin/true in an image root p50 {fmt(g('image_pooled_p50_ms'))} ms, on the host root {fmt(g('image_host_pooled_p50_ms'))} ms (same run)")
if g("gvisor_warm_lease_p50_ms") is not None:
    # Issue 11's measurement (not one of issue 13's targets: gVisor is optional on a host).
    w(f"gVisor /bin/true p50: fresh sandbox {fmt(g('gvisor_fresh_p50_ms'))} ms, pre-started {fmt(g('gvisor_prestarted_p50_ms'))} ms, "
      f"warm lease {fmt(g('gvisor_warm_lease_p50_ms'))} ms ({fmt(rnd(g('gvisor_warm_over_runsc_do_p50'), 2))}x runsc do; bound 0.2x)")
    w(f"grading under gVisor vs native (p50 ms, paired): C {fmt(g('gvisor_grading_c_gvisor_p50_ms'))} vs {fmt(g('gvisor_grading_c_corral_p50_ms'))} "
      f"(+{fmt(g('gvisor_grading_c_gvisor_over_corral_paired_pct'))}%), Python {fmt(g('gvisor_grading_py_gvisor_p50_ms'))} vs "
      f"{fmt(g('gvisor_grading_py_corral_p50_ms'))} (+{fmt(g('gvisor_grading_py_gvisor_over_corral_paired_pct'))}%)")
w("targets (ratios from this run):")
for t in r["targets"]:
    verdict = {True: "MET", False: "MISSED", None: "n/a"}[t["met"]]
    w(f"  [{verdict:^6}] {t['target']:<54} {fmt(t['value'])} {t['unit']}")
if r["errors"]:
    w("")
    w("errors:")
    for e in r["errors"]:
        w(f"  {e}")
print("\n".join(lines))
with open(os.path.join(OUT, "latest.txt"), "w") as f:
    f.write("\n".join(lines) + "\n")

# --- markdown: the headline table for the README ---------------------------------------------------
md = []
m = md.append
m(f"Run of {g('date', '?')}: {g('cpus', '?')} cores ({g('cpu_model', '?')}), Linux {g('kernel', '?')}, "
  f"cgroup {g('cgroup_version', '?')}, commit `{g('commit', '?')}`, load average {fmt(g('loadavg_start'), 1)} → "
  f"{fmt(g('loadavg_end'), 1)}{' (a busy machine)' if r['busy_machine'] else ''}.")
m("")
m("| `/bin/true`, one run | p50 ms | p99 ms | × bare p50 | runs/s p1 | p2 | p8 |")
m("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for label, key in rows:
    if g(f"{key}_p50_ms") is None:
        continue
    x = ratio(g(f"{key}_p50_ms"), g("bare_p50_ms"))
    m(f"| {label} | {fmt(g(f'{key}_p50_ms'))} | {fmt(g(f'{key}_p99_ms'))} | {fmt(x, 1)} | "
      f"{fmt(g(f'{key}_runs_per_s_p1'))} | {fmt(g(f'{key}_runs_per_s_p2'))} | {fmt(g(f'{key}_runs_per_s_p8'))} |")
m("")
m("| grading, one submission (p50 ms) | bare | corral | bwrap | corral over bare (p50s) | corral over bare (paired) | bwrap over bare (paired) |")
m("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for lang, label in (("c", "C: `gcc -O2` + 10 runs"), ("py", "Python: 10 runs")):
    m(f"| {label} | {fmt(g(f'grading_{lang}_bare_p50_ms'), 1)} | {fmt(g(f'grading_{lang}_corral_p50_ms'), 1)} | "
      f"{fmt(g(f'grading_{lang}_bwrap_p50_ms'), 1)} | {fmt(g(f'grading_{lang}_p50_overhead_pct'), 1)}% | "
      f"{fmt(g(f'grading_{lang}_corral_over_bare_paired_pct'), 1)}% | "
      f"+{fmt(g(f'grading_{lang}_bwrap_overhead_pct'), 1)}% |")
m("")
m(f"- Whole process, {g('batch_runs', '?')} × `/bin/true`, parallel 2: `corral run --batch` {fmt(g('batch_corral_elapsed_s'))} s "
  f"({fmt(g('batch_corral_runs_per_s_p2'))} runs/s), `xargs -P 2` over bwrap {fmt(g('batch_bwrap_elapsed_s'))} s "
  f"({fmt(g('batch_bwrap_runs_per_s_p2'))} runs/s).")
m(f"- Time limits, reported use minus the 100 ms limit: CPU p50 {fmt(g('limit_cpu_overshoot_p50_ms'), 0)} / p99 "
  f"{fmt(g('limit_cpu_overshoot_p99_ms'), 0)} ms, wall p50 {fmt(g('limit_wall_overshoot_p50_ms'), 0)} / p99 "
  f"{fmt(g('limit_wall_overshoot_p99_ms'), 0)} ms; the floor, a bare `sleep 5` killed by its parent at 100 ms: "
  f"reaped p50 {fmt(g('limit_bare_wall_overshoot_p50_ms'), 1)} / p99 {fmt(g('limit_bare_wall_overshoot_p99_ms'), 1)} ms late.")
m(f"- Idle pool of {g('idle_sandboxes', 8)} warm sandboxes: the holding process {fmt(g('idle_rss_mib'))} MiB RSS; "
  f"the sandboxes' {g('idle_init_processes', '?')} processes {fmt(g('idle_rss_inits_mib'))} MiB RSS "
  f"({fmt(g('idle_pss_inits_mib'))} MiB PSS: they share the corral binary's pages), "
  f"{fmt(g('idle_cgroup_memory_mib'))} MiB charged to their cgroups (tmpfs roots included).")
m(f"- `POST /run` of `/bin/true` under `wrk` (2 connections, {g('http_run_tokens', '?')} student tokens): "
  f"{fmt(g('http_run_req_per_s'))} req/s, p50 {fmt(g('http_run_p50_ms'))} / p99 {fmt(g('http_run_p99_ms'))} ms "
  f"({fmt(g('http_run_req_per_s_over_pooled_p2'))}× the warm pool's runs/s at parallel 2); the server's own "
  f"threads (HTTP, the supervision of the run; not the sandbox's processes) spent "
  f"{fmt(g('http_run_server_cpu_ms_per_req'), 3)} ms of CPU per request.")
m(f"- WebSocket, a line typed into `cat` until its echo arrives: p50 {fmt(g('ws_echo_p50_ms'))} / p99 "
  f"{fmt(g('ws_echo_p99_ms'))} ms.")
m(f"- Queue, {g('queue_n', '?')} submissions of `examples/hello`: {fmt(g('queue_judged_per_s'))} judged/s through "
  f"`/submissions`, {fmt(g('check_loop_per_s'))}/s through `corral check` in a loop "
  f"({fmt(g('queue_over_check_loop'))}×).")
m(f"- `python3 -c pass`: bare {fmt(g('bare_python_p50_ms'))} ms, warm pool {fmt(g('pooled_python_p50_ms'))} ms (p50).")
m(f"- Pooled `/bin/true` in a Debian image root {fmt(g('image_pooled_p50_ms'))} ms vs the host root {fmt(g('image_host_pooled_p50_ms'))} ms (p50, taking turns in one run): {fmt(g('image_p50_over_host'))}x.")
if g("gvisor_warm_lease_p50_ms") is not None:
    m(f"- gVisor (`--runtime gvisor`), `/bin/true` p50: a fresh gVisor sandbox {fmt(g('gvisor_fresh_p50_ms'))} ms, a pre-started one "
      f"{fmt(g('gvisor_prestarted_p50_ms'))} ms, a run in a warm leased one {fmt(g('gvisor_warm_lease_p50_ms'))} ms: "
      f"{fmt(rnd(g('gvisor_warm_over_runsc_do_p50'), 2))}× `runsc do` (issue 11: at most 0.2×).")
    m(f"- The grading loops under gVisor (a pre-started gVisor sandbox per submission) against native corral, taking turns: "
      f"C {fmt(g('gvisor_grading_c_gvisor_p50_ms'))} vs {fmt(g('gvisor_grading_c_corral_p50_ms'))} ms (+{fmt(g('gvisor_grading_c_gvisor_over_corral_paired_pct'))} %, paired), "
      f"Python {fmt(g('gvisor_grading_py_gvisor_p50_ms'))} vs {fmt(g('gvisor_grading_py_corral_p50_ms'))} ms (+{fmt(g('gvisor_grading_py_gvisor_over_corral_paired_pct'))} %).")
m("")
m("| target | this run | verdict |")
m("| --- | ---: | --- |")
for t in r["targets"]:
    verdict = {True: "met", False: "**missed**", None: "n/a"}[t["met"]]
    m(f"| {t['target']} | {fmt(t['value'])} {t['unit']} | {verdict} |")
with open(os.path.join(OUT, "latest.md"), "w") as f:
    f.write("\n".join(md) + "\n")

# --- csv: one measurement per line -----------------------------------------------------------------
with open(os.path.join(OUT, "latest.csv"), "w", newline="") as f:
    out = csv.writer(f)
    out.writerow(["key", "value"])
    for k in sorted(r):
        if k in ("targets", "errors"):
            continue
        out.writerow([k, r[k]])
    for t in r["targets"]:
        out.writerow([f"target: {t['target']}", "met" if t["met"] else ("missed" if t["met"] is False else "n/a")])

# --- plot --------------------------------------------------------------------------------------------
try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    print(f"\nmatplotlib unavailable: {PLOT} not written", file=sys.stderr)
    sys.exit(STATUS)

fig, axes = plt.subplots(2, 2, figsize=(13, 9))
present = [(label, key) for label, key in rows if g(f"{key}_p50_ms") is not None]
names = [SHORT[k] for _, k in present]

ax = axes[0][0]
xs = range(len(present))
ax.bar([x - 0.2 for x in xs], [g(f"{k}_p50_ms") for _, k in present], 0.4, label="p50")
ax.bar([x + 0.2 for x in xs], [g(f"{k}_p99_ms") for _, k in present], 0.4, label="p99")
ax.set_yscale("log")
ax.set_xticks(list(xs), names, fontsize=8)
ax.set_ylabel("ms (log)")
ax.set_title("/bin/true: latency of one run")
ax.legend()

ax = axes[0][1]
tp = [(label, key) for label, key in present if g(f"{key}_runs_per_s_p1") is not None]
xs = range(len(tp))
for i, p in enumerate((1, 2, 8)):
    ax.bar([x + (i - 1) * 0.27 for x in xs], [g(f"{k}_runs_per_s_p{p}") or 0 for _, k in tp], 0.27,
           label=f"parallel {p}")
ax.set_xticks(list(xs), [SHORT[k] for _, k in tp], fontsize=8)
ax.set_yscale("log")
ax.set_ylabel("runs/s (log)")
ax.set_title(f"/bin/true throughput ({g('cpus', '?')} CPUs)")
ax.legend()

ax = axes[1][0]
runners = [x for x in ("bare", "corral", "bwrap") if g(f"grading_c_{x}_p50_ms") is not None]
for i, run in enumerate(runners):
    ax.bar([j + (i - 1) * 0.27 for j in range(2)],
           [g(f"grading_c_{run}_p50_ms"), g(f"grading_py_{run}_p50_ms")], 0.27, label=run)
ax.set_xticks([0, 1], ["C: gcc + 10 runs", "Python: 10 runs"])
ax.set_ylabel("ms per submission (p50)")
ax.set_title("grading loop")
ax.legend()

ax = axes[1][1]
ax.axis("off")
text = ["targets (this run):"]
for t in r["targets"]:
    verdict = {True: "met", False: "MISSED", None: "n/a"}[t["met"]]
    text.append(f"{verdict:>6}  {t['target']}: {fmt(t['value'])} {t['unit']}")
text += ["", f"batch {g('batch_runs', '?')} x /bin/true, parallel 2:",
         f"  corral run --batch  {fmt(g('batch_corral_runs_per_s_p2'))} runs/s",
         f"  xargs -P 2 bwrap    {fmt(g('batch_bwrap_runs_per_s_p2'))} runs/s",
         "", f"{g('date', '')}, Linux {g('kernel', '')}, {g('cpus', '?')} CPUs"]
text += ["", f"POST /run: {fmt(g('http_run_req_per_s'))} req/s, p99 {fmt(g('http_run_p99_ms'))} ms",
         f"WebSocket echo p50 {fmt(g('ws_echo_p50_ms'))} ms",
         f"queue {fmt(g('queue_judged_per_s'))} judged/s, check loop {fmt(g('check_loop_per_s'))}/s"]
ax.text(0, 1, "\n".join(text), va="top", family="monospace", fontsize=7)
fig.suptitle("corral vs. peers — bench/compare.sh")
fig.tight_layout()
os.makedirs(os.path.dirname(PLOT) or ".", exist_ok=True)
fig.savefig(PLOT, dpi=90)
print(f"\nwrote {os.path.join(OUT, 'latest.json')}, {os.path.join(OUT, 'latest.csv')}, {PLOT}", file=sys.stderr)
sys.exit(STATUS)
