#include <stdio.h>
#include "name.h"

/* -Werror: an unused variable fails the build. */
void greet(const char *name)
{
    int unused = 0;
    printf("hello, %s\n", name);
}
