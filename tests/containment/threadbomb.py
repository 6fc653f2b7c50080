# threadbomb.py -- ATTACK: thread bomb.
# Usage: /usr/bin/python3 threadbomb.py MARKER
# Starts threads that sleep forever until thread creation fails.  Threads count
# against the pids limit exactly like processes.
# Prints "BLOCKED: can't start thread after N threads: <error>" or
# "ESCAPED: started N threads" if 4096 threads could be started.
import sys, threading, time

def sleeper():
    while True:
        time.sleep(3600)

n = 0
try:
    while n < 4096:
        t = threading.Thread(target=sleeper, daemon=True)
        t.start()
        n += 1
    print("ESCAPED: started %d threads" % n, flush=True)
except (RuntimeError, OSError) as e:
    print("BLOCKED: can't start thread after %d threads: %s" % (n, e), flush=True)
