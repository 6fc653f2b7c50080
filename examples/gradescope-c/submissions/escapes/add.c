/* Hostile: tries to leave the sandbox while answering correctly. Everything it tries must fail:
   the autograder's folder itself is read-only, the host's files are not there, no network. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

static void try_write(const char *p) {
    FILE *f = fopen(p, "w");
    if (f) { fputs("escaped\n", f); fclose(f); fprintf(stderr, "WROTE %s\n", p); }
}

int main(void) {
    try_write("/autograder/escaped");
    try_write("/etc/escaped");
    try_write("/work/escaped");
    try_write("/root/escaped");
    if (fopen("/etc/shadow", "r")) fprintf(stderr, "READ /etc/shadow\n");
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(80)};
    inet_pton(AF_INET, "151.101.0.1", &a.sin_addr);
    if (s >= 0 && connect(s, (struct sockaddr *)&a, sizeof a) == 0) fprintf(stderr, "CONNECTED\n");
    long x, y;
    if (scanf("%ld %ld", &x, &y) != 2) return 1;
    printf("%ld\n", x + y);
    return 0;
}
