//! pytest checks: the assignment's public and hidden test files run with pytest inside the
//! sandbox, the outcome read from pytest's own JUnit XML and mapped to a rubric.
//!
//! ```yaml
//! - id: tests
//!   pytest:
//!     tests: [test_public.py]            # public test files (assignment paths)
//!     hidden: [test_hidden.py]           # students see pass/fail only; run in a separate session
//!     points: {test_add: 2}              # per-test weights (default: default_points, 1)
//!     groups: [{id: negatives, tests: [test_neg, test_neg_big], points: 2}]   # all or nothing
//! ```
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
//!   the snapshot. Only then does it write a summary (nonce, exit code, outcomes, what changed) into
//!   a folder with an unpredictable name, next to the JUnit report.
//! - The host reads both files without following links ([`corral_sandbox::Sandbox::read_file`]),
//!   and accepts the run only if: the process ended by itself with pytest's exit code 0 or 1; the
//!   summary carries the nonce and the same exit code; nothing was tampered with; the JUnit XML
//!   parses and lists exactly the tests the summary saw, with the same outcomes; the exit code
//!   agrees with the failures; and every test the assignment's files define is there (or its
//!   module failed to import, which fails its tests). Anything else is an invalid run: an error,
//!   never a point.
//! - Hidden tests run in a second pytest session whose output students never see, so a public
//!   test's failure message cannot carry a hidden test's source.
//!
//! What remains: code in the pytest process can, in principle, find the bootstrap's state in
//! memory (the nonce, the snapshot) and forge a consistent summary, or defeat a test by returning
//! objects that compare equal to anything. That takes an attack written against corral itself; the
//! README ("pytest suites") says what staff can do about it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use corral_sandbox::{Mount, NoSink, Outcome, Pool, RunSpec, SandboxConfig, Status, Stdin};
use serde::Deserialize;
use serde_json::Value;

use crate::engine::Plan;
use crate::pyscan;
use crate::report::{CheckResult, Observation, ScriptEntry};
use crate::suite::{relative, Check, Suite};

/// Where the test files are mounted (read-only) inside the sandbox.
pub const TESTS_DIR: &str = "/corral/tests";
/// The Python that runs pytest inside the sandbox (Debian's, with `python3-pytest`).
pub const PYTHON: &str = "/usr/bin/python3";
/// The bootstrap that runs pytest inside the sandbox.
pub const BOOTSTRAP: &str = include_str!("pytest_boot.py");
/// Largest JUnit report read.
const MAX_REPORT: u64 = 16 << 20;
/// Largest summary read.
const MAX_SUMMARY: u64 = 4 << 20;

/// A pytest check, resolved against the assignment's test files.
#[derive(Debug, Clone)]
pub struct PytestCheck {
    /// Public test files (assignment paths).
    pub tests: Vec<String>,
    /// Hidden test files.
    pub hidden: Vec<String>,
    /// Other assignment files mounted next to the tests (helpers, data, a `conftest.py`).
    pub support: Vec<String>,
    /// The assignment's pytest configuration, passed with `-c`.
    pub config: Option<String>,
    /// Every test the files define, public first.
    pub cases: Vec<TestCase>,
    /// The rubric: one item per group and per test in no group.
    pub items: Vec<Item>,
    /// A test running longer fails (the session goes on); none by default.
    pub test_timeout: Option<std::time::Duration>,
}

/// A test function (all its parametrized cases together).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestCase {
    /// The test file, relative to the assignment folder.
    pub file: String,
    /// `test_add` or `TestMath::test_add`.
    pub name: String,
    pub doc: Option<String>,
    pub hidden: bool,
}

impl TestCase {
    /// The node id without parameters: `test_public.py::test_add`.
    pub fn node(&self) -> String {
        format!("{}::{}", self.file, self.name)
    }

    /// Whether a node id of pytest's is this test (or one of its parametrized cases).
    fn is(&self, nodeid: &str) -> bool {
        let base = nodeid.split('[').next().unwrap_or(nodeid);
        base == self.node()
    }
}

/// A rubric item: points for passing every one of its tests.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    /// The result id: `CHECK/FILE::TEST` or `CHECK/GROUP`.
    pub id: String,
    pub description: String,
    pub points: f64,
    pub hidden: bool,
    /// Indices into [`PytestCheck::cases`].
    pub members: Vec<usize>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPytest {
    #[serde(default)]
    tests: Vec<String>,
    #[serde(default)]
    hidden: Vec<String>,
    #[serde(default)]
    support: Vec<String>,
    #[serde(default)]
    config: Option<String>,
    #[serde(default)]
    points: BTreeMap<String, f64>,
    #[serde(default)]
    default_points: Option<f64>,
    #[serde(default)]
    groups: Vec<RawGroup>,
    #[serde(default)]
    test_timeout: Option<corral_sandbox::Millis>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGroup {
    id: String,
    #[serde(default)]
    description: Option<String>,
    tests: Vec<String>,
    #[serde(default)]
    points: Option<f64>,
}

fn points_ok(p: f64) -> bool {
    p.is_finite() && p >= 0.0
}

/// Reads an assignment file (a path already checked to be relative).
fn read_assignment(dir: &Path, p: &str) -> Result<String, String> {
    let full = dir.join(p);
    let meta = std::fs::symlink_metadata(&full)
        .map_err(|_| format!("{p:?} is not in the assignment folder {}", dir.display()))?;
    if !meta.is_file() {
        return Err(format!("{p:?} is not a regular file"));
    }
    std::fs::read_to_string(&full).map_err(|e| format!("{p:?}: {e}"))
}

fn check_path(dir: &Path, key: &str, p: &str) -> Result<(), String> {
    relative(p).map_err(|why| format!("{key}: {p:?} {why}"))?;
    std::fs::symlink_metadata(dir.join(p))
        .map(|_| ())
        .map_err(|_| {
            format!(
                "{key}: {p:?} is not in the assignment folder {}",
                dir.display()
            )
        })
}

impl PytestCheck {
    /// Validates a check's `pytest` section: the files exist, the rubric names tests that exist,
    /// no test is counted twice. Errors are `key: message`.
    pub(crate) fn resolve(raw: RawPytest, check_id: &str, dir: &Path) -> Result<Self, String> {
        if raw.tests.is_empty() && raw.hidden.is_empty() {
            return Err("pytest: give at least one test file in `tests` or `hidden`".into());
        }
        let default_points = raw.default_points.unwrap_or(1.0);
        if !points_ok(default_points) {
            return Err("pytest.default_points: must be a number >= 0".into());
        }
        let mut seen = BTreeSet::new();
        let mut cases = Vec::new();
        for (key, files, hidden) in [("tests", &raw.tests, false), ("hidden", &raw.hidden, true)] {
            for (i, f) in files.iter().enumerate() {
                let key = format!("pytest.{key}[{i}]");
                check_path(dir, &key, f)?;
                if !f.ends_with(".py") {
                    return Err(format!("{key}: {f:?} is not a .py file"));
                }
                if !seen.insert(f.clone()) {
                    return Err(format!("{key}: {f:?} listed twice"));
                }
                let src = read_assignment(dir, f).map_err(|e| format!("{key}: {e}"))?;
                let found = pyscan::pytest_tests(&src);
                if found.is_empty() {
                    return Err(format!(
                        "{key}: {f:?} defines no test (test_* functions or Test* classes)"
                    ));
                }
                for t in found {
                    cases.push(TestCase {
                        file: f.clone(),
                        name: t.name,
                        doc: t.doc,
                        hidden,
                    });
                }
            }
        }
        for (i, f) in raw.support.iter().enumerate() {
            let key = format!("pytest.support[{i}]");
            check_path(dir, &key, f)?;
            if !seen.insert(f.clone()) {
                return Err(format!("{key}: {f:?} listed twice"));
            }
        }
        if let Some(c) = &raw.config {
            check_path(dir, "pytest.config", c)?;
            let ext = Path::new(c).extension().and_then(|e| e.to_str());
            if !matches!(ext, Some("ini" | "cfg" | "toml")) {
                return Err(format!(
                    "pytest.config: {c:?} must be a .ini, .cfg or .toml file (pytest reads it by its extension)"
                ));
            }
            if seen.contains(c) {
                return Err(format!(
                    "pytest.config: {c:?} is also a test or support file"
                ));
            }
        }

        // Which cases a rubric key names.
        let resolve_key = |key: &str, what: &str| -> Result<Vec<usize>, String> {
            if key.contains('[') {
                return Err(format!(
                    "{what}: {key:?}: name a test function (name, Class::name or file::name); its parametrized cases count together"
                ));
            }
            let hits: Vec<usize> = cases
                .iter()
                .enumerate()
                .filter(|(_, c)| c.name == key || c.node() == key)
                .map(|(i, _)| i)
                .collect();
            match hits.len() {
                0 => Err(format!(
                    "{what}: {key:?} is not a test of {}",
                    files_list(&cases)
                )),
                1 => Ok(hits),
                _ => Err(format!(
                    "{what}: {key:?} is ambiguous ({}); write FILE::NAME",
                    hits.iter()
                        .map(|&i| cases[i].node())
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            }
        };

        let mut owner: Vec<Option<String>> = vec![None; cases.len()];
        let mut items = Vec::new();
        let mut group_ids = BTreeSet::new();
        for (g_i, g) in raw.groups.iter().enumerate() {
            let key = format!("pytest.groups[{g_i}]");
            if g.id.is_empty()
                || !g
                    .id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
            {
                return Err(format!(
                    "{key}.id: {:?} must be made of letters, digits, '_', '-' and '.'",
                    g.id
                ));
            }
            if !group_ids.insert(g.id.clone()) {
                return Err(format!("{key}.id: {:?} used twice", g.id));
            }
            if g.tests.is_empty() {
                return Err(format!("{key}.tests: must not be empty"));
            }
            let points = g.points.unwrap_or(default_points);
            if !points_ok(points) {
                return Err(format!("{key}.points: must be a number >= 0"));
            }
            let mut members = Vec::new();
            for (t_i, t) in g.tests.iter().enumerate() {
                for m in resolve_key(t, &format!("{key}.tests[{t_i}]"))? {
                    if let Some(o) = &owner[m] {
                        return Err(format!(
                            "{key}.tests[{t_i}]: {} is already in {o}",
                            cases[m].node()
                        ));
                    }
                    owner[m] = Some(format!("group {:?}", g.id));
                    members.push(m);
                }
            }
            items.push(Item {
                id: format!("{check_id}/{}", g.id),
                description: g.description.clone().unwrap_or_else(|| g.id.clone()),
                points,
                hidden: members.iter().any(|&m| cases[m].hidden),
                members,
            });
        }
        let mut weights: Vec<Option<f64>> = vec![None; cases.len()];
        for (k, p) in &raw.points {
            let what = format!("pytest.points.{k}");
            if !points_ok(*p) {
                return Err(format!("{what}: must be a number >= 0"));
            }
            for m in resolve_key(k, &what)? {
                if let Some(o) = &owner[m] {
                    return Err(format!(
                        "{what}: {} is in {o}, which has its own points",
                        cases[m].node()
                    ));
                }
                if weights[m].is_some() {
                    return Err(format!("{what}: {} is given points twice", cases[m].node()));
                }
                weights[m] = Some(*p);
            }
        }
        for (i, c) in cases.iter().enumerate() {
            if owner[i].is_none() {
                items.push(Item {
                    id: format!("{check_id}/{}", c.node()),
                    description: c.doc.clone().unwrap_or_else(|| c.node()),
                    points: weights[i].unwrap_or(default_points),
                    hidden: c.hidden,
                    members: vec![i],
                });
            }
        }
        // Groups first, then the tests in file order; keep the files' order overall.
        items.sort_by_key(|it| it.members.iter().copied().min().unwrap_or(usize::MAX));
        Ok(PytestCheck {
            tests: raw.tests,
            hidden: raw.hidden,
            support: raw.support,
            config: raw.config,
            cases,
            items,
            test_timeout: raw.test_timeout.map(|m| m.duration()),
        })
    }

    /// The rubric's total.
    pub fn max_points(&self) -> f64 {
        self.items.iter().map(|i| i.points).sum()
    }

    /// Whether the assignment ships a `conftest.py` (then pytest may load conftest files, from
    /// the read-only test folder only).
    fn has_conftest(&self) -> bool {
        self.support
            .iter()
            .any(|s| Path::new(s).file_name().is_some_and(|n| n == "conftest.py"))
    }
}

fn files_list(cases: &[TestCase]) -> String {
    let files: BTreeSet<&str> = cases.iter().map(|c| c.file.as_str()).collect();
    files.into_iter().collect::<Vec<_>>().join(", ")
}

// ------------------------------------------------------------------------------ test folders

/// Host folders holding the files of one pytest session, shared by every grading of the same
/// assignment in this process (so pooled sandboxes of that shape are reused), removed when the
/// last user is done.
static FOLDERS: Mutex<Vec<(String, Weak<tempfile::TempDir>)>> = Mutex::new(Vec::new());

/// The folder (mounted at [`TESTS_DIR`]) for one session: these files, world-readable, owned by
/// the host user; the sandbox sees it read-only.
pub(crate) fn tests_folder(
    dir: &Path,
    files: &[&String],
) -> std::io::Result<Arc<tempfile::TempDir>> {
    use std::os::unix::fs::PermissionsExt;
    let mut contents = Vec::new();
    for f in files {
        contents.push(((*f).clone(), std::fs::read(dir.join(f))?));
    }
    let key = {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        contents.hash(&mut h);
        format!("{}\0{:016x}", dir.display(), h.finish())
    };
    let mut folders = FOLDERS.lock().unwrap_or_else(|e| e.into_inner());
    folders.retain(|(_, w)| w.strong_count() > 0);
    if let Some(t) = folders
        .iter()
        .find(|(k, _)| *k == key)
        .and_then(|(_, w)| w.upgrade())
    {
        return Ok(t);
    }
    let t = tempfile::Builder::new().prefix("corral-tests-").tempdir()?;
    std::fs::set_permissions(t.path(), std::fs::Permissions::from_mode(0o755))?;
    for (rel, bytes) in &contents {
        let to = t.path().join(rel);
        let mut at = t.path().to_path_buf();
        for c in Path::new(rel)
            .parent()
            .into_iter()
            .flat_map(|p| p.components())
        {
            at.push(c);
            if !at.is_dir() {
                std::fs::create_dir(&at)?;
                std::fs::set_permissions(&at, std::fs::Permissions::from_mode(0o755))?;
            }
        }
        std::fs::write(&to, bytes)?;
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o644))?;
    }
    let t = Arc::new(t);
    folders.push((key, Arc::downgrade(&t)));
    Ok(t)
}

/// Creates (or finds) the test folders of every pytest and check50 check of the suite; holding
/// them keeps the same folders, and so the same pooled sandboxes, for every submission graded
/// meanwhile (batch grading).
pub fn keep_folders(suite: &Suite) -> std::io::Result<Vec<Arc<tempfile::TempDir>>> {
    let mut out = Vec::new();
    for c in &suite.checks {
        match &c.kind {
            crate::suite::CheckKind::Pytest(pc) => {
                for files in [&pc.tests, &pc.hidden] {
                    if files.is_empty() {
                        continue;
                    }
                    let mut mounted: Vec<&String> = files.iter().collect();
                    mounted.extend(pc.support.iter());
                    mounted.extend(pc.config.iter());
                    out.push(tests_folder(&suite.dir, &mounted)?);
                }
            }
            crate::suite::CheckKind::Check50(cc) => {
                out.push(tests_folder(
                    &suite.dir,
                    &cc.files.iter().collect::<Vec<_>>(),
                )?);
            }
            _ => {}
        }
    }
    Ok(out)
}

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
    /// The run was stopped (limit, timeout, signal): the submission's doing, its tests fail.
    Stopped(String),
    /// The run cannot be trusted (no or bad report, tampering, …): an error, never a point.
    /// `what` is corral's own wording, safe to show anyone; `detail` may quote what the
    /// submission controlled (names of its plugins, of tests in a forged report) and is shown to
    /// staff only when the session ran hidden tests.
    Invalid { what: &'static str, detail: String },
    /// corral itself failed.
    Error(String),
}

#[derive(Debug, Deserialize)]
struct Summary {
    nonce: String,
    exit: i64,
    finished: bool,
    outcomes: BTreeMap<String, String>,
    collect_errors: BTreeMap<String, String>,
    tampered: Vec<String>,
}

fn random_hex() -> String {
    let mut b = [0u8; 16];
    getrandom::getrandom(&mut b).expect("the kernel's random numbers");
    b.iter().map(|x| format!("{x:02x}")).collect()
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

fn invalid(what: &'static str, detail: impl std::fmt::Display) -> Session {
    let detail = detail.to_string();
    Session::Invalid {
        what,
        detail: if detail.is_empty() {
            what.to_string()
        } else {
            format!("{what}: {detail}")
        },
    }
}

/// Checks one session's files against what the host knows, and reads the outcomes.
pub(crate) fn judge(
    outcome: &Outcome,
    nonce: &str,
    summary: Option<Vec<u8>>,
    junit: Option<Vec<u8>>,
    expected: &[&TestCase],
) -> Session {
    match outcome.status {
        Status::SandboxError => {
            return Session::Error(
                outcome
                    .error
                    .clone()
                    .unwrap_or_else(|| "sandbox error".into()),
            )
        }
        Status::Ok | Status::NonzeroExit => {}
        Status::Signaled => {
            return Session::Stopped(format!(
                "pytest was killed by {}",
                crate::engine::signal_name(outcome.signal.unwrap_or(0))
            ))
        }
        _ => {
            return Session::Stopped(
                outcome
                    .reason()
                    .unwrap_or_else(|| outcome.status.as_str().to_string()),
            )
        }
    }
    let code = outcome.exit_code.unwrap_or(-1);
    let Some(summary) = summary else {
        return invalid(
            "pytest ended without finishing its session: no report was written",
            format!("exit code {code}"),
        );
    };
    let summary: Summary = match serde_json::from_slice(&summary) {
        Ok(s) => s,
        Err(e) => return invalid("the session summary is malformed", e),
    };
    if summary.nonce != nonce {
        return invalid(
            "the session summary was not written by corral's pytest runner",
            "",
        );
    }
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
    if failed != (code == 1) {
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
        let ran = tests.keys().any(|id| case.is(id));
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
    Session::Valid {
        tests,
        collect_errors,
        exit: code,
    }
}

/// One pytest session (the public or the hidden tests) in a leased sandbox.
#[allow(clippy::too_many_arguments)]
fn session(
    pool: &Arc<Pool>,
    suite: &Suite,
    pc: &PytestCheck,
    plan: &Plan,
    stage: &Path,
    files: &[String],
    output: Option<&Path>,
) -> (Session, Option<PathBuf>) {
    let mut mounted: Vec<&String> = files.iter().collect();
    mounted.extend(pc.support.iter());
    mounted.extend(pc.config.iter());
    let folder = match tests_folder(&suite.dir, &mounted) {
        Ok(f) => f,
        Err(e) => {
            return (
                Session::Error(format!("preparing the test files: {e}")),
                None,
            )
        }
    };
    let mut mounts = plan.mounts.clone();
    mounts.push(Mount {
        src: folder.path().to_path_buf(),
        dst: PathBuf::from(TESTS_DIR),
        writable: false,
    });
    let shape = SandboxConfig::offline(mounts, plan.limits.disk.bytes());
    let mut lease = match pool.lease(&shape) {
        Ok(l) => l,
        Err(e) => return (Session::Error(format!("sandbox error: {e}")), None),
    };
    let sb = lease.sandbox();
    if let Err(e) = sb.copy_in(stage) {
        return (
            Session::Error(format!("copying files into the sandbox: {e}")),
            None,
        );
    }
    let nonce = random_hex();
    let out_dir = format!(".corral-{}", random_hex());
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
    });
    let mut spec = RunSpec::new(vec![
        PYTHON.into(),
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
    let read = |name: &str, max: u64| -> Result<Option<Vec<u8>>, String> {
        sb.read_file(&Path::new(&out_dir).join(name), max)
            .map_err(|e| format!("reading pytest's {name}: {e}"))
    };
    let (summary, junit) = match (
        read("summary.json", MAX_SUMMARY),
        read("junit.xml", MAX_REPORT),
    ) {
        (Ok(s), Ok(j)) => (s, j),
        (Err(e), _) | (_, Err(e)) => return (Session::Error(e), None),
    };
    let expected: Vec<&TestCase> = pc
        .cases
        .iter()
        .filter(|c| files.contains(&c.file))
        .collect();
    let verdict = judge(&outcome, &nonce, summary, junit, &expected);
    let mut out = None;
    if let (Session::Valid { .. }, Some(dir)) = (&verdict, output) {
        match sb.copy_out(dir, plan.limits.disk.bytes()) {
            Ok(_) => out = Some(dir.to_path_buf()),
            Err(e) => {
                return (
                    Session::Error(format!("copying the working directory out: {e}")),
                    None,
                )
            }
        }
    }
    drop(lease);
    drop(folder);
    (verdict, out)
}

fn clip(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut cut = max;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}...", &s[..cut])
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

/// Runs a pytest check: the public session, then the hidden one; one result for the check
/// (`children`: one per rubric item).
pub(crate) fn run_check(
    pool: &Arc<Pool>,
    suite: &Suite,
    check: &Check,
    pc: &PytestCheck,
    plan: &Plan,
    stage: &Path,
    output: Option<&Path>,
) -> (CheckResult, Option<PathBuf>) {
    let started = Instant::now();
    let mut sessions: Vec<(bool, Session)> = Vec::new();
    let mut script = Vec::new();
    let mut out = None;
    for (hidden, files) in [(false, &pc.tests), (true, &pc.hidden)] {
        if files.is_empty() {
            continue;
        }
        // The working directory dependents get is the last session's.
        let (s, o) = session(pool, suite, pc, plan, stage, files, output);
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
            Session::Stopped(r) => format!("stopped: {r}"),
            Session::Invalid { what, .. } if hidden => format!("invalid: {what}"),
            Session::Invalid { detail, .. } => format!("invalid: {detail}"),
            Session::Error(r) => format!("error: {r}"),
        };
        let which = if hidden { "hidden tests" } else { "tests" };
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
                            Observation::new("error", clip(err, crate::engine::MAX_VALUE)),
                            Some(format!(
                                "{} could not be imported: {}",
                                case.file,
                                headline(err)
                            )),
                        )
                    } else if let Some((id, (o, text))) =
                        ran.iter().find(|(_, (o, _))| o != "passed")
                    {
                        (
                            Observation::new(o, clip(text, crate::engine::MAX_VALUE)),
                            Some({
                                let verb = if o == "skipped" {
                                    "was skipped"
                                } else {
                                    "failed"
                                };
                                match headline(text) {
                                    h if h.is_empty() => format!("{id} {verb}"),
                                    h => format!("{id} {verb}: {h}"),
                                }
                            }),
                        )
                    } else {
                        passed_tests += 1;
                        (Observation::new("passed", ran.len() as u64), None)
                    }
                }
                Session::Stopped(r) => (
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
            id: item.id.clone(),
            description: item.description.clone(),
            dependencies: vec![check.id.clone()],
            result: Some(ok),
            script: entries,
            points: if ok { item.points } else { 0.0 },
            max_points: item.points,
            time_ms: 0,
            hidden: item.hidden || check.hidden,
            message: (!ok).then(|| {
                let mut f = failures;
                f.dedup();
                f.join("\n")
            }),
            error: None,
            children: Vec::new(),
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
            Session::Stopped(r) => Some(format!(
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
    // The first public failure says why (hidden ones never reach this visible line).
    if let Some(first) = children
        .iter()
        .find(|c| !c.hidden && c.result == Some(false))
        .and_then(|c| c.message.as_deref())
        .and_then(|m| m.lines().next())
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
    let parent = CheckResult {
        id: check.id.clone(),
        description: check.description.clone(),
        dependencies: check.depends.clone(),
        result: Some(ok),
        script,
        points: 0.0,
        max_points: 0.0,
        time_ms: started.elapsed().as_millis() as u64,
        hidden: check.hidden,
        message: (!ok).then_some(message),
        error,
        children,
    };
    (parent, if ok { out } else { None })
}

/// The rows of a pytest check that did not run (a dependency did not pass, or its working
/// directory could not be prepared): its items, with the same result as the check.
pub(crate) fn rows_not_run(
    check: &Check,
    pc: &PytestCheck,
    parent: &CheckResult,
) -> Vec<CheckResult> {
    pc.items
        .iter()
        .map(|item| CheckResult {
            id: item.id.clone(),
            description: item.description.clone(),
            dependencies: vec![check.id.clone()],
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

/// Integrity: the submission has one of the test files in another version.
pub(crate) fn integrity_flags(
    suite: &Suite,
    submission: &Path,
) -> Vec<crate::report::IntegrityFlag> {
    let mut flags = Vec::new();
    let mut seen = HashMap::new();
    for c in &suite.checks {
        let crate::suite::CheckKind::Pytest(pc) = &c.kind else {
            continue;
        };
        for f in pc
            .tests
            .iter()
            .chain(&pc.hidden)
            .chain(&pc.support)
            .chain(&pc.config)
        {
            if seen.insert(f.clone(), ()).is_some() {
                continue;
            }
            if let Some(reason) =
                crate::stage::compare_file(&suite.dir.join(f), submission, Path::new(f))
            {
                flags.push(crate::report::IntegrityFlag {
                    path: f.clone(),
                    reason: reason.into(),
                });
            }
        }
    }
    flags
}

#[cfg(test)]
mod tests {
    use super::*;

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
