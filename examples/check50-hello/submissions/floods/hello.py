# Greets with three million letters instead of the name, then exits: check50 keeps all of it as
# the check's actual output, and corral must not carry megabytes into the report (or, with more
# checks, past the 16 MiB it reads of check50's results).
import sys

name = input("Name: ")
sys.stdout.write("hello, " + "x" * (3 << 20) + "\n")
