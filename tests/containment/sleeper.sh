#!/bin/sh
# sleeper.sh -- ATTACK: outlive the wall-clock limit.
# Usage: /bin/sh sleeper.sh MARKER
# Ignores SIGTERM/SIGHUP/SIGINT and sleeps forever (in a child sleep, so a
# signal to the shell alone does not end the sleep).  Uses no CPU, so only a
# wall-clock limit can stop it: expected status wall_time_limit.
trap '' TERM HUP INT
echo "SLEEPING $1"
while :; do sleep 1; done
echo "ESCAPED: sleep loop ended"
