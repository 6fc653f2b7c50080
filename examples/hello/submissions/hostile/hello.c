/* Tries to read what it should not, and to trick the file check with a link. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void leak(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f)
    {
        char buf[128];
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = '\0';
        printf("LEAKED %s: %s\n", path, buf);
        fclose(f);
    }
}

int main(int argc, char *argv[])
{
    leak("/etc/shadow");
    leak("/root/.bash_history");
    leak("/work/main/README.md");
    leak("../../../etc/shadow");
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
        /* Not a file of its own: a link to the expected answer, hoping the grader follows it. */
        unlink(argv[2]);
        if (symlink("expected.txt", argv[2]) != 0)
        {
            return 3;
        }
    }
    return 0;
}
