"""A tiny OCI distribution registry on loopback holding one small image, so that the fuzz run's
`POST /images` (a pull) can succeed: this machine reaches no public registry. Prints its
`host:port` on standard output, then serves until killed.

    python3 registry.py          # the image is 127.0.0.1:PORT/fuzz/tiny:1
"""

import gzip
import hashlib
import io
import json
import sys
import tarfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def digest(b):
    return "sha256:" + hashlib.sha256(b).hexdigest()


def layer():
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as t:
        d = tarfile.TarInfo("etc")
        d.type, d.mode = tarfile.DIRTYPE, 0o755
        t.addfile(d)
        data = b"fuzz image\n"
        f = tarfile.TarInfo("etc/fuzz-release")
        f.size, f.mode = len(data), 0o644
        t.addfile(f, io.BytesIO(data))
    plain = raw.getvalue()
    return plain, gzip.compress(plain, mtime=0)


PLAIN, LAYER = layer()
CONFIG = json.dumps(
    {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Env": ["PATH=/usr/bin:/bin"]},
        "rootfs": {"type": "layers", "diff_ids": [digest(PLAIN)]},
    }
).encode()
MANIFEST = json.dumps(
    {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": digest(CONFIG),
            "size": len(CONFIG),
        },
        "layers": [
            {
                "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                "digest": digest(LAYER),
                "size": len(LAYER),
            }
        ],
    }
).encode()
BLOBS = {digest(CONFIG): CONFIG, digest(LAYER): LAYER}


class Handler(BaseHTTPRequestHandler):
    def reply(self, status, body=b"", ctype="application/json", extra=None):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self):
        p = self.path
        if p in ("/v2/", "/v2"):
            return self.reply(200, b"{}")
        if p.startswith("/v2/fuzz/tiny/manifests/"):
            ref = p.rsplit("/", 1)[1]
            if ref in ("1", digest(MANIFEST)):
                return self.reply(
                    200,
                    MANIFEST,
                    "application/vnd.oci.image.manifest.v1+json",
                    {"Docker-Content-Digest": digest(MANIFEST)},
                )
        if p.startswith("/v2/fuzz/tiny/blobs/"):
            blob = BLOBS.get(p.rsplit("/", 1)[1])
            if blob is not None:
                return self.reply(200, blob, "application/octet-stream")
        self.reply(404, b'{"errors": [{"code": "NOT_FOUND"}]}')

    do_HEAD = do_GET

    def log_message(self, *args):
        pass


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
