/*
 * cpuspin.c -- ATTACK: burn CPU.
 *
 * Usage: ./cpuspin MARKER spin
 *          spin forever in one process (must end with status time_limit).
 *        ./cpuspin MARKER fork N
 *          evade a per-process CPU limit (RLIMIT_CPU): fork N children that
 *          each burn 900 ms of their *own* CPU time and exit, so no single
 *          process ever reaches a 1 s limit while the run as a whole burns
 *          N*0.9 s.  Prints "ESCAPED: children burnt <ms> ms of CPU" if all
 *          children finished; the sandbox must account CPU for the whole run
 *          and stop it near the limit (status time_limit).
 *        ./cpuspin MARKER threads N
 *          same with N threads spinning in one process.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double cpu_ms(clockid_t c) {
    struct timespec ts;
    clock_gettime(c, &ts);
    return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
}

static volatile unsigned long sink;

static void *spin_thread(void *arg) {
    (void)arg;
    for (;;) sink++;
    return NULL;
}

int main(int argc, char **argv) {
    const char *mode = argc > 2 ? argv[2] : "spin";
    int n = argc > 3 ? atoi(argv[3]) : 4;
    if (strcmp(mode, "spin") == 0) {
        for (;;) sink++;
    }
    if (strcmp(mode, "threads") == 0) {
        pthread_t t;
        for (int i = 1; i < n; i++) pthread_create(&t, NULL, spin_thread, NULL);
        for (unsigned long i = 0;; i++) {
            sink++;
            if ((i & 0xffffff) == 0 && cpu_ms(CLOCK_PROCESS_CPUTIME_ID) > 20000.0) {
                printf("ESCAPED: threads burnt %.0f ms of CPU\n", cpu_ms(CLOCK_PROCESS_CPUTIME_ID));
                fflush(stdout);
                return 0;
            }
        }
    }
    /* fork mode */
    for (int i = 0; i < n; i++) {
        pid_t p = fork();
        if (p == 0) {
            while (cpu_ms(CLOCK_PROCESS_CPUTIME_ID) < 900.0) {
                for (int k = 0; k < 100000; k++) sink++;
            }
            _exit(0);
        }
        if (p < 0) {
            perror("fork");
        }
    }
    while (wait(NULL) > 0) {}
    struct rusage ru;
    getrusage(RUSAGE_CHILDREN, &ru);
    printf("ESCAPED: children burnt %ld ms of CPU\n",
           (long)(ru.ru_utime.tv_sec * 1000 + ru.ru_utime.tv_usec / 1000 +
                  ru.ru_stime.tv_sec * 1000 + ru.ru_stime.tv_usec / 1000));
    fflush(stdout);
    return 0;
}
