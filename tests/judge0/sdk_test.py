"""The official Judge0 Python SDK (PyPI `judge0`) against a running corral's /judge0 surface.

Run by crates/cli/tests/judge0_e2e.rs with JUDGE0_CE_ENDPOINT (http://HOST:PORT/judge0) and
JUDGE0_CE_AUTH_HEADERS ({"X-Auth-Token": TOKEN}) set: the SDK's own way to name a self-hosted
Judge0. Every check is an assert; the last line printed is a summary.
"""

import json
import os

import judge0
from judge0 import Status, Submission

endpoint = os.environ["JUDGE0_CE_ENDPOINT"]
headers = json.loads(os.environ["JUDGE0_CE_AUTH_HEADERS"])
client = judge0.Client(endpoint=endpoint, headers=headers)

checks = 0


def check(cond, what):
    global checks
    assert cond, what
    checks += 1


# The client read /languages, /config_info and /about when it was made.
check(client.version == "1.13.1", f"version {client.version}")
ids = {lang.id for lang in client.languages}
for alias in (judge0.C, judge0.CPP, judge0.PYTHON, judge0.JAVA, judge0.JAVASCRIPT, judge0.BASH):
    check(client.is_language_supported(alias), f"{alias!r} not supported: {ids}")
check(client.config.enable_batched_submissions, "batches")
statuses = client.get_statuses()
check({s["id"] for s in statuses} == set(range(1, 15)), statuses)

# One run, the SDK's simplest call (create, then poll until done).
r = judge0.run(client=client, source_code="print(input()[::-1])", stdin="corral", language=judge0.PYTHON)
check(r.status == Status.ACCEPTED, r)
check(r.stdout == "larroc\n", repr(r.stdout))
check(r.time is not None and r.memory is not None, r)
check(r.token is not None, "a UUID token")

# Expected output and the verdicts, as Judge0's status ids.
cases = [
    (Submission(source_code="#include <stdio.h>\nint main(void){int a,b;scanf(\"%d %d\",&a,&b);printf(\"%d\\n\",a+b);}",
                language=judge0.C, stdin="2 40", expected_output="42"), Status.ACCEPTED),
    (Submission(source_code="print(41)", language=judge0.PYTHON, expected_output="42"), Status.WRONG_ANSWER),
    (Submission(source_code="int main(void) { return 0 }", language=judge0.C), Status.COMPILATION_ERROR),
    (Submission(source_code="import sys; sys.exit(3)", language=judge0.PYTHON), Status.RUNTIME_ERROR_NZEC),
    (Submission(source_code="int main(void){int *p = 0; return *p;}", language=judge0.C), Status.RUNTIME_ERROR_SIGSEGV),
    (Submission(source_code="while True: pass", language=judge0.PYTHON, cpu_time_limit=0.5, wall_time_limit=5),
     Status.TIME_LIMIT_EXCEEDED),
    (Submission(source_code="console.log(process.argv.slice(2).join('+'))", language=judge0.JAVASCRIPT,
                command_line_arguments="a b"), Status.ACCEPTED),
    (Submission(source_code="echo \"$1\"", language=judge0.BASH, command_line_arguments="quoted"), Status.ACCEPTED),
]
subs = [s for s, _ in cases]
# A batch (the SDK sends several as one /submissions/batch), then waits for all.
subs = judge0.async_run(client=client, submissions=subs)
subs = judge0.wait(client=client, submissions=subs)
for i, (s, (_, want)) in enumerate(zip(subs, cases)):
    check(s.status == want, f"case {i}: {s.status} != {want}: {s}")
check(subs[0].stdout == "42\n", subs[0].stdout)
check("error" in (subs[2].compile_output or ""), subs[2].compile_output)
check(subs[3].exit_code == 3, subs[3].exit_code)
check(subs[4].exit_signal == 11, subs[4].exit_signal)
check(subs[6].stdout == "a+b\n", subs[6].stdout)
check(subs[7].stdout == "quoted\n", subs[7].stdout)

# Multi-file programs: the SDK zips a Filesystem into additional_files, unpacked beside the source.
fs = judge0.Filesystem(content=[judge0.File(name="greet.py", content="def greet(n):\n    return 'hello, ' + n\n")])
s = Submission(source_code="import greet\nprint(greet.greet(input()))", language=judge0.PYTHON, stdin="sdk",
               additional_files=fs)
s = judge0.run(client=client, submissions=s)
check(s.status == Status.ACCEPTED and s.stdout == "hello, sdk\n", s)
# Standard error merged into standard output, and repeated runs.
s = Submission(source_code="import sys\nprint('out', flush=True)\nsys.stderr.write('err\\n')", language=judge0.PYTHON,
               redirect_stderr_to_stdout=True, number_of_runs=2, expected_output="out\nerr")
s = judge0.run(client=client, submissions=s)
check(s.status == Status.ACCEPTED and s.stdout == "out\nerr\n", s)

# Fields: only what is asked for comes back.
s = Submission(source_code="print('hi')", language=judge0.PYTHON)
s = client.create_submission(s)
s = judge0.wait(client=client, submissions=s)
fresh = Submission(source_code="", language=judge0.PYTHON)
fresh.token = s.token
client.get_submission(fresh, fields=["status", "stdout"])
check(fresh.status == Status.ACCEPTED and fresh.stdout == "hi\n", fresh)
check(fresh.time is None, "time was not asked for")

print(f"judge0 SDK {judge0.__version__ if hasattr(judge0, '__version__') else ''}: {checks} passed, 0 failed")
