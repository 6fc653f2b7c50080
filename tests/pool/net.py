"""net.py -- ATTACK (attack) / check (look): network state left in a warm sandbox.

Usage: python3 net.py attack
         listens on 127.0.0.1:4444, connects to itself and closes the 4444
         side first, so a TIME_WAIT socket holds the port; shows that binding
         4444 again now fails ("BIND 4444 EADDRINUSE"); then leaves a listener
         and an established connection on 4445, a UDP socket on 4444 and an
         abstract unix socket open when the run ends.  Prints
         "TIME_WAIT 4444 <n>" and "ENTRIES <file> <n>" for /proc/net files.
       python3 net.py look
         prints "SOCK <file> <entry>" for every socket this network namespace
         still has (before opening any), then tries what the attack would
         block: "BIND 4444 OK|<errno>", "LISTEN 4444 ...", "LOOPBACK 4444 ..."
         (a connection to itself through lo), "BIND 4445 ...",
         "BIND UDP 4444 ...", "BIND ABSTRACT ...".
"""
import errno
import socket
import sys


def entries(f):
    try:
        with open("/proc/net/" + f) as fh:
            return [" ".join(line.split()) for line in fh.read().splitlines()[1:]]
    except OSError:
        return []


def attempt(what, fn):
    try:
        fn()
        print(what, "OK", flush=True)
    except OSError as e:
        print(what, errno.errorcode.get(e.errno, e.errno), flush=True)


def attack():
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 4444))
    srv.listen(8)
    c = socket.create_connection(("127.0.0.1", 4444), timeout=5)
    s, _ = srv.accept()
    s.close()  # the 4444 side closes first: it lingers in TIME_WAIT
    c.recv(1)
    c.close()
    srv.close()
    tw = [e for e in entries("tcp") if e.split()[3] == "06" and e.split()[1].endswith(":115C")]
    print("TIME_WAIT 4444", len(tw), flush=True)
    t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    attempt("BIND 4444", lambda: t.bind(("127.0.0.1", 4444)))
    t.close()
    keep = []
    l2 = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    l2.bind(("127.0.0.1", 4445))
    l2.listen(8)
    c2 = socket.create_connection(("127.0.0.1", 4445), timeout=5)
    s2, _ = l2.accept()
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind(("127.0.0.1", 4444))
    a = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    a.bind("\0corral-pool-test")
    a.listen(1)
    keep += [l2, c2, s2, u, a]
    for f in ["tcp", "udp", "unix"]:
        print("ENTRIES", f, len(entries(f)), flush=True)


def look():
    for f in ["tcp", "tcp6", "udp", "udp6", "raw", "raw6", "unix"]:
        for e in entries(f):
            print("SOCK", f, e, flush=True)
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    attempt("BIND 4444", lambda: srv.bind(("127.0.0.1", 4444)))
    attempt("LISTEN 4444", lambda: srv.listen(8))

    def roundtrip():
        c = socket.create_connection(("127.0.0.1", 4444), timeout=5)
        s, _ = srv.accept()
        c.sendall(b"ping")
        if s.recv(4) != b"ping":
            raise OSError(errno.EIO, "wrong data")

    attempt("LOOPBACK 4444", roundtrip)
    t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    attempt("BIND 4445", lambda: t.bind(("127.0.0.1", 4445)))
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    attempt("BIND UDP 4444", lambda: u.bind(("127.0.0.1", 4444)))
    a = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    attempt("BIND ABSTRACT", lambda: a.bind("\0corral-pool-test"))


if __name__ == "__main__":
    {"attack": attack, "look": look}[sys.argv[1]]()
