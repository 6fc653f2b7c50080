/*
 * netstart.c -- MISREPORT: make corral report a blocked system call the program never made.
 *
 * A warm sandbox starts each program from a thread of its PID 1 that already wears the seccomp
 * filter, whose socket watch raises a notification for every socket(2) of a family other than
 * AF_UNIX (answered with the filter's own verdict, to tell the reset whether the run reached
 * its network namespace). A program that opens a socket as its very first call can do so before
 * PID 1 has heard that the exec happened: if PID 1 takes the call for one made before the exec,
 * it kills the run and reports `blocked_syscall: socket` for a call the default profile allows.
 *
 * Usage: ./netstart MARKER
 *   opens an AF_INET6 datagram socket and an AF_INET stream socket as its first calls, then
 *   prints "SOCKETS OK" (or "FAILED <errno>").
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

int main(void) {
    int a = socket(AF_INET6, SOCK_DGRAM, 0);
    int b = socket(AF_INET, SOCK_STREAM, 0);
    if (a < 0 || b < 0) printf("FAILED %s\n", strerror(errno));
    else printf("SOCKETS OK\n");
    return 0;
}
