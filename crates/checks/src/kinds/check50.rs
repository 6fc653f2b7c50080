//! The `check50` kind: a problem folder in check50's own format (see [`crate::suite::check50`]),
//! which check50 itself runs offline inside the sandbox; its JSON results become corral results.
//!
//! check50 is installed for the sandbox's `/usr/bin/python3` under [`SITE`] by `scripts/setup`.
//! It runs with `--dev` (the slug is a local folder, implies offline) and
//! `--no-install-dependencies`, from a bootstrap ([`BOOTSTRAP`]) that reads a nonce from standard
//! input, makes itself non-dumpable (the submission's programs, which check50 starts as separate
//! processes, cannot read its memory or descriptors) and writes check50's JSON, captured in
//! memory, into a folder with an unpredictable name, sealed with a MAC keyed by the nonce
//! ([`unseal`]; the submission's processes can read the file, never the nonce). The problem folder is mounted
//! read-only. A problem whose checks import the submission's Python code into check50's own
//! process (`check50.py.import_`) has the same in-process caveat as pytest checks.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use corral_sandbox::{Mount, NoSink, Status};
use serde::Deserialize;
use serde_json::Value;

use uuid::Uuid;

use crate::kinds::runner::{CheckContext, CheckRunner};
use crate::report::{cut_text, CheckResult, Observation, ScriptEntry, SKIPPED};
use crate::shared::host_folders::HostFolder;
use crate::shared::mounted::mounted_folder;
use crate::shared::python::{python_helper, unseal, Unsealed};
use crate::shared::rows::items_not_run;
use crate::shared::text::MAX_VALUE;
use crate::suite::{Check, Check50Check, Check50Item, RubricItem, Suite};

pub use crate::check50_toolchain::SITE;
/// Where the problem folder is mounted (read-only) inside the sandbox.
pub const PROBLEM_DIR: &str = "/corral/check50";
/// The most of check50's results read back (the runner keeps at most 8 KiB of each value, so a
/// problem's results reach this only with thousands of checks).
const MAX_RESULTS: u64 = 16 << 20;
pub const BOOTSTRAP: &str = concat!(
    include_str!("../shared/read_nonce.py"),
    include_str!("check50_boot.py")
);

#[derive(Debug, Deserialize)]
struct Summary {
    exit: Option<i64>,
    error: Option<String>,
    check50: Option<Check50Json>,
}

#[derive(Debug, Deserialize)]
struct Check50Json {
    results: Vec<Check50Result>,
    #[serde(default)]
    version: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Check50Result {
    name: String,
    #[serde(default)]
    description: String,
    passed: Option<bool>,
    #[serde(default)]
    log: Vec<String>,
    #[serde(default)]
    cause: Option<serde_json::Map<String, Value>>,
    #[serde(default)]
    dependency: Option<String>,
    /// The check's own data; corral's runner adds `_corral_time_ms`, the check's time.
    #[serde(default)]
    data: Option<serde_json::Map<String, Value>>,
}

impl Check50Result {
    /// How long the check took, as corral's runner timed it where it ran (0 when not known).
    fn time_ms(&self) -> u64 {
        self.data
            .as_ref()
            .and_then(|d| d.get("_corral_time_ms"))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    }
}

enum Run {
    /// check50's results, and the sandbox's pids limit when the run filled it.
    Valid(Check50Json, Option<u64>),
    /// Stopped by a limit, with the checks check50 had finished by then (recorded, sealed, as
    /// each finished: see `_corral_record_progress`), the pids limit when the run filled it,
    /// and the limit that stopped the run (a queued submission's verdict names it).
    Stopped(String, Vec<Check50Result>, Option<u64>, Option<Status>),
    /// check50 refused the submission before any check ran (a file its `.cs50.yml` requires is
    /// missing): the student's doing, so every check fails with check50's reason.
    Refused(String),
    Invalid(String),
    Error(String),
}

fn run_check50(cx: &CheckContext<'_>, cc: &Check50Check) -> Run {
    if !Path::new(SITE).join("check50").is_dir() {
        return Run::Error(format!(
            "check50 is not installed under {SITE} (run scripts/setup)"
        ));
    }
    let folder = match mounted_folder(&cx.suite.dir, &cc.files.iter().collect::<Vec<_>>()) {
        Ok(f) => f,
        Err(e) => return Run::Error(format!("preparing the problem folder: {e}")),
    };
    let mut lease = match cx.lease(Some(Mount {
        src: folder.path().to_path_buf(),
        dst: PathBuf::from(PROBLEM_DIR),
        writable: false,
    })) {
        Ok(l) => l,
        Err(e) => return Run::Error(e),
    };
    let sb = lease.sandbox();
    let nonce = Uuid::new_v4().simple().to_string();
    let out_dir = format!(".corral-{}", Uuid::new_v4().simple());
    let cfg = serde_json::json!({
        "out_dir": out_dir,
        "site": SITE,
        "problem": format!("{PROBLEM_DIR}/{}", cc.problem),
        "problem_root": PROBLEM_DIR,
        // The runner keeps the submission's programs below it (`_corral_leave_pids_for_check50`).
        "pids": cx.settings.limits.pids,
    });
    let mut spec = python_helper(BOOTSTRAP, &cfg, &nonce, cx.settings);
    spec.seccomp = cx.settings.harness_seccomp();
    let outcome = sb.run(&spec, &mut NoSink);
    // check50 runs in the sandbox of the programs it starts and shares its pids limit: when they
    // filled it, check50's own forks (a worker, the next program) could be refused too.
    let pids_hit = outcome.usage.pids_limit_hit.then_some(outcome.limits.pids);
    match outcome.status {
        Status::SandboxError => return Run::Error(crate::shared::text::sandbox_error(&outcome)),
        Status::Ok | Status::NonzeroExit => {}
        _ => {
            let finished = finished_before_the_stop(sb, &out_dir, &nonce);
            return Run::Stopped(
                crate::shared::text::stop_reason(&outcome),
                finished,
                pids_hit,
                Some(outcome.status),
            );
        }
    }
    let summary = match sb.read_file(&Path::new(&out_dir).join("summary.json"), MAX_RESULTS + 1) {
        Ok(Some(s)) if s.len() as u64 > MAX_RESULTS => {
            return Run::Invalid(format!(
                "check50's results are larger than {} MiB",
                MAX_RESULTS >> 20
            ))
        }
        Ok(Some(s)) => s,
        Ok(None) => {
            return Run::Invalid(format!(
                "check50 ended (exit code {}) without writing its results",
                outcome.exit_code.unwrap_or(-1)
            ))
        }
        Err(e) => return Run::Error(format!("reading check50's results: {e}")),
    };
    let summary = match unseal(&summary, &nonce) {
        Ok(s) => s,
        Err(Unsealed::NotOurs) => {
            return Run::Invalid("the results were not written by corral's check50 runner".into())
        }
        Err(Unsealed::Malformed(e)) => {
            return Run::Invalid(format!("check50's results are malformed: {e}"))
        }
    };
    let summary: Summary = match serde_json::from_slice(&summary) {
        Ok(s) => s,
        Err(e) => return Run::Invalid(format!("check50's results are malformed: {e}")),
    };
    if outcome.exit_code != Some(0) {
        return Run::Invalid(format!(
            "check50's runner exited with code {}",
            outcome.exit_code.unwrap_or(-1)
        ));
    }
    if let Some(e) = summary.error {
        if let Some(why) = e.strip_prefix("MissingFilesError: ") {
            // lib50's words, without its hint about the folder check50 was started in.
            let why: Vec<&str> = why
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with("You are currently in"))
                .collect();
            return Run::Refused(why.join(" "));
        }
        if let Some(pids) = pids_hit {
            // check50 itself failed once the submission's processes took every pid: the
            // submission's doing, as a limit that stops check50 is (see `item_row`).
            let finished = finished_before_the_stop(sb, &out_dir, &nonce);
            return Run::Stopped(
                format!("the submission's processes filled the pids limit of {pids} ({e})"),
                finished,
                pids_hit,
                None,
            );
        }
        return Run::Error(format!("check50 failed: {e}"));
    }
    let Some(json) = summary.check50 else {
        return Run::Error(format!(
            "check50 printed no results (exit code {:?}); is the problem folder valid?",
            summary.exit
        ));
    };
    // check50 exits 1 when any check did not pass.
    let any_failed = json.results.iter().any(|r| r.passed != Some(true));
    if summary.exit != Some(i64::from(any_failed)) {
        return Run::Invalid(format!(
            "check50's exit code {:?} does not agree with its results",
            summary.exit
        ));
    }
    let mut seen = BTreeSet::new();
    for r in &json.results {
        if !cc.items.iter().any(|i| i.name == r.name) {
            return Run::Invalid(format!(
                "check50 reported a check {:?} that is not in the problem's source as corral reads \
                 it (a function decorated with @check50.check, at the module's top level or in \
                 its if/try/with blocks): checks made while the problem loads, in a loop or \
                 through globals(), are not supported; define each with its own def",
                r.name
            ));
        }
        if !seen.insert(r.name.clone()) {
            return Run::Invalid(format!("check50 reported {:?} twice", r.name));
        }
    }
    let missing: Vec<&str> = cc
        .items
        .iter()
        .filter(|i| !seen.contains(&i.name))
        .map(|i| i.name.as_str())
        .collect();
    if !missing.is_empty() {
        return Run::Invalid(format!(
            "check50 reported fewer checks than the problem has; missing: {}",
            missing.join(", ")
        ));
    }
    Run::Valid(json, pids_hit)
}

/// A value of check50's results as text, at most [`MAX_VALUE`] bytes of it.
fn text_of(v: Option<&Value>) -> Option<String> {
    let text = match v? {
        Value::Null => return None,
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    Some(cut_text(&text, MAX_VALUE, "..."))
}

/// An expected or actual value for a script entry: a string cut to [`MAX_VALUE`] bytes, any
/// other value kept when it is that small (check50 keeps all a program printed: megabytes when
/// it floods its terminal).
fn shown(v: &Value) -> Value {
    match v {
        Value::String(s) => Value::String(cut_text(s, MAX_VALUE, "...")),
        other if other.to_string().len() <= MAX_VALUE => other.clone(),
        other => Value::String(cut_text(&other.to_string(), MAX_VALUE, "...")),
    }
}

/// Runs a check50 check: one result for the check, `children` one per check50 check.
fn run_check(cx: &CheckContext<'_>, cc: &Check50Check) -> (CheckResult, Option<PathBuf>) {
    let check = cx.check;
    let rubric = check.rubric().unwrap_or_default();
    let started = Instant::now();
    let run = run_check50(cx, cc);
    let mut children = Vec::new();
    let (mut ok, mut message, mut error) = (true, None, None);
    let mut stopped_by = None;
    match &run {
        Run::Valid(json, pids_hit) => {
            for (item, row) in cc.items.iter().zip(&rubric) {
                let r = json
                    .results
                    .iter()
                    .find(|r| r.name == item.name)
                    .expect("every check is there");
                if r.passed != Some(true) {
                    ok = false;
                }
                children.push(item_row(check, item, row, r, *pids_hit));
            }
            let passed = children.iter().filter(|c| c.result == Some(true)).count();
            let unjudged = children.iter().filter(|c| c.error.is_some()).count();
            if !ok {
                message = Some(format!(
                    "{passed} of {} check50 checks passed",
                    children.len()
                ));
            }
            if unjudged > 0 {
                message = Some(format!(
                    "{passed} of {} check50 checks passed, {unjudged} could not be judged \
                     (check50 ran into an error)",
                    children.len()
                ));
            }
        }
        Run::Stopped(r, finished, _, limit) => {
            ok = false;
            stopped_by = *limit;
            message = Some(match finished.len() {
                0 => format!("check50 was stopped: {r}"),
                n => format!(
                    "check50 was stopped: {r} ({n} of {} check50 checks had finished)",
                    cc.items.len()
                ),
            });
        }
        Run::Refused(r) => {
            ok = false;
            message = Some(format!("check50 did not run the checks: {r}"));
        }
        Run::Invalid(r) => {
            ok = false;
            error = Some(format!("invalid check50 run: {r}"));
            message = error.clone();
        }
        Run::Error(r) => {
            ok = false;
            error = Some(r.clone());
            message = Some(format!("could not be checked: {r}"));
        }
    }
    let mut parent = CheckResult {
        stopped_by,
        dependencies: check.depends.clone(),
        result: Some(ok),
        script: vec![ScriptEntry {
            expected: Observation::new("check50", cc.problem.clone()),
            actual: Observation::new(
                "run",
                match &run {
                    Run::Valid(json, _) => format!(
                        "check50 {} ran",
                        json.version.as_deref().unwrap_or("(unknown version)")
                    ),
                    Run::Stopped(r, ..) => format!("stopped: {r}"),
                    Run::Refused(r) => format!("refused: {r}"),
                    Run::Invalid(r) => format!("invalid: {r}"),
                    Run::Error(r) => format!("error: {r}"),
                },
            ),
        }],
        time_ms: started.elapsed().as_millis() as u64,
        hidden: check.hidden,
        message,
        error,
        ..CheckResult::new(check.id.clone(), check.description.clone())
    };
    match &run {
        Run::Valid(..) => {}
        Run::Stopped(_, finished, pids_hit, _) if !finished.is_empty() => {
            children = rows_when_stopped(check, cc, &rubric, &parent, finished, *pids_hit);
        }
        _ => children = items_not_run(check, &rubric, &parent),
    }
    parent.children = children;
    (parent, None)
}

/// The row of a check50 check from check50's result `r` for it; `pids_hit` is the sandbox's
/// pids limit when the run filled it.
///
/// check50's log of a check ("running python3 hello.py...", "sending input David..."), its first
/// 100 lines, as script entries.
fn log_entries(r: &Check50Result) -> impl Iterator<Item = ScriptEntry> + '_ {
    r.log.iter().take(100).map(|l| {
        let l = cut_text(l, MAX_VALUE, "...");
        ScriptEntry {
            expected: Observation::new("log", l.clone()),
            actual: Observation::new("log", l),
        }
    })
}

/// A check's description: check50's, else the problem's.
fn description(item: &Check50Item, r: &Check50Result) -> String {
    let told = crate::suite::pyscan::one_line(&r.description);
    if told.is_empty() {
        item.description.clone()
    } else {
        told
    }
}

/// A check's dependencies: the check50 check it depends on, else the rubric row's.
fn dependencies(check: &Check, row: &RubricItem, r: &Check50Result) -> Vec<String> {
    match &r.dependency {
        Some(d) => vec![format!("{}/{d}", check.id)],
        None => row.dependencies.clone(),
    }
}

/// A check whose code raised something other than a check failure is not skipped by check50 but
/// crashed: check50 reports `passed: null` with `cause.error` (`type`, `value`, `traceback`).
/// Such a check could not be judged: an `error` row (no points; `corral check` exits 125, a
/// queued submission's verdict is `internal_error`), the type and value in its `error` and
/// message, check50's traceback in the staff-only `diagnostics`.
///
/// Unless the pids limit was hit: check50 runs in the sandbox of the programs it starts and
/// shares its pids limit, so a fork bomb leaves check50 itself unable to fork, and whichever
/// checks happen to need a process then crash (`BlockingIOError`). That is the submission's
/// doing, as any limit it exhausts is, so such a check fails (not an error): the grade is the
/// same for the same code, and course staff are not asked to look into a grader that a fork
/// bomb starved. (The runner also keeps the submission's programs below the limit, so check50
/// keeps pids of its own: see `_corral_leave_pids_for_check50`.)
fn item_row(
    check: &Check,
    item: &Check50Item,
    row: &RubricItem,
    r: &Check50Result,
    pids_hit: Option<u64>,
) -> CheckResult {
    let cause = r.cause.as_ref();
    let rationale = text_of(cause.and_then(|c| c.get("rationale")));
    let help = text_of(cause.and_then(|c| c.get("help")));
    // check50's own errors (an exception in a check): its type and value.
    let raised = cause
        .and_then(|c| c.get("error"))
        .filter(|_| r.passed.is_none());
    let crashed = raised.map(|e| {
        format!(
            "{}: {}",
            text_of(e.get("type")).unwrap_or_default(),
            text_of(e.get("value")).unwrap_or_default()
        )
    });
    if let Some(crashed) = crashed {
        return crashed_row(check, item, row, r, raised, &crashed, pids_hit);
    }
    // check50's log ("running python3 hello.py...", "sending input David..."), then
    // what was expected and what happened.
    let mut script: Vec<ScriptEntry> = log_entries(r).collect();
    // A `Mismatch` says what was expected and what came; a `Missing` (output that never came
    // before the timeout) what was missing from what came.
    let field = |name: &str| cause.and_then(|c| c.get(name));
    let compared = match (field("expected"), field("actual")) {
        (Some(e), Some(a)) => Some((e, a)),
        _ => field("missing_item").zip(field("collection")),
    };
    if let Some((e, a)) = compared {
        script.push(ScriptEntry {
            expected: Observation::new("stdout", shown(e)),
            actual: Observation::new("stdout", shown(a)),
        });
    } else if r.passed == Some(false) {
        script.push(ScriptEntry {
            expected: Observation::new("check", r.description.clone()),
            actual: Observation::new("rationale", rationale.clone().unwrap_or_default()),
        });
    }
    let msg = match r.passed {
        Some(true) => None,
        Some(false) => Some(
            [rationale.clone(), help]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join("\n"),
        )
        .filter(|m| !m.is_empty())
        .or(Some("check failed".into())),
        None => Some(rationale.unwrap_or_else(|| SKIPPED.to_string())),
    };
    CheckResult {
        dependencies: dependencies(check, row, r),
        result: r.passed,
        script,
        points: if r.passed == Some(true) {
            item.points
        } else {
            0.0
        },
        max_points: item.points,
        time_ms: r.time_ms(),
        hidden: item.hidden || check.hidden,
        message: msg,
        ..CheckResult::new(item.id.clone(), description(item, r))
    }
}

/// The row of a check in which check50 itself raised `crashed` (`TYPE: value`; `raised` is
/// check50's `error` object): see [`item_row`].
fn crashed_row(
    check: &Check,
    item: &Check50Item,
    row: &RubricItem,
    r: &Check50Result,
    raised: Option<&Value>,
    crashed: &str,
    pids_hit: Option<u64>,
) -> CheckResult {
    let log = log_entries(r);
    let (message, error) = match pids_hit {
        Some(pids) => (
            format!(
                "check50 could not run this check: the submission's processes filled the pids \
                 limit of {pids} ({crashed})"
            ),
            None,
        ),
        None => {
            let e = format!("check50 ran into an error while running this check: {crashed}");
            (format!("could not be checked: {e}"), Some(e))
        }
    };
    let traceback = raised
        .and_then(|e| e.get("traceback"))
        .map(|t| match t {
            Value::Array(lines) => lines
                .iter()
                .map(|l| l.as_str().map_or_else(|| l.to_string(), str::to_string))
                .collect::<String>(),
            other => text_of(Some(other)).unwrap_or_default(),
        })
        .filter(|t| !t.is_empty());
    CheckResult {
        dependencies: dependencies(check, row, r),
        script: log
            .chain([ScriptEntry {
                expected: Observation::new("check", r.description.clone()),
                actual: Observation::new("error", crashed.to_string()),
            }])
            .collect(),
        max_points: item.points,
        time_ms: r.time_ms(),
        hidden: item.hidden || check.hidden,
        message: Some(message),
        error,
        diagnostics: traceback
            .map(|t| format!("check50's traceback:\n{}", cut_text(&t, MAX_VALUE, "..."))),
        ..CheckResult::new(item.id.clone(), description(item, r))
    }
}

/// The rows of a run a limit stopped: the checks that had finished keep their results; a check
/// whose dependency finished without passing is skipped, as check50 would have skipped it; the
/// others fail with the stop.
fn rows_when_stopped(
    check: &Check,
    cc: &Check50Check,
    rubric: &[RubricItem],
    parent: &CheckResult,
    finished: &[Check50Result],
    pids_hit: Option<u64>,
) -> Vec<CheckResult> {
    let stopped = items_not_run(check, rubric, parent);
    // Whether each row's check ran (finished, or skipped after a dependency that did not pass)
    // and passed. check50 registers a check after the one it depends on, so a dependency's row
    // is decided first.
    let mut ran: Vec<Option<bool>> = Vec::with_capacity(cc.items.len());
    let mut rows = Vec::with_capacity(cc.items.len());
    for ((item, row), stopped) in cc.items.iter().zip(rubric).zip(stopped) {
        if let Some(r) = finished.iter().find(|r| r.name == item.name) {
            ran.push(Some(r.passed == Some(true)));
            rows.push(item_row(check, item, row, r, pids_hit));
            continue;
        }
        let dependency_ran = item
            .dependency
            .as_ref()
            .and_then(|d| cc.items.iter().position(|i| &i.name == d))
            .and_then(|at| ran.get(at).copied().flatten());
        if dependency_ran == Some(false) {
            ran.push(Some(false));
            rows.push(CheckResult {
                result: None,
                message: Some(SKIPPED.to_string()),
                ..stopped
            });
        } else {
            ran.push(None);
            rows.push(stopped);
        }
    }
    rows
}

/// What the runner recorded of the checks finished before a limit stopped it: nothing when the
/// record is missing, unreadable or not sealed by the runner (then every check is stopped).
fn finished_before_the_stop(
    sb: &mut corral_sandbox::Sandbox,
    out_dir: &str,
    nonce: &str,
) -> Vec<Check50Result> {
    #[derive(Deserialize)]
    struct Progress {
        results: Vec<Check50Result>,
    }
    let Ok(Some(sealed)) = sb.read_file(&Path::new(out_dir).join("progress.json"), MAX_RESULTS)
    else {
        return Vec::new();
    };
    unseal(&sealed, nonce)
        .ok()
        .and_then(|body| serde_json::from_slice::<Progress>(&body).ok())
        .map(|p| p.results)
        .unwrap_or_default()
}

impl CheckRunner for Check50Check {
    fn run(&self, cx: &CheckContext<'_>) -> (CheckResult, Option<PathBuf>) {
        run_check(cx, self)
    }

    /// The problem folder.
    fn mounted_folders(&self, suite: &Suite) -> std::io::Result<Vec<Arc<HostFolder>>> {
        Ok(vec![mounted_folder(
            &suite.dir,
            &self.files.iter().collect::<Vec<_>>(),
        )?])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A suite with a check50 problem of three checks: `exists`, `runs` (after `exists`) and
    /// `greets` (after `runs`, hidden).
    fn suite(dir: &Path) -> Suite {
        let problem = dir.join("problem");
        std::fs::create_dir_all(&problem).unwrap();
        std::fs::write(problem.join(".cs50.yml"), "check50: true\n").unwrap();
        std::fs::write(
            problem.join("__init__.py"),
            "import check50\n\n@check50.check()\ndef exists():\n    \"\"\"a.c exists\"\"\"\n\n\
             @check50.check(exists)\ndef runs():\n    \"\"\"a runs\"\"\"\n\n\
             @check50.check(runs)\ndef greets():\n    \"\"\"a greets\"\"\"\n",
        )
        .unwrap();
        let text = "name: t\nchecks:\n  - id: p\n    check50:\n      problem: problem\n      \
                    hidden: [greets]\n";
        Suite::parse(text, &dir.join("suite.yaml"), false).unwrap()
    }

    /// check50's result for a check whose code raised something other than a check failure, as
    /// its runner writes it (`check50/runner.py`: `passed: null`, `cause.error`).
    fn raised(name: &str) -> Check50Result {
        serde_json::from_value(serde_json::json!({
            "name": name,
            "description": "a runs",
            "passed": null,
            "log": ["running ./a..."],
            "cause": {
                "rationale": "check50 ran into an error while running checks!",
                "error": {
                    "type": "BlockingIOError",
                    "value": "[Errno 11] Resource temporarily unavailable",
                    "traceback": ["  File \"runner.py\", line 146, in wrapper\n", "    state = check(*args)\n"],
                    "data": {}
                }
            },
            "data": {},
            "dependency": "exists"
        }))
        .unwrap()
    }

    fn rows(suite: &Suite) -> (&Check, &Check50Check, Vec<RubricItem<'_>>) {
        let check = &suite.checks[0];
        let crate::suite::CheckKind::Check50(cc) = &check.kind else {
            panic!("not a check50 check")
        };
        (check, cc, check.rubric().unwrap())
    }

    /// A check in which check50 itself raised could not be judged: an error row (never a silent
    /// skip), the exception's type and value in its error and message, the traceback for staff.
    #[test]
    fn a_check_check50_raised_in_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let suite = suite(dir.path());
        let (check, cc, rubric) = rows(&suite);
        let row = item_row(check, &cc.items[1], &rubric[1], &raised("runs"), None);
        assert_eq!(row.id, "p/runs");
        assert_eq!(row.result, Some(false));
        assert_eq!(row.points, 0.0);
        let why = "check50 ran into an error while running this check: BlockingIOError: \
                   [Errno 11] Resource temporarily unavailable";
        assert_eq!(row.error.as_deref(), Some(why));
        assert_eq!(
            row.message.as_deref(),
            Some(format!("could not be checked: {why}").as_str())
        );
        let diagnostics = row.diagnostics.as_deref().unwrap();
        assert!(
            diagnostics.contains("line 146, in wrapper"),
            "{diagnostics}"
        );
        assert_eq!(row.script.last().unwrap().actual.kind, "error");
        // Students see that it could not be judged; the traceback is staff's only.
        assert_eq!(row.visible_diagnostics(crate::report::View::Student), None);
        assert!(row
            .visible_message(crate::report::View::Student)
            .unwrap()
            .contains("could not be checked"));
        // A hidden check says no more to students than that.
        let hidden = item_row(check, &cc.items[2], &rubric[2], &raised("greets"), None);
        assert!(hidden.hidden && hidden.error.is_some());
        assert_eq!(
            hidden
                .visible_message(crate::report::View::Student)
                .as_deref(),
            Some(crate::report::HIDDEN_ERROR)
        );
        // Nor does its `error` (the exception's text may quote the hidden check).
        let shown = crate::report::Report {
            suite: "s".into(),
            results: vec![hidden.clone()],
            integrity: Default::default(),
            safety: None,
            images: Default::default(),
            runtimes: Default::default(),
        }
        .to_json(crate::report::View::Student);
        assert_eq!(
            shown["results"][&hidden.id]["error"],
            crate::report::HIDDEN_ERROR,
            "{shown}"
        );
        assert!(hidden
            .visible_script(crate::report::View::Student)
            .is_empty());
    }

    /// When the submission's processes filled the pids limit, check50's crash is the
    /// submission's doing: a failure that names the cause, not an error.
    #[test]
    fn a_check_check50_raised_in_after_a_fork_bomb_fails() {
        let dir = tempfile::tempdir().unwrap();
        let suite = suite(dir.path());
        let (check, cc, rubric) = rows(&suite);
        let row = item_row(check, &cc.items[1], &rubric[1], &raised("runs"), Some(64));
        assert_eq!(row.result, Some(false));
        assert_eq!(row.error, None);
        assert_eq!(
            row.message.as_deref(),
            Some(
                "check50 could not run this check: the submission's processes filled the pids \
                 limit of 64 (BlockingIOError: [Errno 11] Resource temporarily unavailable)"
            )
        );
    }

    /// check50's own skips and failures are untouched: a skip stays null with check50's words.
    #[test]
    fn skips_and_failures_are_not_errors() {
        let dir = tempfile::tempdir().unwrap();
        let suite = suite(dir.path());
        let (check, cc, rubric) = rows(&suite);
        let skip: Check50Result = serde_json::from_value(serde_json::json!({
            "name": "greets", "description": "a greets", "passed": null, "log": [],
            "cause": {"rationale": "can't check until a frown turns upside down"},
            "dependency": "runs"
        }))
        .unwrap();
        let row = item_row(check, &cc.items[2], &rubric[2], &skip, None);
        assert_eq!(row.result, None);
        assert_eq!(row.error, None);
        assert_eq!(
            row.message.as_deref(),
            Some("can't check until a frown turns upside down")
        );
        let fail: Check50Result = serde_json::from_value(serde_json::json!({
            "name": "runs", "description": "a runs", "passed": false, "log": [],
            "cause": {"rationale": "expected exit code 0, not 1"}, "dependency": "exists"
        }))
        .unwrap();
        let row = item_row(check, &cc.items[1], &rubric[1], &fail, Some(64));
        assert_eq!((row.result, row.error), (Some(false), None));
        assert_eq!(row.message.as_deref(), Some("expected exit code 0, not 1"));
    }
}
