"""schemathesis hooks for `scripts/fuzz-api` (loaded through SCHEMATHESIS_HOOKS=hooks).

- Every response's status is appended to $FUZZ_CALLS (one JSON line per call), from which
  `coverage.py` tells, per operation, whether it was ever reached with valid data (a 2xx).
- Every request carries the admin token ($FUZZ_ADMIN_TOKEN), except that the remote-worker
  operations (`/worker/...`) are sent with the worker token prepare.py made
  ($FUZZ_WORKER_TOKEN) instead of the admin one; a result is signed the way `corral worker` signs
  it (`Corral-Signature: t=UNIX,v1=HEX(HMAC-SHA256(sha256_hex(token), "{t}.{body}"))`) over the
  exact bytes sent, so the fuzzer reaches the verdict-recording code, not only the 401.
- `DELETE /tokens/{id}` never revokes the fuzzer's own tokens ($FUZZ_KEEP_TOKEN_IDS: the admin's
  and the worker's, whose ids `GET /whoami` shows and the stateful phase can carry over): such an
  id is swapped for one that does not exist (a 404). Revoking them once left every later call,
  and the WebSocket cases after the fuzzing, with a 401.
- `POST /images/import`'s example body is a placeholder in the document (a JSON document cannot
  hold a binary archive); the archive prepare.py wrote ($FUZZ_IMPORT_ARCHIVE) is sent instead.
- `POST /images/build`'s example body is a placeholder too: schemathesis writes YAML bodies with
  yaml.dump, which turns a string into a quoted scalar; the build file's own text is sent instead.
"""

import hashlib
import hmac
import json
import os
import time

import schemathesis

IMPORT_PLACEHOLDER = "FUZZ_IMPORT_ARCHIVE"
BUILD_PLACEHOLDER = "FUZZ_BUILD_FILE"
BUILD_FILE = "from: fuzz/imported:1\nsteps:\n  - env: {FUZZ: '2'}\n"


def _is_json(v):
    return isinstance(v, (dict, list, str, int, float, bool)) or v is None


def _label(case):
    return f"{case.operation.method.upper()} {case.operation.path}"


@schemathesis.hook
def before_call(context, case, kwargs):
    path = case.operation.path
    headers = dict(case.headers or {})
    token = os.environ["FUZZ_ADMIN_TOKEN"]
    if path.startswith("/worker/"):
        token = os.environ["FUZZ_WORKER_TOKEN"]
    headers["Authorization"] = f"Bearer {token}"
    if path.startswith("/worker/"):
        body = case.body
        if path.endswith("/result") and "data" not in kwargs and _is_json(body):
            raw = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
            t = int(time.time())
            key = hashlib.sha256(token.encode()).hexdigest().encode()
            mac = hmac.new(key, f"{t}.".encode() + raw, hashlib.sha256).hexdigest()
            headers["Corral-Signature"] = f"t={t},v1={mac}"
            kwargs["data"] = raw
    if path == "/images/import":
        body = case.body
        if body == IMPORT_PLACEHOLDER or body == IMPORT_PLACEHOLDER.encode():
            with open(os.environ["FUZZ_IMPORT_ARCHIVE"], "rb") as f:
                kwargs["data"] = f.read()
            headers["Content-Type"] = "application/octet-stream"
    if path == "/images/build":
        body = case.body
        if body == BUILD_PLACEHOLDER or body == BUILD_PLACEHOLDER.encode() or (
            isinstance(body, str) and BUILD_PLACEHOLDER in body
        ):
            kwargs["data"] = BUILD_FILE.encode()
            kwargs.pop("json", None)
            headers["Content-Type"] = "application/yaml"
    if case.operation.method.upper() == "DELETE" and path == "/tokens/{id}":
        keep = set(filter(None, os.environ.get("FUZZ_KEEP_TOKEN_IDS", "").split(",")))
        params = case.path_parameters or {}
        if params.get("id") in keep:
            case.path_parameters = {**params, "id": "fuzz-kept-token"}
    case.headers = headers


@schemathesis.hook
def after_call(context, case, response):
    with open(os.environ["FUZZ_CALLS"], "a") as f:
        f.write(json.dumps({"op": _label(case), "status": response.status_code}) + "\n")
