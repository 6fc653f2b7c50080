/*
 * listfds.c -- ATTACK: use file descriptors leaked from the host.
 *
 * Usage: ./listfds MARKER
 * Lists /proc/self/fd (skipping the directory fd used for the listing) and
 * prints "FD <n> -> <link target>" for each open descriptor, then tries to
 * read from / write to every descriptor above 2 ("USED <n> ..." if that worked).
 * The host test opened a file and a pipe without O_CLOEXEC before starting
 * corral: only 0, 1 and 2 may be visible.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(void) {
    DIR *d = opendir("/proc/self/fd");
    if (!d) { perror("opendir /proc/self/fd"); return 1; }
    int self = dirfd(d);
    int fds[1024], n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 1024) {
        if (e->d_name[0] == '.') continue;
        int fd = atoi(e->d_name);
        if (fd == self) continue;
        fds[n++] = fd;
    }
    for (int i = 0; i < n; i++) {
        char p[64], t[4096];
        snprintf(p, sizeof p, "/proc/self/fd/%d", fds[i]);
        ssize_t l = readlink(p, t, sizeof t - 1);
        t[l > 0 ? l : 0] = 0;
        printf("FD %d -> %s\n", fds[i], t);
    }
    closedir(d);
    for (int i = 0; i < n; i++) {
        if (fds[i] <= 2) continue;
        char buf[256];
        ssize_t r = read(fds[i], buf, sizeof buf);
        if (r > 0) printf("USED %d read %zd bytes\n", fds[i], r);
        ssize_t w = write(fds[i], "escaped\n", 8);
        if (w > 0) printf("USED %d wrote %zd bytes\n", fds[i], w);
    }
    printf("DONE\n");
    return 0;
}
