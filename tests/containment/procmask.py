# procmask.py -- ATTACK: dangerous /proc and /sys files.
# Usage: /usr/bin/python3 procmask.py MARKER
# Tries to read /proc/kcore (kernel memory), /proc/keys (keyrings),
# /proc/kmsg, /proc/kallsyms addresses, /proc/timer_list, /proc/cmdline, and to open for
# writing /proc/sysrq-trigger, /proc/sys/kernel/core_pattern,
# /proc/sys/kernel/hostname, /proc/sys/vm/drop_caches and
# /sys/kernel/mm/transparent_hugepage/enabled (open only: nothing is written).
# Lines: "<path> <op> OK <info>", "<path> <op> MASKED" (the path is /dev/null
# bound over the real file, so it is harmless) or "<path> <op> BLOCKED <ERRNO>".
import errno, os, stat

def en(e):
    return errno.errorcode.get(e.errno, str(e.errno))

def is_devnull(fd):
    st = os.fstat(fd)
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3)

def try_read(p, n=4096):
    try:
        with open(p, "rb") as f:
            if is_devnull(f.fileno()):
                print("%s read MASKED" % p, flush=True)
                return
            data = f.read(n)
        print("%s read OK %d %r" % (p, len(data), data[:200]), flush=True)
    except OSError as e:
        print("%s read BLOCKED %s" % (p, en(e)), flush=True)

def try_open_write(p):
    try:
        fd = os.open(p, os.O_WRONLY)
        masked = is_devnull(fd)
        os.close(fd)
        print("%s open-write %s" % (p, "MASKED" if masked else "OK"), flush=True)
    except OSError as e:
        print("%s open-write BLOCKED %s" % (p, en(e)), flush=True)

for p in ["/proc/kcore", "/proc/keys", "/proc/key-users", "/proc/kmsg", "/proc/timer_list", "/proc/sched_debug",
          "/proc/cmdline"]:
    try_read(p)
# kallsyms: real kernel addresses must not leak
try:
    with open("/proc/kallsyms") as f:
        nz = 0
        for i, line in enumerate(f):
            if i > 2000:
                break
            if int(line.split()[0], 16) != 0:
                nz += 1
    print("/proc/kallsyms addresses NONZERO=%d" % nz, flush=True)
except OSError as e:
    print("/proc/kallsyms read BLOCKED %s" % en(e), flush=True)
for p in ["/proc/sysrq-trigger", "/proc/sys/kernel/core_pattern", "/proc/sys/kernel/hostname",
          "/proc/sys/vm/drop_caches", "/proc/sys/kernel/modprobe",
          "/sys/kernel/mm/transparent_hugepage/enabled", "/sys/fs/cgroup/cgroup.procs"]:
    try_open_write(p)
