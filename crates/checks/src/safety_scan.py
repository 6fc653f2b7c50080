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


def scan(path, rel):
    global scanned
    try:
        with open(path, "rb") as f:
            src = f.read(4 << 20)
        tree = ast.parse(src, filename=rel)
    except SyntaxError as e:
        errors.append({"path": rel, "message": "syntax error at line %s: %s" % (e.lineno, e.msg)})
        return
    except (RecursionError, MemoryError, ValueError) as e:
        findings.append({"path": rel, "line": 0, "column": 0, "kind": "unanalysable", "name": type(e).__name__})
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
        if not name.endswith(".py"):
            continue
        path = os.path.join(root, name)
        if os.path.islink(path) or not os.path.isfile(path):
            continue
        scan(path, os.path.relpath(path, "."))

seen = set()
unique = []
for f in sorted(findings, key=lambda f: (f["path"], f["line"], f["column"])):
    k = (f["path"], f["line"], f["column"], f["kind"], f["name"])
    if k not in seen:
        seen.add(k)
        unique.append(f)
sys.stdout.write(json.dumps({"scanned": scanned, "findings": unique[:500], "errors": errors[:100]}))
