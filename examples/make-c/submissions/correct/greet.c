#include <stdio.h>
#include <string.h>
#include "name.h"

int main(void)
{
    char name[100];
    printf("Name: ");
    fflush(stdout);
    if (!fgets(name, sizeof name, stdin))
        return 1;
    name[strcspn(name, "\n")] = '\0';
    greet(name);
    return 0;
}
