#include <stdio.h>

int main(void)
{
    int total = 0, n;
    while (scanf("%d", &n) == 1)
    {
        total += n;
    }
    printf("%d\n", total);
    return 0;
}
