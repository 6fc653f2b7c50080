# corral's Python helpers in the sandbox start with this (it is prepended to each bootstrap): they
# are given a one-line nonce on standard input, the key of the MAC they seal their results with
# (`_corral_sealed`) so the host knows the results are theirs.
import os

# Bound before any code of the submission runs (pytest imports it into this process).
from hashlib import sha256 as _corral_sha256
from hmac import HMAC as _corral_HMAC
from json import dumps as _corral_dumps


def _corral_read_nonce():
    data = b""
    while not data.endswith(b"\n") and len(data) < 256:
        chunk = os.read(0, 256)
        if not chunk:
            break
        data += chunk
    # Standard input is the nonce's pipe: nothing that runs later may read it again.
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return data.strip().decode("ascii", "replace")


def _corral_sealed(nonce, summary):
    """What the helper writes for the host: its summary as JSON and an HMAC-SHA256 of it keyed
    by the nonce. The nonce itself is never written: the submission's processes run as the same
    user and can read the file once it is there (a daemon may wait for it), but a MAC tells them
    nothing they could sign a changed summary with."""
    body = _corral_dumps(summary, sort_keys=True)
    mac = _corral_HMAC(nonce.encode("ascii", "replace"), body.encode(), _corral_sha256).hexdigest()
    return _corral_dumps({"summary": body, "mac": mac}).encode()
