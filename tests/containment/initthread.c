/*
 * initthread.c -- ATTACK: reach a thread of the sandbox's PID 1.
 *
 * Usage: ./initthread MARKER
 * A reused sandbox's PID 1 has a second thread that starts the programs (it
 * wears their seccomp filter and Landlock domain, and keeps PID 1's
 * credentials); corral gives it the PID just below pid_max.  For that PID, its
 * neighbours and the low PIDs, tries: tgkill(1, tid, SIGSTOP/SIGKILL),
 * kill(tid, SIGKILL), opening /proc/<tid>/mem and /proc/1/task/<tid>/mem,
 * pidfd_open(tid) and pidfd_getfd() of its descriptors (the seccomp listener
 * among them would let a program answer its own forbidden calls), then
 * process_vm_readv() and ptrace(PTRACE_SEIZE) (expected to be ended by the
 * filter).  Prints "ESCAPED: <what> <tid>" for anything that works (a signal
 * counts when kill/tgkill returned 0), "BLOCKED: <what> <tid> <errno>"
 * otherwise, and "ALIVE" at the end, after a pause in which a stopped or
 * killed PID 1 would have ended the run.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

static void rep(const char *what, long tid, long r) {
    if (r >= 0) printf("ESCAPED: %s %ld\n", what, tid);
    else printf("BLOCKED: %s %ld %s\n", what, tid, strerror(errno));
    fflush(stdout);
}

int main(int argc, char **argv) {
    (void)argc;
    (void)argv;
    long max = 32768;
    FILE *f = fopen("/proc/sys/kernel/pid_max", "r");
    if (f) {
        if (fscanf(f, "%ld", &max) != 1) max = 32768;
        fclose(f);
    }
    long tids[] = {max - 1, max - 2, max - 3, 2, 3};
    size_t n = sizeof tids / sizeof tids[0];
    char path[64];
    for (size_t i = 0; i < n; i++) {
        long t = tids[i];
        if (t == getpid()) continue;
        rep("tgkill-stop", t, syscall(SYS_tgkill, 1, t, SIGSTOP));
        rep("tgkill-kill", t, syscall(SYS_tgkill, 1, t, SIGKILL));
        rep("kill", t, kill((pid_t)t, SIGKILL));
        snprintf(path, sizeof path, "/proc/%ld/mem", t);
        rep("open-mem", t, open(path, O_RDONLY));
        snprintf(path, sizeof path, "/proc/1/task/%ld/mem", t);
        rep("open-task-mem", t, open(path, O_RDONLY));
        long pfd = syscall(SYS_pidfd_open, t, 0);
        if (pfd < 0) {
            rep("pidfd-open", t, pfd);
        } else {
            printf("PIDFD %ld\n", t);
            for (int fd = 0; fd < 300; fd++) {
                long got = syscall(SYS_pidfd_getfd, pfd, fd, 0);
                if (got >= 0) rep("pidfd-getfd", t, got);
            }
            printf("BLOCKED: pidfd-getfd %ld (none)\n", t);
        }
    }
    usleep(200 * 1000);
    printf("ALIVE\n");
    fflush(stdout);
    char buf[8];
    struct iovec local = {buf, sizeof buf}, remote = {(void *)0x400000, sizeof buf};
    rep("process-vm-readv", max - 1, syscall(SYS_process_vm_readv, max - 1, &local, 1, &remote, 1, 0));
    rep("ptrace-seize", max - 1, ptrace(PTRACE_SEIZE, max - 1, 0, 0));
    return 0;
}
