//! Python's own compiler over an assignment's Python source at suite load (a check50 problem's
//! `__init__.py`), so that a file check50 could not import is a load error, before any
//! submission runs. The source is compiled, never executed (`compile()` only builds a code
//! object), by the host's interpreter, which is the one every check on the host root runs
//! (`/usr/bin/python3` is the sandbox's too). Staff files only: a submission's Python is parsed
//! only inside a sandbox (`safety_scan`).

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
/// the problem as JSON when it does not compile; prints nothing when it does.
const COMPILE: &str = r#"
import json, sys
src = sys.stdin.buffer.read()
try:
    compile(src, sys.argv[1], "exec", dont_inherit=True)
except SyntaxError as e:
    print(json.dumps({"kind": type(e).__name__, "message": str(e.msg), "line": e.lineno,
                      "column": e.offset, "text": e.text}))
except (ValueError, MemoryError, RecursionError) as e:
    print(json.dumps({"kind": type(e).__name__, "message": str(e)}))
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

/// Compiles `source` (named `name` in messages) with `python`: `Ok(None)` when it compiles,
/// `Ok(Some(problem))` when Python refuses it, `Err(why)` when the question could not be
/// answered (no such interpreter, a timeout): then nothing is known, and the file's errors are
/// found when it runs, as without this check.
pub fn check(python: &Path, source: &[u8], name: &str) -> Result<Option<SyntaxProblem>, String> {
    let mut child = Command::new(python)
        .args(["-I", "-B", "-c", COMPILE, name])
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
        assert_eq!(check(python, ok.as_bytes(), "ok.py"), Ok(None));
        assert!(!marker.exists());

        let p = check(
            python,
            b"import check50\n\ndef f(:\n    pass\n",
            "p/__init__.py",
        )
        .unwrap()
        .expect("a syntax error");
        assert_eq!((p.kind.as_str(), p.line), ("SyntaxError", Some(3)));
        let d = p.describe("p/__init__.py");
        assert!(d.starts_with("p/__init__.py:3:"), "{d}");
        assert!(d.contains("(\"def f(:\")"), "{d}");

        let p = check(python, b"def f():\nreturn 1\n", "i.py")
            .unwrap()
            .expect("an indentation error");
        assert_eq!((p.kind.as_str(), p.line), ("IndentationError", Some(2)));

        // Bytes that are not UTF-8 (and no coding declaration): Python's own words, not a crash.
        let p = check(python, b"x = '\xff'\n", "b.py")
            .unwrap()
            .expect("an error");
        assert_eq!(p.kind, "SyntaxError");

        // No interpreter: no answer, and the caller goes on.
        assert!(check(Path::new("/nonexistent/python3"), b"x = 1\n", "x.py").is_err());
    }
}
