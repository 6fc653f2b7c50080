"""Calls a running `corral serve` through the client openapi-python-client generated from its own
/openapi.json: an upload, a run in it, a suite registered and a check, a Judge0 submission with
wait=true (and a batch), the Judge0 languages and statuses.

    python3 client_test.py BASE_URL ADMIN_TOKEN   (the generated package `corral_client` importable;
    scripts/openapi-clients generates it and runs this)
"""

import base64
import sys

from corral_client import AuthenticatedClient
from corral_client.api.checks import check, register_suite
from corral_client.api.judge0 import (
    judge0_create_batch,
    judge0_create_submission,
    judge0_get_batch,
    judge0_list_languages,
    judge0_list_statuses,
)
from corral_client.api.sandbox import run, upload
from corral_client.models import (
    CheckRequest,
    Judge0BatchRequest,
    Judge0Submission,
    Judge0SubmissionRequest,
    Judge0Token,
    RunRequest,
    SandboxRef,
    SuiteForm,
    UploadForm,
)
from corral_client.types import File

base, token = sys.argv[1], sys.argv[2]
client = AuthenticatedClient(base_url=base, token=token, raise_on_unexpected_status=True, timeout=120)
GREET = b"echo hello\n"


def ok(what, cond, detail):
    if not cond:
        sys.exit(f"client_test: {what}: {detail!r}")
    print(f"client_test: {what}: ok")


# An upload, then a run in it.
up = upload.sync(client=client, body=UploadForm(files=[File(payload=GREET, file_name="greet.sh")]))
ok("upload", up is not None and up.files == ["greet.sh"], up)
r = run.sync(client=client, body=RunRequest(cmd="sh greet.sh", sandbox=SandboxRef(homedir=up.id, keep=False)))
ok("run", r is not None and r.code == 0 and r.stdout == "hello\n", r)

# A suite, then a check of the upload against it.
suite = (
    b"name: hello\nchecks:\n  - id: greets\n    description: Does greet.sh print hello?\n"
    b"    steps:\n      - run: sh greet.sh\n      - stdout: hello\n      - exit: 0\n"
)
reg = register_suite.sync(
    client=client,
    body=SuiteForm(suite=File(payload=suite, file_name="suite.yaml"), id="client-test-hello", files=[]),
)
ok("register suite", reg is not None and reg.id == "client-test-hello", reg)
report = check.sync(client=client, body=CheckRequest(checks="client-test-hello", sandbox=SandboxRef(homedir=up.id)), format_="json")
ok("check", report is not None and report.passed is True and report.score == 1.0, report)

# Judge0: the languages and statuses, a submission with wait=true, a batch.
langs = judge0_list_languages.sync(client=client)
ok("judge0 languages", langs and any(l.id == 46 for l in langs), langs)
statuses = judge0_list_statuses.sync(client=client)
ok("judge0 statuses", statuses and len(statuses) == 14 and statuses[2].description == "Accepted", statuses)
sub = judge0_create_submission.sync(
    client=client,
    body=Judge0SubmissionRequest(source_code="read x; echo \"$x$x\"", language_id=46, stdin="ab", expected_output="abab"),
    wait=True,
    fields="*",
)
ok(
    "judge0 submission (wait=true)",
    isinstance(sub, Judge0Submission) and sub.status.id == 3 and sub.stdout == "abab\n" and sub.language.id == 46,
    sub,
)
sub = judge0_create_submission.sync(
    client=client,
    body=Judge0SubmissionRequest(
        source_code=base64.b64encode(b"printf '\\377'").decode(), language_id="46"
    ),
    wait=True,
    base64_encoded=True,
)
ok("judge0 base64 (bytes kept)", isinstance(sub, Judge0Submission) and base64.b64decode(sub.stdout) == b"\xff", sub)
items = judge0_create_batch.sync(
    client=client,
    body=Judge0BatchRequest(
        submissions=[
            Judge0SubmissionRequest(source_code="echo one", language_id=46),
            Judge0SubmissionRequest(source_code="x", language_id=9999),
        ]
    ),
)
ok("judge0 batch", isinstance(items[0], Judge0Token) and "language_id" in items[1].additional_properties, items)
got = judge0_get_batch.sync(client=client, tokens=items[0].token, fields="token,status")
ok("judge0 batch read back", got is not None and got.submissions[0].token == items[0].token, got)
print("client_test: the generated client works against the server")
