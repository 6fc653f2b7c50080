#include <stdio.h>
#include "name.h"

void greet(const char *name)
{
    printf("hello, %s\n", name);
}
