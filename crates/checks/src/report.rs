//! Results of a graded submission and their exports: corral's JSON (CS50 Check's shape plus points,
//! timings and integrity), strict CS50 JSON, Gradescope's `results.json` and check50-style text.

use std::collections::BTreeMap;

use corral_sandbox::Runtime;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

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

/// Script kinds of a grader's own bookkeeping, left out of a Gradescope test's `output`: its
/// fields (name, score, status) or the export's other keys already carry them.
const GRADER_BOOKKEEPING: [&str; 7] = [
    "test",
    "tags",
    "extra_data",
    "execution_time",
    "leaderboard",
    "setup",
    "output_format",
];

/// The key of Gradescope's `extra_data` under which an autograder's own keys go when corral's
/// (or an earlier autograder's) already hold their names, by check id (see
/// [`Report::to_gradescope`]).
pub const AUTOGRADER_EXTRA_DATA: &str = "autograder_extra_data";

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

fn num(x: f64) -> Value {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        json!(x as i64)
    } else {
        json!(x)
    }
}

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

    fn cs50_json(&self, view: View) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("dependencies".into(), json!(self.dependencies));
        m.insert("description".into(), json!(self.description));
        m.insert("result".into(), json!(self.result));
        m.insert(
            "script".into(),
            serde_json::to_value(self.visible_script(view)).expect("serializable"),
        );
        m
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

    /// corral's JSON: CS50 Check's `{"results": {...}}` with added fields per check (`points`,
    /// `max_points`, `time_ms`, `hidden`, `message`, `error`, `not_gradable` (when a grader
    /// refused the submission), `diagnostics` (staff view only),
    /// `image`, `runtime`) and at the top
    /// (`suite`, `score`, `max_score`, `passed`, `integrity`, `images`). `image` is `{"name",
    /// "digest"}` of the container image the check ran in (absent on the host root); `images`
    /// lists each once (absent when none); `runtime` is `native` or `gvisor`.
    pub fn to_json(&self, view: View) -> Value {
        let mut results = Map::new();
        for r in self.results.iter().filter(|r| !r.omitted(view)) {
            let mut m = r.cs50_json(view);
            m.insert("points".into(), num(r.points));
            m.insert("max_points".into(), num(r.max_points));
            m.insert("time_ms".into(), json!(r.time_ms));
            m.insert("hidden".into(), json!(r.hidden));
            if let Some(msg) = r.visible_message(view) {
                m.insert("message".into(), json!(msg));
            }
            if let Some(e) = &r.error {
                let hidden = r.hidden && view == View::Student;
                m.insert("error".into(), json!(if hidden { HIDDEN_ERROR } else { e }));
            }
            if r.not_gradable {
                m.insert("not_gradable".into(), json!(true));
            }
            if let Some(d) = r.visible_diagnostics(view) {
                m.insert("diagnostics".into(), json!(d));
            }
            if let Some(i) = self.images.get(&r.id) {
                m.insert("image".into(), json!(i));
            }
            if let Some(rt) = self.runtimes.get(&r.id) {
                m.insert("runtime".into(), json!(rt));
            }
            results.insert(r.id.clone(), Value::Object(m));
        }
        let mut v = json!({
            "suite": self.suite,
            "results": results,
            "score": num(self.score()),
            "max_score": num(self.max_score()),
            "passed": self.passed(),
            "integrity": self.integrity,
        });
        if let Some(s) = &self.safety {
            v["safety"] = serde_json::to_value(s).expect("serializable");
        }
        let images = self.used_images();
        if !images.is_empty() {
            v["images"] = json!(images);
        }
        v
    }

    /// Exactly CS50 Check's shape: `{"results": {id: {dependencies, description, result, script}}}`.
    pub fn to_cs50(&self, view: View) -> Value {
        let results: Map<String, Value> = self
            .results
            .iter()
            .filter(|r| !r.omitted(view))
            .map(|r| (r.id.clone(), Value::Object(r.cs50_json(view))))
            .collect();
        json!({ "results": results })
    }

    /// Gradescope's `results.json`. A Gradescope check's tests keep their own `visibility`
    /// (students' view leaves `hidden` ones out); other hidden checks are `after_published`;
    /// their output has no expected/actual values unless `view` is staff.
    ///
    /// A Gradescope check's own `leaderboard` and `extra_data` are carried through (in the
    /// student view only when its row is visible to students, as its script is): the
    /// leaderboard entries as written, in suite order (an entry whose name an earlier check's
    /// took is named `CHECK/NAME`); the autograder's `extra_data` keys beside corral's own,
    /// which never move. A key corral's (or an earlier check's) already holds goes, with any
    /// `extra_data` that is not an object, under [`AUTOGRADER_EXTRA_DATA`]`.CHECK`, so nothing
    /// of either side is lost. Students never get an autograder's `extra_data`, as on
    /// Gradescope.
    pub fn to_gradescope(&self, view: View) -> Value {
        let shown: Vec<&CheckResult> = self.results.iter().filter(|r| !r.omitted(view)).collect();
        // A pytest, check50 or grader check's own row says no more than its tests' rows when
        // it went as they say: students get no test of its own (a 0/0 "failed" test they cannot
        // fix), only when it has something to tell (an error, a stop, a refusal). Staff keep it
        // (a grader's own log is there).
        let tested: Vec<&CheckResult> = shown
            .iter()
            .copied()
            .filter(|r| view == View::Staff || !self.said_by_its_rows(r))
            .collect();
        let tests: Vec<Value> = tested
            .iter()
            .map(|r| {
                let mut out = Vec::new();
                if let Some(m) = r.visible_message(view) {
                    out.push(m);
                }
                for e in r.visible_script(view) {
                    match (e.expected.kind.as_str(), e.actual.kind.as_str()) {
                        // An autograder's own bookkeeping (its test's name and result, tags,
                        // timing, the cached environment): the row's fields say it already.
                        (k, _) if GRADER_BOOKKEEPING.contains(&k) => continue,
                        // check50's rationale for a failed check: the message already.
                        ("check", "rationale") => continue,
                        // check50's log of a failed check (what it ran, a compiler's errors),
                        // as its own results page shows it.
                        ("log", "log") => {
                            if r.result == Some(false) {
                                out.extend(e.actual.value.as_str().map(str::to_string));
                            }
                            continue;
                        }
                        // A grader's log: the text, as Gradescope shows a log.
                        ("run", "output") => {
                            if let Some(log) = e.actual.value.as_str().filter(|t| !t.is_empty()) {
                                out.push(log.to_string());
                            }
                            continue;
                        }
                        _ => {}
                    }
                    if e.expected != e.actual {
                        out.push(format!(
                            "expected {}: {}, actual {}: {}",
                            e.expected.kind,
                            show(&e.expected.value, 2000),
                            e.actual.kind,
                            show(&e.actual.value, 2000)
                        ));
                    }
                }
                out.extend(r.visible_diagnostics(view).map(str::to_string));
                let mut test = json!({
                    "name": r.description,
                    "number": r.id,
                    "score": num(r.points),
                    "max_score": num(r.max_points),
                    "status": if r.result == Some(true) { "passed" } else { "failed" },
                    "output": out.join("\n"),
                    "visibility": match r.visibility {
                        Some(v) if v != "visible" => v,
                        _ if r.hidden => "after_published",
                        _ => "visible",
                    },
                });
                // An autograder test's own fields, as it wrote them (its `extra_data` never to
                // students, as on Gradescope).
                for e in r.visible_script(view) {
                    match e.actual.kind.as_str() {
                        "output_format" | "tags" => {
                            test[e.actual.kind.as_str()] = e.actual.value.clone()
                        }
                        "extra_data" if view == View::Staff => {
                            test["extra_data"] = e.actual.value.clone()
                        }
                        _ => {}
                    }
                }
                test
            })
            .collect();
        // The autograders' own top-level outputs first, as Gradescope shows them; then corral's
        // count of the rows.
        let mut output: String = shown
            .iter()
            .filter_map(|r| r.gradescope.as_deref()?.output.as_deref())
            .map(|o| format!("{o}\n\n"))
            .collect();
        output.push_str(&format!(
            "{} of {} checks passed.",
            tested.iter().filter(|r| r.result == Some(true)).count(),
            tested.len()
        ));
        if !self.integrity.ok {
            output.push_str("\nProtected assignment files were replaced by the submission: ");
            output.push_str(
                &self
                    .integrity
                    .flagged
                    .iter()
                    .map(|f| format!("{} ({})", f.path, f.reason))
                    .collect::<Vec<_>>()
                    .join(", "),
            );
        }
        if let Some(s) = self
            .safety
            .as_ref()
            .filter(|s| !s.ok || s.failure.is_some())
        {
            output.push_str("\nThe static safety check found: ");
            output.push_str(&s.describe().join("; "));
        }
        let mut extra_data = json!({
            "suite": self.suite,
            "max_score": num(self.max_score()),
            "integrity": self.integrity,
            "safety": self.safety,
            "images": self.used_images(),
            "runtimes": self.runtimes,
        });
        let mut leaderboard: Vec<Value> = Vec::new();
        let mut moved = Map::new();
        for r in &self.results {
            let Some(x) = r.gradescope.as_deref() else {
                continue;
            };
            if r.hidden && view == View::Student {
                continue;
            }
            let earlier = leaderboard.len();
            for entry in &x.leaderboard {
                let mut entry = entry.clone();
                let name = entry["name"].as_str().unwrap_or_default().to_string();
                if leaderboard[..earlier]
                    .iter()
                    .any(|e| e["name"] == name.as_str())
                {
                    entry["name"] = json!(format!("{}/{name}", r.id));
                }
                leaderboard.push(entry);
            }
            match &x.extra_data {
                _ if view == View::Student => {}
                None | Some(Value::Null) => {}
                Some(Value::Object(theirs)) => {
                    let ours = extra_data.as_object_mut().expect("an object");
                    let mut clashing = Map::new();
                    for (k, v) in theirs {
                        if ours.contains_key(k) || k == AUTOGRADER_EXTRA_DATA {
                            clashing.insert(k.clone(), v.clone());
                        } else {
                            ours.insert(k.clone(), v.clone());
                        }
                    }
                    if !clashing.is_empty() {
                        moved.insert(r.id.clone(), Value::Object(clashing));
                    }
                }
                Some(other) => {
                    moved.insert(r.id.clone(), other.clone());
                }
            }
        }
        if !moved.is_empty() {
            extra_data[AUTOGRADER_EXTRA_DATA] = Value::Object(moved);
        }
        let mut out = json!({
            "score": num(self.score()),
            "output": output,
            "visibility": "visible",
            "stdout_visibility": "hidden",
            "tests": tests,
            "extra_data": extra_data,
        });
        // The format of the autograders' own output, which comes first (corral's count of the
        // rows after it reads the same in text, Markdown or HTML); the first that says.
        if let Some(f) = shown
            .iter()
            .filter_map(|r| r.gradescope.as_deref())
            .find_map(|x| x.output_format.filter(|_| x.output.is_some()))
        {
            out["output_format"] = json!(f);
        }
        if !leaderboard.is_empty() {
            out["leaderboard"] = json!(leaderboard);
        }
        out
    }

    /// Whether `r` is a check's own row whose rows (`ID/…`, listed after it) tell all it says:
    /// it adds no points, corral could judge it (no error, no stop, no refusal), and it passed
    /// or one of its rows failed.
    fn said_by_its_rows(&self, r: &CheckResult) -> bool {
        let prefix = format!("{}/", r.id);
        let rows: Vec<&CheckResult> = self
            .results
            .iter()
            .filter(|c| c.id.starts_with(&prefix))
            .collect();
        !rows.is_empty()
            && r.max_points == 0.0
            && r.error.is_none()
            && !r.not_gradable
            && r.stopped_by.is_none()
            && (r.result == Some(true) || rows.iter().any(|c| c.result == Some(false)))
    }

    /// check50-style text: ✓ (green) / ✗ (red) / `:|` (yellow, skipped), the description, and for
    /// failures the reason, "expected X, not Y" and the end of check50's log.
    pub fn render_text(&self, view: View, color: bool) -> String {
        let paint = |code: &str, s: &str| {
            if color {
                format!("\x1b[{code}m{s}\x1b[0m")
            } else {
                s.to_string()
            }
        };
        let mut out = String::new();
        for r in self.results.iter().filter(|r| !r.omitted(view)) {
            let (mark, code) = match r.result {
                Some(true) => ("\u{2713}", "32"),
                Some(false) => ("\u{2717}", "31"),
                None => (":|", "33"),
            };
            let points = if r.max_points > 0.0 {
                format!(" [{}/{}]", fmt_num(r.points), fmt_num(r.max_points))
            } else {
                String::new()
            };
            let hidden = if r.hidden { " (hidden)" } else { "" };
            out.push_str(&paint(
                code,
                &format!("{mark} {}{hidden}{points}", inert(&r.description)),
            ));
            out.push('\n');
            if let Some(m) = r.visible_message(view) {
                if r.result != Some(true) {
                    let mut lines = m.lines();
                    if let Some(first) = lines.next() {
                        out.push_str(&format!("    {}\n", paint(code, &inert(first))));
                    }
                    for l in lines {
                        out.push_str(&format!("      {}\n", inert(l)));
                    }
                }
            }
            if let Some(d) = r.visible_diagnostics(view) {
                for l in d.lines() {
                    out.push_str(&format!("      {}\n", inert(l)));
                }
            }
            if r.result == Some(false) {
                // What check50 logged for a failed check (what it ran, sent and looked for; a
                // compiler's errors; valgrind's findings), as its web page shows: the last lines.
                let log: Vec<&str> = r
                    .visible_script(view)
                    .into_iter()
                    .filter(|e| e.expected.kind == "log")
                    .filter_map(|e| e.expected.value.as_str())
                    .flat_map(str::lines)
                    .collect();
                last_lines(&mut out, "log", &log);
            }
            if view == View::Staff && r.result == Some(true) {
                // A grader's own output when it worked (the check's row says its end when it
                // did not): the first place staff look, as Gradescope's "Autograder Output".
                let output: Vec<&str> = r
                    .script
                    .iter()
                    .filter(|e| {
                        (e.expected.kind.as_str(), e.actual.kind.as_str()) == ("run", "output")
                    })
                    .filter_map(|e| e.actual.value.as_str())
                    .flat_map(str::lines)
                    .collect();
                last_lines(&mut out, "output", &output);
            }
            let said = r
                .visible_message(view)
                // "expected X, not Y", or a file check's "out.txt differs ...: expected X, not Y".
                .is_some_and(|m| m.starts_with("expected") || m.contains(": expected "));
            if r.result == Some(false) && !said {
                if let Some(e) = r.visible_script(view).last() {
                    if e.expected.kind == e.actual.kind && e.expected.value != e.actual.value {
                        out.push_str(&format!(
                            "    expected {}, not {}\n",
                            show(&e.expected.value, 200),
                            show(&e.actual.value, 200)
                        ));
                    }
                }
            }
        }
        if !self.integrity.ok {
            out.push_str(&paint(
                "31",
                "!! protected assignment files were replaced by the submission (the assignment's copies were used):",
            ));
            out.push('\n');
            for f in &self.integrity.flagged {
                out.push_str(&format!("    {} ({})\n", inert(&f.path), inert(&f.reason)));
            }
        }
        if let Some(s) = self
            .safety
            .as_ref()
            .filter(|s| !s.ok || s.failure.is_some())
        {
            let head = if s.enforced {
                "!! the static safety check found (the checks were not run):"
            } else {
                "!! the static safety check found:"
            };
            out.push_str(&paint("31", head));
            out.push('\n');
            for l in s.describe() {
                out.push_str(&format!("    {}\n", inert(&l)));
            }
        }
        for i in self.used_images() {
            out.push_str(&format!("image: {} ({})\n", inert(&i.name), i.digest));
        }
        let gvisor = self.gvisor_rows();
        if gvisor.len() == self.results.len() {
            out.push_str("runtime: gvisor\n");
        } else if !gvisor.is_empty() {
            out.push_str(&format!(
                "runtime: gvisor for {}; native for the rest\n",
                gvisor.join(", ")
            ));
        }
        out.push_str(&format!(
            "score: {}/{}\n",
            fmt_num(self.score()),
            fmt_num(self.max_score())
        ));
        out
    }
}

/// The most lines of a failed check's log the text report shows (its last ones).
const LOG_LINES: usize = 12;

/// `name:` and `lines` under it, indented, or their last [`LOG_LINES`] (`name (its end):`);
/// nothing when there are none.
fn last_lines(out: &mut String, name: &str, lines: &[&str]) {
    if lines.is_empty() {
        return;
    }
    let skip = lines.len().saturating_sub(LOG_LINES);
    let end = if skip > 0 { " (its end)" } else { "" };
    out.push_str(&format!("    {name}{end}:\n"));
    for l in &lines[skip..] {
        out.push_str(&format!("      {}\n", inert(l)));
    }
}

/// `s` with its control characters (C0 but the tab, DEL, C1) written out as `\u{1b}`: the text
/// report goes to a person's terminal, and a submission's output, a grader's test names or a
/// file's name could otherwise move the cursor, repaint a failed check as passed, set the
/// window's title or write the clipboard (OSC 52). Newlines are the caller's to split on.
pub fn inert(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(|c| c.is_control() && c != '\t') {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c.is_control() && c != '\t' {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Keys printed first, in this order, at every level of a report's JSON; others follow sorted.
const KEY_ORDER: &[&str] = &[
    "suite",
    "results",
    "score",
    "max_score",
    "passed",
    "integrity",
    "safety",
    "images",
    "dependencies",
    "description",
    "result",
    "script",
    "type",
    "value",
    "match",
    "points",
    "max_points",
    "time_ms",
    "hidden",
    "message",
    "error",
    "not_gradable",
    "diagnostics",
    "image",
    "runtime",
    "runtimes",
    "name",
    "digest",
    "number",
    "status",
    "output",
    "visibility",
    "stdout_visibility",
    "tests",
    "extra_data",
    "leaderboard",
    "ok",
    "flagged",
    "path",
    "reason",
];

/// A JSON value printed with readable key order: [`KEY_ORDER`], and the checks of `results` in
/// suite order.
struct Ordered<'a> {
    value: &'a Value,
    ids: &'a [String],
    top: bool,
}

impl Serialize for Ordered<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        match self.value {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                let rank = |k: &str| -> (usize, usize) {
                    if self.top {
                        if let Some(i) = self.ids.iter().position(|id| id == k) {
                            return (0, i);
                        }
                    }
                    match KEY_ORDER.iter().position(|o| *o == k) {
                        Some(i) => (1, i),
                        None => (2, 0),
                    }
                };
                keys.sort_by(|a, b| rank(a).cmp(&rank(b)).then(a.cmp(b)));
                let mut map = s.serialize_map(Some(keys.len()))?;
                for k in keys {
                    let inner = Ordered {
                        value: &m[k],
                        ids: self.ids,
                        // The ids are the keys of the object under `results`.
                        top: k == "results",
                    };
                    map.serialize_entry(k, &inner)?;
                }
                map.end()
            }
            Value::Array(a) => {
                let mut seq = s.serialize_seq(Some(a.len()))?;
                for v in a {
                    seq.serialize_element(&Ordered {
                        value: v,
                        ids: self.ids,
                        top: false,
                    })?;
                }
                seq.end()
            }
            other => other.serialize(s),
        }
    }
}

impl Report {
    /// `value` (one of this report's exports) as indented JSON, keys in a readable order and the
    /// checks in suite order.
    pub fn pretty(&self, value: &Value) -> String {
        let ids: Vec<String> = self.results.iter().map(|r| r.id.clone()).collect();
        let ordered = Ordered {
            value,
            ids: &ids,
            top: false,
        };
        serde_json::to_string_pretty(&ordered).expect("JSON values serialize") + "\n"
    }
}

fn fmt_num(x: f64) -> String {
    if x.fract() == 0.0 {
        format!("{}", x as i64)
    } else {
        format!("{x:.2}")
    }
}

/// `s` when it is at most `max` bytes; else its longest prefix of at most `max` bytes that ends on
/// a character boundary, then `marker` (which says the text was cut).
pub fn cut_text(s: &str, max: usize, marker: &str) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{marker}", &s[..end])
}

/// A value for a human: strings quoted with escapes (so newlines show), at most `max` characters.
pub fn show(v: &Value, max: usize) -> String {
    match v {
        Value::String(s) => {
            let mut q = format!("{s:?}");
            if q.chars().count() > max {
                q = q.chars().take(max).collect::<String>() + "...\"";
            }
            q
        }
        Value::Null => "nothing".into(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_is_cut_on_a_character_boundary_and_marked() {
        assert_eq!(cut_text("short", 5, "…"), "short");
        assert_eq!(cut_text("abcdef", 3, "..."), "abc...");
        // "é" is two bytes: a cut inside it moves back before it.
        assert_eq!(cut_text("aé", 2, "!"), "a!");
    }

    fn result(id: &str, r: Option<bool>, hidden: bool) -> CheckResult {
        let script = if r.is_none() {
            vec![]
        } else {
            vec![ScriptEntry {
                expected: Observation::new("stdout", "secret answer 42"),
                actual: Observation::new("stdout", "41"),
            }]
        };
        CheckResult {
            dependencies: vec![],
            result: r,
            script,
            points: if r == Some(true) { 2.0 } else { 0.0 },
            max_points: 2.0,
            time_ms: 5,
            hidden,
            message: match r {
                None => Some(SKIPPED.to_string()),
                Some(true) => None,
                Some(false) => Some("expected \"secret answer 42\", not \"41\"".into()),
            },
            ..CheckResult::new(id, format!("{id} works"))
        }
    }

    fn report() -> Report {
        Report {
            suite: "t".into(),
            results: vec![
                result("a", Some(true), false),
                result("b", Some(false), true),
                result("c", None, false),
            ],
            integrity: Integrity {
                ok: true,
                flagged: vec![],
            },
            safety: None,
            images: BTreeMap::new(),
            runtimes: ["a", "b", "c"]
                .into_iter()
                .map(|id| (id.to_string(), Runtime::Native))
                .collect(),
        }
    }

    /// `--format gradescope` says how the autograder asked its output be rendered (the top-level
    /// and each test's `output_format`) and keeps a test's `tags`, and its `extra_data` for staff.
    #[test]
    fn gradescope_export_keeps_a_tests_format_tags_and_extra_data() {
        let mut r = report();
        r.results[0].gradescope = Some(Box::new(GradescopeExtras {
            output: Some("## greet".into()),
            output_format: Some("md"),
            ..GradescopeExtras::default()
        }));
        let same = |kind: &str, v: Value| ScriptEntry {
            expected: Observation::new(kind, v.clone()),
            actual: Observation::new(kind, v),
        };
        r.results[2].script = vec![
            same("output_format", json!("html")),
            same("tags", json!(["loops"])),
            same("extra_data", json!({"seed": 7})),
        ];
        let staff = r.to_gradescope(View::Staff);
        assert_eq!(staff["output_format"], "md", "{staff}");
        let t = &staff["tests"][2];
        assert_eq!(
            (&t["output_format"], &t["tags"], &t["extra_data"]),
            (&json!("html"), &json!(["loops"]), &json!({"seed": 7})),
            "{staff}"
        );
        let text = t["output"].as_str().unwrap();
        assert!(
            !text.contains("html") && !text.contains("loops") && !text.contains("seed"),
            "bookkeeping is no output: {staff}"
        );
        let student = r.to_gradescope(View::Student);
        let t = student["tests"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["number"] == "c")
            .unwrap();
        assert_eq!(t["output_format"], "html", "{student}");
        assert!(t.get("extra_data").is_none(), "{student}");
    }

    /// Staff's text shows a grader's own output when it worked (its last lines): the first
    /// place they look, as Gradescope's "Autograder Output". Students never see it there.
    #[test]
    fn staff_text_shows_a_graders_output_that_worked() {
        let mut r = report();
        let lines: String = (1..=20).map(|i| format!("line {i}\n")).collect();
        r.results[0].script = vec![ScriptEntry {
            expected: Observation::new("run", json!(null)),
            actual: Observation::new("output", lines),
        }];
        let staff = r.render_text(View::Staff, false);
        assert!(
            staff.contains("    output (its end):\n      line 9\n"),
            "{staff}"
        );
        assert!(
            staff.contains("      line 20\n") && !staff.contains("line 8\n"),
            "{staff}"
        );
        let student = r.render_text(View::Student, false);
        assert!(!student.contains("line 20"), "{student}");
    }

    /// Reports list their checks in the suite's order, as check50 does (`exists` before
    /// `compiles`), not by name: the editor and a client showing the keys in order follow it.
    #[test]
    fn the_results_keep_the_suites_order() {
        let mut r = report();
        r.results.reverse();
        for v in [r.to_json(View::Staff), r.to_cs50(View::Staff)] {
            let keys: Vec<&str> = v["results"]
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            assert_eq!(keys, ["c", "b", "a"], "{v}");
            let text = serde_json::to_string(&v).unwrap();
            assert!(text.find("\"c\"") < text.find("\"a\""), "{text}");
        }
    }

    /// On Gradescope a check's own row is no test for students when its rows say it all; one
    /// with an error stays. check50's rationale is not repeated, its log ends a failed test.
    #[test]
    fn a_checks_own_row_is_a_gradescope_test_only_when_it_has_something_to_say() {
        let mut r = report();
        let mut parent = result("p", Some(false), false);
        parent.max_points = 0.0;
        parent.message = Some("1 of 2 check50 checks passed".into());
        let mut passed = result("p/a", Some(true), false);
        passed.dependencies = vec!["p".into()];
        let mut failed = result("p/b", Some(false), false);
        failed.dependencies = vec!["p".into()];
        failed.script = vec![
            ScriptEntry {
                expected: Observation::new("log", "running ./b..."),
                actual: Observation::new("log", "running ./b..."),
            },
            ScriptEntry {
                expected: Observation::new("check", "b works"),
                actual: Observation::new("rationale", "b crashed"),
            },
        ];
        failed.message = Some("b crashed".into());
        r.results = vec![parent, passed, failed];
        let names = |v: &Value| -> Vec<String> {
            v["tests"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["number"].as_str().unwrap().to_string())
                .collect()
        };
        let student = r.to_gradescope(View::Student);
        assert_eq!(names(&student), ["p/a", "p/b"], "{student:#}");
        assert!(
            student["output"]
                .as_str()
                .unwrap()
                .ends_with("1 of 2 checks passed."),
            "{student:#}"
        );
        assert_eq!(student["tests"][1]["output"], "b crashed\nrunning ./b...");
        assert_eq!(names(&r.to_gradescope(View::Staff)), ["p", "p/a", "p/b"]);
        r.results[0].error = Some("invalid check50 run: …".into());
        assert_eq!(names(&r.to_gradescope(View::Student)), ["p", "p/a", "p/b"]);
    }

    /// A failed check's log (check50's) is shown in text, its last lines; never a hidden
    /// check's to students.
    #[test]
    fn a_failed_checks_log_ends_its_text_row() {
        let mut r = report();
        let log = |n: usize| ScriptEntry {
            expected: Observation::new("log", format!("log line {n}")),
            actual: Observation::new("log", format!("log line {n}")),
        };
        r.results[1].script = (1..=14).map(log).collect();
        r.results[0].script = vec![log(99)];
        let staff = r.render_text(View::Staff, false);
        assert!(
            staff.contains("    log (its end):\n      log line 3\n"),
            "{staff}"
        );
        assert!(staff.contains("      log line 14\n"), "{staff}");
        assert!(!staff.contains("log line 2\n"), "{staff}");
        assert!(
            !staff.contains("log line 99"),
            "a passed check's log: {staff}"
        );
        let student = r.render_text(View::Student, false);
        assert!(
            !student.contains("log line"),
            "a hidden check's log: {student}"
        );
        r.results[1].hidden = false;
        r.results[1].script.truncate(2);
        let student = r.render_text(View::Student, false);
        assert!(
            student.contains("    log:\n      log line 1\n      log line 2\n"),
            "{student}"
        );
    }

    #[test]
    fn hidden_details_never_reach_students() {
        let r = report();
        for text in [
            r.to_json(View::Student).to_string(),
            r.to_cs50(View::Student).to_string(),
            r.to_gradescope(View::Student).to_string(),
        ] {
            // "a" is visible, so its copy of the secret shows; count exactly that one.
            assert_eq!(text.matches("secret answer 42").count(), 1, "{text}");
        }
        // Text shows expected/actual only for failures, and "b" (the failure) is hidden.
        let text = r.render_text(View::Student, false);
        assert!(!text.contains("secret answer 42"), "{text}");
        assert!(r
            .render_text(View::Staff, false)
            .contains("secret answer 42"));
        assert_eq!(
            r.to_json(View::Staff)["results"]["b"]["script"][0]["expected"]["value"],
            "secret answer 42"
        );
        let gs = r.to_gradescope(View::Student);
        assert_eq!(gs["tests"][1]["visibility"], "after_published");
        assert_eq!(gs["tests"][0]["visibility"], "visible");
        assert_eq!(gs["score"], 2);
    }

    /// A submission's text reaches the text report (its output in a message, a grader's test
    /// names, its file names): none of its control characters reaches the terminal, so it
    /// cannot repaint a failed check as passed, retitle the window or write the clipboard.
    #[test]
    fn the_text_report_writes_control_characters_out() {
        let mut r = report();
        let repaint = "\r\x1b[2K\x1b[1A\x1b[32m\u{2713} b works [2/2]\x1b[0m";
        r.results[1].hidden = false;
        r.results[1].description = format!("b works{repaint}");
        r.results[1].message = Some(format!(
            "exit 3\x1b]0;TITLE\x07\nsaid: \x1b]52;c;ZWNobw==\x07\u{9b}31m{repaint}"
        ));
        r.results[1].diagnostics = Some("\x1b]8;;http://x/\x07link".into());
        r.integrity = Integrity {
            ok: false,
            flagged: vec![IntegrityFlag {
                path: "a\x1b[8m.c".into(),
                reason: "replaced".into(),
            }],
        };
        for (view, color) in [
            (View::Staff, false),
            (View::Staff, true),
            (View::Student, true),
        ] {
            let t = r.render_text(view, color);
            // Only the report's own colours remain.
            let own = t
                .replace("\x1b[0m", "")
                .replace("\x1b[31m", "")
                .replace("\x1b[32m", "")
                .replace("\x1b[33m", "");
            assert!(!own.chars().any(|c| c.is_control() && c != '\n'), "{t:?}");
            assert!(t.contains("b works\\u{d}\\u{1b}[2K"), "{t:?}");
            assert!(t.contains("\\u{9b}31m"), "{t:?}");
        }
        assert!(r
            .render_text(View::Staff, false)
            .contains("a\\u{1b}[8m.c (replaced)"));
    }

    /// What a program wrote when its check could not be judged (pytest's standard error) may
    /// quote hidden tests: every staff view has it, no student view does.
    #[test]
    fn diagnostics_are_for_staff_only() {
        let mut r = report();
        r.results[0].result = Some(false);
        r.results[0].diagnostics = Some("pytest's standard error:\nsecret hidden source".into());
        for text in [
            r.to_json(View::Student).to_string(),
            r.to_cs50(View::Student).to_string(),
            r.to_gradescope(View::Student).to_string(),
            r.render_text(View::Student, false),
            r.to_cs50(View::Staff).to_string(),
        ] {
            assert!(!text.contains("secret hidden source"), "{text}");
        }
        assert_eq!(
            r.to_json(View::Staff)["results"]["a"]["diagnostics"],
            "pytest's standard error:\nsecret hidden source"
        );
        let gs = r.to_gradescope(View::Staff);
        assert!(
            gs["tests"][0]["output"]
                .as_str()
                .unwrap()
                .ends_with("pytest's standard error:\nsecret hidden source"),
            "{gs}"
        );
        let t = r.render_text(View::Staff, false);
        assert!(t.contains("      secret hidden source\n"), "{t}");
    }

    /// An autograder's leaderboard and `extra_data` reach `--format gradescope`: its keys beside
    /// corral's, a clashing key (corral's `suite`, an earlier autograder's `seed`) under
    /// `autograder_extra_data.CHECK`, a repeated leaderboard name as `CHECK/NAME`; a hidden
    /// row's only in the staff view.
    /// Gradescope's own format keeps an autograder's words as it wrote them: its top-level
    /// `output` first, each test's output alone (not "expected test: {…}, actual result: {…}",
    /// the bookkeeping corral's rows carry), a grader's log as text.
    #[test]
    fn gradescope_export_keeps_an_autograders_own_output() {
        let mut r = report();
        r.results[0].gradescope = Some(Box::new(GradescopeExtras {
            output: Some("Thanks for submitting!".into()),
            ..GradescopeExtras::default()
        }));
        r.results[0].script = vec![
            ScriptEntry {
                expected: Observation::new("setup", "setup.sh"),
                actual: Observation::new("setup", "cached: environment sha256:ab"),
            },
            ScriptEntry {
                expected: Observation::new("execution_time", json!(null)),
                actual: Observation::new("execution_time", json!(0.0)),
            },
        ];
        r.results[2].message = Some("Test Failed: 0 != 0.3".into());
        r.results[2].script = vec![ScriptEntry {
            expected: Observation::new("test", json!({"name": "sum", "max_score": 2.0})),
            actual: Observation::new("result", json!({"score": 0.0, "status": "failed"})),
        }];
        r.results[1].hidden = false;
        r.results[1].message = None;
        r.results[1].script = vec![ScriptEntry {
            expected: Observation::new("run", json!(null)),
            actual: Observation::new("output", "compiling...\nok\n"),
        }];
        let gs = r.to_gradescope(View::Student);
        let output = gs["output"].as_str().unwrap();
        assert!(
            output.starts_with("Thanks for submitting!\n\n") && output.ends_with("checks passed."),
            "{output}"
        );
        let tests = gs["tests"].as_array().unwrap();
        let out = |number: &str| {
            tests.iter().find(|t| t["number"] == number).unwrap()["output"]
                .as_str()
                .unwrap()
                .to_string()
        };
        assert_eq!(out("a"), "");
        assert_eq!(out("b"), "compiling...\nok\n");
        assert_eq!(out("c"), "Test Failed: 0 != 0.3");
    }

    #[test]
    fn autograders_leaderboards_and_extra_data_are_carried_through() {
        let mut r = report();
        let extras = |board: Value, extra: Value| {
            Some(Box::new(GradescopeExtras {
                leaderboard: serde_json::from_value(board).unwrap(),
                extra_data: Some(extra),
                output: None,
                output_format: None,
            }))
        };
        r.results[0].gradescope = extras(
            json!([{"name": "Time", "value": 15.1, "order": "asc"}, {"name": "Stars", "value": "*****"}]),
            json!({"seed": 7, "suite": "theirs", "autograder_extra_data": 1}),
        );
        r.results[2].gradescope = extras(
            json!([{"name": "Time", "value": 3}]),
            json!({"seed": 8, "language": "c"}),
        );
        // Students get the leaderboards, never an autograder's extra_data (as on Gradescope).
        let gs = r.to_gradescope(View::Student);
        assert_eq!(gs["extra_data"].get("seed"), None, "{gs}");
        assert_eq!(gs["extra_data"].get("autograder_extra_data"), None, "{gs}");
        let gs = r.to_gradescope(View::Staff);
        assert_eq!(
            gs["leaderboard"],
            json!([
                {"name": "Time", "value": 15.1, "order": "asc"},
                {"name": "Stars", "value": "*****"},
                {"name": "c/Time", "value": 3},
            ])
        );
        let x = &gs["extra_data"];
        assert_eq!(
            (&x["suite"], &x["seed"], &x["language"]),
            (&json!("t"), &json!(7), &json!("c"))
        );
        assert_eq!(
            x["autograder_extra_data"],
            json!({"a": {"suite": "theirs", "autograder_extra_data": 1}, "c": {"seed": 8}})
        );
        assert_eq!(x["max_score"], 6);
        assert!(
            x["runtimes"].is_object() && x["integrity"].is_object(),
            "{x}"
        );
        // Not an object: kept whole under the check's id.
        r.results[2].gradescope = extras(json!([]), json!([1, 2]));
        let gs = r.to_gradescope(View::Staff);
        assert_eq!(
            gs["extra_data"]["autograder_extra_data"]["c"],
            json!([1, 2])
        );
        assert_eq!(gs["leaderboard"].as_array().unwrap().len(), 2);
        // A hidden row's (here "b") only for staff.
        let mut r = report();
        r.results[1].gradescope = extras(json!([{"name": "Time", "value": 1}]), json!({"k": 1}));
        let gs = r.to_gradescope(View::Student);
        assert!(
            gs.get("leaderboard").is_none() && gs["extra_data"].get("k").is_none(),
            "{gs}"
        );
        let gs = r.to_gradescope(View::Staff);
        assert_eq!(gs["leaderboard"][0]["name"], "Time");
        assert_eq!(gs["extra_data"]["k"], 1);
        // Without them, the file is as before.
        let gs = report().to_gradescope(View::Staff);
        assert!(gs.get("leaderboard").is_none(), "{gs}");
        assert!(
            gs["extra_data"].get("autograder_extra_data").is_none(),
            "{gs}"
        );
    }

    #[test]
    fn cs50_shape_is_exact() {
        let v = report().to_cs50(View::Staff);
        let obj = v.as_object().unwrap();
        assert_eq!(obj.keys().collect::<Vec<_>>(), vec!["results"]);
        let a = v["results"]["a"].as_object().unwrap();
        assert_eq!(
            a.keys().collect::<Vec<_>>(),
            vec!["dependencies", "description", "result", "script"]
        );
        assert!(v["results"]["c"]["result"].is_null());
        let j = report().to_json(View::Student);
        assert_eq!(j["score"], 2);
        assert_eq!(j["max_score"], 6);
        assert_eq!(j["results"]["c"]["message"], SKIPPED);
    }

    #[test]
    fn pretty_json_keeps_suite_order() {
        let mut r = report();
        r.results.reverse(); // c, b, a
        let text = r.pretty(&r.to_json(View::Staff));
        let (c, b, a) = (
            text.find("\"c\": {").unwrap(),
            text.find("\"b\": {").unwrap(),
            text.find("\"a\": {").unwrap(),
        );
        assert!(c < b && b < a, "{text}");
        assert!(text.find("\"suite\"").unwrap() < text.find("\"results\"").unwrap());
        assert!(text.find("\"dependencies\"").unwrap() < text.find("\"script\"").unwrap());
        let back: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, r.to_json(View::Staff));
    }

    #[test]
    fn reports_record_the_image_each_check_ran_in() {
        let mut r = report();
        let j = r.to_json(View::Student);
        assert!(j.get("images").is_none() && j["results"]["a"].get("image").is_none());
        assert!(!r.render_text(View::Student, false).contains("image:"));
        let img = UsedImage {
            name: "python:3.12-slim".into(),
            digest: format!("sha256:{}", "ab".repeat(32)),
        };
        r.images.insert("a".into(), img.clone());
        r.images.insert("b".into(), img.clone());
        let j = r.to_json(View::Student);
        assert_eq!(j["results"]["a"]["image"]["digest"], img.digest.as_str());
        assert_eq!(j["results"]["b"]["image"]["name"], "python:3.12-slim");
        assert!(j["results"]["c"].get("image").is_none());
        assert_eq!(j["images"], json!([img]));
        assert_eq!(
            r.to_gradescope(View::Student)["extra_data"]["images"],
            json!([img])
        );
        let t = r.render_text(View::Student, false);
        assert!(
            t.contains(&format!("image: python:3.12-slim ({})", img.digest)),
            "{t}"
        );
    }

    #[test]
    fn every_row_says_which_runtime_graded_it() {
        let mut r = report();
        let j = r.to_json(View::Student);
        for id in ["a", "b", "c"] {
            assert_eq!(j["results"][id]["runtime"], "native", "{j}");
        }
        assert!(!r.render_text(View::Student, false).contains("runtime:"));
        r.runtimes.insert("b".into(), Runtime::Gvisor);
        let j = r.to_json(View::Student);
        assert_eq!(j["results"]["b"]["runtime"], "gvisor", "{j}");
        assert_eq!(j["results"]["a"]["runtime"], "native", "{j}");
        let gs = r.to_gradescope(View::Student);
        assert_eq!(gs["extra_data"]["runtimes"]["b"], "gvisor", "{gs}");
        // CS50's exact shape has no runtime.
        assert!(r.to_cs50(View::Student)["results"]["b"]
            .get("runtime")
            .is_none());
        let t = r.render_text(View::Student, false);
        assert!(
            t.contains("runtime: gvisor for b; native for the rest"),
            "{t}"
        );
        for id in ["a", "c"] {
            r.runtimes.insert(id.into(), Runtime::Gvisor);
        }
        let t = r.render_text(View::Student, false);
        assert!(t.contains("runtime: gvisor\n"), "{t}");
    }

    #[test]
    fn text_looks_like_check50() {
        let t = report().render_text(View::Student, false);
        assert!(t.contains("\u{2713} a works [2/2]"), "{t}");
        assert!(t.contains("\u{2717} b works (hidden) [0/2]"), "{t}");
        assert!(t.contains(HIDDEN_FAILED), "{t}");
        assert!(t.contains(":| c works"), "{t}");
        assert!(t.contains("score: 2/6"), "{t}");
    }
}
