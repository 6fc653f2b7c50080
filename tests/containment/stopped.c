/*
 * stopped.c -- ATTACK: hide from the cleanup as a stopped (SIGSTOP'd) process.
 *
 * Usage: ./stopped MARKER child
 *          fork a child that stops itself with SIGSTOP (a stopped process does
 *          not react to SIGTERM); the parent prints "CHILD STOPPED" and exits
 *          0.  The run must end promptly and the stopped child must be gone.
 *        ./stopped MARKER self
 *          the same child, but then the main program stops itself too, so the
 *          run can only end through the wall-time limit; nothing may remain.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    const char *mode = argc > 2 ? argv[2] : "child";
    pid_t p = fork();
    if (p < 0) { perror("fork"); return 1; }
    if (p == 0) {
        signal(SIGTERM, SIG_IGN);
        signal(SIGHUP, SIG_IGN);
        raise(SIGSTOP);
        for (;;) pause();
    }
    int st;
    waitpid(p, &st, WUNTRACED);
    printf("CHILD STOPPED %d\n", WIFSTOPPED(st));
    fflush(stdout);
    if (strcmp(mode, "self") == 0) {
        signal(SIGTERM, SIG_IGN);
        raise(SIGSTOP);
        printf("ESCAPED: resumed\n");
        fflush(stdout);
        for (;;) pause();
    }
    return 0;
}
