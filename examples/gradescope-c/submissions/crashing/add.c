#include <stdio.h>

int main(void) {
    long a, b;
    if (scanf("%ld %ld", &a, &b) != 2) return 1;
    if (a < 0) { int *p = 0; *p = 1; }   /* crashes on a negative number */
    printf("%ld\n", a + b);
    return 0;
}
