//! A graded submission's report: its rows (one per check, and per rubric item of a pytest,
//! check50 or grader check), the integrity and safety sections, and what the whole means (score,
//! passed, the limit that stopped it). Its exports are the sibling modules'.

use std::collections::BTreeMap;

use corral_sandbox::Runtime;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::image_root::UsedImage;

/// What a step expected or what actually happened: CS50 Check's `{type, value}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Observation {
    #[serde(rename = "type")]
    pub kind: String,
    pub value: Value,
    /// For output matchers: `contains`, `regex`, `exact` or `file`; for a `diff` step
    /// `diff ACTUAL EXPECTED` (the two files it compared).
    #[serde(rename = "match", skip_serializing_if = "Option::is_none")]
    pub matcher: Option<String>,
}

impl Observation {
    pub fn new(kind: &str, value: impl Into<Value>) -> Self {
        Observation {
            kind: kind.to_string(),
            value: value.into(),
            matcher: None,
        }
    }
}

/// One step of a check's script: what was expected, what happened.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScriptEntry {
    pub expected: Observation,
    pub actual: Observation,
}

/// The result of one check.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckResult {
    pub id: String,
    pub description: String,
    pub dependencies: Vec<String>,
    /// `Some(true)` passed, `Some(false)` failed, `None` skipped (a dependency did not pass).
    pub result: Option<bool>,
    pub script: Vec<ScriptEntry>,
    /// Points earned.
    pub points: f64,
    pub max_points: f64,
    pub time_ms: u64,
    pub hidden: bool,
    /// Why it failed or was skipped, in one line (check50's rationale).
    pub message: Option<String>,
    /// Set when corral itself failed (sandbox error) or a test run could not be trusted (an
    /// invalid pytest or check50 report): the check could not be judged.
    pub error: Option<String>,
    /// What staff need to see why a check could not be judged, in corral's words with what the
    /// program wrote (pytest's standard error when its session did not finish). Shown in the
    /// staff view only: it may quote what the submission printed while hidden tests ran.
    pub diagnostics: Option<String>,
    /// On a Gradescope check's own row: what its autograder's `results.json` says for the whole
    /// submission beyond rows, which `--format gradescope` carries through.
    pub gradescope: Option<Box<GradescopeExtras>>,
    /// The grader refused the submission itself (PrairieLearn's `gradable: false`: a syntax
    /// error, a missing file): the student's to fix, not corral's failure, so not an `error`.
    /// `message` is the grader's, shown to students even on a hidden row.
    pub not_gradable: bool,
    /// The sandbox limit that stopped the check's program before it could finish (a grader's
    /// run: no results were read; a step's program, or the step's `timeout` as its wall time),
    /// so a queued submission's verdict can name it (`time_limit`, `memory_limit`, …) as a
    /// run's does. Not in the JSON report: its script says the reason.
    pub stopped_by: Option<corral_sandbox::Status>,
    /// The check failed while a `compile` step's program (or `run: "{compile}"`'s) was the one
    /// it talked to (it exited with the wrong code, a limit ended it): a queued submission's
    /// verdict is then `compile_error`. Not in the JSON report: its script says why.
    pub compile_failed: bool,
    /// A Gradescope test's visibility (`visible`, `hidden`, `after_due_date`,
    /// `after_published`: its own, else its results' default), which `--format gradescope`
    /// keeps. A `hidden` row is left out of students' views entirely (its points still count),
    /// as Gradescope never shows it; the others are hidden rows (pass/fail and points). `None`
    /// on other rows.
    pub visibility: Option<&'static str>,
    /// Rows of a pytest or check50 check's rubric items, while the engine runs; a [`Report`]
    /// lists them after their check and leaves this empty.
    pub children: Vec<CheckResult>,
}

/// The parts of a Gradescope autograder's `results.json` that are not rows: its `leaderboard`
/// entries (`{name, value, order}`, validated) and its top-level `extra_data`, as written.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GradescopeExtras {
    pub leaderboard: Vec<Value>,
    pub extra_data: Option<Value>,
    /// The autograder's own top-level `output` (what Gradescope shows above the tests).
    pub output: Option<String>,
    /// How Gradescope renders that output (`md`, `html`, …), when the autograder said.
    pub output_format: Option<&'static str>,
}

/// A protected assignment file that the submission had in another version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IntegrityFlag {
    pub path: String,
    /// `modified`, `link`, `not_a_file`.
    pub reason: String,
}

/// The integrity section (mograder's integrity check): protected files the submission replaced.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Integrity {
    pub ok: bool,
    pub flagged: Vec<IntegrityFlag>,
}

/// Who reads the output: students never see hidden checks' expected/actual values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    Student,
    Staff,
}

/// Everything learned about one submission.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub suite: String,
    /// In suite order.
    pub results: Vec<CheckResult>,
    pub integrity: Integrity,
    /// The static safety check's findings, when the suite asked for one.
    pub safety: Option<SafetyReport>,
    /// The container image each row's check was graded in, by row id (rows on the host root
    /// have none).
    pub images: BTreeMap<String, UsedImage>,
    /// The runtime (the kernel) each row's check was graded under, by row id.
    pub runtimes: BTreeMap<String, Runtime>,
}

/// One thing the scan found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    pub path: String,
    pub line: u64,
    pub column: u64,
    /// `import`, `call`, `attribute`, `name` or `unanalysable`.
    pub kind: String,
    pub name: String,
}

/// A file the scan could not parse (a syntax error is not a finding: such code cannot run).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScanError {
    pub path: String,
    pub message: String,
}

/// The `safety` section of a report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SafetyReport {
    /// No finding.
    pub ok: bool,
    /// The checks were not run because of the findings.
    pub enforced: bool,
    /// Python files parsed.
    pub scanned: u64,
    pub findings: Vec<Finding>,
    pub errors: Vec<ScanError>,
    /// Set when the scan itself could not be done (the submission is then not run when enforced).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

impl SafetyReport {
    /// One line per finding, for people.
    pub fn describe(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .findings
            .iter()
            .map(|f| {
                let what = match f.kind.as_str() {
                    "import" => format!("imports {}", f.name),
                    "call" => format!("calls {}()", f.name),
                    "attribute" => format!("uses .{}", f.name),
                    "name" => format!("uses {}", f.name),
                    "unanalysable" => format!("could not be analysed ({})", f.name),
                    other => format!("{other} {}", f.name),
                };
                format!("{}:{}:{}: {what}", f.path, f.line, f.column)
            })
            .collect();
        if let Some(f) = &self.failure {
            out.push(format!("the scan failed: {f}"));
        }
        out
    }

    /// The checks must not run.
    pub fn blocks(&self) -> bool {
        self.enforced && (!self.ok || self.failure.is_some())
    }
}

/// Text shown for a skipped check (check50's wording).
pub const SKIPPED: &str = "can't check until a frown turns upside down";
/// The message students get for a failed hidden check.
pub const HIDDEN_FAILED: &str = "hidden check failed";
/// What a student is told of a hidden check that could not be judged: its error (a sandbox's,
/// or an exception check50 or pytest raised in it, whose text may quote the check) is staff's.
pub const HIDDEN_ERROR: &str = "hidden check could not be checked (staff see why)";

impl CheckResult {
    /// A row that says nothing yet: failed, no points, no script, no dependency.
    pub fn new(id: impl Into<String>, description: impl Into<String>) -> Self {
        CheckResult {
            id: id.into(),
            description: description.into(),
            dependencies: Vec::new(),
            result: Some(false),
            script: Vec::new(),
            points: 0.0,
            max_points: 0.0,
            time_ms: 0,
            hidden: false,
            message: None,
            error: None,
            diagnostics: None,
            gradescope: None,
            not_gradable: false,
            stopped_by: None,
            compile_failed: false,
            visibility: None,
            children: Vec::new(),
        }
    }

    /// The script as `view` may see it.
    pub fn visible_script(&self, view: View) -> Vec<&ScriptEntry> {
        // A refused submission's script says why (CS50's format has no message).
        if self.hidden && view == View::Student && !self.not_gradable {
            return Vec::new();
        }
        self.script
            .iter()
            // Gradescope never shows an autograder's `extra_data` to students.
            .filter(|e| view == View::Staff || e.expected.kind != "extra_data")
            .collect()
    }

    /// Left out of `view` entirely: a Gradescope `hidden` test, for students.
    pub fn omitted(&self, view: View) -> bool {
        view == View::Student && self.visibility == Some("hidden")
    }

    /// The diagnostics as `view` may see them: staff only.
    pub fn visible_diagnostics(&self, view: View) -> Option<&str> {
        match view {
            View::Staff => self.diagnostics.as_deref(),
            View::Student => None,
        }
    }

    /// The one-line explanation as `view` may see it.
    pub fn visible_message(&self, view: View) -> Option<String> {
        if self.not_gradable {
            return self.message.clone();
        }
        match (self.hidden && view == View::Student, self.result) {
            (true, Some(false)) => Some(
                self.error
                    .as_ref()
                    .map(|_| HIDDEN_ERROR.to_string())
                    .unwrap_or_else(|| HIDDEN_FAILED.to_string()),
            ),
            (true, _) => self.result.is_none().then(|| SKIPPED.to_string()),
            (false, _) => self.message.clone(),
        }
    }
}

impl Report {
    pub fn score(&self) -> f64 {
        self.results.iter().map(|r| r.points).sum()
    }

    pub fn max_score(&self) -> f64 {
        self.results.iter().map(|r| r.max_points).sum()
    }

    /// Every check passed.
    pub fn passed(&self) -> bool {
        self.results.iter().all(|r| r.result == Some(true))
    }

    /// Some check could not be judged because corral failed.
    pub fn has_errors(&self) -> bool {
        self.results.iter().any(|r| r.error.is_some())
    }

    /// Some grader refused the submission as not gradable (and nothing failed in corral).
    pub fn not_gradable(&self) -> bool {
        self.results.iter().any(|r| r.not_gradable)
    }

    /// When the first check that failed (in the report's order) failed on the program of a
    /// `compile` step, that row: a queued submission's verdict is `compile_error`.
    pub fn failed_to_compile(&self) -> Option<&CheckResult> {
        let failed = self.results.iter().find(|r| r.result == Some(false))?;
        failed.compile_failed.then_some(failed)
    }

    /// When the first check that failed (in the report's order) failed because a sandbox limit
    /// ended its program — a grader's run, a step's program, a step's `timeout` —, that row and
    /// the limit: a queued submission's verdict names it, as a run's does.
    pub fn stopped(&self) -> Option<(&CheckResult, corral_sandbox::Status)> {
        let failed = self.results.iter().find(|r| r.result == Some(false))?;
        failed.stopped_by.map(|s| (failed, s))
    }

    /// The images the checks were graded in, each once, in suite order (empty: all on the host).
    pub fn used_images(&self) -> Vec<UsedImage> {
        let mut out: Vec<UsedImage> = Vec::new();
        for r in &self.results {
            if let Some(i) = self.images.get(&r.id) {
                if !out.contains(i) {
                    out.push(i.clone());
                }
            }
        }
        out
    }

    /// The rows graded under gVisor, in suite order (empty: every check ran natively).
    pub fn gvisor_rows(&self) -> Vec<&str> {
        self.results
            .iter()
            .filter(|r| self.runtimes.get(&r.id) == Some(&Runtime::Gvisor))
            .map(|r| r.id.as_str())
            .collect()
    }
}
