/*
 * sbxid.c -- which sandbox is this? (not an attack: the pool tests' probe)
 *
 * Usage: ./sbxid
 * Prints "SBXID <id>" to stderr, where <id> is the kernel's never-reused
 * 64-bit unique mount id (statx STATX_MNT_ID_UNIQUE, Linux 6.8+) of the
 * sandbox's root "/".  A reset keeps the root mount, so two runs served by
 * one warm sandbox print the same id; a sandbox built afresh has a new root
 * mount and prints a new id (unlike namespace inode numbers, which the kernel
 * recycles once a namespace is freed).  Prints "SBXID unknown <why>" and
 * exits 1 when the kernel cannot tell.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#ifndef STATX_MNT_ID_UNIQUE
#define STATX_MNT_ID_UNIQUE 0x00004000U
#endif

int main(void) {
    struct statx st;
    memset(&st, 0, sizeof st);
    if (statx(AT_FDCWD, "/", AT_SYMLINK_NOFOLLOW, STATX_MNT_ID_UNIQUE, &st) != 0) {
        fprintf(stderr, "SBXID unknown statx: %s\n", strerror(errno));
        return 1;
    }
    if (!(st.stx_mask & STATX_MNT_ID_UNIQUE)) {
        fprintf(stderr, "SBXID unknown no STATX_MNT_ID_UNIQUE\n");
        return 1;
    }
    fprintf(stderr, "SBXID %llu\n", (unsigned long long)st.stx_mnt_id);
    return 0;
}
