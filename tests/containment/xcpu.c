/*
 * xcpu.c -- ATTACK: make corral report a CPU time limit that was never reached.
 *
 * corral's own backstop for the CPU limit is RLIMIT_CPU, whose soft limit sends SIGXCPU; a run
 * whose program dies of SIGXCPU may be reported as `time_limit`. The program can send itself that
 * signal, or lower its own RLIMIT_CPU, long before the run's limit: a wrong or crashing program
 * would then be reported as "too slow" (a grader's "time limit exceeded" instead of a runtime
 * error), and the reason line would claim the run's limit was exceeded.
 *
 * Usage: ./xcpu MARKER raise
 *          print "FORGING" and raise(SIGXCPU) at once (almost no CPU used).
 *        ./xcpu MARKER rlimit
 *          lower the soft RLIMIT_CPU to 1 s and spin until the kernel's SIGXCPU ends it.
 * The run must be reported as `signaled` (signal 24), not `time_limit`, when its CPU time is
 * below the run's limit.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: xcpu MARKER raise|rlimit\n"); return 2; }
    printf("FORGING %s\n", argv[2]);
    fflush(stdout);
    if (strcmp(argv[2], "raise") == 0) {
        raise(SIGXCPU);
    } else {
        struct rlimit rl;
        getrlimit(RLIMIT_CPU, &rl);
        rl.rlim_cur = 1;
        if (setrlimit(RLIMIT_CPU, &rl) != 0) { perror("setrlimit"); return 1; }
        for (volatile unsigned long i = 0;; i++) {}
    }
    printf("NOT KILLED\n");
    return 1;
}
