//! check50 compatibility: a check may point to a problem folder in check50's own format
//! (`__init__.py` with `@check50.check` functions, `.cs50.yml`), which check50 itself runs
//! offline inside the sandbox; its JSON results become corral results.
//!
//! ```yaml
//! - id: hello
//!   check50:
//!     problem: problem          # the check50 problem folder (an assignment path)
//!     points: {greets: 2}       # per check50 check (default: default_points, 1)
//!     hidden: [greets_grace]    # check50 checks students see pass/fail of only
//! ```
//!
//! check50 is installed for the sandbox's `/usr/bin/python3` under [`SITE`] by `scripts/setup`.
//! It runs with `--dev` (the slug is a local folder, implies offline) and
//! `--no-install-dependencies`, from a bootstrap ([`BOOTSTRAP`]) that reads a nonce from standard
//! input, makes itself non-dumpable (the submission's programs, which check50 starts as separate
//! processes, cannot read its memory or descriptors) and writes check50's JSON, captured in
//! memory, with the nonce into a folder with an unpredictable name. The problem folder is mounted
//! read-only. A problem whose checks import the submission's Python code into check50's own
//! process (`check50.py.import_`) has the same in-process caveat as pytest checks.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use corral_sandbox::{Mount, NoSink, Pool, RunSpec, SandboxConfig, Status, Stdin};
use serde::Deserialize;
use serde_json::Value;

use crate::engine::Plan;
use crate::pyscan;
use crate::report::{CheckResult, Observation, ScriptEntry, SKIPPED};
use crate::suite::{relative, Check, Suite};

/// Where check50 (and what it needs) is installed for `/usr/bin/python3`.
pub const SITE: &str = "/usr/local/lib/corral/python";
/// Where the problem folder is mounted (read-only) inside the sandbox.
pub const PROBLEM_DIR: &str = "/corral/check50";
pub const BOOTSTRAP: &str = include_str!("check50_boot.py");

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCheck50 {
    problem: String,
    #[serde(default)]
    points: BTreeMap<String, f64>,
    #[serde(default)]
    default_points: Option<f64>,
    #[serde(default)]
    hidden: Vec<String>,
}

/// A check50 problem, resolved: its checks in file order.
#[derive(Debug, Clone)]
pub struct Check50Check {
    /// The problem folder (assignment path).
    pub problem: String,
    /// Every file of the problem folder, relative to the assignment folder.
    pub files: Vec<String>,
    pub items: Vec<Check50Item>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Check50Item {
    /// check50's name of the check (its function name).
    pub name: String,
    /// Result id: `CHECK/NAME`.
    pub id: String,
    pub description: String,
    pub dependency: Option<String>,
    pub points: f64,
    pub hidden: bool,
}

fn list_files(dir: &Path, rel: &Path, out: &mut Vec<String>, depth: usize) -> Result<(), String> {
    if depth > 16 {
        return Err(format!("{}: folders nested too deep", dir.display()));
    }
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name();
        if name == "__pycache__" {
            continue;
        }
        let ft = e.file_type().map_err(|e| e.to_string())?;
        let r = rel.join(&name);
        if ft.is_dir() {
            list_files(&e.path(), &r, out, depth + 1)?;
        } else if ft.is_file() {
            out.push(r.to_string_lossy().into_owned());
        }
    }
    Ok(())
}

impl Check50Check {
    pub(crate) fn resolve(raw: RawCheck50, check_id: &str, dir: &Path) -> Result<Self, String> {
        let p = &raw.problem;
        relative(p).map_err(|why| format!("check50.problem: {p:?} {why}"))?;
        let full = dir.join(p);
        if !std::fs::symlink_metadata(&full).is_ok_and(|m| m.is_dir()) {
            return Err(format!(
                "check50.problem: {p:?} is not a folder of the assignment folder {}",
                dir.display()
            ));
        }
        let init = full.join("__init__.py");
        let src = std::fs::read_to_string(&init).map_err(|_| {
            format!("check50.problem: {p:?} has no __init__.py (check50's checks file)")
        })?;
        if !full.join(".cs50.yml").is_file() && !full.join(".cs50.yaml").is_file() {
            return Err(format!(
                "check50.problem: {p:?} has no .cs50.yml (write `check50: true` in it)"
            ));
        }
        let found = pyscan::check50_checks(&src);
        if found.is_empty() {
            return Err(format!(
                "check50.problem: {p:?}/__init__.py defines no @check50.check function"
            ));
        }
        let default_points = raw.default_points.unwrap_or(1.0);
        if !(default_points.is_finite() && default_points >= 0.0) {
            return Err("check50.default_points: must be a number >= 0".into());
        }
        let all: Vec<String> = found.iter().map(|c| c.name.clone()).collect();
        let names: BTreeSet<&str> = all.iter().map(String::as_str).collect();
        for k in raw.points.keys() {
            if !names.contains(k.as_str()) {
                return Err(format!(
                    "check50.points.{k}: not a check of {p}/__init__.py ({})",
                    names.iter().copied().collect::<Vec<_>>().join(", ")
                ));
            }
        }
        for (i, h) in raw.hidden.iter().enumerate() {
            if !names.contains(h.as_str()) {
                return Err(format!(
                    "check50.hidden[{i}]: {h:?} is not a check of {p}/__init__.py"
                ));
            }
        }
        let mut items = Vec::new();
        for c in found {
            let points = raw.points.get(&c.name).copied().unwrap_or(default_points);
            if !(points.is_finite() && points >= 0.0) {
                return Err(format!("check50.points.{}: must be a number >= 0", c.name));
            }
            if let Some(d) = &c.dependency {
                if !names.contains(d.as_str()) {
                    return Err(format!(
                        "check50.problem: check {} depends on {d}, which is not a check",
                        c.name
                    ));
                }
            }
            items.push(Check50Item {
                id: format!("{check_id}/{}", c.name),
                description: c.doc.clone().unwrap_or_else(|| c.name.clone()),
                hidden: raw.hidden.contains(&c.name),
                dependency: c.dependency,
                name: c.name,
                points,
            });
        }
        let mut files = Vec::new();
        list_files(&full, Path::new(p), &mut files, 0)?;
        Ok(Check50Check {
            problem: raw.problem,
            files,
            items,
        })
    }

    pub fn max_points(&self) -> f64 {
        self.items.iter().map(|i| i.points).sum()
    }

    fn deps_of(&self, check: &Check, item: &Check50Item) -> Vec<String> {
        match &item.dependency {
            Some(d) => vec![format!("{}/{d}", check.id)],
            None => vec![check.id.clone()],
        }
    }
}

#[derive(Debug, Deserialize)]
struct Summary {
    nonce: String,
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
}

enum Run {
    Valid(Check50Json),
    Stopped(String),
    Invalid(String),
    Error(String),
}

fn random_hex() -> String {
    let mut b = [0u8; 16];
    getrandom::getrandom(&mut b).expect("the kernel's random numbers");
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn run_check50(
    pool: &Arc<Pool>,
    suite: &Suite,
    cc: &Check50Check,
    plan: &Plan,
    stage: &Path,
) -> Run {
    if !Path::new(SITE).join("check50").is_dir() {
        return Run::Error(format!(
            "check50 is not installed under {SITE} (run scripts/setup)"
        ));
    }
    let files: Vec<&String> = cc.files.iter().collect();
    let folder = match crate::pytest::tests_folder(&suite.dir, &files) {
        Ok(f) => f,
        Err(e) => return Run::Error(format!("preparing the problem folder: {e}")),
    };
    let mut mounts = plan.mounts.clone();
    mounts.push(Mount {
        src: folder.path().to_path_buf(),
        dst: PathBuf::from(PROBLEM_DIR),
        writable: false,
    });
    let shape = SandboxConfig::offline(mounts, plan.limits.disk.bytes());
    let mut lease = match pool.lease(&shape) {
        Ok(l) => l,
        Err(e) => return Run::Error(format!("sandbox error: {e}")),
    };
    let sb = lease.sandbox();
    if let Err(e) = sb.copy_in(stage) {
        return Run::Error(format!("copying files into the sandbox: {e}"));
    }
    let nonce = random_hex();
    let out_dir = format!(".corral-{}", random_hex());
    let cfg = serde_json::json!({
        "out_dir": out_dir,
        "site": SITE,
        "problem": format!("{PROBLEM_DIR}/{}", cc.problem),
    });
    let mut spec = RunSpec::new(vec![
        crate::pytest::PYTHON.into(),
        "-I".into(),
        "-B".into(),
        "-c".into(),
        BOOTSTRAP.into(),
        cfg.to_string(),
    ]);
    spec.stdin = Stdin::Bytes(format!("{nonce}\n").into_bytes());
    spec.limits = plan.limits.clone();
    spec.env = plan.env.clone();
    let outcome = sb.run(&spec, &mut NoSink);
    match outcome.status {
        Status::SandboxError => {
            return Run::Error(
                outcome
                    .error
                    .clone()
                    .unwrap_or_else(|| "sandbox error".into()),
            )
        }
        Status::Ok | Status::NonzeroExit => {}
        _ => {
            return Run::Stopped(
                outcome
                    .reason()
                    .unwrap_or_else(|| outcome.status.as_str().to_string()),
            )
        }
    }
    let summary = match sb.read_file(&Path::new(&out_dir).join("summary.json"), 16 << 20) {
        Ok(Some(s)) => s,
        Ok(None) => {
            return Run::Invalid(format!(
                "check50 ended (exit code {}) without writing its results",
                outcome.exit_code.unwrap_or(-1)
            ))
        }
        Err(e) => return Run::Error(format!("reading check50's results: {e}")),
    };
    let summary: Summary = match serde_json::from_slice(&summary) {
        Ok(s) => s,
        Err(e) => return Run::Invalid(format!("check50's results are malformed: {e}")),
    };
    if summary.nonce != nonce {
        return Run::Invalid("the results were not written by corral's check50 runner".into());
    }
    if outcome.exit_code != Some(0) {
        return Run::Invalid(format!(
            "check50's runner exited with code {}",
            outcome.exit_code.unwrap_or(-1)
        ));
    }
    if let Some(e) = summary.error {
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
            return Run::Invalid(format!("check50 reported an unknown check {:?}", r.name));
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
    Run::Valid(json)
}

fn text_of(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

/// Runs a check50 check: one result for the check, `children` one per check50 check.
pub(crate) fn run_check(
    pool: &Arc<Pool>,
    suite: &Suite,
    check: &Check,
    cc: &Check50Check,
    plan: &Plan,
    stage: &Path,
) -> (CheckResult, Option<PathBuf>) {
    let started = Instant::now();
    let run = run_check50(pool, suite, cc, plan, stage);
    let mut children = Vec::new();
    let (mut ok, mut message, mut error) = (true, None, None);
    match &run {
        Run::Valid(json) => {
            for item in &cc.items {
                let r = json
                    .results
                    .iter()
                    .find(|r| r.name == item.name)
                    .expect("every check is there");
                let cause = r.cause.as_ref();
                let rationale = text_of(cause.and_then(|c| c.get("rationale")));
                let help = text_of(cause.and_then(|c| c.get("help")));
                // check50's own errors (an exception in a check): its type and value.
                let crashed = cause.and_then(|c| c.get("error")).map(|e| {
                    format!(
                        "{}: {}",
                        text_of(e.get("type")).unwrap_or_default(),
                        text_of(e.get("value")).unwrap_or_default()
                    )
                });
                // check50's log ("running python3 hello.py...", "sending input David..."), then
                // what was expected and what happened.
                let mut script: Vec<ScriptEntry> = r
                    .log
                    .iter()
                    .take(100)
                    .map(|l| ScriptEntry {
                        expected: Observation::new("log", l.clone()),
                        actual: Observation::new("log", l.clone()),
                    })
                    .collect();
                if let (Some(e), Some(a)) = (
                    cause.and_then(|c| c.get("expected")),
                    cause.and_then(|c| c.get("actual")),
                ) {
                    script.push(ScriptEntry {
                        expected: Observation::new("stdout", e.clone()),
                        actual: Observation::new("stdout", a.clone()),
                    });
                } else if r.passed == Some(false) {
                    script.push(ScriptEntry {
                        expected: Observation::new("check", r.description.clone()),
                        actual: Observation::new(
                            "rationale",
                            rationale.clone().unwrap_or_default(),
                        ),
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
                }
                .map(|m| match &crashed {
                    Some(c) => format!("{m}\n{c}"),
                    None => m,
                });
                if r.passed != Some(true) {
                    ok = false;
                }
                children.push(CheckResult {
                    id: item.id.clone(),
                    description: if r.description.is_empty() {
                        item.description.clone()
                    } else {
                        r.description.clone()
                    },
                    dependencies: match &r.dependency {
                        Some(d) => vec![format!("{}/{d}", check.id)],
                        None => cc.deps_of(check, item),
                    },
                    result: r.passed,
                    script,
                    points: if r.passed == Some(true) {
                        item.points
                    } else {
                        0.0
                    },
                    max_points: item.points,
                    time_ms: 0,
                    hidden: item.hidden || check.hidden,
                    message: msg,
                    error: None,
                    children: Vec::new(),
                });
            }
            let passed = children.iter().filter(|c| c.result == Some(true)).count();
            if !ok {
                message = Some(format!(
                    "{passed} of {} check50 checks passed",
                    children.len()
                ));
            }
        }
        Run::Stopped(r) => {
            ok = false;
            message = Some(format!("check50 was stopped: {r}"));
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
        id: check.id.clone(),
        description: check.description.clone(),
        dependencies: check.depends.clone(),
        result: Some(ok),
        script: vec![ScriptEntry {
            expected: Observation::new("check50", cc.problem.clone()),
            actual: Observation::new(
                "run",
                match &run {
                    Run::Valid(json) => format!(
                        "check50 {} ran",
                        json.version.as_deref().unwrap_or("(unknown version)")
                    ),
                    Run::Stopped(r) => format!("stopped: {r}"),
                    Run::Invalid(r) => format!("invalid: {r}"),
                    Run::Error(r) => format!("error: {r}"),
                },
            ),
        }],
        points: 0.0,
        max_points: 0.0,
        time_ms: started.elapsed().as_millis() as u64,
        hidden: check.hidden,
        message,
        error,
        children: Vec::new(),
    };
    if !matches!(run, Run::Valid(_)) {
        children = rows_not_run(check, cc, &parent);
    }
    parent.children = children;
    (parent, None)
}

/// The rows of a check50 check that did not run, with the check's result.
pub(crate) fn rows_not_run(
    check: &Check,
    cc: &Check50Check,
    parent: &CheckResult,
) -> Vec<CheckResult> {
    cc.items
        .iter()
        .map(|item| CheckResult {
            id: item.id.clone(),
            description: item.description.clone(),
            dependencies: cc.deps_of(check, item),
            result: parent.result.map(|_| false),
            script: Vec::new(),
            points: 0.0,
            max_points: item.points,
            time_ms: 0,
            hidden: item.hidden || check.hidden,
            message: parent.message.clone(),
            error: None,
            children: Vec::new(),
        })
        .collect()
}
