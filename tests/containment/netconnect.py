# netconnect.py -- ATTACK: reach the host's network.
# Usage: /usr/bin/python3 netconnect.py HOST PORT [ABSTRACT_NAME]
# Tries a TCP connect to HOST:PORT (the test listens there on the host's
# loopback), a UDP send to the same address, and, if given, a connect to the
# abstract unix socket "@ABSTRACT_NAME" that the test binds on the host (abstract
# sockets are scoped by network namespace).
# Prints "CONNECTED tcp", "SENT udp", "CONNECTED abstract" on success and
# "BLOCKED <what> <ERRNO>" on failure.
import errno, socket, sys

host, port = sys.argv[1], int(sys.argv[2])

def name(e):
    return errno.errorcode.get(e.errno, str(e)) if getattr(e, "errno", None) else type(e).__name__

try:
    s = socket.create_connection((host, port), timeout=3)
    s.sendall(b"hello from the sandbox\n")
    s.close()
    print("CONNECTED tcp", flush=True)
except OSError as e:
    print("BLOCKED tcp %s" % name(e), flush=True)

try:
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.sendto(b"udp from the sandbox\n", (host, port))
    print("SENT udp", flush=True)
except OSError as e:
    print("BLOCKED udp %s" % name(e), flush=True)

if len(sys.argv) > 3:
    try:
        a = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        a.settimeout(3)
        a.connect("\0" + sys.argv[3])
        a.sendall(b"abstract hello\n")
        print("CONNECTED abstract", flush=True)
    except OSError as e:
        print("BLOCKED abstract %s" % name(e), flush=True)
