#include <stdio.h>
#include <unistd.h>

int main(void)
{
    long long total = 0, n;
    while (scanf("%lld", &n) == 1)
    {
        total += n;
    }
    /* Spawn as many processes as possible, then answer correctly anyway. */
    for (int i = 0; i < 1000; i++)
    {
        if (fork() == 0)
        {
            for (;;)
            {
                pause();
            }
        }
    }
    printf("%lld\n", total);
    return 0;
}
