//! Python's own compiler over an assignment's Python source at suite load (a check50 problem's
//! `__init__.py`), so that a file check50 could not import is a load error, before any
//! submission runs. The source is compiled, never executed (`compile()` only builds a code
//! object), by the host's interpreter, which is the one every check on the host root runs
//! (`/usr/bin/python3` is the sandbox's too). Staff files only: a submission's Python is parsed
//! only inside a sandbox (`safety_scan`).
//!
//! Asked to (`imports` given to [`check`]), it also finds the modules the file imports when it is imported
//! — at its top level, and in a `try` or `with` there unless the `try` catches the failure —
//! and looks each up (`importlib.util.find_spec` of the top-level name, which finds a module
//! without running it): one the interpreter lacks would fail every check of every submission.
//! A module `check50.import_checks("../less")` makes (`less`) is the problem's own.
//! Imports under an `if` (a version's alternative) or inside functions are left to the run.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The host's Python: the one corral's helpers run with in a sandbox on the host root.
pub const PYTHON: &str = "/usr/bin/python3";

/// How long a compile may take before the question is left to the run (a huge file, a stuck
/// interpreter): loading a suite must not hang.
const COMPILE_TIMEOUT: Duration = Duration::from_secs(10);

/// Reads the source from standard input (bytes: Python honours a coding declaration) and prints
/// the problem as JSON when it does not compile; prints nothing when it does. With `--imports`
/// (and folders) after the file's name, then looks up the modules it imports (see the module's
/// documentation) with those folders first on the search path, and prints the first it cannot
/// find.
const COMPILE: &str = r#"
import json, sys
src = sys.stdin.buffer.read()
try:
    compile(src, sys.argv[1], "exec", dont_inherit=True)
except SyntaxError as e:
    print(json.dumps({"kind": type(e).__name__, "message": str(e.msg), "line": e.lineno,
                      "column": e.offset, "text": e.text}))
    sys.exit(0)
except (ValueError, MemoryError, RecursionError) as e:
    print(json.dumps({"kind": type(e).__name__, "message": str(e)}))
    sys.exit(0)
if sys.argv[2:3] == ["--imports"]:
    import ast, importlib.util
    sys.path[:0] = sys.argv[3:]
    CAUGHT = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}

    def catches(handler):
        t = handler.type
        names = [] if t is None else t.elts if isinstance(t, ast.Tuple) else [t]
        return t is None or any(getattr(n, "id", getattr(n, "attr", None)) in CAUGHT for n in names)

    def imports(body):
        for node in body:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield node, alias.name
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                yield node, node.module
            elif isinstance(node, ast.Try):
                if not any(catches(h) for h in node.handlers):
                    yield from imports(node.body)
                yield from imports(node.orelse)
                yield from imports(node.finalbody)
            elif isinstance(node, ast.With):
                yield from imports(node.body)

    tree = ast.parse(src)
    # check50.import_checks("../less") makes the module `less`, which the file then imports.
    made = set()
    for node in ast.walk(tree):
        f = getattr(node, "func", None)
        if getattr(f, "attr", getattr(f, "id", None)) == "import_checks" and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                made.add(arg.value.rstrip("/").split("/")[-1])
    lines = src.decode("utf-8", "replace").splitlines()
    for node, name in imports(tree.body):
        top = name.split(".")[0]
        if top in made:
            continue
        try:
            found = importlib.util.find_spec(top) is not None
        except Exception:
            found = True  # not known to be missing: the run says
        if not found:
            text = lines[node.lineno - 1] if node.lineno <= len(lines) else None
            print(json.dumps({"kind": "ModuleNotFoundError", "message": "No module named %r" % top,
                              "line": node.lineno, "column": node.col_offset + 1, "text": text}))
            break
"#;

/// Why a Python file does not compile: Python's own words.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct SyntaxProblem {
    /// `SyntaxError`, `IndentationError`, `TabError`, `ValueError` (a NUL byte, before 3.12)…
    pub kind: String,
    pub message: String,
    #[serde(default)]
    pub line: Option<u64>,
    #[serde(default)]
    pub column: Option<u64>,
    /// The offending line, as Python read it.
    #[serde(default)]
    pub text: Option<String>,
}

impl SyntaxProblem {
    /// `NAME:LINE:COLUMN: KIND: MESSAGE (the line)`, as compilers write it.
    pub fn describe(&self, name: &str) -> String {
        let mut at = name.to_string();
        if let Some(l) = self.line {
            at.push_str(&format!(":{l}"));
            if let Some(c) = self.column.filter(|c| *c > 0) {
                at.push_str(&format!(":{c}"));
            }
        }
        let mut out = format!("{at}: {}: {}", self.kind, self.message);
        if let Some(t) = self
            .text
            .as_deref()
            .map(str::trim)
            .filter(|t| !t.is_empty())
        {
            let t = crate::report::cut_text(t, 200, "...");
            out.push_str(&format!(" ({t:?})"));
        }
        out
    }
}

/// Compiles `source` (named `name` in messages) with `python`, and with `imports` (folders put
/// first on Python's search path) looks up the modules it imports when imported (a module
/// `python` cannot find is a `ModuleNotFoundError` problem): `Ok(None)` when it compiles,
/// `Ok(Some(problem))` when Python refuses it, `Err(why)` when the question could not be
/// answered (no such interpreter, a timeout): then nothing is known, and the file's errors are
/// found when it runs, as without this check.
pub fn check(
    python: &Path,
    source: &[u8],
    name: &str,
    imports: Option<&[&Path]>,
) -> Result<Option<SyntaxProblem>, String> {
    let mut child = Command::new(python)
        .args(["-I", "-B", "-c", COMPILE, name])
        .args(imports.map(|_| "--imports"))
        .args(imports.unwrap_or_default())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .env_clear()
        .spawn()
        .map_err(|e| format!("{}: {e}", python.display()))?;
    // Written from a thread: a source larger than the pipe would block until Python reads it.
    let mut stdin = child.stdin.take().expect("piped");
    let source = source.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&source);
    });
    let mut stdout = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        let _ = stdout.by_ref().take(1 << 20).read_to_end(&mut out);
        out
    });
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if started.elapsed() < COMPILE_TIMEOUT => {
                std::thread::sleep(Duration::from_millis(5))
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{} took longer than {}s",
                    python.display(),
                    COMPILE_TIMEOUT.as_secs()
                ));
            }
            Err(e) => return Err(format!("{}: {e}", python.display())),
        }
    };
    let _ = writer.join();
    let out = reader.join().unwrap_or_default();
    if !status.success() {
        return Err(format!("{} ended with {status}", python.display()));
    }
    let out = String::from_utf8_lossy(&out);
    let out = out.trim();
    if out.is_empty() {
        return Ok(None);
    }
    serde_json::from_str(out)
        .map(Some)
        .map_err(|e| format!("{}: unexpected output: {e}", python.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syntax_errors_say_where_and_nothing_runs() {
        let python = Path::new(PYTHON);
        let marker = std::env::temp_dir().join(format!("corral-compiled-{}", std::process::id()));
        // Compiling is not running: the file's code would leave a marker.
        let ok = format!(
            "open({:?}, 'w').write('ran')\n",
            marker.display().to_string()
        );
        assert_eq!(check(python, ok.as_bytes(), "ok.py", None), Ok(None));
        assert!(!marker.exists());

        let p = check(
            python,
            b"import check50\n\ndef f(:\n    pass\n",
            "p/__init__.py",
            None,
        )
        .unwrap()
        .expect("a syntax error");
        assert_eq!((p.kind.as_str(), p.line), ("SyntaxError", Some(3)));
        let d = p.describe("p/__init__.py");
        assert!(d.starts_with("p/__init__.py:3:"), "{d}");
        assert!(d.contains("(\"def f(:\")"), "{d}");

        let p = check(python, b"def f():\nreturn 1\n", "i.py", None)
            .unwrap()
            .expect("an indentation error");
        assert_eq!((p.kind.as_str(), p.line), ("IndentationError", Some(2)));

        // Bytes that are not UTF-8 (and no coding declaration): Python's own words, not a crash.
        let p = check(python, b"x = '\xff'\n", "b.py", None)
            .unwrap()
            .expect("an error");
        assert_eq!(p.kind, "SyntaxError");

        // A module the interpreter lacks, imported when the file is: found, not run. One a
        // `try` catches, one under an `if`, one inside a function, and one of the search
        // folders are not problems.
        let folder = tempfile::tempdir().unwrap();
        std::fs::write(folder.path().join("helpers.py"), "x = 1\n").unwrap();
        let src = "import os, json\n\
                   import helpers\n\
                   try:\n    import no_such_module_a\nexcept ImportError:\n    pass\n\
                   if False:\n    import no_such_module_b\n\
                   def f():\n    import no_such_module_c\n\
                   with open(__file__):\n    from no_such_module_d.sub import x\n";
        let p = check(
            python,
            src.as_bytes(),
            "p/__init__.py",
            Some(&[folder.path()]),
        )
        .unwrap()
        .expect("a missing module");
        assert_eq!(
            p.describe("p/__init__.py"),
            "p/__init__.py:12:5: ModuleNotFoundError: No module named 'no_such_module_d' \
             (\"from no_such_module_d.sub import x\")"
        );
        let src = src.replace("no_such_module_d.sub", "json");
        assert_eq!(
            check(
                python,
                src.as_bytes(),
                "p/__init__.py",
                Some(&[folder.path()])
            ),
            Ok(None)
        );
        assert!(check(python, b"import helpers\n", "x.py", Some(&[]))
            .unwrap()
            .is_some());
        // A module check50.import_checks makes is the problem's own.
        let more = b"__import__('check50').import_checks('../less/')\nfrom less import *\n";
        assert_eq!(check(python, more, "more/__init__.py", Some(&[])), Ok(None));
        // `check` looks no module up.
        assert_eq!(
            check(python, b"import no_such_module_e\n", "x.py", None),
            Ok(None)
        );

        // No interpreter: no answer, and the caller goes on.
        assert!(check(Path::new("/nonexistent/python3"), b"x = 1\n", "x.py", None).is_err());
    }
}
