#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void)
{
    char line[4096];
    long long total = 0;
    if (fgets(line, sizeof line, stdin))
    {
        for (char *t = strtok(line, " \n"); t; t = strtok(NULL, " \n"))
        {
            total += atoll(t);
        }
    }
    printf("%lld\n", total);
    return 0;
}
