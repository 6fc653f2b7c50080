/* spawn_bench: the timing driver for every "spawn a process and wait for it" peer in
 * bench/compare.sh — bare fork+exec (the physical floor), bubblewrap, gVisor's `runsc do`.
 *
 *   spawn_bench N P WARMUP -- /abs/path/program [args...]
 *
 * Runs the program WARMUP times untimed, then N times with P threads taking turns from one
 * counter; each run is fork + execve + waitpid, with stdin/stdout/stderr on /dev/null. Prints
 * one JSON object: per-run latency p50/p99/mean (ms), runs/s over the whole batch, failures.
 * Built by compare.sh with `gcc -O2 -pthread`.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static char **child_argv;
static long total;
static atomic_long next_run;
static atomic_long failures;
static double *latency_ms;
static int devnull;

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* One fork + execve + waitpid; 0 when the program exited 0. */
static int one_run(void) {
    pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
        /* Only async-signal-safe calls between fork and exec (the parent may be threaded). */
        dup2(devnull, 0);
        dup2(devnull, 1);
        dup2(devnull, 2);
        execve(child_argv[0], child_argv, environ);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0) {
    }
    return !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void *worker(void *arg) {
    (void)arg;
    for (;;) {
        long i = atomic_fetch_add(&next_run, 1);
        if (i >= total) return NULL;
        double t0 = now_ms();
        if (one_run()) atomic_fetch_add(&failures, 1);
        latency_ms[i] = now_ms() - t0;
    }
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Nearest rank, like corral-bench's. */
static double pct(const double *sorted, long n, double p) {
    long rank = (long)ceil(p / 100.0 * (double)n);
    if (rank < 1) rank = 1;
    if (rank > n) rank = n;
    return sorted[rank - 1];
}

int main(int argc, char **argv) {
    if (argc < 6 || strcmp(argv[4], "--") != 0 || argv[5][0] != '/') {
        fprintf(stderr, "usage: %s N PARALLEL WARMUP -- /abs/program [args...]\n", argv[0]);
        return 2;
    }
    total = atol(argv[1]);
    long parallel = atol(argv[2]);
    long warmup = atol(argv[3]);
    child_argv = &argv[5];
    if (total < 1 || parallel < 1 || warmup < 0) return 2;
    devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    latency_ms = calloc((size_t)total, sizeof(double));
    if (devnull < 0 || !latency_ms) return 1;

    long warm_failures = 0;
    for (long i = 0; i < warmup; i++) warm_failures += one_run();

    pthread_t *threads = calloc((size_t)parallel, sizeof(pthread_t));
    double t0 = now_ms();
    for (long i = 0; i < parallel; i++) pthread_create(&threads[i], NULL, worker, NULL);
    for (long i = 0; i < parallel; i++) pthread_join(threads[i], NULL);
    double elapsed = now_ms() - t0;

    double sum = 0;
    for (long i = 0; i < total; i++) sum += latency_ms[i];
    qsort(latency_ms, (size_t)total, sizeof(double), cmp);
    printf("{\"n\": %ld, \"parallel\": %ld, \"p50_ms\": %.4f, \"p99_ms\": %.4f, \"mean_ms\": %.4f, "
           "\"runs_per_s\": %.1f, \"elapsed_s\": %.3f, \"failures\": %ld}\n",
           total, parallel, pct(latency_ms, total, 50), pct(latency_ms, total, 99), sum / (double)total,
           (double)total / (elapsed / 1e3), elapsed / 1e3, (long)atomic_load(&failures) + warm_failures);
    return 0;
}
