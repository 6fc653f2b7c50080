# readsecrets.py -- ATTACK: read host secrets and other users' files.
# Usage: /usr/bin/python3 readsecrets.py PATH...
# For every PATH: if it is a directory, list it (and try to read every regular
# file directly inside it); otherwise open and read it.  One line per attempt:
#   LISTED <path> <json list of entries>
#   READ <path> <hex of the first 4096 bytes>
#   BLOCKED <path> <ERRNO>
# The host test decides which outcomes are acceptable for which path (e.g.
# /etc/shadow must be BLOCKED, /home may only list "sandbox") and checks that
# no host secret appears in the output.
import errno, json, os, sys

def read(p):
    try:
        with open(p, "rb") as f:
            data = f.read(4096)
        print("READ %s %s" % (p, data.hex()), flush=True)
    except OSError as e:
        print("BLOCKED %s %s" % (p, errno.errorcode.get(e.errno, str(e.errno))), flush=True)

for p in sys.argv[1:]:
    try:
        if os.path.isdir(p):
            entries = sorted(os.listdir(p))
            print("LISTED %s %s" % (p, json.dumps(entries)), flush=True)
            for e in entries:
                q = os.path.join(p, e)
                if os.path.isfile(q):
                    read(q)
        else:
            read(p)
    except OSError as e:
        print("BLOCKED %s %s" % (p, errno.errorcode.get(e.errno, str(e.errno))), flush=True)
