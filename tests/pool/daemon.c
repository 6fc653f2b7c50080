/*
 * daemon.c -- ATTACK: outlive the run and keep working in a warm sandbox.
 *
 * Usage: ./daemon MARKER TICKFILE
 * Classic daemon: fork, setsid() in the child, fork again, the middle child
 * exits; the grandchild (re-parented, own session, stdio on /dev/null,
 * SIGTERM/SIGHUP/SIGINT ignored) replaces TICKFILE (write aside, rename) with
 * an increasing counter every 20 ms, forever.  A second child stops itself (SIGSTOP) and would sleep
 * forever once continued.  The original process waits until the counter is
 * running, prints "DAEMON RUNNING <pid>" (or "DAEMON NOT RUNNING") and exits 0.
 * MARKER is only in argv so the host can look for leftover processes.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static long read_tick(const char *path) {
    FILE *f = fopen(path, "r");
    long n = -1;
    if (f) { if (fscanf(f, "%ld", &n) != 1) n = -1; fclose(f); }
    return n;
}

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: daemon MARKER TICKFILE\n"); return 2; }
    const char *tick = argv[2];
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", tick);
    int pfd[2];
    if (pipe(pfd) < 0) { perror("pipe"); return 1; }
    pid_t p = fork();
    if (p < 0) { perror("fork"); return 1; }
    if (p == 0) {
        setsid();
        pid_t q = fork();
        if (q != 0) {
            if (q > 0) (void)!write(pfd[1], &q, sizeof q);
            _exit(0);
        }
        signal(SIGTERM, SIG_IGN);
        signal(SIGHUP, SIG_IGN);
        signal(SIGINT, SIG_IGN);
        signal(SIGPIPE, SIG_IGN);
        close(pfd[0]);
        close(pfd[1]);
        int fd = open("/dev/null", O_RDWR);
        if (fd >= 0) { dup2(fd, 0); dup2(fd, 1); dup2(fd, 2); if (fd > 2) close(fd); }
        for (long n = 1;; n++) {
            char buf[32];
            int len = snprintf(buf, sizeof buf, "%ld\n", n);
            /* write aside, then rename: the file is never seen empty or half-written */
            int t = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0666);
            if (t >= 0) { (void)!write(t, buf, len); close(t); rename(tmp, tick); }
            usleep(20 * 1000);
        }
    }
    pid_t daemon = -1;
    (void)!read(pfd[0], &daemon, sizeof daemon);
    waitpid(p, NULL, 0);
    pid_t s = fork();
    if (s == 0) {
        setsid();
        raise(SIGSTOP);
        for (;;) pause();
    }
    for (int i = 0; i < 500 && read_tick(tick) < 3; i++) usleep(10 * 1000);
    if (read_tick(tick) >= 3) printf("DAEMON RUNNING %d\n", (int)daemon);
    else printf("DAEMON NOT RUNNING\n");
    return 0;
}
