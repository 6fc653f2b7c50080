/*
 * suid_probe.c -- ATTACK: gain privileges through a setuid-root binary.
 *
 * Usage: ./suid_probe MARKER
 * The test installs this binary owned by root with mode 04755 (setuid root)
 * and makes it visible in the sandbox (copied into the working directory with
 * --dir, and bind-mounted read-only with --ro-bind).  If the setuid bit were
 * honoured, geteuid() would be 0 and setuid(0) would succeed.
 * Prints the real/effective/saved uids and "ESCAPED: ..." if any is 0 or
 * setuid(0) worked, else "BLOCKED: euid=<n>".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(void) {
    uid_t r, e, s;
    getresuid(&r, &e, &s);
    printf("UIDS %u %u %u\n", r, e, s);
    if (r == 0 || e == 0 || s == 0) {
        printf("ESCAPED: running with uid 0\n");
        return 0;
    }
    if (setuid(0) == 0) {
        printf("ESCAPED: setuid(0) succeeded\n");
        return 0;
    }
    printf("BLOCKED: euid=%u setuid(0): %s\n", e, strerror(errno));
    return 0;
}
