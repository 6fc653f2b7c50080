//! Suite files: the assignment's checks, in YAML (or JSON), with CS50 Check semantics.
//!
//! ```yaml
//! name: hello
//! files: [{path: expected.txt, protected: true}]
//! checks:
//!   - id: compiles
//!     steps: [{run: gcc -o hello hello.c}, {exit: 0}]
//! ```
//!
//! Parsing is strict: unknown keys are errors, and every error names the file, the line and
//! column, and the key: serde's errors where the parser puts them, the errors found after parsing
//! (an unknown dependency, a cycle, a limit out of bounds) at their key (`spans`). A value of
//! the wrong type says what is wanted in the README's words (`values`). See the README
//! ("Checks and grading") for every key.
//!
//! This is the model only: plain data, parsing and validation, no sandbox. Each check kind's
//! model is a module here ([`steps`], [`pytest`], [`check50`], [`graders`] for Gradescope and
//! PrairieLearn graders; its runner is in [`crate::kinds`]),
//! next to the safety scan's rules ([`safety`]), the scanner of the assignment's own Python files
//! ([`pyscan`]) and path rules ([`paths`]).

pub mod check50;
pub mod graders;
pub mod paths;
pub mod pyscan;
pub mod pytest;
pub mod safety;
mod spans;
pub mod steps;
pub mod submission;
mod values;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use corral_images::document::{self, DocumentError};
use corral_sandbox::{Limits, LimitsRequest, Millis, Restrictions, Runtime};
use serde::Deserialize;

use crate::error::SuiteError;
use crate::image_root::check_reference;
pub use check50::{Check50Check, Check50Item};
pub use graders::{GradescopeCheck, PrairieLearnCheck};
pub use paths::relative;
use paths::{assignment_path, normalize_rel};
pub use pytest::{Item, PytestCheck, TestCase};
pub use safety::SafetyConfig;
pub use steps::{Command, Input, Matcher, Step};
pub use submission::{SubmissionFiles, Take};

/// How long a check may take, start to end, when neither the check nor the suite says.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// A whole suite, validated.
#[derive(Debug, Clone)]
pub struct Suite {
    pub name: String,
    pub description: Option<String>,
    /// Default language of the checks (a language id of the registry).
    pub language: Option<String>,
    /// Default container image of the checks (REF); `None`: the language's image, else the host.
    pub image: Option<String>,
    /// Default limits of every run of every check.
    pub limits: LimitsRequest,
    /// Default time a check may take.
    pub timeout: Option<Millis>,
    /// A stricter seccomp profile for every run of every check (replacing the language's).
    pub seccomp: Option<Restrictions>,
    /// The kernel of every check's sandboxes, over the languages' and the caller's default (a
    /// server's `force_gvisor` still wins).
    pub runtime: Option<Runtime>,
    /// Files of the assignment copied in next to the submission.
    pub files: Vec<AssignmentFile>,
    /// Which of the submission's files are graded (`submission: {include, exclude}`; all by
    /// default).
    pub submission: SubmissionFiles,
    /// The checks, in file order.
    pub checks: Vec<Check>,
    /// The optional static safety check of Python files (off unless the suite asks for it).
    pub safety: Option<SafetyConfig>,
    /// The suite file.
    pub path: PathBuf,
    /// The assignment folder: the suite file's folder. Every assignment path is relative to it.
    pub dir: PathBuf,
}

/// A file (or folder) of the assignment.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AssignmentFile {
    /// Relative to the assignment folder; also where it lands in the working directory.
    pub path: String,
    /// Always taken from the assignment, never from the submission (and flagged when the
    /// submission's copy differs). Unprotected files are only copied when the submission lacks them.
    #[serde(default, deserialize_with = "values::flag")]
    pub protected: bool,
    /// Copied only into hidden checks' working directories: a hidden check's input or expected
    /// output, which a visible check's program could otherwise read and print to its student.
    #[serde(default, deserialize_with = "values::flag")]
    pub hidden: bool,
}

/// One check.
#[derive(Debug, Clone)]
pub struct Check {
    pub id: String,
    pub description: String,
    /// Checks that must pass first; this one runs in a copy of their working directories.
    pub depends: Vec<String>,
    /// Points for passing (default 1).
    pub points: f64,
    /// Students see only pass/fail, never expected/actual.
    pub hidden: bool,
    pub timeout: Option<Millis>,
    pub limits: LimitsRequest,
    pub language: Option<String>,
    /// The container image (REF) the check runs in, over the suite's.
    pub image: Option<String>,
    /// A stricter seccomp profile for every run of this check (replacing the suite's).
    pub seccomp: Option<Restrictions>,
    /// The kernel of this check's sandboxes, over the suite's.
    pub runtime: Option<Runtime>,
    pub kind: CheckKind,
}

/// What a check does. Each kind's model is a module of this folder; its runner is the module of
/// the same name in [`crate::kinds`]. A new kind adds both, this variant, its key in `RawCheck`
/// (resolved in `Suite::from_raw`), its arms in [`Check::rubric`] and
/// [`CheckKind::assignment_files`], and its runner's arm in [`crate::kinds::runner_of`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum CheckKind {
    /// A sequence of steps run against live processes (CS50 Check's chains).
    Steps(Vec<Step>),
    /// The assignment's pytest files (public and hidden) with a rubric; see [`pytest`].
    Pytest(Box<PytestCheck>),
    /// A check50 problem folder run by check50 itself; see [`check50`].
    Check50(Box<Check50Check>),
    /// A Gradescope autograder run unmodified; see [`graders`].
    Gradescope(Box<GradescopeCheck>),
    /// A PrairieLearn external grader run unmodified; see [`graders`].
    PrairieLearn(Box<PrairieLearnCheck>),
}

/// A rubric item of a check whose points are its items' (a pytest test or group, a check50
/// check): a row of its own in every report, after its check's.
#[derive(Debug, Clone, PartialEq)]
pub struct RubricItem<'a> {
    /// The row's id: `CHECK/ITEM`.
    pub id: &'a str,
    pub description: &'a str,
    pub points: f64,
    pub hidden: bool,
    /// The row's `dependencies`: its check, or the check50 check it depends on.
    pub dependencies: Vec<String>,
}

impl Check {
    /// Whether the check keeps something from the submission that only Landlock keeps, so only
    /// natively: a check50 problem with hidden checks (their source and expected output are in
    /// the problem folder, which the submission's programs are kept from reading with a
    /// Landlock layer; gVisor has no Landlock). pytest's hidden tests are safe anywhere: they
    /// run in a session of their own.
    pub fn hides_with_landlock(&self) -> bool {
        match &self.kind {
            CheckKind::Check50(c) => c.items.iter().any(|i| i.hidden),
            _ => false,
        }
    }

    /// The rubric items when the check's points are its items' (pytest, check50), in report
    /// order; `None` when the check earns its own `points` (steps).
    pub fn rubric(&self) -> Option<Vec<RubricItem<'_>>> {
        let row = |id, description, points, hidden, after: Option<&String>| RubricItem {
            id,
            description,
            points,
            hidden,
            dependencies: vec![match after {
                Some(d) => format!("{}/{d}", self.id),
                None => self.id.clone(),
            }],
        };
        match &self.kind {
            // Graders' tests are known only once they ran: their rows come with the results.
            CheckKind::Steps(_) | CheckKind::Gradescope(_) | CheckKind::PrairieLearn(_) => None,
            CheckKind::Pytest(pc) => Some(
                pc.items
                    .iter()
                    .map(|i| row(&i.id, &i.description, i.points, i.hidden, None))
                    .collect(),
            ),
            CheckKind::Check50(cc) => Some(
                cc.items
                    .iter()
                    .map(|i| {
                        row(
                            &i.id,
                            &i.description,
                            i.points,
                            i.hidden,
                            i.dependency.as_ref(),
                        )
                    })
                    .collect(),
            ),
        }
    }
}

impl CheckKind {
    /// The assignment files the check reads besides the suite's `files` (test files, a check50
    /// problem's files), relative to the assignment folder: a change to one changes the grade.
    pub fn assignment_files(&self) -> Vec<&String> {
        match self {
            CheckKind::Steps(steps) => steps::files_read(steps),
            CheckKind::Pytest(pc) => pc
                .tests
                .iter()
                .chain(&pc.hidden)
                .chain(&pc.support)
                .chain(&pc.config)
                .collect(),
            CheckKind::Check50(cc) => cc.files.iter().collect(),
            CheckKind::Gradescope(gc) => gc.files.iter().collect(),
            CheckKind::PrairieLearn(pc) => pc.files.iter().collect(),
        }
    }
}

// ------------------------------------------------------------------------------------------ raw

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSuite {
    name: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    language: Option<String>,
    #[serde(default)]
    image: Option<String>,
    #[serde(default)]
    limits: LimitsRequest,
    #[serde(default)]
    timeout: Option<Millis>,
    #[serde(default)]
    seccomp: Option<Restrictions>,
    #[serde(default)]
    runtime: Option<Runtime>,
    #[serde(default)]
    files: Vec<AssignmentFile>,
    #[serde(default)]
    submission: Option<submission::RawSubmissionFiles>,
    #[serde(default)]
    safety: Option<safety::RawSafety>,
    checks: Vec<RawCheck>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCheck {
    id: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default, deserialize_with = "values::ids")]
    depends: Vec<String>,
    #[serde(default, deserialize_with = "values::opt_points")]
    points: Option<f64>,
    #[serde(default, deserialize_with = "values::flag")]
    hidden: bool,
    #[serde(default)]
    timeout: Option<Millis>,
    #[serde(default)]
    limits: LimitsRequest,
    #[serde(default)]
    language: Option<String>,
    #[serde(default)]
    image: Option<String>,
    seccomp: Option<Restrictions>,
    #[serde(default)]
    runtime: Option<Runtime>,
    #[serde(default)]
    steps: Option<Vec<Step>>,
    #[serde(default)]
    pytest: Option<pytest::RawPytest>,
    #[serde(default)]
    check50: Option<check50::RawCheck50>,
    #[serde(default)]
    gradescope: Option<graders::RawGradescope>,
    #[serde(default)]
    prairielearn: Option<graders::RawPrairieLearn>,
}

/// Hides every check that depends, directly or not, on a hidden check: it starts in a copy of
/// that check's working directory, where the hidden run's program could have left what it was
/// given (its input, its expected output's files), and a visible check's messages would show it.
fn hide_dependents_of_hidden(checks: &mut [Check]) {
    loop {
        let hidden: BTreeSet<String> = checks
            .iter()
            .filter(|c| c.hidden)
            .map(|c| c.id.clone())
            .collect();
        let mut changed = false;
        for c in checks.iter_mut().filter(|c| !c.hidden) {
            if c.depends.iter().any(|d| hidden.contains(d)) {
                c.hidden = true;
                changed = true;
            }
        }
        if !changed {
            return;
        }
    }
}

/// An assignment file, not marked `hidden`, that a hidden check's steps read (its input or
/// expected output) and no visible check's do — listed itself, or inside a listed folder: every
/// check's program could read it in its working directory and print it where a student reads.
/// The index of its entry in `files` and why.
fn hidden_checks_file_in_view(
    files: &[AssignmentFile],
    checks: &[Check],
) -> Option<(usize, String)> {
    // Every file steps read, normalised, with whether a visible check reads it and the first
    // hidden check that does.
    let mut read: BTreeMap<PathBuf, (bool, Option<&str>)> = BTreeMap::new();
    for c in checks {
        let CheckKind::Steps(steps) = &c.kind else {
            continue;
        };
        for f in steps::files_read(steps) {
            let e = read.entry(normalize_rel(f)).or_default();
            if c.hidden {
                e.1.get_or_insert(c.id.as_str());
            } else {
                e.0 = true;
            }
        }
    }
    files.iter().enumerate().find_map(|(i, f)| {
        if f.hidden {
            return None;
        }
        let entry = normalize_rel(&f.path);
        // Path::starts_with compares whole components: `data` holds `data/a.txt`, not `data2`.
        let (path, check) = read
            .iter()
            .filter(|(p, _)| p.starts_with(&entry))
            .find_map(|(p, (visible, hidden))| Some((p, (*hidden).filter(|_| !visible)?)))?;
        let what = if *path == entry {
            format!("{:?}", f.path)
        } else {
            format!("{:?} (in the listed folder {:?})", path.display().to_string(), f.path)
        };
        Some((
            i,
            format!(
                "{what} is read by the hidden check {check:?}, but every check's program finds the files listed here in its working directory, where a visible check's program can print it to its student: give a hidden check's files an entry of their own with `hidden: true` (copied only into hidden checks' working directories), or leave them out of `files` (a step reads them from the assignment folder itself)"
            ),
        ))
    })
}

// ------------------------------------------------------------------------------------ loading

impl Suite {
    /// Reads and validates a suite file (`.json` is read as JSON, anything else as YAML).
    pub fn load(path: &Path) -> Result<Suite, SuiteError> {
        Suite::load_in(path, None)
    }

    /// [`Suite::load`] for a run in `image` when one is given (a request's `image`, `--image`):
    /// it becomes the suite's default, and a check50 problem is then compiled by that image's
    /// Python when it runs — not by the host's now, which may be older than the problem's syntax.
    pub fn load_in(path: &Path, image: Option<&str>) -> Result<Suite, SuiteError> {
        let (text, is_json) = document::read(path)?;
        let raw = Suite::read_raw(&text, path, is_json)?;
        let run_in_image = image.is_some();
        let mut suite = Suite::from_raw(raw, &text, path, &document::folder(path), run_in_image)?;
        if let Some(image) = image {
            suite.image = Some(image.to_string());
        }
        Ok(suite)
    }

    /// Parses and validates suite text; `path` names it in errors and locates the assignment folder.
    pub fn parse(text: &str, path: &Path, json: bool) -> Result<Suite, SuiteError> {
        let raw = Suite::read_raw(text, path, json)?;
        Suite::from_raw(raw, text, path, &document::folder(path), false)
    }

    fn read_raw(text: &str, path: &Path, json: bool) -> Result<RawSuite, SuiteError> {
        Ok(if json {
            let mut de = serde_json::Deserializer::from_str(text);
            serde_path_to_error::deserialize(&mut de).map_err(|e| {
                let inner = e.inner();
                let (line, column) = (inner.line(), inner.column());
                // serde_json says the position at the end; the location says it in front.
                let mut message = inner.to_string();
                if let Some(cut) = message.rfind(&format!(" at line {line} column {column}")) {
                    message.truncate(cut);
                }
                // The top level's path is "." (`.: missing field `name``): no key to name.
                let key = e.path().to_string();
                if key != "." {
                    message = format!("{key}: {message}");
                }
                DocumentError::Parse {
                    path: path.to_path_buf(),
                    location: (line > 0).then_some((line, column)),
                    message,
                }
            })?
        } else {
            document::from_yaml(text, path)?
        })
    }

    /// `run_in_image`: the suite runs in an image given at run time (see [`Suite::load_in`]).
    fn from_raw(
        raw: RawSuite,
        text: &str,
        path: &Path,
        dir: &Path,
        run_in_image: bool,
    ) -> Result<Suite, SuiteError> {
        // Errors found here point at the key they are about (see `spans`): the text is read
        // again for its positions only when there is one.
        let positions = std::cell::OnceCell::new();
        let spans = || positions.get_or_init(|| spans::Spans::of(text));
        let at = |key: &str, message: String| {
            SuiteError::File(DocumentError::Parse {
                path: path.to_path_buf(),
                location: spans().locate(key),
                message,
            })
        };
        let invalid = |key: &str, why: String| at(key, format!("{key}: {why}"));
        // About check number `i`: `key` is relative to it, and a message of its kind's model
        // (`steps[4].stderr: …`, `pytest.points: …`) says its key first.
        let check_err = |i: usize, id: &str, key: &str, message: String| {
            let key = if key.is_empty() {
                leading_key(&message)
            } else {
                key
            };
            let full = if key.is_empty() {
                format!("checks[{i}]")
            } else {
                format!("checks[{i}].{key}")
            };
            at(&full, format!("check {id:?}: {message}"))
        };
        if raw.name.trim().is_empty() {
            return Err(invalid("name", "must not be empty".into()));
        }
        raw.limits
            .resolve(&Limits::default())
            .map_err(|e| at(&limit_key("limits", &e), format!("limits: {e}")))?;
        if let Some(image) = &raw.image {
            check_reference(image).map_err(|e| invalid("image", e.to_string()))?;
        }
        let mut seen_files = BTreeSet::new();
        for (i, f) in raw.files.iter().enumerate() {
            let key = format!("files[{i}].path");
            assignment_path(dir, &key, &f.path).map_err(|m| at(&key, m))?;
            if !seen_files.insert(normalize_rel(&f.path)) {
                return Err(invalid(&key, format!("{:?} listed twice", f.path)));
            }
        }

        let mut checks = Vec::new();
        // Each id and the index of the check that has it.
        let mut ids = BTreeMap::new();
        let in_image = run_in_image || raw.image.is_some();
        for (i, rc) in raw.checks.into_iter().enumerate() {
            let id = rc.id.clone();
            if id.is_empty()
                || !id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
            {
                return Err(invalid(
                    &format!("checks[{i}].id"),
                    format!("{id:?} must be made of letters, digits, '_', '-' and '.'"),
                ));
            }
            if let Some(first) = ids.insert(id.clone(), i) {
                let here = spans().locate(&format!("checks[{i}].id"));
                let also = match spans().locate(&format!("checks[{first}].id")) {
                    Some((line, col)) if here.is_some_and(|h| h.0 == line) => {
                        format!(" (also at line {line} column {col})")
                    }
                    Some((line, _)) => format!(" (also at line {line})"),
                    None => String::new(),
                };
                return Err(check_err(
                    i,
                    &id,
                    "id",
                    format!("id: used by two checks{also}"),
                ));
            }
            let points = rc.points.unwrap_or(1.0);
            if !points.is_finite() || points < 0.0 {
                return Err(check_err(
                    i,
                    &id,
                    "points",
                    "points: must be a number >= 0".into(),
                ));
            }
            rc.limits
                .resolve(&Limits::default())
                .map_err(|e| check_err(i, &id, &limit_key("limits", &e), format!("limits: {e}")))?;
            if let Some(image) = &rc.image {
                check_reference(image)
                    .map_err(|e| check_err(i, &id, "image", format!("image: {e}")))?;
            }
            let kinds = [
                rc.steps.is_some(),
                rc.pytest.is_some(),
                rc.check50.is_some(),
                rc.gradescope.is_some(),
                rc.prairielearn.is_some(),
            ];
            if kinds.iter().filter(|k| **k).count() > 1 {
                return Err(check_err(
                    i,
                    &id,
                    "",
                    "give only one of `steps`, `pytest`, `check50`, `gradescope` and `prairielearn`"
                        .into(),
                ));
            }
            let rubric_kind = rc.pytest.is_some() || rc.check50.is_some();
            if rubric_kind && rc.points.is_some() {
                return Err(check_err(
                    i,
                    &id,
                    "points",
                    "points: a pytest or check50 check gets its points from its own `points` (per test)".into(),
                ));
            }
            let language = rc.language.as_ref().or(raw.language.as_ref());
            let at = |m: String| check_err(i, &id, "", m);
            let (kind, points) = if let Some(raw) = rc.gradescope {
                let gc = GradescopeCheck::resolve(raw, rc.points, dir).map_err(at)?;
                (
                    CheckKind::Gradescope(Box::new(gc)),
                    rc.points.unwrap_or(0.0),
                )
            } else if let Some(raw) = rc.prairielearn {
                let pc = PrairieLearnCheck::resolve(raw, points, dir).map_err(at)?;
                (CheckKind::PrairieLearn(Box::new(pc)), points)
            } else {
                match (rc.steps, rc.pytest, rc.check50) {
                    (_, Some(raw), _) => {
                        let pc = PytestCheck::resolve(raw, &id, dir).map_err(at)?;
                        let max = pc.max_points();
                        (CheckKind::Pytest(Box::new(pc)), max)
                    }
                    (_, _, Some(raw)) => {
                        // On the host root check50 runs with the host's Python, which can
                        // compile the problem now; an image's Python may be another version,
                        // so there the run finds what does not compile, as before.
                        let python = (rc.image.is_none() && !in_image)
                            .then(|| Path::new(crate::python_syntax::PYTHON));
                        let cc = Check50Check::resolve(raw, &id, dir, python).map_err(at)?;
                        let max = cc.max_points();
                        (CheckKind::Check50(Box::new(cc)), max)
                    }
                    (Some(steps), None, None) => {
                        steps::validate(&steps, language.is_some(), dir).map_err(at)?;
                        (CheckKind::Steps(steps), points)
                    }
                    (None, None, None) => {
                        return Err(at(
                        "missing `steps` (or `pytest`, `check50`, `gradescope`, `prairielearn`)"
                            .into(),
                    ));
                    }
                }
            };
            if let Some(why) = bad_timeout(rc.timeout) {
                return Err(at(format!("timeout: {why}")));
            }
            checks.push(Check {
                description: rc.description.unwrap_or_else(|| id.clone()),
                id,
                depends: rc.depends,
                points,
                hidden: rc.hidden,
                timeout: rc.timeout,
                limits: rc.limits,
                language: rc.language,
                image: rc.image,
                seccomp: rc.seccomp,
                runtime: rc.runtime,
                kind,
            });
        }
        if checks.is_empty() {
            return Err(invalid("checks", "a suite needs at least one check".into()));
        }
        for (i, c) in checks.iter().enumerate() {
            let mut seen = BTreeSet::new();
            for (j, d) in c.depends.iter().enumerate() {
                let key = format!("depends[{j}]");
                let why = if d == &c.id {
                    "depends: a check cannot depend on itself".to_string()
                } else if !ids.contains_key(d) {
                    format!("depends: unknown check {d:?}")
                } else if !seen.insert(d) {
                    format!("depends: {d:?} listed twice")
                } else {
                    continue;
                };
                return Err(check_err(i, &c.id, &key, why));
            }
        }
        if let Some(why) = bad_timeout(raw.timeout) {
            return Err(invalid("timeout", why.into()));
        }
        if let Some(cycle) = find_cycle(&checks) {
            // At the first check's dependency on the next one around the cycle.
            let i = ids[&cycle[0]];
            let j = checks[i]
                .depends
                .iter()
                .position(|d| *d == cycle[1])
                .expect("a cycle follows dependencies");
            return Err(check_err(
                i,
                &cycle[0],
                &format!("depends[{j}]"),
                format!("depends: dependency cycle {}", cycle.join(" -> ")),
            ));
        }
        hide_dependents_of_hidden(&mut checks);
        if let Some((i, why)) = hidden_checks_file_in_view(&raw.files, &checks) {
            return Err(invalid(&format!("files[{i}].path"), why));
        }
        Ok(Suite {
            name: raw.name,
            description: raw.description,
            language: raw.language,
            image: raw.image,
            limits: raw.limits,
            timeout: raw.timeout,
            seccomp: raw.seccomp,
            runtime: raw.runtime,
            files: raw.files,
            submission: SubmissionFiles::resolve(raw.submission.unwrap_or_default()).map_err(
                |m| {
                    let key = format!("submission.{}", leading_key(&m));
                    at(&key, format!("submission.{m}"))
                },
            )?,
            checks,
            safety: raw
                .safety
                .map(SafetyConfig::resolve)
                .transpose()
                .map_err(|m| {
                    let key = match leading_key(&m) {
                        "" => "safety".to_string(),
                        k => format!("safety.{k}"),
                    };
                    at(&key, format!("safety: {m}"))
                })?
                .flatten(),
            path: path.to_path_buf(),
            dir: dir.to_path_buf(),
        })
    }

    pub fn check(&self, id: &str) -> Option<&Check> {
        self.checks.iter().find(|c| c.id == id)
    }

    /// Total points of the suite.
    pub fn max_score(&self) -> f64 {
        self.checks.iter().map(|c| c.points).sum()
    }

    /// How long a check may take.
    pub fn timeout_of(&self, check: &Check) -> Duration {
        check
            .timeout
            .or(self.timeout)
            .map(|m| m.duration())
            .unwrap_or(DEFAULT_TIMEOUT)
    }

    /// The seccomp profile a check names: its own, or the suite's (`None`: the language's).
    pub fn seccomp_of<'a>(&'a self, check: &'a Check) -> Option<&'a Restrictions> {
        check.seccomp.as_ref().or(self.seccomp.as_ref())
    }

    /// The runtime a check names: its own, or the suite's (`None`: its language's, else the
    /// caller's default).
    pub fn runtime_of(&self, check: &Check) -> Option<Runtime> {
        check.runtime.or(self.runtime)
    }

    /// The language of a check: its own, or the suite's.
    pub fn language_of<'a>(&'a self, check: &'a Check) -> Option<&'a str> {
        check.language.as_deref().or(self.language.as_deref())
    }

    /// The image a check names: its own, or the suite's (`None`: its language's, else the host).
    pub fn image_of<'a>(&'a self, check: &'a Check) -> Option<&'a str> {
        check.image.as_deref().or(self.image.as_deref())
    }
}

/// The key a message of a kind's model starts with (`steps[4].stderr` of `steps[4].stderr: …`),
/// or "" when it starts with none.
fn leading_key(message: &str) -> &str {
    let key = message.split_once(": ").map_or("", |(k, _)| k);
    let keyish = |c: char| c.is_ascii_alphanumeric() || "_.[]".contains(c);
    if key.chars().all(keyish) {
        key
    } else {
        ""
    }
}

/// The key of a limit a `SpecError` is about (`limits.memory`), else `limits` itself.
fn limit_key(limits: &str, e: &corral_sandbox::SpecError) -> String {
    match e {
        corral_sandbox::SpecError::BadLimit { key, .. } => format!("{limits}.{key}"),
        _ => limits.to_string(),
    }
}

/// A dependency cycle, as ids from its first check back to it, if any.
fn find_cycle(checks: &[Check]) -> Option<Vec<String>> {
    let index: BTreeMap<&str, usize> = checks
        .iter()
        .enumerate()
        .map(|(i, c)| (c.id.as_str(), i))
        .collect();
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Active,
        Done,
    }
    let mut mark = vec![Mark::New; checks.len()];
    fn visit(
        i: usize,
        checks: &[Check],
        index: &BTreeMap<&str, usize>,
        mark: &mut [Mark],
        stack: &mut Vec<usize>,
    ) -> Option<Vec<String>> {
        mark[i] = Mark::Active;
        stack.push(i);
        for d in &checks[i].depends {
            let j = index[d.as_str()];
            match mark[j] {
                Mark::Active => {
                    let from = stack.iter().position(|&k| k == j).expect("on the stack");
                    let mut cycle: Vec<String> = stack[from..]
                        .iter()
                        .map(|&k| checks[k].id.clone())
                        .collect();
                    cycle.push(checks[j].id.clone());
                    return Some(cycle);
                }
                Mark::New => {
                    if let Some(c) = visit(j, checks, index, mark, stack) {
                        return Some(c);
                    }
                }
                Mark::Done => {}
            }
        }
        stack.pop();
        mark[i] = Mark::Done;
        None
    }
    for i in 0..checks.len() {
        if mark[i] == Mark::New {
            if let Some(c) = visit(i, checks, &index, &mut mark, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}
/// Why a suite's or check's `timeout` cannot be honoured (the bounds of a wall-time limit).
fn bad_timeout(t: Option<Millis>) -> Option<&'static str> {
    let t = t?.0;
    (t < Duration::from_millis(1) || t > Duration::from_secs(86_400))
        .then_some("must be between 1ms and 24h")
}
