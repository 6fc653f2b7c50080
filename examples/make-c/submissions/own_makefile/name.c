#include <stdio.h>
#include "name.h"

void greet(const char *name)
{
    printf("hi, %s\n", name);
}
