#include <stdio.h>

int main(void)
{
    printf("Name: ");
    fflush(stdout);
    volatile unsigned long n = 0;
    for (;;)
    {
        n++;
    }
}
