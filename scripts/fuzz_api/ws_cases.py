"""Scripted fuzz cases for `GET /ws`, which schemathesis cannot open (it is not plain HTTP).

Each case opens its own socket and asserts what the server must do: a real interactive run (a
prompt, input, its exit), an error message for bad JSON, unknown types, wrong fields or input
with no program, and a closed connection (never a crash) for frames that break RFC 6455 or the
message size cap. After every case `/health` must answer and a fresh socket must still run a
program. Every handshake's status is appended to the coverage log.

    python3 ws_cases.py ADDR TOKEN CALLS_JSONL
"""

import json
import struct
import sys
import urllib.request

import wsclient
from wsclient import BINARY, CLOSE, CONTINUATION, PING, TEXT, Closed, Conn, frame

ADDR, TOKEN, CALLS = sys.argv[1], sys.argv[2], sys.argv[3]


def record(status):
    with open(CALLS, "a") as f:
        f.write(json.dumps({"op": "GET /ws", "status": status, "source": "ws_cases"}) + "\n")


def connect(token=TOKEN):
    c = Conn(ADDR, token)
    record(c.status)
    return c


def messages_until(c, kind):
    """Messages up to and including the first of `type` == kind."""
    seen = []
    while True:
        m = json.loads(c.recv())
        seen.append(m)
        if m["type"] == kind:
            return seen


def until_exit(c):
    """The stdout up to the run's end, and its `exit` message."""
    seen = messages_until(c, "exit")
    return "".join(m["data"] for m in seen if m["type"] == "stdout"), seen[-1]


def expect_error(c, code):
    m = json.loads(c.recv())
    assert m["type"] == "error", f"expected an error message, got {m}"
    assert m["error"] == code, f"expected error {code}, got {m}"


def expect_closed(c):
    """The server ends the connection (a close frame or EOF), never answers with data."""
    try:
        while True:
            m = c.recv()
            # An error message may precede the close; data that is not one is a failure.
            assert json.loads(m)["type"] == "error", f"unexpected message {m}"
    except (Closed, ConnectionResetError, BrokenPipeError):
        return
    except TimeoutError:
        raise AssertionError("the server kept a connection open after a protocol violation")


def echo_run(c):
    """A complete run on an open socket: the socket still works."""
    c.send(json.dumps({"type": "run", "cmd": "echo alive"}))
    out, end = until_exit(c)
    assert "alive" in out and end["status"] == "ok", (out, end)


def case_interactive_run():
    c = connect()
    assert c.status == 101, c.head
    c.send(json.dumps({"type": "run", "cmd": "printf 'Name: '; read n; echo \"hello, $n\""}))
    seen = messages_until(c, "stdin")
    assert "Name: " in "".join(m.get("data", "") for m in seen), seen
    c.send(json.dumps({"type": "stdin", "data": "fuzz\n"}))
    out, end = until_exit(c)
    assert "hello, fuzz" in out and end["code"] == 0, (out, end)
    c.close()


def case_bad_json():
    c = connect()
    for text in ["{", "null", "[]", '"run"', "{\"type\": 1}", "\x00", "{" * 10000, "[" * 100000]:
        c.send(text)
        expect_error(c, "bad_message")
    echo_run(c)
    c.close()


def case_unknown_and_wrong_fields():
    c = connect()
    for msg in [
        {"type": "nope"},
        {"type": "RUN", "cmd": "true"},
        {"type": "run"},
        {"type": "run", "cmd": 5},
        {"type": "run", "cmd": "true", "limits": {"memory": "lots"}},
        {"type": "run", "cmd": "true", "tty": {"cols": -1, "rows": 2}},
        {"type": "resize", "cols": 70000, "rows": 1},
        {"type": "stdin", "data": 7},
    ]:
        c.send(json.dumps(msg))
        m = json.loads(c.recv())
        assert m["type"] == "error", f"{msg} was not refused: {m}"
    for msg, code in [
        ({"type": "run", "cmd": "true", "limits": {"cpu_time": "0s"}}, "invalid"),
        ({"type": "run", "cmd": ["/bin/echo", "a\u0000b"]}, "invalid"),
        ({"type": "run", "cmd": "true", "env": {"A=B": "c"}}, "invalid"),
        ({"type": "run", "cmd": "true", "language": "klingon"}, "unknown_language"),
        ({"type": "run", "cmd": "true", "sandbox": {"id": "0" * 32}}, "not_found"),
        ({"type": "run", "cmd": "true", "sandbox": {"homedir": "../../etc"}}, "not_found"),
        ({"type": "run", "cmd": "true", "image": "no-such-image:1"}, "invalid"),
        ({"type": "run", "cmd": "true", "seccomp": "no_forks"}, "invalid"),
        ({"type": "stdin", "data": "x"}, "not_running"),
        ({"type": "signal", "name": "SIGINT"}, "not_running"),
        ({"type": "kill"}, "not_running"),
        ({"type": "resize", "cols": 80, "rows": 24}, "not_running"),
    ]:
        c.send(json.dumps(msg))
        m = json.loads(c.recv())
        assert m["type"] == "error", f"{msg} was not refused: {m}"
        assert m["error"] == code or code is None, f"{msg}: expected {code}, got {m}"
    echo_run(c)
    c.close()


def case_busy_and_bad_signal():
    c = connect()
    c.send(json.dumps({"type": "run", "cmd": "read x; echo got $x"}))
    messages_until(c, "stdin")
    c.send(json.dumps({"type": "run", "cmd": "true"}))
    expect_error(c, "busy")
    c.send(json.dumps({"type": "signal", "name": "SIGSEGV"}))
    expect_error(c, "bad_signal")
    c.send(json.dumps({"type": "signal", "name": "\u0000" * 1000}))
    expect_error(c, "bad_signal")
    c.send(json.dumps({"type": "stdin", "data": "x", "eof": True}))
    out, end = until_exit(c)
    assert "got x" in out, (out, end)
    c.close()


def case_binary_frames():
    c = connect()
    c.send_raw(frame(BINARY, b"\xff\xfe\x00garbage"))
    expect_error(c, "bad_message")
    c.send_raw(frame(BINARY, json.dumps({"type": "run", "cmd": "echo bin"}).encode()))
    out, end = until_exit(c)
    assert out == "bin\n" and end["status"] == "ok", (out, end)
    c.close()


def case_fragmented_message():
    c = connect()
    whole = json.dumps({"type": "run", "cmd": "echo pieces"}).encode()
    c.send_raw(frame(TEXT, whole[:5], fin=False))
    c.send_raw(frame(PING, b"between fragments"))
    c.send_raw(frame(CONTINUATION, whole[5:12], fin=False))
    c.send_raw(frame(CONTINUATION, whole[12:]))
    out, end = until_exit(c)
    assert out == "pieces\n", (out, end)
    c.close()


def case_text_not_utf8():
    c = connect()
    c.send_raw(frame(TEXT, b'{"type": "kill", "x": "\xc3\x28"}'))
    expect_closed(c)


def case_huge_message():
    # Above the 1 MiB message cap: the connection ends; the server keeps its memory. The server
    # may close while the 2 MiB are still being written: that write then fails with a broken pipe
    # or a reset, which is the connection ending as required.
    c = connect()
    try:
        c.send_raw(frame(TEXT, b"[" + b"1," * (1 << 20) + b"1]"))
    except (BrokenPipeError, ConnectionResetError):
        return
    expect_closed(c)


def case_lying_length():
    # Claims 2^62 bytes and sends a few: refused by the size cap before anything is allocated.
    c = connect()
    c.send_raw(frame(TEXT, b"{}", length=1 << 62))
    expect_closed(c)


def case_unmasked_frame():
    c = connect()
    c.send_raw(frame(TEXT, b'{"type": "kill"}', mask=False))
    expect_closed(c)


def case_reserved_bits_and_opcodes():
    for raw in [
        frame(TEXT, b"{}", rsv=0b100),
        frame(0x3, b"{}"),
        frame(0xB, b""),
        frame(PING, b"x" * 200),  # control frames are at most 125 bytes
        frame(PING, b"x", fin=False),  # and never fragmented
        frame(CONTINUATION, b"{}"),  # nothing to continue
        frame(CLOSE, b"\x00"),  # a close payload of one byte
        frame(CLOSE, struct.pack("!H", 999)),  # a code nobody may send
    ]:
        c = connect()
        c.send_raw(raw)
        expect_closed(c)


def case_truncated_frame_then_eof():
    c = connect()
    c.send_raw(frame(TEXT, b'{"type": "run", "cmd": "sleep 30"}')[:9])
    c.sock.shutdown(1)
    expect_closed(c)


def case_disconnect_mid_run():
    # The run is killed with its socket; the next socket still runs programs.
    c = connect()
    c.send(json.dumps({"type": "run", "cmd": "sleep 30"}))
    c.sock.close()
    c = connect()
    echo_run(c)
    c.close()


def case_stdin_flood():
    # More than 16 MiB of input to one run is refused; the run itself continues.
    c = connect()
    c.send(json.dumps({"type": "run", "cmd": "cat > /dev/null; echo done"}))
    chunk = json.dumps({"type": "stdin", "data": "x" * ((1 << 20) - 64)})
    refused = False
    for _ in range(18):
        c.send(chunk)
    c.send(json.dumps({"type": "stdin", "eof": True}))
    while True:
        m = json.loads(c.recv())
        if m["type"] == "error":
            assert m["error"] == "too_large", m
            refused = True
        if m["type"] == "exit":
            break
    assert refused, "16 MiB of input was accepted"
    c.close()


def case_message_flood():
    c = connect()
    for _ in range(2000):
        c.send(json.dumps({"type": "kill"}))
    for _ in range(2000):
        expect_error(c, "not_running")
    echo_run(c)
    c.close()


def case_no_or_bad_token():
    for token in ["", "corral_" + "0" * 32, "%00", "x" * 5000]:
        c = Conn(ADDR, token)
        record(c.status)
        assert c.status in (400, 401, 431), f"token {token[:20]!r}: {c.head[:200]!r}"
        c.sock.close()


def healthy():
    with urllib.request.urlopen(f"http://{ADDR}/health", timeout=10) as r:
        assert r.status == 200


def main():
    failures = 0
    cases = [(n, f) for n, f in globals().items() if n.startswith("case_")]
    for name, case in cases:
        try:
            case()
            healthy()
            print(f"ws {name}: ok")
        except Exception as e:  # every failure is reported, then the next case runs
            failures += 1
            print(f"ws {name}: FAILED: {type(e).__name__}: {e}", file=sys.stderr)
    print(f"ws: {len(cases) - failures} of {len(cases)} cases passed")
    try:
        c = connect()
        echo_run(c)
        c.close()
    except Exception as e:
        failures += 1
        print(f"ws: the server no longer runs programs over a socket: {e}", file=sys.stderr)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
