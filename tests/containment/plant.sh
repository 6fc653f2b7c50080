#!/bin/sh
# plant.sh -- ATTACK: plant traps for the host-side copy-out (--copy-out DIR).
# Usage: /bin/sh plant.sh MARKER
# Leaves in the working directory:
#   ok.txt                 a regular file with "fine" (must be copied)
#   sub/inner.txt          a regular file in a subdirectory (must be copied)
#   out.txt -> /etc/shadow a symlink to a secret (following it copies the secret)
#   sub/deep -> /etc/shadow
#   etcdir -> /etc         a symlink to a directory
#   zero -> /dev/zero      a device-like path: following it copies forever
#   kmsg -> /dev/kmsg
#   a.txt, b.txt           two hard links to one file (nlink 2)
#   result.txt             a FIFO: opening it for reading blocks forever
#   sock                   a unix socket
#   race                   a background loop keeps swapping this name between a
#                          regular file and a symlink to /etc/shadow, in case the
#                          copy-out runs while sandboxed processes still live.
# Prints "PLANTED <name>" or "FAILED <name>" for each.
plant() { if "$@" 2>/dev/null; then echo "PLANTED $name"; else echo "FAILED $name"; fi; }
name=ok.txt; plant sh -c 'echo fine > ok.txt'
name=sub/inner.txt; plant sh -c 'mkdir -p sub && echo inner > sub/inner.txt'
name=out.txt; plant ln -s /etc/shadow out.txt
name=sub/deep; plant ln -s /etc/shadow sub/deep
name=etcdir; plant ln -s /etc etcdir
name=zero; plant ln -s /dev/zero zero
name=kmsg; plant ln -s /dev/kmsg kmsg
name=a.txt; plant sh -c 'echo hardlinked > a.txt && ln a.txt b.txt'
name=result.txt; plant mkfifo result.txt
name=sock; plant /usr/bin/python3 -c 'import socket; s=socket.socket(socket.AF_UNIX); s.bind("sock")'
(
    trap '' TERM HUP INT
    while :; do
        echo innocent > race.tmp
        mv -f race.tmp race
        ln -sf /etc/shadow race.lnk
        mv -f race.lnk race
    done
) >/dev/null 2>&1 &
echo "PLANTED race"
# For the log only: the loop above renames files while ls reads the folder, and a name that
# vanished between readdir and lstat must not turn the program's exit status into a failure.
ls -la || true
