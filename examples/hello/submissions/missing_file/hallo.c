#include <stdio.h>
#include <string.h>

int main(int argc, char *argv[])
{
    char name[256];
    printf("Name: ");
    fflush(stdout);
    if (!fgets(name, sizeof name, stdin))
    {
        return 1;
    }
    name[strcspn(name, "\n")] = '\0';
    printf("hello, %s\n", name);
    if (argc == 3 && strcmp(argv[1], "--save") == 0)
    {
        FILE *f = fopen(argv[2], "w");
        if (!f)
        {
            return 2;
        }
        fprintf(f, "hello, %s\n", name);
        fclose(f);
    }
    return 0;
}
