#include <stdio.h>

int main(void)
{
    printf("Name: ")
    return 0;
}
