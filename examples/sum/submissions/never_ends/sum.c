#include <stdio.h>

int main(void)
{
    long long total = 0, n;
    /* Wrong loop condition: at end of file scanf returns EOF (-1), never 0. */
    while (scanf("%lld", &n) != 0)
    {
        total += n;
    }
    printf("%lld\n", total);
    return 0;
}
