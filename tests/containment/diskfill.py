# diskfill.py -- ATTACK: fill the disk.
# Usage: /usr/bin/python3 diskfill.py DIR MAX_MIB
# Writes 64 KiB blocks into DIR/fill-<n>.bin (a new file every 16 MiB) until a
# write fails or MAX_MIB MiB were written.
# Prints "BLOCKED: <ERRNO> wrote=<bytes>" when the filesystem refused more data,
# "ESCAPED: wrote=<bytes>" when it could write all MAX_MIB MiB.
import errno, os, sys

d = sys.argv[1]
max_bytes = int(sys.argv[2]) * 1024 * 1024
block = b"\xa5" * 65536
total = 0
n = 0
try:
    while total < max_bytes:
        with open(os.path.join(d, "fill-%d.bin" % n), "wb", buffering=0) as f:
            for _ in range(256):
                w = f.write(block)
                total += w
                if w < len(block):
                    raise OSError(errno.ENOSPC, "short write")
                if total >= max_bytes:
                    break
        n += 1
    print("ESCAPED: wrote=%d" % total, flush=True)
except OSError as e:
    print("BLOCKED: %s wrote=%d" % (errno.errorcode.get(e.errno, str(e.errno)), total), flush=True)
