/* Tries to start new processes and programs, or threads: argv[1] is the test's marker, argv[2]
 * the way. Prints "ESCAPED: ..." when a new process or program started, "BLOCKED: ..." when the
 * call failed, "THREADS: n" when n threads ran. Under no_spawn the sandbox kills it at the call. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static void *worker(void *arg) {
    return arg;
}

int main(int argc, char **argv) {
    const char *way = argc > 2 ? argv[2] : "fork";
    if (strcmp(way, "fork") == 0) {
        pid_t p = fork();
        if (p == 0) _exit(7);
        if (p < 0) { printf("BLOCKED: fork: %s\n", strerror(errno)); return 0; }
        int st = 0;
        waitpid(p, &st, 0);
        printf("ESCAPED: fork: child exited %d\n", WEXITSTATUS(st));
    } else if (strcmp(way, "vfork") == 0) {
        pid_t p = vfork();
        if (p == 0) _exit(7);
        if (p < 0) { printf("BLOCKED: vfork: %s\n", strerror(errno)); return 0; }
        waitpid(p, NULL, 0);
        printf("ESCAPED: vfork\n");
    } else if (strcmp(way, "spawn") == 0) {
        pid_t p;
        char *args[] = {"/bin/true", NULL};
        int e = posix_spawn(&p, "/bin/true", NULL, NULL, args, environ);
        if (e) { printf("BLOCKED: posix_spawn: %s\n", strerror(e)); return 0; }
        waitpid(p, NULL, 0);
        printf("ESCAPED: posix_spawn\n");
    } else if (strcmp(way, "exec") == 0) {
        fflush(stdout);
        execl("/bin/echo", "echo", "ESCAPED: exec", (char *)NULL);
        printf("BLOCKED: exec: %s\n", strerror(errno));
    } else if (strcmp(way, "threads") == 0) {
        pthread_t t[4];
        int n = 0;
        for (int i = 0; i < 4; i++)
            if (pthread_create(&t[i], NULL, worker, NULL) == 0) n++;
        for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
        printf("THREADS: %d\n", n);
    }
    return 0;
}
