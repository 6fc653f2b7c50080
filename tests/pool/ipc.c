/*
 * ipc.c -- ATTACK: leave IPC objects behind in a warm sandbox.
 *
 * Usage: ./ipc plant KEY NAME    create, with the fixed SysV key KEY (hex):
 *                                a shared memory segment holding NAME, a
 *                                message queue holding one message NAME and a
 *                                semaphore set whose semaphore is 7; plus the
 *                                POSIX message queue /NAME holding NAME and
 *                                the POSIX shared memory object /NAME.  Also
 *                                a few IPC_PRIVATE objects (only counted).
 *                                Prints "PLANTED <what>" or "FAILED <what>
 *                                <error>", then does what "look" does.
 *        ./ipc look KEY NAME     prints "SEEN <what> <detail>" for every such
 *                                object it can still reach (a leak) and
 *                                "GONE <what>" otherwise, then the number of
 *                                SysV objects of each kind in this IPC
 *                                namespace: "COUNT shm|msg|sem N".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <mqueue.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <unistd.h>

union semun { int val; struct semid_ds *buf; unsigned short *array; struct seminfo *__buf; };
struct msg { long type; char text[128]; };

static void planted(const char *what, int ok) {
    if (ok) printf("PLANTED %s\n", what);
    else printf("FAILED %s %s\n", what, strerror(errno));
}

static void plant(key_t key, const char *name) {
    int id = shmget(key, 4096, IPC_CREAT | 0666);
    planted("sysv-shm", id >= 0);
    if (id >= 0) {
        char *p = shmat(id, NULL, 0);
        if (p != (void *)-1) { snprintf(p, 4096, "%s", name); shmdt(p); }
    }
    id = msgget(key, IPC_CREAT | 0666);
    planted("sysv-msg", id >= 0);
    if (id >= 0) {
        struct msg m = {1, ""};
        snprintf(m.text, sizeof m.text, "%s", name);
        planted("sysv-msg-message", msgsnd(id, &m, sizeof m.text, IPC_NOWAIT) == 0);
    }
    id = semget(key, 1, IPC_CREAT | 0666);
    planted("sysv-sem", id >= 0);
    if (id >= 0) {
        union semun arg = {.val = 7};
        planted("sysv-sem-value", semctl(id, 0, SETVAL, arg) == 0);
    }
    /* anonymous objects: nobody can name them, only count them */
    planted("sysv-private-shm", shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0600) >= 0);
    planted("sysv-private-msg", msgget(IPC_PRIVATE, IPC_CREAT | 0600) >= 0);
    planted("sysv-private-sem", semget(IPC_PRIVATE, 3, IPC_CREAT | 0600) >= 0);

    char path[256];
    snprintf(path, sizeof path, "/%s", name);
    struct mq_attr attr = {0};
    attr.mq_maxmsg = 4;
    attr.mq_msgsize = 128;
    mqd_t q = mq_open(path, O_CREAT | O_RDWR, 0666, &attr);
    planted("posix-mq", q != (mqd_t)-1);
    if (q != (mqd_t)-1)
        planted("posix-mq-message", mq_send(q, name, strlen(name) + 1, 0) == 0);
    int fd = shm_open(path, O_CREAT | O_RDWR, 0666);
    planted("posix-shm", fd >= 0);
    if (fd >= 0) {
        planted("posix-shm-data", write(fd, name, strlen(name)) == (ssize_t)strlen(name));
        close(fd);
    }
}

static void look(key_t key, const char *name) {
    int id = shmget(key, 0, 0);
    if (id >= 0) {
        char *p = shmat(id, NULL, SHM_RDONLY);
        printf("SEEN sysv-shm %s\n", p != (void *)-1 ? p : "(cannot attach)");
    } else {
        printf("GONE sysv-shm\n");
    }
    id = msgget(key, 0);
    if (id >= 0) {
        struct msg m = {0, ""};
        ssize_t n = msgrcv(id, &m, sizeof m.text, 0, IPC_NOWAIT | MSG_COPY);
        if (n < 0) n = msgrcv(id, &m, sizeof m.text, 0, IPC_NOWAIT);
        printf("SEEN sysv-msg %s\n", n >= 0 ? m.text : "(no message)");
    } else {
        printf("GONE sysv-msg\n");
    }
    id = semget(key, 0, 0);
    if (id >= 0) printf("SEEN sysv-sem value=%d\n", semctl(id, 0, GETVAL));
    else printf("GONE sysv-sem\n");

    char path[256];
    snprintf(path, sizeof path, "/%s", name);
    mqd_t q = mq_open(path, O_RDONLY | O_NONBLOCK);
    if (q != (mqd_t)-1) {
        struct mq_attr a;
        mq_getattr(q, &a);
        printf("SEEN posix-mq messages=%ld\n", a.mq_curmsgs);
    } else {
        printf("GONE posix-mq %s\n", strerror(errno));
    }
    int fd = shm_open(path, O_RDONLY, 0);
    if (fd >= 0) {
        char buf[256] = "";
        ssize_t n = read(fd, buf, sizeof buf - 1);
        printf("SEEN posix-shm %s\n", n > 0 ? buf : "(empty)");
    } else {
        printf("GONE posix-shm %s\n", strerror(errno));
    }

    struct shm_info si;
    int r = shmctl(0, SHM_INFO, (struct shmid_ds *)&si);
    printf("COUNT shm %d\n", r >= 0 ? si.used_ids : -1);
    struct msginfo mi;
    r = msgctl(0, MSG_INFO, (struct msqid_ds *)&mi);
    printf("COUNT msg %d\n", r >= 0 ? mi.msgpool : -1);
    struct seminfo sm;
    union semun arg = {.__buf = &sm};
    r = semctl(0, 0, SEM_INFO, arg);
    printf("COUNT sem %d\n", r >= 0 ? sm.semusz : -1);
}

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: ipc plant|look KEY NAME\n"); return 2; }
    key_t key = (key_t)strtoul(argv[2], NULL, 16);
    if (strcmp(argv[1], "plant") == 0) plant(key, argv[3]);
    else if (strcmp(argv[1], "look") != 0) { fprintf(stderr, "bad mode\n"); return 2; }
    look(key, argv[3]);
    return 0;
}
