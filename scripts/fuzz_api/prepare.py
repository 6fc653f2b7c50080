"""Makes the fixtures a fuzz run needs and writes the OpenAPI document with them as examples.

Operations on ids (an upload, a suite, a kept sandbox, a submission, a claimed job, an image) are
refused when called with made-up ids, so schemathesis would only ever see their 404s. This
creates one of each on the running server, the way a client would, and puts the real values into
the document's examples (schemathesis' examples phase sends those first; its stateful phase
follows the document's links from there). Prints `KEY=VALUE` lines for the shell.

    python3 prepare.py BASE_URL ADMIN_TOKEN REGISTRY_ADDR WORKDIR
"""

import hashlib
import hmac
import io
import json
import os
import sys
import tarfile
import time
import urllib.error
import urllib.request
import uuid

BASE, ADMIN, REGISTRY, WORK = sys.argv[1:5]
GREET = b"echo hello\n"


def call(method, path, body=None, token=ADMIN, ctype="application/json", expect=(200, 201, 202, 204)):
    data = body
    if body is not None and ctype == "application/json":
        data = json.dumps(body).encode()
    req = urllib.request.Request(BASE + path, data=data, method=method)
    req.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        req.add_header("Content-Type", ctype)
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            status, raw = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    if status not in expect:
        sys.exit(f"prepare: {method} {path} answered {status}: {raw[:500]!r}")
    return json.loads(raw) if raw else None


def signed_result(worker, job, body):
    """POST /worker/jobs/{job}/result as `corral worker` sends it (signed with its token)."""
    raw = json.dumps(body).encode()
    t = int(time.time())
    key = hashlib.sha256(worker.encode()).hexdigest().encode()
    mac = hmac.new(key, f"{t}.".encode() + raw, hashlib.sha256).hexdigest()
    req = urllib.request.Request(f"{BASE}/worker/jobs/{job}/result", data=raw, method="POST")
    req.add_header("Authorization", f"Bearer {worker}")
    req.add_header("Content-Type", "application/json")
    req.add_header("Corral-Signature", f"t={t},v1={mac}")
    with urllib.request.urlopen(req, timeout=60) as r:
        if r.status != 200:
            sys.exit(f"prepare: the result of {job} answered {r.status}")


def multipart(parts):
    """parts: (field name, file name or None, bytes)."""
    boundary = uuid.uuid4().hex
    out = io.BytesIO()
    for name, filename, data in parts:
        out.write(f"--{boundary}\r\n".encode())
        disp = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
        out.write(f"Content-Disposition: {disp}\r\n\r\n".encode())
        out.write(data + b"\r\n")
    out.write(f"--{boundary}--\r\n".encode())
    return out.getvalue(), f"multipart/form-data; boundary={boundary}"


def rootfs_tar(marker):
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as t:
        d = tarfile.TarInfo("etc")
        d.type, d.mode = tarfile.DIRTYPE, 0o755
        t.addfile(d)
        f = tarfile.TarInfo("etc/fuzz-release")
        f.size, f.mode = len(marker), 0o644
        t.addfile(f, io.BytesIO(marker))
    return raw.getvalue()


def op(doc, method, path):
    return doc["paths"][path][method.lower()]


def body_example(doc, method, path, value):
    for media in op(doc, method, path)["requestBody"]["content"].values():
        media.pop("examples", None)
        media["example"] = value


def param_example(doc, method, path, name, value):
    o = op(doc, method, path)
    params = o.get("parameters", []) + doc["paths"][path].get("parameters", [])
    for p in params:
        if p["name"] == name:
            p.pop("examples", None)
            p["example"] = value
            return
    sys.exit(f"prepare: {method} {path} has no parameter {name}")


def main():
    # An upload with the file the `hello` suite grades, and that suite.
    body, ctype = multipart([("files", "greet.sh", GREET)])
    upload = call("POST", "/upload", body, ctype=ctype)["id"]
    suite = (
        b"name: hello\nchecks:\n  - id: greets\n    description: Does greet.sh print hello?\n"
        b"    steps:\n      - run: sh greet.sh\n      - stdout: hello\n      - exit: 0\n"
    )
    body, ctype = multipart([("id", None, b"hello"), ("suite", "suite.yaml", suite), ("greet.sh", "greet.sh", GREET)])
    call("POST", "/suites", body, ctype=ctype)
    # A kept sandbox, a submission, a revision, a token to revoke, the worker's token.
    kept = call("POST", "/run", {"cmd": "true"})["sandbox"]
    submission = call("POST", "/submissions", {"cmd": "cat greet.sh", "upload": upload})["id"]
    revision = call(
        "POST",
        "/revisions",
        {"kind": "save", "language": "bash", "status": "saved", "files": [{"path": "greet.sh", "content": "echo hello\n"}]},
    )["id"]
    doomed = call("POST", "/tokens", {"role": "student", "name": "fuzz-doomed"})["id"]
    made = call("POST", "/tokens", {"role": "worker", "name": "fuzz-worker"})
    worker = made["token"]
    # The fuzzer's own tokens, which it must not revoke (hooks.py steers it away from them).
    keep = [call("GET", "/whoami")["id"], made["id"]]
    # Three jobs claimed by the worker (one to renew, one to finish, one finished here: staff
    # regrade it and send its callback again), one left for the claim. Their callback names a host
    # that resolves to loopback: accepted (a name is checked when it is called), then refused at
    # once by each delivery, so no try is under way when the fuzzer asks for another.
    for _ in range(4):
        call("POST", "/submissions", {"cmd": "echo hi", "callback_url": "http://localhost:9/fuzz-hook"})
    claimed = [call("POST", "/worker/claim", {"worker": "fuzz", "wait": 5}, token=worker) for _ in range(3)]
    judged = claimed[2]["id"]
    signed_result(worker, judged, {"lease": claimed[2]["lease"], "verdict": {"verdict": "accepted", "score": 1.0, "max_score": 1.0}})
    for _ in range(600):
        if call("GET", f"/submissions/{judged}")["callback"]["state"] == "failed":
            break
        time.sleep(0.1)
    else:
        sys.exit(f"prepare: the callback of {judged} was never given up")
    # Images: one imported (the worker fetches it), one to remove; the pull comes from registry.py.
    archive = os.path.join(WORK, "import.tar")
    with open(archive, "wb") as f:
        f.write(rootfs_tar(b"imported\n"))
    call("POST", "/images/import?name=fuzz/imported:1", open(archive, "rb").read(), ctype="application/octet-stream")
    call("POST", "/images/import?name=fuzz/delete-me:1", rootfs_tar(b"doomed\n"), ctype="application/octet-stream")
    # The image manifest's digest: a blob the worker fetches first.
    blob = call("GET", "/worker/images/fuzz/imported:1", token=worker)["digest"]
    # An image build (an `env` step only: no sandbox work), polled at GET /images/builds/{id}.
    build_file = "from: fuzz/imported:1\nsteps:\n  - env: {FUZZ: '1'}\n"
    build = call("POST", "/images/build?name=fuzz/built:1", build_file.encode(), ctype="application/yaml")["id"]
    # A Judge0 submission (Bash, id 46), read back by its token.
    judge0 = {"source_code": "echo hello", "language_id": 46, "expected_output": "hello"}
    judge0_token = call("POST", "/judge0/submissions", judge0)["token"]

    doc = call("GET", "/openapi.json")
    param_example(doc, "GET", "/uploads/{id}", "id", upload)
    body_example(doc, "POST", "/run", {"cmd": "sh greet.sh", "sandbox": {"homedir": upload}, "seccomp": "no_sockets"})
    param_example(doc, "DELETE", "/sandboxes/{id}", "id", kept)
    body_example(doc, "POST", "/check", {"checks": "hello", "sandbox": {"homedir": upload}})
    body_example(doc, "POST", "/submissions", {"cmd": "sh greet.sh", "upload": upload, "expected_output": "hello"})
    param_example(doc, "GET", "/submissions/{id}", "id", submission)
    param_example(doc, "POST", "/submissions/{id}/regrade", "id", judged)
    param_example(doc, "POST", "/submissions/{id}/callback", "id", judged)
    param_example(doc, "GET", "/revisions/{id}", "id", revision)
    param_example(doc, "DELETE", "/tokens/{id}", "id", doomed)
    body_example(doc, "POST", "/images", {"pull": f"{REGISTRY}/fuzz/tiny:1"})
    body_example(doc, "POST", "/images/import", "FUZZ_IMPORT_ARCHIVE")
    param_example(doc, "POST", "/images/import", "name", "fuzz/imported:1")
    param_example(doc, "DELETE", "/images/{reference}", "reference", "fuzz/delete-me:1")
    body_example(doc, "POST", "/worker/claim", {"worker": "fuzz", "wait": 0})
    param_example(doc, "POST", "/worker/jobs/{id}/heartbeat", "id", claimed[0]["id"])
    body_example(doc, "POST", "/worker/jobs/{id}/heartbeat", {"lease": claimed[0]["lease"]})
    param_example(doc, "POST", "/worker/jobs/{id}/result", "id", claimed[1]["id"])
    body_example(
        doc,
        "POST",
        "/worker/jobs/{id}/result",
        {"lease": claimed[1]["lease"], "verdict": {"verdict": "accepted", "score": 1.0, "max_score": 1.0}},
    )
    param_example(doc, "GET", "/worker/images/{reference}", "reference", "fuzz/imported:1")
    param_example(doc, "GET", "/worker/blobs/{digest}", "digest", blob)
    body_example(doc, "POST", "/images/build", "FUZZ_BUILD_FILE")  # replaced by hooks.py
    param_example(doc, "POST", "/images/build", "name", "fuzz/built:2")
    param_example(doc, "GET", "/images/builds/{id}", "id", build)
    body_example(doc, "POST", "/judge0/submissions", judge0)
    body_example(doc, "POST", "/judge0/submissions/batch", {"submissions": [judge0, {**judge0, "stdin": "x"}]})
    param_example(doc, "GET", "/judge0/submissions/{token}", "token", judge0_token)
    param_example(doc, "DELETE", "/judge0/submissions/{token}", "token", judge0_token)
    param_example(doc, "GET", "/judge0/submissions/batch", "tokens", judge0_token)
    param_example(doc, "GET", "/judge0/languages/{id}", "id", 46)
    with open(os.path.join(WORK, "openapi.json"), "w") as f:
        json.dump(doc, f, indent=1)
    print(f"FUZZ_WORKER_TOKEN={worker}")
    print(f"FUZZ_KEEP_TOKEN_IDS={','.join(keep)}")
    print(f"FUZZ_IMPORT_ARCHIVE={archive}")


if __name__ == "__main__":
    main()
