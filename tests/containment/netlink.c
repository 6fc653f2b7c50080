/* Netlink and raw sockets: argv[1] is the test's marker, argv[2] the kind.
 *   route:      socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE); then lists the links (RTM_GETLINK)
 *               and tries to change the namespace: RTM_NEWADDR (an address on lo), RTM_NEWLINK
 *               (a new dummy link) and RTM_NEWLINK (lo down). Prints "OPENED: route",
 *               "LINKS: NAME ..." and, per change, "REFUSED: WHAT: ERROR" or "ESCAPED: WHAT".
 *   getifaddrs: getifaddrs() (glibc's, over NETLINK_ROUTE); "IFADDRS: NAME ..." or "BLOCKED".
 *   audit, uevent, diag: socket(AF_NETLINK, SOCK_RAW, NETLINK_AUDIT / _KOBJECT_UEVENT /
 *               _SOCK_DIAG).
 *   packet:     socket(AF_PACKET, SOCK_RAW, ETH_P_ALL).
 * A socket that opens is "ESCAPED: KIND socket" (route: "OPENED"), one refused "BLOCKED: KIND:
 * ERROR". Under no_sockets the sandbox kills it at the call.
 * It refuses to run as root: there, its changes would be accepted and would take the host's lo
 * down. */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <linux/if_addr.h>
#include <linux/if_ether.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static unsigned seq = 1;

/* Appends an attribute to the message in buf. */
static void attr(struct nlmsghdr *h, int type, const void *data, int len) {
    struct rtattr *a = (struct rtattr *)((char *)h + NLMSG_ALIGN(h->nlmsg_len));
    a->rta_type = type;
    a->rta_len = RTA_LENGTH(len);
    memcpy(RTA_DATA(a), data, len);
    h->nlmsg_len = NLMSG_ALIGN(h->nlmsg_len) + RTA_ALIGN(a->rta_len);
}

/* Sends h and returns the ack's error (0: accepted, else a negative errno), or -errno of the
 * failing call. */
static int request(int fd, struct nlmsghdr *h) {
    h->nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
    h->nlmsg_seq = seq++;
    if (send(fd, h, h->nlmsg_len, 0) < 0) return -errno;
    char buf[8192];
    for (;;) {
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n < 0) return -errno;
        for (struct nlmsghdr *r = (struct nlmsghdr *)buf; NLMSG_OK(r, (unsigned)n); r = NLMSG_NEXT(r, n)) {
            if (r->nlmsg_seq != h->nlmsg_seq) continue;
            if (r->nlmsg_type == NLMSG_ERROR) return ((struct nlmsgerr *)NLMSG_DATA(r))->error;
        }
    }
}

static void change(int fd, const char *what, struct nlmsghdr *h) {
    int e = request(fd, h);
    if (e == 0) printf("ESCAPED: %s accepted\n", what);
    else printf("REFUSED: %s: %s\n", what, strerror(-e));
}

static void links(int fd) {
    struct { struct nlmsghdr h; struct ifinfomsg i; } req;
    memset(&req, 0, sizeof req);
    req.h.nlmsg_len = NLMSG_LENGTH(sizeof req.i);
    req.h.nlmsg_type = RTM_GETLINK;
    req.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    req.h.nlmsg_seq = seq++;
    req.i.ifi_family = AF_UNSPEC;
    printf("LINKS:");
    if (send(fd, &req, req.h.nlmsg_len, 0) < 0) { printf(" (send: %s)\n", strerror(errno)); return; }
    char buf[16384];
    for (;;) {
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n <= 0) break;
        for (struct nlmsghdr *r = (struct nlmsghdr *)buf; NLMSG_OK(r, (unsigned)n); r = NLMSG_NEXT(r, n)) {
            if (r->nlmsg_type == NLMSG_DONE || r->nlmsg_type == NLMSG_ERROR) { printf("\n"); return; }
            if (r->nlmsg_type != RTM_NEWLINK) continue;
            struct ifinfomsg *i = NLMSG_DATA(r);
            int len = IFLA_PAYLOAD(r);
            for (struct rtattr *a = IFLA_RTA(i); RTA_OK(a, len); a = RTA_NEXT(a, len))
                if (a->rta_type == IFLA_IFNAME) printf(" %s", (char *)RTA_DATA(a));
        }
    }
    printf("\n");
}

static void route(void) {
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (fd < 0) { printf("BLOCKED: route: %s\n", strerror(errno)); return; }
    printf("OPENED: route\n");
    links(fd);
    int lo = (int)if_nametoindex("lo");
    if (lo == 0) lo = 1;

    char buf[512];
    struct nlmsghdr *h = (struct nlmsghdr *)buf;

    /* 10.9.8.7/8 on lo. */
    memset(buf, 0, sizeof buf);
    h->nlmsg_len = NLMSG_LENGTH(sizeof(struct ifaddrmsg));
    h->nlmsg_type = RTM_NEWADDR;
    h->nlmsg_flags = NLM_F_CREATE | NLM_F_EXCL;
    struct ifaddrmsg *a = NLMSG_DATA(h);
    a->ifa_family = AF_INET;
    a->ifa_prefixlen = 8;
    a->ifa_index = lo;
    struct in_addr ip;
    inet_pton(AF_INET, "10.9.8.7", &ip);
    attr(h, IFA_LOCAL, &ip, sizeof ip);
    attr(h, IFA_ADDRESS, &ip, sizeof ip);
    change(fd, "RTM_NEWADDR", h);

    /* A new dummy link. */
    memset(buf, 0, sizeof buf);
    h->nlmsg_len = NLMSG_LENGTH(sizeof(struct ifinfomsg));
    h->nlmsg_type = RTM_NEWLINK;
    h->nlmsg_flags = NLM_F_CREATE | NLM_F_EXCL;
    ((struct ifinfomsg *)NLMSG_DATA(h))->ifi_family = AF_UNSPEC;
    attr(h, IFLA_IFNAME, "corral0", 8);
    struct rtattr *info = (struct rtattr *)((char *)h + NLMSG_ALIGN(h->nlmsg_len));
    info->rta_type = IFLA_LINKINFO;
    info->rta_len = RTA_LENGTH(0);
    h->nlmsg_len = NLMSG_ALIGN(h->nlmsg_len) + RTA_LENGTH(0);
    attr(h, IFLA_INFO_KIND, "dummy", 6);
    info->rta_len = (char *)h + h->nlmsg_len - (char *)info;
    change(fd, "RTM_NEWLINK dummy", h);

    /* lo down. */
    memset(buf, 0, sizeof buf);
    h->nlmsg_len = NLMSG_LENGTH(sizeof(struct ifinfomsg));
    h->nlmsg_type = RTM_NEWLINK;
    struct ifinfomsg *i = NLMSG_DATA(h);
    i->ifi_family = AF_UNSPEC;
    i->ifi_index = lo;
    i->ifi_change = IFF_UP;
    i->ifi_flags = 0;
    change(fd, "RTM_NEWLINK lo down", h);
    close(fd);
}

static void ifaddrs(void) {
    struct ifaddrs *all;
    if (getifaddrs(&all) < 0) { printf("BLOCKED: getifaddrs: %s\n", strerror(errno)); return; }
    printf("IFADDRS:");
    for (struct ifaddrs *p = all; p; p = p->ifa_next)
        if (p->ifa_addr && p->ifa_addr->sa_family == AF_INET) printf(" %s", p->ifa_name);
    printf("\n");
    freeifaddrs(all);
}

int main(int argc, char **argv) {
    const char *kind = argc > 2 ? argv[2] : "route";
    setvbuf(stdout, NULL, _IONBF, 0);
    if (geteuid() == 0) { printf("refusing to run as root (it would change this namespace)\n"); return 3; }
    if (strcmp(kind, "route") == 0) { route(); return 0; }
    if (strcmp(kind, "getifaddrs") == 0) { ifaddrs(); return 0; }
    int fd;
    if (strcmp(kind, "packet") == 0) fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
    else if (strcmp(kind, "audit") == 0) fd = socket(AF_NETLINK, SOCK_RAW, NETLINK_AUDIT);
    else if (strcmp(kind, "uevent") == 0) fd = socket(AF_NETLINK, SOCK_RAW, NETLINK_KOBJECT_UEVENT);
    else if (strcmp(kind, "diag") == 0) fd = socket(AF_NETLINK, SOCK_RAW, NETLINK_SOCK_DIAG);
    else { printf("unknown kind %s\n", kind); return 2; }
    if (fd < 0) printf("BLOCKED: %s: %s\n", kind, strerror(errno));
    else printf("ESCAPED: %s socket\n", kind);
    return 0;
}
