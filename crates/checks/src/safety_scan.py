# corral's static safety scan: runs inside a sandbox as
#   /usr/bin/python3 -I -B -c <this file> RULES_JSON
# over the submission's files (the working directory). It only parses (ast.parse never runs the
# code) and prints one JSON object on standard output.
import ast
import json
import os
import sys

rules = json.loads(sys.argv[1])
deny_imports = set(rules["deny_imports"])
deny_calls = set(rules["deny_calls"])
deny_attributes = set(rules["deny_attributes"])
findings = []
errors = []
scanned = 0


def add(path, node, kind, name):
    findings.append({"path": path, "line": getattr(node, "lineno", 0), "column": getattr(node, "col_offset", 0) + 1, "kind": kind, "name": name})


MAX_SOURCE = 4 << 20


def unanalysable(rel, why):
    findings.append({"path": rel, "line": 0, "column": 0, "kind": "unanalysable", "name": why})


def scan(path, rel):
    global scanned
    try:
        with open(path, "rb") as f:
            src = f.read(MAX_SOURCE + 1)
        if len(src) > MAX_SOURCE:
            # Reading only the start would leave the rest unread (an import after 4 MiB of
            # comment ran unseen): a file too large to read whole is a finding.
            unanalysable(rel, "larger than 4 MiB")
            return
        tree = ast.parse(src, filename=rel)
    except SyntaxError as e:
        errors.append({"path": rel, "message": "syntax error at line %s: %s" % (e.lineno, e.msg)})
        return
    except (RecursionError, MemoryError, ValueError) as e:
        unanalysable(rel, type(e).__name__)
        return
    scanned += 1
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in deny_imports:
                    add(rel, node, "import", a.name)
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level == 0 and mod.split(".")[0] in deny_imports:
                add(rel, node, "import", mod)
        elif isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else (f.attr if isinstance(f, ast.Attribute) else None)
            if name in deny_calls:
                add(rel, node, "call", name)
        elif isinstance(node, ast.Attribute):
            if node.attr in deny_attributes:
                add(rel, node, "attribute", node.attr)
        elif isinstance(node, ast.Name):
            if node.id in deny_attributes:
                add(rel, node, "name", node.id)


for root, dirs, files in os.walk(".", followlinks=False):
    dirs[:] = sorted(d for d in dirs if not d.startswith(".corral-"))
    for name in sorted(files):
        path = os.path.join(root, name)
        rel = os.path.relpath(path, ".")
        # Code Python imports with no source to read: a sourceless `.pyc` (beside where its
        # `.py` would be; `__pycache__` copies are used only with their source) and extension
        # modules.
        compiled = (name.endswith(".pyc") and os.path.basename(root) != "__pycache__") or name.endswith(".so")
        if compiled:
            unanalysable(rel, "compiled code Python imports without its source")
            continue
        if not name.endswith(".py"):
            continue
        if os.path.islink(path):
            # Python imports what it points to (a system module under another name, say).
            unanalysable(rel, "a symbolic link")
            continue
        if not os.path.isfile(path):
            continue
        scan(path, rel)

seen = set()
unique = []
for f in sorted(findings, key=lambda f: (f["path"], f["line"], f["column"])):
    k = (f["path"], f["line"], f["column"], f["kind"], f["name"])
    if k not in seen:
        seen.add(k)
        unique.append(f)
sys.stdout.write(json.dumps({"scanned": scanned, "findings": unique[:500], "errors": errors[:100]}))
