/*
 * membomb.c -- ATTACK: memory bomb.
 *
 * Usage: ./membomb MARKER
 * Allocates memory in 1 MiB chunks and touches every page so it is really
 * resident, up to 4 GiB.  Also forks one helper that does the same, so a
 * per-process limit (RLIMIT_AS) alone is not enough: the sandbox must cap the
 * whole run's memory (cgroup) and report status memory_limit.
 * Prints "ESCAPED: allocated <N> MiB" if it got 4 GiB.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int eat(void) {
    size_t mib = 0;
    while (mib < 4096) {
        char *p = malloc(1 << 20);
        if (!p) {
            printf("BLOCKED: malloc failed after %zu MiB\n", mib);
            fflush(stdout);
            return 1;
        }
        memset(p, 0x5a, 1 << 20);
        mib++;
    }
    printf("ESCAPED: allocated %zu MiB\n", mib);
    fflush(stdout);
    return 0;
}

int main(void) {
    pid_t p = fork();
    if (p == 0) {
        return eat();
    }
    int r = eat();
    if (p > 0) waitpid(p, NULL, 0);
    /* keep the memory alive a bit */
    sleep(2);
    return r;
}
