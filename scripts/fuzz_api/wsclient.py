"""A minimal WebSocket client over a raw socket (RFC 6455), for fuzzing `GET /ws`.

Hand-written on purpose: a client library refuses to send what this one must send to test the
server (unmasked frames, reserved bits, unknown opcodes, oversized control frames, lengths that
lie), so every frame is built byte by byte here.
"""

import base64
import os
import socket
import struct

TEXT, BINARY, CLOSE, PING, PONG, CONTINUATION = 0x1, 0x2, 0x8, 0x9, 0xA, 0x0


class Closed(Exception):
    """The server closed the connection (its close code, if it sent one)."""

    def __init__(self, code=None, reason=b""):
        super().__init__(f"closed ({code}) {reason!r}")
        self.code = code
        self.reason = reason


def handshake(addr, path):
    """Opens a socket and upgrades it; returns (socket, status code, response head)."""
    host, port = addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=30)
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall(
        (
            f"GET {path} HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(4096)
        if not chunk:
            break
        head += chunk
    status = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/1.1 ") else 0
    # Anything after the head is the start of the first frame.
    rest = head.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in head else b""
    return s, status, head, rest


def frame(opcode, payload, fin=True, mask=True, rsv=0, length=None):
    """One frame; `length` may lie about the payload's size."""
    n = len(payload) if length is None else length
    b0 = (0x80 if fin else 0) | (rsv << 4) | opcode
    mbit = 0x80 if mask else 0
    if n < 126:
        head = struct.pack("!BB", b0, mbit | n)
    elif n < 1 << 16:
        head = struct.pack("!BBH", b0, mbit | 126, n)
    else:
        head = struct.pack("!BBQ", b0, mbit | 127, n)
    if not mask:
        return head + payload
    key = os.urandom(4)
    return head + key + masked(payload, key)


def masked(payload, key):
    """The payload XOR the repeated key (as one big integer: fast for megabytes)."""
    n = len(payload)
    if n == 0:
        return b""
    k = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(payload, "big") ^ int.from_bytes(k, "big")).to_bytes(n, "big")


class Conn:
    def __init__(self, addr, token):
        self.sock, self.status, self.head, self.buf = handshake(addr, f"/ws?token={token}")

    def send_raw(self, data):
        self.sock.sendall(data)

    def send(self, text):
        self.send_raw(frame(TEXT, text.encode() if isinstance(text, str) else text))

    def _read(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise Closed()
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def recv(self):
        """The next data message's text (pings answered, close raised as `Closed`)."""
        while True:
            b0, b1 = self._read(2)
            opcode, n = b0 & 0x0F, b1 & 0x7F
            if n == 126:
                (n,) = struct.unpack("!H", self._read(2))
            elif n == 127:
                (n,) = struct.unpack("!Q", self._read(8))
            payload = self._read(n)
            if opcode == CLOSE:
                code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None
                raise Closed(code, payload[2:])
            if opcode == PING:
                self.send_raw(frame(PONG, payload))
                continue
            if opcode in (TEXT, BINARY):
                return payload.decode("utf-8", "replace")

    def close(self):
        try:
            self.send_raw(frame(CLOSE, struct.pack("!H", 1000)))
        except OSError:
            pass
        self.sock.close()
