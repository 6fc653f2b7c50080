/*
 * sbxid.c -- which sandbox is this? (not an attack: the pool tests' probe)
 *
 * Usage: ./sbxid [PATH...]
 * Prints "SBXID <id>" to stderr, where <id> is the kernel's never-reused
 * 64-bit unique mount id (statx STATX_MNT_ID_UNIQUE, Linux 6.8+) of the
 * sandbox's root "/".  A reset keeps the root mount, so two runs served by
 * one warm sandbox print the same id; a sandbox built afresh has a new root
 * mount and prints a new id (unlike namespace inode numbers, which the kernel
 * recycles once a namespace is freed).  Prints "SBXID unknown <why>" and
 * exits 1 when the kernel cannot tell.  For each PATH it also prints
 * "MNTID <path> <id>", the same id of the mount PATH is on: a scratch folder
 * emptied in place by a reset keeps its id, a remounted one gets a new one.
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

static int print_id(const char *tag, const char *path, int with_path) {
    struct statx st;
    memset(&st, 0, sizeof st);
    const char *sep = with_path ? " " : "";
    const char *shown = with_path ? path : "";
    if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, STATX_MNT_ID_UNIQUE, &st) != 0) {
        fprintf(stderr, "%s%s%s unknown statx: %s\n", tag, sep, shown, strerror(errno));
        return 1;
    }
    if (!(st.stx_mask & STATX_MNT_ID_UNIQUE)) {
        fprintf(stderr, "%s%s%s unknown no STATX_MNT_ID_UNIQUE\n", tag, sep, shown);
        return 1;
    }
    fprintf(stderr, "%s%s%s %llu\n", tag, sep, shown, (unsigned long long)st.stx_mnt_id);
    return 0;
}

int main(int argc, char **argv) {
    int bad = print_id("SBXID", "/", 0);
    for (int i = 1; i < argc; i++)
        bad |= print_id("MNTID", argv[i], 1);
    return bad;
}
