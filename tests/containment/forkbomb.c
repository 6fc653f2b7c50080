/*
 * forkbomb.c -- ATTACK: fork bomb.
 *
 * Usage: ./forkbomb MARKER
 * The parent forks children as fast as it can; every child immediately tries
 * to fork more children too (a real bomb), then sleeps forever.  The parent
 * counts how many forks succeeded before fork() failed.
 *
 * Prints "BLOCKED: fork failed errno=<NAME> after <N> children" when the pids
 * limit stopped it, or "ESCAPED: forked <N> children" if it could create
 * 4096 children.  The parent then exits 0 and leaves its children behind
 * (orphans): the sandbox must kill them.  MARKER is in argv so the host can
 * look for leftovers in /proc/<pid>/cmdline.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *errname(int e) {
    switch (e) {
    case EAGAIN: return "EAGAIN";
    case ENOMEM: return "ENOMEM";
    case EPERM: return "EPERM";
    case ENOSYS: return "ENOSYS";
    default: return "OTHER";
    }
}

int main(int argc, char **argv) {
    (void)argc; (void)argv;
    signal(SIGTERM, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    int n = 0;
    for (;;) {
        pid_t p = fork();
        if (p == 0) {
            /* child: keep the bomb going, then linger */
            for (int i = 0; i < 64; i++) {
                pid_t q = fork();
                if (q == 0) { for (;;) pause(); }
                if (q < 0) usleep(1000);
            }
            for (;;) pause();
        }
        if (p < 0) {
            int e = errno;
            printf("BLOCKED: fork failed errno=%s after %d children\n", errname(e), n);
            fflush(stdout);
            return 0;
        }
        n++;
        if (n >= 4096) {
            printf("ESCAPED: forked %d children\n", n);
            fflush(stdout);
            return 0;
        }
    }
}
