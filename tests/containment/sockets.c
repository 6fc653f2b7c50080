/* Opens a socket: argv[1] is the test's marker, argv[2] the kind (unix, inet, inet6, pair).
 * Prints "ESCAPED: ..." when it got one, "BLOCKED: ..." when the call failed. Under no_sockets
 * the sandbox kills it at the call. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

int main(int argc, char **argv) {
    const char *kind = argc > 2 ? argv[2] : "inet";
    int fd, sv[2];
    if (strcmp(kind, "pair") == 0) {
        fd = socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    } else {
        int family = strcmp(kind, "unix") == 0 ? AF_UNIX : strcmp(kind, "inet6") == 0 ? AF_INET6 : AF_INET;
        fd = socket(family, SOCK_STREAM, 0);
    }
    if (fd < 0) printf("BLOCKED: %s: %s\n", kind, strerror(errno));
    else printf("ESCAPED: %s socket\n", kind);
    return 0;
}
