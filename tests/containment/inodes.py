# inodes.py -- ATTACK: inode exhaustion.
# Usage: /usr/bin/python3 inodes.py DIR MAX
# Creates empty files (and every 100th a directory) in DIR until creation fails
# or MAX entries exist.  Empty files use no data blocks, so only an inode limit
# stops this.
# Prints "BLOCKED: <ERRNO> created=<n>" or "ESCAPED: created=<n>".
import errno, os, sys

d = sys.argv[1]
limit = int(sys.argv[2])
n = 0
try:
    while n < limit:
        if n % 100 == 0:
            os.mkdir(os.path.join(d, "d%d" % n))
        else:
            fd = os.open(os.path.join(d, "f%d" % n), os.O_CREAT | os.O_WRONLY, 0o644)
            os.close(fd)
        n += 1
    print("ESCAPED: created=%d" % n, flush=True)
except OSError as e:
    print("BLOCKED: %s created=%d" % (errno.errorcode.get(e.errno, str(e.errno)), n), flush=True)
