/*
 * outflood.c -- ATTACK: output flood.
 *
 * Usage: ./outflood MARKER [stdout|stderr|both]
 * Writes 64 KiB blocks of 'A' (stdout) / 'E' (stderr) forever, ignoring
 * SIGPIPE so it keeps writing even if the reader goes away.  The sandbox must
 * cap what it captures at the --output limit and report status output_limit
 * instead of buffering gigabytes on the host.
 */
#include <signal.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    const char *mode = argc > 2 ? argv[2] : "stdout";
    static char a[65536], e[65536];
    memset(a, 'A', sizeof a);
    memset(e, 'E', sizeof e);
    signal(SIGPIPE, SIG_IGN);
    for (;;) {
        if (strcmp(mode, "stderr") != 0) (void)!write(1, a, sizeof a);
        if (strcmp(mode, "stdout") != 0) (void)!write(2, e, sizeof e);
    }
}
