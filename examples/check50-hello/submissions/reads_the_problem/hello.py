# Greets correctly, but first tries to read the problem's checks (hidden ones included) where
# corral mounts them; what it could read would reach the student in a public check's output
# (with the hidden checks' expected text), so it prints that instead of the greeting. The folder
# is there (its names can be listed); its files must not be readable by the programs check50
# starts.
import os

name = input("Name: ")
leaked = []
for folder, _dirs, files in os.walk("/corral/check50"):
    for f in files:
        try:
            with open(os.path.join(folder, f)) as fh:
                leaked.append(fh.read())
        except PermissionError:
            pass
if not os.path.isdir("/corral/check50"):
    leaked.append("the problem folder is not where this submission looks for it")
# check50 looks for the greeting anywhere in the output (and the checks' source contains it):
# with anything read, say how much instead.
print(f"LEAKED {sum(map(len, leaked))} characters" if leaked else "hello, " + name)
