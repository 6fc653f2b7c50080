#!/bin/sh
# sparse.sh -- ATTACK: make the host-side copy-out (--copy-out DIR) write far
# more than the working directory's size limit.
# Usage: /bin/sh sparse.sh MARKER
# Sparse files take (almost) no space in the working dir's tmpfs, so a size
# limit on the tmpfs does not stop them, but a naive copy-out writes their full
# apparent size, zeros included, to the host disk.  Creates huge.img (1 GiB
# apparent) and 40 files of 16 MiB apparent size each (640 MiB), each with one
# real byte at the end, plus small.txt with real content.
# Prints "SPARSE <apparent bytes total>".
set -e
echo small > small.txt
truncate -s 1G huge.img
i=0
while [ $i -lt 40 ]; do
    truncate -s 16M "s$i.img"
    printf 'x' | dd of="s$i.img" bs=1 seek=16777215 conv=notrunc 2>/dev/null
    i=$((i + 1))
done
echo "SPARSE $((1073741824 + 40 * 16777216))"
du -sk . | sed 's/^/DU_KIB /'
