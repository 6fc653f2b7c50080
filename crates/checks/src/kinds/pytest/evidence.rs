//! Judging one pytest session from what it left: the sandbox's outcome, the bootstrap's sealed
//! summary and pytest's JUnit report, each checked against the others and against the tests the
//! assignment defines. Anything that does not agree is an invalid session, never a point.

use std::collections::{BTreeMap, BTreeSet};

use corral_sandbox::{Outcome, Status};
use serde::Deserialize;

use crate::shared::python::{unseal, Unsealed};
use crate::shared::text::signal_name;
use crate::suite::TestCase;

use super::junit::{junit_name, parse_junit};

/// How one pytest session went.
#[derive(Debug, Clone)]
pub(super) enum Session {
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
pub(super) fn judge(
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
