"""scan.py -- look for anything an earlier run left in this sandbox.

Usage: python3 scan.py
Not an attack: the pool tests run it as the "victim" of a warm sandbox (and
inside the "attacker" right after it planted its state, to show that the scan
does see such state).  One line per finding, so the test can show exactly what
leaked:

  PID <pid>                      this process (2 in a fresh PID numbering when
                                 exec'd by the first process of the run)
  FILE <dir> <repr(name)> <type> every entry under the scratch folders (hidden
                                 ones, unreadable folders are reported as such)
  UNREADABLE <path> <error>      a folder the scan could not list
  USED <dir> <blocks> <inodes>   blocks and inodes in use on that tmpfs
  MODE <dir> <octal mode> <uid>  the scratch folder itself
  XATTR <dir> <names>            extended attributes (ACLs too) on that folder
  SYSV <kind> <line>             an entry of /proc/sysvipc/{shm,msg,sem}
  PROC <pid> <cmdline>           any process but this one
  ENV <key>=<value>              any variable beyond the minimal environment
  RLIMIT <name> <soft> <hard>    open files and file size limits
  SOCK <file> <line>             an entry of /proc/net/{tcp,tcp6,udp,udp6,raw,raw6,unix}
  SCAN DONE                      the scan ran to its end
"""
import os
import resource
import stat
import sys

MINIMAL_ENV = {"PATH", "HOME", "PWD", "USER", "LOGNAME", "SHELL", "TMPDIR", "LANG"}
SCRATCH = ["/home/sandbox", "/tmp", "/var/tmp", "/dev/shm"]


def out(*parts):
    print(*parts, flush=True)


def kind(mode):
    for test, name in [(stat.S_ISDIR, "dir"), (stat.S_ISREG, "file"), (stat.S_ISLNK, "link"),
                       (stat.S_ISFIFO, "fifo"), (stat.S_ISSOCK, "socket")]:
        if test(mode):
            return name
    return "other"


def walk(top, path):
    try:
        names = sorted(os.listdir(path))
    except OSError as e:
        out("UNREADABLE", repr(path), e.strerror)
        return
    for name in names:
        full = os.path.join(path, name)
        try:
            st = os.lstat(full)
        except OSError as e:
            out("FILE", top, repr(full), "unstatable", e.strerror)
            continue
        out("FILE", top, repr(full), kind(st.st_mode))
        if stat.S_ISDIR(st.st_mode):
            walk(top, full)


out("PID", os.getpid())
for top in SCRATCH:
    walk(top, top)
    st = os.stat(top)
    out("MODE", top, oct(stat.S_IMODE(st.st_mode)), st.st_uid)
    try:
        names = os.listxattr(top)
    except OSError as e:
        names = ["<%s>" % e.strerror]
    if names:
        out("XATTR", top, " ".join(sorted(names)))
    vfs = os.statvfs(top)
    out("USED", top, vfs.f_blocks - vfs.f_bfree, vfs.f_files - vfs.f_ffree)

for k in ["shm", "msg", "sem"]:
    with open("/proc/sysvipc/" + k) as f:
        for line in f.read().splitlines()[1:]:
            out("SYSV", k, " ".join(line.split()))

me = os.getpid()
for name in sorted(os.listdir("/proc")):
    if name.isdigit() and int(name) != me:
        try:
            with open("/proc/%s/cmdline" % name, "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except OSError as e:
            cmd = "<%s>" % e.strerror
        out("PROC", name, cmd)

for k in sorted(os.environ):
    if k not in MINIMAL_ENV:
        out("ENV", "%s=%s" % (k, os.environ[k]))

for name, r in [("nofile", resource.RLIMIT_NOFILE), ("fsize", resource.RLIMIT_FSIZE)]:
    soft, hard = resource.getrlimit(r)
    out("RLIMIT", name, soft, hard)

for f in ["tcp", "tcp6", "udp", "udp6", "raw", "raw6", "unix"]:
    try:
        with open("/proc/net/" + f) as fh:
            lines = fh.read().splitlines()[1:]
    except OSError:
        continue
    for line in lines:
        out("SOCK", f, " ".join(line.split()))

out("SCAN DONE")
