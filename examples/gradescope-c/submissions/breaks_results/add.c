/* Hostile: leaves a results.json that is not Gradescope's shape and kills the autograder. */
#include <signal.h>
#include <stdio.h>

int main(void) {
    FILE *f = fopen("/autograder/results/results.json", "w");
    if (f) { fputs("{\"score\": \"all of them\"}\n", f); fclose(f); }
    kill(-1, SIGKILL);             /* every process it may signal: the autograder too */
    return 0;
}
