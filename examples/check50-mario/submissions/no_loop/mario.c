#include <stdio.h>

// Prints whatever height it is given, once: does not reject -1 or 9.
int main(void)
{
    int h = 0;
    printf("Height: ");
    scanf("%d", &h);
    for (int i = 1; i <= h; i++)
    {
        printf("%*s", h - i, "");
        for (int j = 0; j < i; j++) printf("#");
        printf("  ");
        for (int j = 0; j < i; j++) printf("#");
        printf("\n");
    }
}
