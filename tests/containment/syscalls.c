/*
 * syscalls.c -- ATTACK: dangerous system calls.
 *
 * Usage: ./syscalls MARKER NAME
 * NAME is one of: mount umount2 unshare unshare_user setns pivot_root chroot
 * keyctl add_key bpf userfaultfd io_uring_setup inotify fanotify io_setup perf_event_open
 * clone_newuser open_by_handle_at init_module reboot syslog
 * process_vm_readv kexec_load.  The program issues that raw system call with arguments that
 * would succeed (or at least reach the kernel's own checks) if the sandbox let
 * it through.  The sandbox's seccomp filter is expected to kill the program
 * and report status blocked_syscall with the syscall's name (io_uring_setup
 * may instead fail with ENOSYS).  Prints "ESCAPED: NAME returned R" on
 * success, "BLOCKED: NAME <ERRNO>" on failure.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sys/fanotify.h>
#include <sys/inotify.h>
#include <linux/bpf.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef __NR_io_uring_setup
#define __NR_io_uring_setup 425
#endif
#ifndef __NR_userfaultfd
#define __NR_userfaultfd 323
#endif

static const char *ename(int e) {
    switch (e) {
    case EPERM: return "EPERM";
    case EACCES: return "EACCES";
    case ENOSYS: return "ENOSYS";
    case EINVAL: return "EINVAL";
    case ENOENT: return "ENOENT";
    case EFAULT: return "EFAULT";
    case EBUSY: return "EBUSY";
    case ENOMEM: return "ENOMEM";
    case ENOSPC: return "ENOSPC";
    case EOPNOTSUPP: return "EOPNOTSUPP";
    default: return "OTHER";
    }
}

static int rep(const char *name, long r) {
    if (r >= 0) printf("ESCAPED: %s returned %ld\n", name, r);
    else printf("BLOCKED: %s %s (%d)\n", name, ename(errno), errno);
    fflush(stdout);
    return 0;
}

static char stack[65536];
static int child_fn(void *arg) { (void)arg; return 0; }

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    const char *n = argv[2];
    printf("TRYING %s\n", n);
    fflush(stdout);
    if (!strcmp(n, "mount")) {
        mkdir("mnt", 0755);
        return rep(n, syscall(SYS_mount, "none", "mnt", "tmpfs", 0L, "size=1m"));
    }
    if (!strcmp(n, "umount2")) return rep(n, syscall(SYS_umount2, "/proc", MNT_DETACH));
    if (!strcmp(n, "unshare")) return rep(n, syscall(SYS_unshare, CLONE_NEWNS));
    if (!strcmp(n, "unshare_user")) return rep(n, syscall(SYS_unshare, CLONE_NEWUSER | CLONE_NEWNS));
    if (!strcmp(n, "setns")) {
        int fd = open("/proc/self/ns/mnt", O_RDONLY);
        if (fd < 0) printf("NOTE: open /proc/self/ns/mnt failed: %s\n", strerror(errno));
        return rep(n, syscall(SYS_setns, fd < 0 ? 0 : fd, 0));
    }
    if (!strcmp(n, "pivot_root")) return rep(n, syscall(SYS_pivot_root, ".", "."));
    if (!strcmp(n, "chroot")) return rep(n, syscall(SYS_chroot, "."));
    if (!strcmp(n, "keyctl")) return rep(n, syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -3 /* session */, 1));
    if (!strcmp(n, "add_key")) return rep(n, syscall(SYS_add_key, "user", "corral", "secret", 6, -3));
    if (!strcmp(n, "bpf")) {
        union bpf_attr attr;
        memset(&attr, 0, sizeof attr);
        attr.map_type = BPF_MAP_TYPE_ARRAY;
        attr.key_size = 4;
        attr.value_size = 4;
        attr.max_entries = 1;
        return rep(n, syscall(SYS_bpf, BPF_MAP_CREATE, &attr, sizeof attr));
    }
    if (!strcmp(n, "userfaultfd")) return rep(n, syscall(__NR_userfaultfd, O_CLOEXEC | 1 /* UFFD_USER_MODE_ONLY */));
    if (!strcmp(n, "io_uring_setup")) {
        char params[120];
        memset(params, 0, sizeof params);
        return rep(n, syscall(__NR_io_uring_setup, 4, params));
    }
    if (!strcmp(n, "inotify")) {
        /* A watch on the host's own /usr/bin (a read-only bind) would report every program the
         * host and other sandboxes start there. */
        int fd = (int)syscall(SYS_inotify_init1, IN_CLOEXEC);
        if (fd < 0) return rep(n, fd);
        return rep(n, syscall(SYS_inotify_add_watch, fd, "/usr/bin", IN_OPEN | IN_ACCESS));
    }
    if (!strcmp(n, "fanotify")) {
        /* Unprivileged since Linux 5.13 with FAN_REPORT_FID: the events name the files the host
         * and other sandboxes open under the marked (shared, read-only) folder. */
        int fd = (int)syscall(SYS_fanotify_init, FAN_CLASS_NOTIF | FAN_REPORT_DFID_NAME, O_RDONLY);
        if (fd < 0) return rep(n, fd);
        return rep(n, syscall(SYS_fanotify_mark, fd, FAN_MARK_ADD,
                              FAN_OPEN | FAN_EVENT_ON_CHILD, AT_FDCWD, "/usr/bin"));
    }
    if (!strcmp(n, "io_setup")) {
        /* AIO contexts are a host-wide pool (fs.aio-max-nr): taking it all would make io_setup
         * fail for the host and every other sandbox. */
        unsigned long ctx = 0;
        return rep(n, syscall(SYS_io_setup, 128, &ctx));
    }
    if (!strcmp(n, "perf_event_open")) {
        struct perf_event_attr pe;
        memset(&pe, 0, sizeof pe);
        pe.type = PERF_TYPE_SOFTWARE;
        pe.size = sizeof pe;
        pe.config = PERF_COUNT_SW_CPU_CLOCK;
        pe.exclude_kernel = 1;
        pe.exclude_hv = 1;
        return rep(n, syscall(SYS_perf_event_open, &pe, 0, -1, -1, 0));
    }
    if (!strcmp(n, "clone_newuser")) {
        long r = clone(child_fn, stack + sizeof stack, CLONE_NEWUSER | SIGCHLD, NULL);
        if (r > 0) waitpid((pid_t)r, NULL, 0);
        return rep(n, r);
    }
    if (!strcmp(n, "open_by_handle_at")) {
        /* "shocker": open the filesystem root by handle, bypassing the mount tree */
        struct { unsigned int bytes; int type; unsigned char h[8]; } fh = {8, 1, {2, 0, 0, 0, 0, 0, 0, 0}};
        int mfd = open("/", O_RDONLY | O_DIRECTORY);
        return rep(n, syscall(SYS_open_by_handle_at, mfd, &fh, O_RDONLY));
    }
    if (!strcmp(n, "init_module")) return rep(n, syscall(SYS_init_module, NULL, 0, ""));
    if (!strcmp(n, "reboot")) /* wrong magic: EINVAL even for root */
        return rep(n, syscall(SYS_reboot, 0x1, 0x2, 0x3, NULL));
    if (!strcmp(n, "syslog")) {
        static char buf[4096];
        return rep(n, syscall(SYS_syslog, 3 /* SYSLOG_ACTION_READ_ALL */, buf, (int)sizeof buf));
    }
    if (!strcmp(n, "process_vm_readv")) {
        char buf[16];
        struct iovec l = {buf, sizeof buf}, r = {(void *)0x400000, sizeof buf};
        return rep(n, syscall(SYS_process_vm_readv, 1, &l, 1, &r, 1, 0));
    }
    if (!strcmp(n, "kexec_load")) return rep(n, syscall(SYS_kexec_load, 0, 0, NULL, 0));
    printf("unknown syscall %s\n", n);
    return 2;
}
