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
//!   with an HMAC keyed by the nonce ([`unseal`]: the nonce is never written, so a process of
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
//!   watchdog) fails on its own and the session runs again without it ([`session`]); nothing a
//!   cut-short run reported is trusted.
//! - Hidden tests run in a second pytest session whose output students never see, so a public
//!   test's failure message cannot carry a hidden test's source.
//!
//! What remains: code in the pytest process can, in principle, find the bootstrap's state in
//! memory (the nonce, the snapshot) and forge a consistent summary, or defeat a test by returning
//! objects that compare equal to anything. That takes an attack written against corral itself; the
//! README ("pytest suites") says what staff can do about it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use corral_sandbox::{Mount, NoSink, Outcome, Size, Status};
use serde::Deserialize;
use serde_json::Value;

use uuid::Uuid;

use crate::kinds::runner::{CheckContext, CheckRunner};
use crate::report::{CheckResult, IntegrityFlag, Observation, ScriptEntry};
use crate::shared::host_folders::HostFolder;
use crate::shared::mounted::mounted_folder;
use crate::shared::python::{python_helper, unseal, Unsealed};
use crate::shared::stage::compare_file;
use crate::shared::text::{output_tail, signal_name, MAX_VALUE};
use crate::suite::{PytestCheck, Suite, TestCase};

/// Where the test files are mounted (read-only) inside the sandbox.
pub const TESTS_DIR: &str = "/corral/tests";
/// The bootstrap that runs pytest inside the sandbox.
pub const BOOTSTRAP: &str = concat!(
    include_str!("../shared/read_nonce.py"),
    include_str!("pytest_boot.py")
);
/// Largest JUnit report read.
const MAX_REPORT: u64 = 16 << 20;
/// Largest summary read.
const MAX_SUMMARY: u64 = 4 << 20;

// ------------------------------------------------------------------------------------ running

/// How one pytest session went.
#[derive(Debug, Clone)]
pub(crate) enum Session {
    /// A valid run: each node id's outcome and failure text; collection errors by node id.
    Valid {
        tests: BTreeMap<String, (String, String)>,
        collect_errors: BTreeMap<String, String>,
        exit: i32,
    },
    /// The run was stopped (limit, timeout, signal): the submission's doing, its tests fail;
    /// with the limit that stopped it (a queued submission's verdict names it).
    Stopped(String, Option<Status>),
    /// The run cannot be trusted (no or bad report, tampering, …): an error, never a point.
    /// `what` is corral's own wording (from what the host knows, never from the run), safe to
    /// show anyone; `detail` may quote what the submission controlled (names of its plugins, of
    /// tests in a forged report) and is shown to staff only when the session ran hidden tests.
    Invalid { what: String, detail: String },
    /// corral itself failed.
    Error(String),
}

#[derive(Debug, Deserialize)]
struct Summary {
    exit: i64,
    finished: bool,
    outcomes: BTreeMap<String, String>,
    collect_errors: BTreeMap<String, String>,
    tampered: Vec<String>,
}

/// `test_x.py::TestC::test_m[p]` → (`test_x.TestC`, `test_m[p]`): pytest's `mangle_test_address`.
fn junit_name(nodeid: &str) -> (String, String) {
    let (path, params) = match nodeid.find('[') {
        Some(i) => (&nodeid[..i], &nodeid[i..]),
        None => (nodeid, ""),
    };
    let mut names: Vec<String> = path.split("::").map(str::to_string).collect();
    let first = names[0].replace('/', ".");
    names[0] = first.strip_suffix(".py").unwrap_or(&first).to_string();
    let last = names.len() - 1;
    names[last].push_str(params);
    let name = names.pop().expect("one name at least");
    (names.join("."), name)
}

/// Reads the JUnit XML: (classname, name) → (outcome, failure text).
pub(crate) fn parse_junit(xml: &str) -> Result<Vec<(String, String, String, String)>, String> {
    let doc = roxmltree::Document::parse(xml).map_err(|e| format!("not valid XML: {e}"))?;
    let root = doc.root_element();
    let suites: Vec<roxmltree::Node> = match root.tag_name().name() {
        "testsuites" => root
            .children()
            .filter(|n| n.is_element())
            .map(|n| {
                if n.tag_name().name() == "testsuite" {
                    Ok(n)
                } else {
                    Err(format!(
                        "unexpected <{}> in <testsuites>",
                        n.tag_name().name()
                    ))
                }
            })
            .collect::<Result<_, _>>()?,
        "testsuite" => vec![root],
        other => return Err(format!("root element <{other}>, not <testsuites>")),
    };
    if suites.len() != 1 {
        return Err(format!("{} <testsuite> elements, not 1", suites.len()));
    }
    let suite = suites[0];
    let mut out = Vec::new();
    let (mut failures, mut errors, mut skipped) = (0u64, 0u64, 0u64);
    for tc in suite.children().filter(|n| n.is_element()) {
        match tc.tag_name().name() {
            "testcase" => {}
            "properties" | "system-out" | "system-err" => continue,
            other => return Err(format!("unexpected <{other}> in <testsuite>")),
        }
        let classname = tc
            .attribute("classname")
            .ok_or("a <testcase> without classname")?;
        let name = tc.attribute("name").ok_or("a <testcase> without name")?;
        let mut outcome = "passed";
        let mut text = String::new();
        for child in tc.children().filter(|n| n.is_element()) {
            let kind = child.tag_name().name();
            let this = match kind {
                "failure" => {
                    failures += 1;
                    "failed"
                }
                "error" => {
                    errors += 1;
                    "failed"
                }
                "skipped" => {
                    skipped += 1;
                    "skipped"
                }
                "system-out" | "system-err" | "properties" => continue,
                other => return Err(format!("unexpected <{other}> in <testcase>")),
            };
            if this == "failed" || outcome == "passed" {
                outcome = this;
            }
            let msg = child.attribute("message").unwrap_or("");
            let body = child.text().unwrap_or("");
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(msg);
            if !body.trim().is_empty() {
                text.push('\n');
                text.push_str(body.trim_end());
            }
        }
        out.push((
            classname.to_string(),
            name.to_string(),
            outcome.to_string(),
            text,
        ));
    }
    let count = |a: &str| -> Result<u64, String> {
        suite
            .attribute(a)
            .unwrap_or("0")
            .parse::<u64>()
            .map_err(|_| format!("testsuite {a}= is not a count"))
    };
    if count("tests")? != out.len() as u64
        || count("failures")? != failures
        || count("errors")? != errors
        || count("skipped")? != skipped
    {
        return Err("the <testsuite> counts do not match its test cases".into());
    }
    Ok(out)
}

fn invalid(what: impl Into<String>, detail: impl std::fmt::Display) -> Session {
    let (what, detail) = (what.into(), detail.to_string());
    Session::Invalid {
        detail: if detail.is_empty() {
            what.clone()
        } else {
            format!("{what}: {detail}")
        },
        what,
    }
}

/// Checks one session's files against what the host knows, and reads the outcomes. `skipped`:
/// the node ids this run left out because they stopped an earlier run of the session (they
/// count as run; with every remaining test left out, pytest's "no tests" exit code is expected).
pub(crate) fn judge(
    outcome: &Outcome,
    nonce: &str,
    summary: Option<Vec<u8>>,
    junit: Option<Vec<u8>>,
    expected: &[&TestCase],
    skipped: &[String],
) -> Session {
    match outcome.status {
        Status::SandboxError => return Session::Error(crate::shared::text::sandbox_error(outcome)),
        Status::Ok | Status::NonzeroExit => {}
        Status::Signaled => {
            return Session::Stopped(
                format!(
                    "pytest was killed by {}",
                    signal_name(outcome.signal.unwrap_or(0))
                ),
                None,
            )
        }
        _ => {
            let why = crate::shared::text::stop_reason(outcome);
            return Session::Stopped(why, Some(outcome.status));
        }
    }
    let code = outcome.exit_code.unwrap_or(-1);
    let Some(summary) = summary else {
        return invalid(
            "pytest ended without finishing its session: no report was written",
            format!("exit code {code}"),
        );
    };
    let summary = match unseal(&summary, nonce) {
        Ok(s) => s,
        Err(Unsealed::NotOurs) => {
            return invalid(
                "the session summary was not written by corral's pytest runner",
                "",
            )
        }
        Err(Unsealed::Malformed(e)) => return invalid("the session summary is malformed", e),
    };
    let summary: Summary = match serde_json::from_slice(&summary) {
        Ok(s) => s,
        Err(e) => return invalid("the session summary is malformed", e),
    };
    if summary.exit != i64::from(code) {
        return invalid(
            "pytest's exit code differs from the process's",
            format!("{} and {code}", summary.exit),
        );
    }
    if !summary.tampered.is_empty() {
        return invalid(
            "pytest was modified during the run",
            summary.tampered.join("; "),
        );
    }
    if !summary.finished {
        return invalid("the pytest session did not finish", "");
    }
    match code {
        0 | 1 => {}
        5 if !skipped.is_empty() && summary.outcomes.is_empty() => {}
        2 => return invalid("the pytest session was interrupted (exit code 2)", ""),
        3 => return invalid("pytest failed with an internal error (exit code 3)", ""),
        4 => return Session::Error("pytest rejected its command line (exit code 4)".into()),
        5 => return invalid("pytest collected no tests (exit code 5)", ""),
        c => return invalid("pytest exited with an unexpected code", c),
    }
    let Some(junit) = junit else {
        return invalid("pytest's JUnit report is missing or not a regular file", "");
    };
    let Ok(xml) = String::from_utf8(junit) else {
        return invalid("pytest's JUnit report is not UTF-8", "");
    };
    let cases = match parse_junit(&xml) {
        Ok(c) => c,
        Err(e) => return invalid("pytest's JUnit report is malformed", e),
    };
    // The report must list exactly what pytest's own reports said, no more, no less.
    let mut want: BTreeMap<(String, String), (String, &str)> = BTreeMap::new();
    for (id, o) in &summary.outcomes {
        want.insert(junit_name(id), (id.clone(), o.as_str()));
    }
    for id in summary.collect_errors.keys() {
        want.insert(junit_name(id), (id.clone(), "failed"));
    }
    if want.len() != summary.outcomes.len() + summary.collect_errors.len() {
        return invalid("the session summary names a test twice", "");
    }
    let mut tests = BTreeMap::new();
    let mut collect_errors = BTreeMap::new();
    let mut seen = BTreeSet::new();
    for (classname, name, outcome, text) in cases {
        let key = (classname, name);
        let Some((id, o)) = want.get(&key) else {
            return invalid(
                "the JUnit report lists a test pytest did not run",
                format!("{}::{}", key.0, key.1),
            );
        };
        if !seen.insert(key.clone()) {
            return invalid("the JUnit report lists a test twice", id);
        }
        if *o != outcome {
            return invalid(
                "the JUnit report and pytest's own report disagree",
                format!("{id}: {outcome} in the JUnit report, {o} in pytest's"),
            );
        }
        if let Some(e) = summary.collect_errors.get(id) {
            collect_errors.insert(id.clone(), if text.is_empty() { e.clone() } else { text });
        } else {
            tests.insert(id.clone(), (outcome, text));
        }
    }
    if seen.len() != want.len() {
        return invalid(
            "the JUnit report lists fewer results than pytest reported",
            format!("{} of {}", seen.len(), want.len()),
        );
    }
    let failed = tests.values().any(|(o, _)| o == "failed") || !collect_errors.is_empty();
    // Exit code 5 (only when every remaining test was left out, above) means nothing failed.
    let consistent = if code == 5 {
        !failed
    } else {
        failed == (code == 1)
    };
    if !consistent {
        return invalid(
            "pytest's exit code does not agree with its report",
            format!(
                "exit code {code}, {}",
                if failed { "failures" } else { "no failures" }
            ),
        );
    }
    // Every test of the assignment's files ran, or its module failed to import.
    let mut missing = Vec::new();
    for case in expected {
        let ran = tests.keys().chain(skipped).any(|id| case.is(id));
        let broken = collect_errors
            .keys()
            .any(|id| id == &case.file || id.is_empty());
        if !ran && !broken {
            missing.push(case.node());
        }
    }
    if !missing.is_empty() {
        return invalid(
            "the report lists fewer tests than the assignment has",
            format!("missing {}", missing.join(", ")),
        );
    }
    // And nothing ran that the scan of the files did not find: a test a class inherits (from a
    // mixin or a parent `TestCase`) or a test function a test file imports is collected by
    // pytest but has no row, so its failure would change no score — a wrong submission would get
    // full marks. Loud instead: the suite needs its tests defined in its files.
    let unscanned: Vec<&str> = tests
        .keys()
        .filter(|id| !expected.iter().any(|case| case.is(id)))
        .map(String::as_str)
        .collect();
    if !unscanned.is_empty() {
        return invalid(
            "pytest ran tests the suite's files do not define (inherited from another class, or \
             imported into a test file), which no row would score",
            unscanned.join(", "),
        );
    }
    Session::Valid {
        tests,
        collect_errors,
        exit: code,
    }
}

/// The files one session mounts at [`TESTS_DIR`]: its test files, the support files, the config.
fn session_files<'a>(pc: &'a PytestCheck, files: &'a [String]) -> Vec<&'a String> {
    let mut mounted: Vec<&String> = files.iter().collect();
    mounted.extend(pc.support.iter());
    mounted.extend(pc.config.iter());
    mounted
}

/// How many tests may each stop one session (a limit, a crash, stuck past the watchdog) and be
/// failed on their own while the others run again; one more stops the session for good.
const MAX_RESTARTS: usize = 3;

/// One run of a session's tests: the verdict, and when the run ended before pytest's summary,
/// what the bootstrap's `current` file named as the test under way.
struct Attempt {
    verdict: Session,
    /// The run ended before its summary (a limit, a signal, an exit): why, in corral's words.
    cut_short: Option<String>,
    /// The test under way then (as the bootstrap wrote it; checked against the suite's tests).
    current: Option<String>,
    /// faulthandler's watchdog wrote its traceback: the test outran its timeout in code the
    /// alarm could not interrupt.
    watchdog: bool,
    /// The sandbox's pids limit, when the run's processes filled it (a fork bomb).
    pids_hit: Option<u64>,
    output: Option<PathBuf>,
    /// The end of pytest's standard error when the run was not valid, for staff.
    stderr: Option<String>,
}

/// How one session went, with what staff see of it.
struct SessionRun {
    verdict: Session,
    output: Option<PathBuf>,
    /// The end of pytest's standard error in the session's last run, when it was not valid.
    stderr: Option<String>,
}

/// One pytest session (the public or the hidden tests): run, and when a test stops the run
/// before it finishes, that test fails and the session runs again without it (like
/// pytest-xdist replacing a crashed worker), at most [`MAX_RESTARTS`] times. Each run gets the
/// check's full limits: a test stuck until the CPU limit must not take the others' time.
fn session(cx: &CheckContext<'_>, pc: &PytestCheck, files: &[String]) -> SessionRun {
    let expected: Vec<&TestCase> = pc
        .cases
        .iter()
        .filter(|c| files.contains(&c.file))
        .collect();
    let mut stopped_by: Vec<(String, String)> = Vec::new();
    loop {
        let skipped: Vec<String> = stopped_by.iter().map(|(id, _)| id.clone()).collect();
        let a = attempt(cx, pc, files, &expected, &skipped);
        let culprit = match (&a.cut_short, &a.current) {
            (Some(_), Some(id))
                if stopped_by.len() < MAX_RESTARTS
                    && id.len() <= 1000
                    && !id.chars().any(char::is_control)
                    && expected.iter().any(|c| c.is(id))
                    && !skipped.contains(id) =>
            {
                Some(id.clone())
            }
            _ => None,
        };
        if let (Some(id), Some(why)) = (culprit, &a.cut_short) {
            let text = if a.watchdog {
                let t = pc.test_timeout.map(|d| d.as_secs_f64()).unwrap_or(0.0);
                let stuck = match a.pids_hit {
                    Some(n) => format!("its processes filled the pids limit of {n}"),
                    None => "stuck where the timeout cannot interrupt it, e.g. in C code".into(),
                };
                format!(
                    "the test did not stop within 1s after its {t}s timeout ({stuck}); pytest \
                     was ended and the other tests ran again without this one"
                )
            } else {
                format!("{why} while this test ran; the other tests ran again without this one")
            };
            tracing::debug!(test = %id, restarts = stopped_by.len() + 1, "a test stopped its pytest session; running the others again");
            stopped_by.push((id, text));
            continue;
        }
        let verdict = match a.verdict {
            Session::Valid {
                mut tests,
                collect_errors,
                exit,
            } => {
                let exit = if stopped_by.is_empty() { exit } else { 1 };
                for (id, text) in stopped_by {
                    tests.insert(id, ("failed".to_string(), text));
                }
                Session::Valid {
                    tests,
                    collect_errors,
                    exit,
                }
            }
            // The stops before this one are the reason it ran again: say so.
            Session::Stopped(r, limit) if !stopped_by.is_empty() => Session::Stopped(
                format!(
                    "{r} (in its run without the {} tests that had each stopped it before)",
                    stopped_by.len()
                ),
                limit,
            ),
            Session::Invalid { what, detail } if !stopped_by.is_empty() => Session::Invalid {
                what,
                detail: format!(
                    "{detail} (in its run without the {} tests that had each stopped it before)",
                    stopped_by.len()
                ),
            },
            other => other,
        };
        return SessionRun {
            verdict,
            output: a.output,
            stderr: a.stderr,
        };
    }
}

/// One run of a session's tests in a leased sandbox, leaving out `skipped`.
fn attempt(
    cx: &CheckContext<'_>,
    pc: &PytestCheck,
    files: &[String],
    expected: &[&TestCase],
    skipped: &[String],
) -> Attempt {
    let failed = |verdict: Session| Attempt {
        verdict,
        cut_short: None,
        current: None,
        watchdog: false,
        pids_hit: None,
        output: None,
        stderr: None,
    };
    let folder = match mounted_folder(&cx.suite.dir, &session_files(pc, files)) {
        Ok(f) => f,
        Err(e) => return failed(Session::Error(format!("preparing the test files: {e}"))),
    };
    let mut lease = match cx.lease(Some(Mount {
        src: folder.path().to_path_buf(),
        dst: PathBuf::from(TESTS_DIR),
        writable: false,
    })) {
        Ok(l) => l,
        Err(e) => return failed(Session::Error(e)),
    };
    let sb = lease.sandbox();
    let nonce = Uuid::new_v4().simple().to_string();
    let out_dir = format!(".corral-{}", Uuid::new_v4().simple());
    let config = match &pc.config {
        Some(c) => format!("{TESTS_DIR}/{c}"),
        None => "/dev/null".to_string(),
    };
    let mut args: Vec<String> = vec![
        "-c".into(),
        config,
        format!("--rootdir={TESTS_DIR}"),
        format!("--confcutdir={TESTS_DIR}"),
        "-p".into(),
        "no:cacheprovider".into(),
        "-q".into(),
        "--tb=short".into(),
        "--show-capture=no".into(),
        "--continue-on-collection-errors".into(),
        "-o".into(),
        "junit_family=xunit2".into(),
        "-o".into(),
        "junit_logging=no".into(),
        "-o".into(),
        "console_output_style=classic".into(),
        // pytest's own faulthandler timer would replace the bootstrap's watchdog.
        "-o".into(),
        "faulthandler_timeout=0".into(),
    ];
    if !pc.has_conftest() {
        args.push("--noconftest".into());
    }
    args.extend(files.iter().map(|f| format!("{TESTS_DIR}/{f}")));
    let cfg = serde_json::json!({
        "out_dir": out_dir,
        "workdir": corral_sandbox::WORKDIR,
        "args": args,
        "test_timeout": pc.test_timeout.map(|d| d.as_secs_f64()),
        "skip": skipped,
    });
    let mut spec = python_helper(BOOTSTRAP, &cfg, &nonce, cx.settings);
    spec.seccomp = cx.settings.harness_seccomp();
    let outcome = sb.run(&spec, &mut NoSink);
    let read = |name: &str, max: u64| -> Result<Option<Vec<u8>>, String> {
        sb.read_file(&Path::new(&out_dir).join(name), max)
            .map_err(|e| format!("reading pytest's {name}: {e}"))
    };
    let (summary, junit) = match (
        read("summary.json", MAX_SUMMARY),
        read("junit.xml", MAX_REPORT),
    ) {
        (Ok(s), Ok(j)) => (s, j),
        (Err(e), _) | (_, Err(e)) => return failed(Session::Error(e)),
    };
    let cut_short = cut_short(&outcome, summary.is_some());
    let pids_hit = outcome.usage.pids_limit_hit.then_some(outcome.limits.pids);
    let (current, watchdog) = if cut_short.is_some() {
        let current = read("current", 4096)
            .ok()
            .flatten()
            .and_then(|b| String::from_utf8(b).ok())
            .filter(|s| !s.is_empty());
        let watchdog = outcome.exit_code == Some(1)
            && read("watchdog", 64 << 10)
                .ok()
                .flatten()
                .is_some_and(|b| !b.is_empty());
        (current, watchdog)
    } else {
        (None, false)
    };
    let verdict = judge(&outcome, &nonce, summary, junit, expected, skipped);
    let stderr = match &verdict {
        Session::Valid { .. } => None,
        _ => Some(&outcome.stderr.bytes)
            .filter(|b| !b.is_empty())
            .map(|b| output_tail(b, STDERR_TAIL)),
    };
    // No summary and no test under way: pytest never got to the tests. The usual cause is a
    // file of the submission named like a module pytest imports (`xml.py`, `pytest.py`), which
    // Python finds first in the working directory; say which, in corral's words.
    let verdict = match verdict {
        Session::Invalid { what, detail } if cut_short.is_some() && current.is_none() => {
            match shadowing(cx, sb) {
                Some(said) => Session::Invalid {
                    detail: format!("{said} ({detail})"),
                    what: said,
                },
                None => Session::Invalid { what, detail },
            }
        }
        v => v,
    };
    let mut out = None;
    if let (Session::Valid { .. }, Some(dir)) = (&verdict, cx.output) {
        match sb.copy_out(dir, cx.settings.limits.disk.bytes()) {
            Ok(_) => out = Some(dir.to_path_buf()),
            Err(e) => {
                return failed(Session::Error(format!(
                    "copying the working directory out: {e}"
                )))
            }
        }
    }
    drop(lease);
    drop(folder);
    Attempt {
        verdict,
        cut_short,
        current,
        watchdog,
        pids_hit,
        output: out,
        stderr,
    }
}

/// How much of the end of pytest's standard error staff see when a session is not valid.
const STDERR_TAIL: usize = 6 * 1024;

/// Run after pytest could not start, in the same sandbox (its programs have all ended): which
/// top-level modules pytest and its plugins import, once the bootstrap's own imports (done
/// before the working directory is on `sys.path`, so never looked up there) are left out. It
/// runs none of the submission's code: `-I` keeps the working directory off `sys.path`.
const IMPORTED_BY_PYTEST: &str = r#"
import importlib, json, sys
import ctypes, hashlib, hmac, os, signal
early = {m.partition(".")[0] for m in sys.modules}
try:
    import pytest
    from _pytest.config import default_plugins, essential_plugins
    for p in tuple(essential_plugins) + tuple(default_plugins):
        try:
            importlib.import_module("_pytest." + p)
        except Exception:
            pass
except Exception:
    pass
names = set(json.loads(sys.argv[1])["names"])
print(json.dumps(sorted(names & ({m.partition(".")[0] for m in sys.modules} - early))))
"#;

/// The modules the working directory would provide, from the host's own copy of it (the
/// stage, as it was before anything ran): `NAME.py`, `NAME.pyc` and packages `NAME/`, by
/// module name.
fn stage_modules(stage: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(stage) else {
        return out;
    };
    for e in entries.filter_map(Result::ok).take(10_000) {
        let Ok(name) = e.file_name().into_string() else {
            continue;
        };
        let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
        let module = if is_dir && e.path().join("__init__.py").is_file() {
            Some((name.clone(), format!("{name}/")))
        } else {
            name.strip_suffix(".py")
                .or_else(|| name.strip_suffix(".pyc"))
                .filter(|_| !is_dir)
                .map(|m| (m.to_string(), name.clone()))
        };
        if let Some((m, file)) = module {
            let identifier = m.chars().next().is_some_and(|c| !c.is_ascii_digit())
                && m.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if identifier {
                out.insert(m, file);
            }
        }
    }
    out
}

/// When the working directory has files named like modules pytest imports, the message that
/// says so; `None` when there are none (or the question could not be answered).
fn shadowing(cx: &CheckContext<'_>, sb: &mut corral_sandbox::Sandbox) -> Option<String> {
    let modules = stage_modules(cx.stage);
    if modules.is_empty() {
        return None;
    }
    let cfg = serde_json::json!({"names": modules.keys().collect::<Vec<_>>()});
    let mut spec = python_helper(IMPORTED_BY_PYTEST, &cfg, "", cx.settings);
    spec.seccomp = cx.settings.harness_seccomp();
    let outcome = sb.run(&spec, &mut NoSink);
    if outcome.status != Status::Ok {
        tracing::debug!(
            status = outcome.status.as_str(),
            "could not ask which modules pytest imports"
        );
        return None;
    }
    let names: Vec<String> = serde_json::from_slice(&outcome.stdout.bytes).ok()?;
    // Only names the host offered come back into the message.
    let found: Vec<(&String, &String)> = names
        .iter()
        .filter_map(|n| modules.get_key_value(n))
        .collect();
    shadow_message(&found)
}

/// corral's words for files (module name, file) that shadow modules pytest imports.
fn shadow_message(found: &[(&String, &String)]) -> Option<String> {
    let files: Vec<&str> = found.iter().map(|(_, f)| f.as_str()).collect();
    let mods: Vec<&str> = found.iter().map(|(m, _)| m.as_str()).collect();
    match found.len() {
        0 => None,
        1 => Some(format!(
            "pytest could not start: the submission's {} has the name of the module {}, which \
             pytest imports, and Python finds the submission's file first: rename it",
            files[0], mods[0]
        )),
        _ => Some(format!(
            "pytest could not start: the submission's {} have the names of the modules {}, \
             which pytest imports, and Python finds the submission's files first: rename them",
            files.join(", "),
            mods.join(", ")
        )),
    }
}

/// Why a run ended before pytest's summary was written, in corral's words (never the
/// submission's): a limit, a signal, or an exit without the summary. `None` when it finished or
/// when the sandbox itself failed.
fn cut_short(outcome: &Outcome, has_summary: bool) -> Option<String> {
    match outcome.status {
        Status::SandboxError => None,
        Status::Ok | Status::NonzeroExit if has_summary => None,
        Status::Ok | Status::NonzeroExit => Some(format!(
            "pytest ended (exit code {}) before its session finished",
            outcome.exit_code.unwrap_or(-1)
        )),
        Status::Signaled => Some(format!(
            "pytest was killed by {}",
            signal_name(outcome.signal.unwrap_or(0))
        )),
        _ => Some(crate::shared::text::stop_reason(outcome)),
    }
}

fn clip(s: &str, max: usize) -> String {
    crate::report::cut_text(s, max, "...")
}

/// The first meaningful line of a failure text (pytest's `E   ...` line when there is one).
fn headline(text: &str) -> String {
    let e_line = text
        .lines()
        .find(|l| l.trim_start().starts_with("E "))
        .map(|l| l.trim_start().trim_start_matches('E').trim().to_string());
    let first = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    clip(&e_line.unwrap_or_else(|| first.to_string()), 300)
}

/// The line that says why a test file could not be imported: pytest's report of it ends with
/// the exception (`E   SyntaxError: invalid syntax`), after where it was raised (`E     File
/// "/home/sandbox/stats.py", line 1` for a syntax error, which `headline` would pick): the
/// exception, then the file's name and line when pytest gave them.
fn import_headline(text: &str) -> String {
    let lines: Vec<&str> = text
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("E "))
        .map(str::trim)
        .collect();
    let exception = lines.iter().rev().find(|l| {
        let name = l.split(':').next().unwrap_or("");
        !name.is_empty()
            && name.len() < l.len()
            && name
                .chars()
                .all(|c| c.is_alphanumeric() || c == '_' || c == '.')
            && ["Error", "Exception", "Exit", "Interrupt"]
                .iter()
                .any(|e| name.ends_with(e))
    });
    let Some(exception) = exception else {
        return headline(text);
    };
    let place = lines.iter().find_map(|l| {
        let rest = l.strip_prefix("File \"")?;
        let (file, rest) = rest.split_once('"')?;
        let line = rest.strip_prefix(", line ")?;
        let name = file.rsplit('/').next().unwrap_or(file);
        Some(format!("{name}, line {line}"))
    });
    clip(
        &match place {
            Some(p) => format!("{exception} ({p})"),
            None => exception.to_string(),
        },
        300,
    )
}

/// Python ignores SIGXFSZ, so a write past the file size limit fails with `EFBIG`, and pytest's
/// capture of a test's output is a file: a test that prints a flood fails with an `OSError`
/// that names no limit. Say which one it met.
fn name_file_size_limit(headline: String, limit: Size) -> String {
    if headline.contains("[Errno 27]") {
        format!(
            "{headline} (a file, or the test's printed output, reached the file size limit of \
             {limit})"
        )
    } else {
        headline
    }
}

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
    }

    #[test]
    fn junit_names_follow_pytest() {
        assert_eq!(
            junit_name("test_a.py::test_x"),
            ("test_a".into(), "test_x".into())
        );
        assert_eq!(
            junit_name("sub/test_a.py::TestC::test_m[1-a::b]"),
            ("sub.test_a.TestC".into(), "test_m[1-a::b]".into())
        );
        assert_eq!(junit_name("test_a.py"), ("".into(), "test_a".into()));
    }

    #[test]
    fn junit_counts_must_match() {
        let good = r#"<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="0" failures="1" skipped="0" tests="2"><testcase classname="t" name="a"/><testcase classname="t" name="b"><failure message="assert 1 == 2">x</failure></testcase></testsuite></testsuites>"#;
        let c = parse_junit(good).unwrap();
        assert_eq!(c[1].2, "failed");
        assert!(c[1].3.starts_with("assert 1 == 2"));
        let bad = good.replace("failures=\"1\"", "failures=\"0\"");
        assert!(parse_junit(&bad).is_err());
        assert!(parse_junit("<testsuites><testsuite").is_err());
        let dtd = r#"<!DOCTYPE x [<!ENTITY a "b">]><testsuites/>"#;
        assert!(parse_junit(dtd).is_err());
    }
}
