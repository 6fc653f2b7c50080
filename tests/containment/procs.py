# procs.py -- ATTACK: look at other processes (host or other sandboxes).
# Usage: /usr/bin/python3 procs.py MARKER [SLEEP_SECONDS] [TMP_MARKER_FILE]
# Optionally writes /tmp/<TMP_MARKER_FILE>, sleeps, then prints every visible
# process ("PROC <pid> <cmdline>") and every entry of /tmp ("TMP <name>").
# The test checks that no host process and no other sandbox's process or file
# is visible.
import os, sys, time

if len(sys.argv) > 3:
    with open(os.path.join("/tmp", sys.argv[3]), "w") as f:
        f.write(sys.argv[1])
if len(sys.argv) > 2:
    time.sleep(float(sys.argv[2]))
for pid in sorted((p for p in os.listdir("/proc") if p.isdigit()), key=int):
    try:
        with open("/proc/%s/cmdline" % pid, "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError as e:
        cmd = "<unreadable %s>" % e.strerror
    print("PROC %s %s" % (pid, cmd), flush=True)
for name in sorted(os.listdir("/tmp")):
    print("TMP %s" % name, flush=True)
print("DONE", flush=True)
