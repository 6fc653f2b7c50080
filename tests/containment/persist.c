/*
 * persist.c -- ATTACK: leave state behind for the next run.
 *
 * Usage: ./persist MARKER create KEY
 *          create /tmp/persist-MARKER, /dev/shm/persist-MARKER,
 *          /var/tmp/persist-MARKER, a SysV shared memory segment, message
 *          queue and semaphore set with the fixed IPC key KEY (hex), and a
 *          POSIX message queue /persist-MARKER.  Prints "CREATED <what>" or
 *          "FAILED <what> <errno>" for each.
 *        ./persist MARKER check KEY
 *          look for all of them: prints "SEEN <what>" (the previous run's
 *          object survived: an escape) or "GONE <what>".
 */
#include <errno.h>
#include <fcntl.h>
#include <mqueue.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <unistd.h>

static void report(int create, const char *what, int ok) {
    if (create) {
        if (ok) printf("CREATED %s\n", what);
        else printf("FAILED %s %s\n", what, strerror(errno));
    } else {
        printf("%s %s\n", ok ? "SEEN" : "GONE", what);
    }
    fflush(stdout);
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage\n"); return 2; }
    const char *marker = argv[1];
    int create = strcmp(argv[2], "create") == 0;
    key_t key = (key_t)strtoul(argv[3], NULL, 16);
    const char *dirs[] = {"/tmp", "/dev/shm", "/var/tmp"};
    char path[512];
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/persist-%s", dirs[i], marker);
        if (create) {
            int fd = open(path, O_CREAT | O_WRONLY, 0666);
            if (fd >= 0) { (void)!write(fd, "persist\n", 8); close(fd); }
            report(1, path, fd >= 0);
        } else {
            report(0, path, access(path, F_OK) == 0);
        }
    }
    int flags = create ? (IPC_CREAT | 0666) : 0;
    int id = shmget(key, 4096, flags);
    report(create, "sysv-shm", id >= 0);
    id = msgget(key, flags);
    report(create, "sysv-msg", id >= 0);
    if (create && id >= 0) {
        struct { long t; char m[16]; } msg = {1, "persist"};
        msgsnd(id, &msg, sizeof msg.m, IPC_NOWAIT);
    }
    id = semget(key, 1, flags);
    report(create, "sysv-sem", id >= 0);
    snprintf(path, sizeof path, "/persist-%s", marker);
    struct mq_attr attr = {0};
    attr.mq_maxmsg = 4;
    attr.mq_msgsize = 64;
    mqd_t q = create ? mq_open(path, O_CREAT | O_RDWR, 0666, &attr) : mq_open(path, O_RDONLY);
    report(create, "posix-mq", q != (mqd_t)-1);
    /* extra: any SysV object at all left by anybody? */
    if (!create) {
        struct shm_info si;
        int maxid = shmctl(0, SHM_INFO, (struct shmid_ds *)&si);
        printf("SHM_OBJECTS %d\n", maxid >= 0 ? si.used_ids : -1);
    }
    return 0;
}
