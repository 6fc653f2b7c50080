#!/bin/sh
# writeout.sh -- ATTACK: write outside the working directory.
# Usage: /bin/sh writeout.sh MARKER -d DIR... -f FILE...
# For each DIR after -d: try to create the file DIR/corral-escape-MARKER and
# the directory DIR/corral-escape-dir-MARKER.  For each FILE after -f: try to
# open it for writing in append mode without writing anything (": >> FILE"),
# which proves write access without changing the file if it succeeds.
# One line per attempt: "ESCAPED: <what> <path>" or "BLOCKED: <what> <path>".
marker=$1; shift
mode=d
for p in "$@"; do
    case "$p" in
        -d) mode=d; continue ;;
        -f) mode=f; continue ;;
    esac
    if [ "$mode" = d ]; then
        if ( : > "$p/corral-escape-$marker" ) 2>/dev/null; then
            echo "ESCAPED: create $p"
        else
            echo "BLOCKED: create $p"
        fi
        if mkdir "$p/corral-escape-dir-$marker" 2>/dev/null; then
            echo "ESCAPED: mkdir $p"
        else
            echo "BLOCKED: mkdir $p"
        fi
    else
        if ( : >> "$p" ) 2>/dev/null; then
            echo "ESCAPED: open-write $p"
        else
            echo "BLOCKED: open-write $p"
        fi
    fi
done
