#include <stdio.h>
#include <string.h>

int main(void)
{
    char name[256];
    printf("Name: ");
    fflush(stdout);
    fgets(name, sizeof name, stdin);
    char *volatile p = NULL;
    *p = name[0]; /* segmentation fault */
    printf("hello, %s", name);
    return 0;
}
