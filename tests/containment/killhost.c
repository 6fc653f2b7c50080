/*
 * killhost.c -- ATTACK: kill or ptrace a host process.
 *
 * Usage: ./killhost MARKER HOSTPID
 * HOSTPID is the host pid of a process the test started on the host.  Tries,
 * in this order: kill(HOSTPID, SIGKILL), kill(-1, SIGKILL) (everything we may
 * signal), kill(1, SIGKILL) (the namespace's init), then
 * ptrace(PTRACE_ATTACH, HOSTPID) and ptrace(PTRACE_ATTACH, 1).  Prints
 * "ESCAPED: <what>" when kill(HOSTPID)/ptrace succeeds, "BLOCKED: <what>
 * <errno>" when it fails, and "KILL-ALL ..."/"KILL-INIT ..." for the two
 * in-namespace kills (informational; the host process' survival is checked by
 * the test).  ptrace is expected to be killed by seccomp (status
 * blocked_syscall), so it comes last.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <unistd.h>

static void rep(const char *what, long r) {
    if (r == 0) printf("ESCAPED: %s\n", what);
    else printf("BLOCKED: %s %s\n", what, strerror(errno));
    fflush(stdout);
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    pid_t hp = (pid_t)atoi(argv[2]);
    signal(SIGTERM, SIG_IGN);
    rep("kill-hostpid", kill(hp, SIGKILL));
    /* kill(-1) never signals the caller itself; success just means some
       process in our own namespace got it, which is fine.  Report it
       separately, the host process' survival is what matters. */
    long r = kill(-1, SIGKILL);
    printf("KILL-ALL %s\n", r == 0 ? "sent" : strerror(errno));
    fflush(stdout);
    /* Signals from inside a pid namespace to its init are dropped by the
       kernel even when kill() returns 0, so this is informational. */
    r = kill(1, SIGKILL);
    printf("KILL-INIT %s\n", r == 0 ? "sent" : strerror(errno));
    fflush(stdout);
    usleep(100 * 1000);
    printf("ALIVE after kill-init\n");
    fflush(stdout);
    rep("ptrace-hostpid", ptrace(PTRACE_ATTACH, hp, 0, 0));
    rep("ptrace-init", ptrace(PTRACE_ATTACH, 1, 0, 0));
    return 0;
}
