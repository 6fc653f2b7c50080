#!/bin/bash
# A grader in the style of PrairieLearn's own Python grader image (prairielearn/grader-python's
# run.sh), written from its documented behaviour: as root, merge the student's files and the
# tests into /grade/run, lock them down, run the tests as an unprivileged user `ag`, and move
# the results from a secret file name into /grade/results only afterwards, so the student's
# code (which runs as ag) can neither read the tests' answers nor forge the results.
set -u
if [[ ! -d /grade ]]; then
    echo "ERROR: /grade not found!"
    exit 1
fi
RUN=/grade/run
OUT=/grade/results
mkdir "$RUN" || exit 1
mkdir -p "$OUT"
mv /grade/student/* "$RUN"
cp /grade/tests/grade.py "$RUN"
chmod -R 755 "$RUN"
chmod 1777 "$RUN"
chmod 755 "$OUT"
# The image of PrairieLearn's grader makes its user at build time; this one may start from a
# plain image, so root makes it here if it is missing.
id ag >/dev/null 2>&1 || useradd -M -s /bin/bash ag
# The results' file name is random and handed over in a file the grader deletes before it runs
# any student code (a name on the command line would be in the process's own /proc entry).
SECRET="$RUN/$(cat /proc/sys/kernel/random/uuid)"
FILENAMES=/grade/filenames
mkdir "$FILENAMES"
chmod 777 "$FILENAMES"
echo -n "$SECRET" > "$FILENAMES/output-fname.txt"
chmod 644 "$FILENAMES/output-fname.txt"
echo "[run] starting autograder as $(id -un) (HOME=$HOME, COURSE=${COURSE:-unset})"
su -c "python3 $RUN/grade.py" ag
rm -f "$OUT/results.json"
if [ -f "$SECRET" ]; then
    mv "$SECRET" "$OUT/results.json"
fi
if [ ! -s "$OUT/results.json" ]; then
    echo '{"succeeded": false, "score": 0.0, "message": "Your code could not be processed by the autograder."}' > "$OUT/results.json"
fi
echo "[run] autograder completed"
