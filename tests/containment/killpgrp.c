/*
 * killpgrp.c -- ATTACK: kill host processes through process groups/sessions.
 *
 * Usage: ./killpgrp MARKER
 * kill(0, sig) and kill(-pgid, sig) reach every member of a process group,
 * even members outside the caller's pid namespace.  If the sandboxed program
 * still shared corral's (host) process group or session, this would kill corral
 * and its neighbours.  Prints the program's pgid/sid and those of pid 1, sends
 * SIGKILL to pid 1's process group and session leader's group (if visible),
 * then finally kill(0, SIGKILL) -- its own process group, which kills itself.
 * Expected: status signaled (9), corral reports normally, the host process
 * the test put into corral's process group survives.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(void) {
    pid_t pg = getpgrp(), sid = getsid(0), pg1 = getpgid(1), sid1 = getsid(1);
    printf("SELF pgid=%d sid=%d ppid=%d\n", pg, sid, getppid());
    printf("INIT pgid=%d sid=%d\n", pg1, sid1);
    fflush(stdout);
    if (pg1 > 0 && pg1 != pg) {
        int r = kill(-pg1, SIGKILL);
        printf("KILL init-pgrp %d: %s\n", pg1, r == 0 ? "sent" : strerror(errno));
    }
    if (sid1 > 0 && sid1 != pg && sid1 != pg1) {
        int r = kill(-sid1, SIGKILL);
        printf("KILL init-session %d: %s\n", sid1, r == 0 ? "sent" : strerror(errno));
    }
    printf("KILL own group next\n");
    fflush(stdout);
    kill(0, SIGKILL);
    printf("ESCAPED: survived kill(0, SIGKILL)\n");
    return 0;
}
