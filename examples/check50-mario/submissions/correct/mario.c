#include <stdio.h>

// Prompts with printf and no newline or fflush: on a terminal the prompt shows before scanf.
int main(void)
{
    int h = 0;
    do
    {
        printf("Height: ");
        if (scanf("%d", &h) != 1)
        {
            return 1;
        }
    }
    while (h < 1 || h > 8);
    for (int i = 1; i <= h; i++)
    {
        printf("%*s", h - i, "");
        for (int j = 0; j < i; j++) printf("#");
        printf("  ");
        for (int j = 0; j < i; j++) printf("#");
        printf("\n");
    }
}
