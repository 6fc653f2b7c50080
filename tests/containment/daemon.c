/*
 * daemon.c -- ATTACK: daemonize and outlive the run.
 *
 * Usage: ./daemon MARKER [keepstdio]
 * Classic double fork: fork, setsid() in the child, fork again, the middle
 * child exits, the grandchild (now re-parented, in its own session, no
 * controlling terminal) ignores SIGTERM/SIGHUP/SIGINT, closes stdio and sleeps
 * forever.  The original process prints "DAEMON STARTED" and exits 0
 * immediately.  MARKER is in argv, so the host test scans /proc for it after
 * the run: nothing may be left.
 * With "keepstdio" the grandchild keeps stdout/stderr open and writes "tick"
 * every 50 ms forever: the run must still end when the main program exits
 * (not wait for the pipe to close, nor hang until the wall limit).
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int keep = argc > 2 && strcmp(argv[2], "keepstdio") == 0;
    pid_t p = fork();
    if (p < 0) { perror("fork"); return 1; }
    if (p == 0) {
        if (setsid() < 0) perror("setsid");
        pid_t q = fork();
        if (q != 0) _exit(0);
        signal(SIGTERM, SIG_IGN);
        signal(SIGHUP, SIG_IGN);
        signal(SIGINT, SIG_IGN);
        signal(SIGPIPE, SIG_IGN);
        if (keep) {
            for (;;) {
                (void)!write(1, "tick\n", 5);
                usleep(50 * 1000);
            }
        }
        int fd = open("/dev/null", O_RDWR);
        if (fd >= 0) { dup2(fd, 0); dup2(fd, 1); dup2(fd, 2); if (fd > 2) close(fd); }
        for (;;) sleep(1);
    }
    waitpid(p, NULL, 0);
    /* give the grandchild time to detach fully */
    usleep(200 * 1000);
    printf("DAEMON STARTED\n");
    fflush(stdout);
    return 0;
}
