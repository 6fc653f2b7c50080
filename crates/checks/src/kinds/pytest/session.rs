//! Running one pytest session in the sandbox: the test files mounted read-only, pytest started
//! by the bootstrap, and a session a test stopped run again without that test; when pytest
//! could not start at all, which of the submission's files shadow a module it imports.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use corral_sandbox::{Mount, NoSink, Outcome, Status};

use uuid::Uuid;

use crate::kinds::runner::CheckContext;
use crate::shared::mounted::mounted_folder;
use crate::shared::python::python_helper;
use crate::shared::text::{output_tail, signal_name};
use crate::suite::{PytestCheck, TestCase};

use super::evidence::{judge, Session};
use super::messages::shadow_message;

/// Where the test files are mounted (read-only) inside the sandbox.
pub const TESTS_DIR: &str = "/corral/tests";
/// The bootstrap that runs pytest inside the sandbox.
pub const BOOTSTRAP: &str = concat!(
    include_str!("../../shared/read_nonce.py"),
    include_str!("pytest_boot.py")
);
/// Largest JUnit report read.
const MAX_REPORT: u64 = 16 << 20;
/// Largest summary read.
const MAX_SUMMARY: u64 = 4 << 20;

/// The files one session mounts at [`TESTS_DIR`]: its test files, the support files, the config.
pub(super) fn session_files<'a>(pc: &'a PytestCheck, files: &'a [String]) -> Vec<&'a String> {
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
pub(super) struct SessionRun {
    pub(super) verdict: Session,
    pub(super) output: Option<PathBuf>,
    /// The end of pytest's standard error in the session's last run, when it was not valid.
    pub(super) stderr: Option<String>,
}

/// One pytest session (the public or the hidden tests): run, and when a test stops the run
/// before it finishes, that test fails and the session runs again without it (like
/// pytest-xdist replacing a crashed worker), at most [`MAX_RESTARTS`] times. Each run gets the
/// check's full limits: a test stuck until the CPU limit must not take the others' time.
pub(super) fn session(cx: &CheckContext<'_>, pc: &PytestCheck, files: &[String]) -> SessionRun {
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
