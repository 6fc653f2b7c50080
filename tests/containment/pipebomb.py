# pipebomb.py -- ATTACK: exhaust host kernel memory through pipe buffers.
# Usage: /usr/bin/python3 pipebomb.py MARKER CHILDREN
# Pipe buffers are kernel memory, not process memory: a limit on RSS alone
# misses them.  CHILDREN processes each open as many pipes as they can, grow
# each to 1 MiB (F_SETPIPE_SZ) and fill it without reading, then hold them for
# a moment.  Every child prints "BUFFERED <bytes>"; the parent prints "DONE".
# The host test adds the numbers up: far more than the memory limit buffered
# means kernel memory escaped the limit.
import errno, fcntl, os, sys, time

F_SETPIPE_SZ = 1031
children = int(sys.argv[2])
pids = []
for _ in range(children):
    try:
        pid = os.fork()
    except OSError as e:
        print("FORK FAILED %s" % errno.errorcode.get(e.errno), flush=True)
        break
    if pid == 0:
        total = 0
        pipes = []
        chunk = b"p" * 65536
        try:
            while True:
                r, w = os.pipe()
                pipes.append((r, w))
                try:
                    fcntl.fcntl(w, F_SETPIPE_SZ, 1 << 20)
                except OSError:
                    pass
                os.set_blocking(w, False)
                while True:
                    try:
                        total += os.write(w, chunk)
                    except BlockingIOError:
                        break
        except OSError as e:
            pass
        print("BUFFERED %d" % total, flush=True)
        time.sleep(1)
        os._exit(0)
    pids.append(pid)
for p in pids:
    os.waitpid(p, 0)
print("DONE", flush=True)
