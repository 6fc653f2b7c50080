# environ.py -- ATTACK: steal secrets from environments.
# Usage: /usr/bin/python3 environ.py MARKER
# Dumps its own environment, then tries to read /proc/1/environ (the sandbox's
# init, which might have inherited corral's environment) and every other
# /proc/<pid>/environ and /proc/<pid>/cmdline it can see.
# Lines: "ENV <key>=<value>", "PROC <pid> environ READ <escaped contents>" or
# "PROC <pid> environ BLOCKED <ERRNO>", "PROC1 environ ...".  The host test
# checks that a secret it put into corral's environment appears nowhere.
import errno, os

for k, v in sorted(os.environ.items()):
    print("ENV %s=%s" % (k, v))

def dump(pid, what):
    try:
        with open("/proc/%s/%s" % (pid, what), "rb") as f:
            data = f.read()
        print("PROC %s %s READ %r" % (pid, what, data))
        return True
    except OSError as e:
        print("PROC %s %s BLOCKED %s" % (pid, what, errno.errorcode.get(e.errno, str(e.errno))))
        return False

dump("1", "environ")
for pid in sorted(p for p in os.listdir("/proc") if p.isdigit()):
    dump(pid, "environ")
    dump(pid, "cmdline")
