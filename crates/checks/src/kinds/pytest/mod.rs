//! The `pytest` kind: the assignment's public and hidden test files (see
//! [`crate::suite::pytest`]) run with pytest inside the sandbox, the outcome read from pytest's
//! own JUnit XML and mapped to the rubric.
//!
//! **Where the grade comes from.** The submission runs in the same Python process as pytest (its
//! module is imported by the tests), so nothing *inside* that process is out of its reach. corral
//! removes every channel that does not need that, and checks the rest:
//!
//! - The test files (and any `support` files or `config`) are never in the working directory:
//!   they are bind-mounted read-only at [`TESTS_DIR`] from a host folder corral fills, so the
//!   submission can neither replace them before the run nor rewrite a test module that is imported
//!   after its own code ran. Their bytecode cache would live there too (read-only), and `-B`
//!   keeps pytest from writing one.
//! - pytest runs as `python3 -I -B` (no user site, no `PYTHON*` variables, no script folder on
//!   `sys.path`), with `-c CONFIG|/dev/null` and `--rootdir`/`--confcutdir` at the tests (the
//!   submission's `pytest.ini`, `pyproject.toml`, `setup.cfg`, `tox.ini` are never read),
//!   `--noconftest` unless the assignment ships a `conftest.py`, the submission's own
//!   `conftest.py` files deleted before pytest starts, `-p no:cacheprovider`, and plugin
//!   auto-loading and `PYTEST_*` variables off.
//! - A bootstrap ([`BOOTSTRAP`]) starts before any of the submission's code. It reads a one-time
//!   nonce from standard input (then closes it), snapshots pytest's and pluggy's functions and
//!   classes, the builtins, the registered plugins and hook implementations once the session has
//!   started, records each test's outcome from pytest's reports, and when the session ends compares
//!   the snapshot. Only then does it write a summary (exit code, outcomes, what changed), sealed
//!   with an HMAC keyed by the nonce (`unseal`: the nonce is never written, so a process of
//!   the submission that reads the file cannot sign a changed one), into a folder with an
//!   unpredictable name, next to the JUnit report.
//! - The host reads both files without following links ([`corral_sandbox::Sandbox::read_file`]),
//!   and accepts the run only if: the process ended by itself with pytest's exit code 0 or 1; the
//!   summary's MAC is the nonce's and it carries the same exit code; nothing was tampered with; the JUnit XML
//!   parses and lists exactly the tests the summary saw, with the same outcomes; the exit code
//!   agrees with the failures; and every test the assignment's files define is there (or its
//!   module failed to import, which fails its tests). Anything else is an invalid run: an error,
//!   never a point.
//! - A test that stops the process before the summary (a limit, a crash, stuck in C past the
//!   watchdog) fails on its own and the session runs again without it (`session.rs`); nothing a
//!   cut-short run reported is trusted.
//! - Hidden tests run in a second pytest session whose output students never see, so a public
//!   test's failure message cannot carry a hidden test's source.
//!
//! What remains: code in the pytest process can, in principle, find the bootstrap's state in
//! memory (the nonce, the snapshot) and forge a consistent summary, or defeat a test by returning
//! objects that compare equal to anything. That takes an attack written against corral itself; the
//! README ("pytest suites") says what staff can do about it.

mod evidence;
mod junit;
mod messages;
mod session;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;

use crate::kinds::runner::{CheckContext, CheckRunner};
use crate::report::{CheckResult, IntegrityFlag, Observation, ScriptEntry};
use crate::shared::host_folders::HostFolder;
use crate::shared::mounted::mounted_folder;
use crate::shared::stage::compare_file;
use crate::shared::text::MAX_VALUE;
use crate::suite::{PytestCheck, Suite, TestCase};

use evidence::Session;
use messages::{clip, headline, import_headline, name_file_size_limit};
use session::{session, session_files, SessionRun};
pub use session::{BOOTSTRAP, TESTS_DIR};

/// Runs a pytest check: the public session, then the hidden one; one result for the check
/// (`children`: one per rubric item).
fn run_check(cx: &CheckContext<'_>, pc: &PytestCheck) -> (CheckResult, Option<PathBuf>) {
    let check = cx.check;
    let started = Instant::now();
    let mut sessions: Vec<(bool, Session)> = Vec::new();
    // Staff only (the row's `diagnostics`): a hidden session's output may quote hidden tests.
    let mut diagnostics = Vec::new();
    let mut script = Vec::new();
    let mut out = None;
    for (hidden, files) in [(false, &pc.tests), (true, &pc.hidden)] {
        if files.is_empty() {
            continue;
        }
        // The working directory dependents get is the last session's.
        let SessionRun {
            verdict: s,
            output: o,
            stderr,
        } = session(cx, pc, files);
        // This row is visible to students: nothing the submission controlled is quoted from a
        // hidden session (it could carry the hidden tests' source out).
        let actual = match &s {
            Session::Valid {
                exit,
                tests,
                collect_errors,
            } => {
                let n = |o: &str| tests.values().filter(|(x, _)| x == o).count();
                format!(
                    "exit code {exit}: {} passed, {} failed, {} skipped, {} modules not imported",
                    n("passed"),
                    n("failed"),
                    n("skipped"),
                    collect_errors.len()
                )
            }
            Session::Stopped(r, _) => format!("stopped: {r}"),
            Session::Invalid { what, .. } if hidden => format!("invalid: {what}"),
            Session::Invalid { detail, .. } => format!("invalid: {detail}"),
            Session::Error(r) => format!("error: {r}"),
        };
        let which = if hidden { "hidden tests" } else { "tests" };
        if let Some(e) = stderr {
            diagnostics.push(format!(
                "pytest's standard error, {which}:\n{}",
                e.trim_end()
            ));
        }
        script.push(ScriptEntry {
            expected: Observation::new("pytest", format!("{which}: {}", files.join(" "))),
            actual: Observation::new("session", Value::from(actual)),
        });
        if o.is_some() {
            out = o;
        }
        sessions.push((hidden, s));
    }
    let session_of = |case: &TestCase| -> &Session {
        &sessions
            .iter()
            .find(|(h, _)| *h == case.hidden)
            .expect("a session per kind of test")
            .1
    };

    let mut children = Vec::new();
    let mut passed_tests = 0;
    for item in &pc.items {
        let mut entries = Vec::new();
        let mut failures = Vec::new();
        let mut ok = true;
        for &m in &item.members {
            let case = &pc.cases[m];
            let node = case.node();
            let (actual, why) = match session_of(case) {
                Session::Valid {
                    tests,
                    collect_errors,
                    ..
                } => {
                    let ran: Vec<(&String, &(String, String))> =
                        tests.iter().filter(|(id, _)| case.is(id)).collect();
                    if ran.is_empty() {
                        let err = collect_errors
                            .get(&case.file)
                            .or_else(|| collect_errors.get(""))
                            .map(String::as_str)
                            .unwrap_or("");
                        (
                            Observation::new("error", clip(err, MAX_VALUE)),
                            Some(format!(
                                "{} could not be imported: {}",
                                case.file,
                                import_headline(err)
                            )),
                        )
                    } else if let Some((id, (o, text))) =
                        ran.iter().find(|(_, (o, _))| o != "passed")
                    {
                        (
                            Observation::new(o, clip(text, MAX_VALUE)),
                            Some({
                                let verb = if o == "skipped" {
                                    "was skipped"
                                } else {
                                    "failed"
                                };
                                match headline(text) {
                                    h if h.is_empty() => format!("{id} {verb}"),
                                    h => format!(
                                        "{id} {verb}: {}",
                                        name_file_size_limit(h, cx.settings.limits.file_size)
                                    ),
                                }
                            }),
                        )
                    } else {
                        passed_tests += 1;
                        (Observation::new("passed", ran.len() as u64), None)
                    }
                }
                Session::Stopped(r, _) => (
                    Observation::new("stopped", r.clone()),
                    Some(format!("the test run was stopped: {r}")),
                ),
                Session::Invalid { detail, .. } => (
                    Observation::new("invalid", detail.clone()),
                    Some("not graded: the test run was invalid".to_string()),
                ),
                Session::Error(r) => (
                    Observation::new("error", r.clone()),
                    Some("could not be checked: corral failed to run the tests".to_string()),
                ),
            };
            entries.push(ScriptEntry {
                expected: Observation::new("passed", Value::from(node)),
                actual,
            });
            if let Some(w) = why {
                ok = false;
                failures.push(w);
            }
        }
        children.push(CheckResult {
            dependencies: vec![check.id.clone()],
            result: Some(ok),
            script: entries,
            points: if ok { item.points } else { 0.0 },
            max_points: item.points,
            hidden: item.hidden || check.hidden,
            message: (!ok).then(|| {
                let mut f = failures;
                f.dedup();
                f.join("\n")
            }),
            ..CheckResult::new(item.id.clone(), item.description.clone())
        });
    }

    let problems: Vec<String> = sessions
        .iter()
        .filter_map(|(hidden, s)| {
            let which = if *hidden { "hidden tests" } else { "tests" };
            match s {
                Session::Invalid { what, .. } if *hidden => Some(format!(
                    "invalid run of the {which}: {what} (the details are in the hidden tests' rows)"
                )),
                Session::Invalid { detail, .. } => {
                    Some(format!("invalid run of the {which}: {detail}"))
                }
                Session::Error(r) => Some(format!("{which}: {r}")),
                _ => None,
            }
        })
        .collect();
    let stopped: Vec<String> = sessions
        .iter()
        .filter_map(|(hidden, s)| match s {
            Session::Stopped(r, _) => Some(format!(
                "the {} were stopped: {r}",
                if *hidden { "hidden tests" } else { "tests" }
            )),
            _ => None,
        })
        .collect();
    let all = pc.cases.len();
    let ok = problems.is_empty()
        && stopped.is_empty()
        && children.iter().all(|c| c.result == Some(true));
    let mut message = format!("{passed_tests} of {all} tests passed");
    // The first public failure says why (hidden ones never reach this visible line), unless
    // it is the stop said on the line above.
    if let Some(first) = children
        .iter()
        .find(|c| !c.hidden && c.result == Some(false))
        .and_then(|c| c.message.as_deref())
        .and_then(|m| m.lines().next())
        .filter(|m| stopped.is_empty() || !m.starts_with("the test run was stopped"))
    {
        message.push_str(&format!("; {first}"));
    }
    if let Some(s) = stopped.first() {
        message = format!("{s}\n{message}");
    }
    let error = (!problems.is_empty()).then(|| problems.join("\n"));
    if let Some(e) = &error {
        message = e.clone();
    }
    // The limit that stopped a run of the tests: a queued submission's verdict names it.
    let stopped_by = sessions.iter().find_map(|(_, s)| match s {
        Session::Stopped(_, limit) => *limit,
        _ => None,
    });
    let parent = CheckResult {
        dependencies: check.depends.clone(),
        result: Some(ok),
        script,
        stopped_by: stopped_by.filter(|_| !ok),
        time_ms: started.elapsed().as_millis() as u64,
        hidden: check.hidden,
        message: (!ok).then_some(message),
        error,
        diagnostics: (!diagnostics.is_empty()).then(|| diagnostics.join("\n")),
        children,
        ..CheckResult::new(check.id.clone(), check.description.clone())
    };
    (parent, if ok { out } else { None })
}

impl CheckRunner for PytestCheck {
    fn run(&self, cx: &CheckContext<'_>) -> (CheckResult, Option<PathBuf>) {
        run_check(cx, self)
    }

    /// One folder per session (public, hidden).
    fn mounted_folders(&self, suite: &Suite) -> std::io::Result<Vec<Arc<HostFolder>>> {
        let mut out = Vec::new();
        for files in [&self.tests, &self.hidden] {
            if !files.is_empty() {
                out.push(mounted_folder(&suite.dir, &session_files(self, files))?);
            }
        }
        Ok(out)
    }

    /// The submission has one of the test, support or config files in another version.
    fn integrity_flags(&self, suite: &Suite, submission: &Path) -> Vec<IntegrityFlag> {
        let mut flags = Vec::new();
        let mut seen = BTreeSet::new();
        for f in self
            .tests
            .iter()
            .chain(&self.hidden)
            .chain(&self.support)
            .chain(&self.config)
        {
            if !seen.insert(f) {
                continue;
            }
            if let Some(reason) = compare_file(&suite.dir.join(f), submission, Path::new(f)) {
                flags.push(IntegrityFlag {
                    path: f.clone(),
                    reason: reason.into(),
                });
            }
        }
        flags
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_import_error_says_the_exception_and_where() {
        let syntax = "test_public.py:1: in <module>\n    import stats\n\
                      E     File \"/home/sandbox/stats.py\", line 1\n\
                      E       def f(:\n\
                      E             ^\n\
                      E   SyntaxError: invalid syntax\n";
        assert_eq!(
            import_headline(syntax),
            "SyntaxError: invalid syntax (stats.py, line 1)"
        );
        let missing = "E   ModuleNotFoundError: No module named 'nosuchmod'\n";
        assert_eq!(
            import_headline(missing),
            "ModuleNotFoundError: No module named 'nosuchmod'"
        );
        // No exception line: the first line that says something, as for a failure.
        assert_eq!(import_headline("E   something odd\n"), "something odd");
        // input() while tested: what the code did, not pytest's advice to pass `-s`.
        let input = "E   OSError: pytest: reading from stdin while output is captured!  Consider using `-s`.\n";
        for said in [import_headline(input), headline(input)] {
            assert!(
                said.starts_with("the code reads standard input (input())"),
                "{said}"
            );
            assert!(!said.contains("-s"), "{said}");
        }
    }
}
