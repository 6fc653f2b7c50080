/*
 * sched.c -- ATTACK: run above the host's ordinary processes.
 *
 * A process inherits its parent's scheduling policy and nice value, and RLIMIT_RTPRIO /
 * RLIMIT_NICE say how far an unprivileged one may raise them itself. A supervisor started with
 * a real-time policy or a negative nice (`chrt`, `nice -n -5`, a service's `Nice=`), or under
 * raised limits (a desktop's audio group gets rtprio 95), would hand that priority to every
 * program it runs: a SCHED_FIFO spinner takes a CPU from every ordinary process of the host (and
 * from the supervisor enforcing the limits, at the same priority) until its CPU limit.
 *
 * The same holds for the I/O priority (`ionice -c1`): a real-time class is served before every
 * ordinary process's reads of the host's disks.
 *
 * Usage: ./sched MARKER
 *   prints its policy, nice value and limits, then "ESCAPED: ..." for every way it runs or could
 *   make itself run above an ordinary process (a real-time policy, a negative nice, a real-time
 *   I/O class), or
 *   "BLOCKED: ..." for each attempt that failed. It never spins.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define IOPRIO_WHO_PROCESS 1
#define IOPRIO_CLASS_RT 1

int main(void) {
    int policy = sched_getscheduler(0) & ~SCHED_RESET_ON_FORK;
    errno = 0;
    int nice = getpriority(PRIO_PROCESS, 0);
    struct rlimit rt, rn;
    getrlimit(RLIMIT_RTPRIO, &rt);
    getrlimit(RLIMIT_NICE, &rn);
    printf("POLICY %d NICE %d RTPRIO %llu/%llu RLIMIT_NICE %llu/%llu\n", policy, nice,
           (unsigned long long)rt.rlim_cur, (unsigned long long)rt.rlim_max,
           (unsigned long long)rn.rlim_cur, (unsigned long long)rn.rlim_max);
    if (policy == SCHED_FIFO || policy == SCHED_RR) printf("ESCAPED: started with real-time policy %d\n", policy);
    else printf("BLOCKED: started with policy %d\n", policy);
    if (nice < 0) printf("ESCAPED: started at nice %d\n", nice);
    else printf("BLOCKED: started at nice %d\n", nice);
    struct sched_param sp = {.sched_priority = 1};
    if (sched_setscheduler(0, SCHED_FIFO, &sp) == 0) printf("ESCAPED: made itself SCHED_FIFO\n");
    else printf("BLOCKED: SCHED_FIFO %s\n", strerror(errno));
    sp.sched_priority = 0;
    sched_setscheduler(0, SCHED_OTHER, &sp);
    if (setpriority(PRIO_PROCESS, 0, -10) == 0) printf("ESCAPED: made itself nice -10\n");
    else printf("BLOCKED: nice -10 %s\n", strerror(errno));
    int ioprio = syscall(SYS_ioprio_get, IOPRIO_WHO_PROCESS, 0);
    printf("IOPRIO class %d level %d\n", ioprio >> 13, ioprio & 0x1fff);
    if (ioprio >= 0 && ioprio >> 13 == IOPRIO_CLASS_RT) printf("ESCAPED: started with real-time I/O priority\n");
    else printf("BLOCKED: started with I/O class %d\n", ioprio >> 13);
    if (syscall(SYS_ioprio_set, IOPRIO_WHO_PROCESS, 0, IOPRIO_CLASS_RT << 13) == 0)
        printf("ESCAPED: made itself real-time I/O priority\n");
    else printf("BLOCKED: real-time I/O priority %s\n", strerror(errno));
    return 0;
}
