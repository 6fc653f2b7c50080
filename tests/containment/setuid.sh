#!/bin/sh
# setuid.sh -- ATTACK: become root through setuid binaries.
# Usage: /bin/sh setuid.sh MARKER [EXTRA_SUID_PROGRAM...]
# Runs ./suid_probe and ./id-suid (root-owned setuid copies that the test put
# in the working dir), every EXTRA_SUID_PROGRAM given (e.g. the same probe
# bind-mounted read-only from the host), and the system's setuid helpers
# (su, passwd, newgrp, mount) where present, each asked to print `id -u`.
# Every line that comes out as uid 0 is reported as "ESCAPED: <how>"; then
# "UID <id -u>", then a mount(8) attempt (the sandbox may kill the run there).
marker=$1; shift
check() { # $1 = description, $2 = output
    if printf '%s\n' "$2" | grep -qx '0'; then echo "ESCAPED: $1 gave uid 0"; else echo "BLOCKED: $1"; fi
}
for p in ./suid_probe "$@"; do
    out=$("$p" "$marker" 2>&1)
    echo "$p: $out"
done
if [ -e ./id-suid ]; then
    check "./id-suid -u" "$(./id-suid -u 2>&1)"
    check "./id-suid -ru" "$(./id-suid -ru 2>&1)"
else
    echo "MISSING ./id-suid"
fi
[ -x /usr/bin/su ] && check "su -c id -u" "$(/usr/bin/su root -c 'id -u' </dev/null 2>&1)"
[ -x /usr/bin/su ] && check "su -s /bin/sh" "$(echo 'id -u' | /usr/bin/su -s /bin/sh root 2>&1)"
if [ -x /usr/bin/passwd ]; then
    # only root may show another user's password status
    if /usr/bin/passwd -S root </dev/null >/dev/null 2>&1; then echo "ESCAPED: passwd -S root worked"; else echo "BLOCKED: passwd -S root"; fi
fi
[ -x /usr/bin/newgrp ] && check "newgrp root" "$(echo 'id -u' | /usr/bin/newgrp root 2>&1)"
echo "UID $(id -u)"
# last, because the sandbox may kill the whole run on the mount(2) call
if [ -x /bin/mount ]; then
    mkdir -p mnt
    if /bin/mount -t tmpfs none mnt 2>/dev/null; then echo "ESCAPED: mount(8) mounted a tmpfs"; else echo "BLOCKED: mount(8)"; fi
fi
