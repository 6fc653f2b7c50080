#include <stdio.h>
#include <string.h>

int main(void)
{
    char name[256];
    printf("Name: ");
    fflush(stdout);
    if (!fgets(name, sizeof name, stdin))
    {
        return 1;
    }
    name[strcspn(name, "\n")] = '\0';
    for (;;)
    {
        printf("hello, %s\n", name);
    }
}
