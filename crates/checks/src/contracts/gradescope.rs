//! Gradescope's autograder contract, as its public specification documents it
//! (<https://gradescope-autograders.readthedocs.io/en/latest/specs/>): the `results.json` an
//! autograder writes (read here: plain data, validated), how its tests become corral rows, and the
//! `submission_metadata.json` the harness gives the autograder.
//!
//! What is refused (the check errors, it never passes): a file over [`MAX_RESULTS_BYTES`], text
//! that is not JSON or not an object, a known key of the wrong type or value (an unknown
//! `visibility`, a negative `max_score`, a `status` other than `passed`/`failed`), more than
//! [`MAX_TESTS`] tests, and a file with no score at all: neither a top-level `score` nor a test
//! with one. Unknown keys are ignored, as Gradescope ignores them.
//!
//! The specification's comments ask for a score on every test when there is no top-level one;
//! Gradescope itself accepts a test without one and shows it by its `status`, worth no points:
//! Otter-Grader writes such a "Public Tests" summary in every results file (otter-grader issues
//! #519 and #539, "it's never had a point value assigned to it"). So does corral: such a test is
//! a row worth no points (0 of its `max_score` when it has one, so never a pass by accident).

use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Deserializer};
use serde_json::{json, Value};

use super::results_file::{cap, fmt_num as fmt, read, row_id};
pub use super::results_file::{ResultsError, MAX_OUTPUT, MAX_RESULTS_BYTES, MAX_TESTS};
use crate::report::{CheckResult, GradescopeExtras, Observation, ScriptEntry};

/// Who sees a result on Gradescope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Visibility {
    Visible,
    Hidden,
    AfterDueDate,
    AfterPublished,
}

impl Visibility {
    /// Students see only pass/fail in corral (a hidden row) unless it is `visible`; a `hidden`
    /// row is left out of their views altogether (see [`CheckResult::visibility`]).
    pub fn hides(self) -> bool {
        self != Visibility::Visible
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Visibility::Visible => "visible",
            Visibility::Hidden => "hidden",
            Visibility::AfterDueDate => "after_due_date",
            Visibility::AfterPublished => "after_published",
        }
    }
}

/// How Gradescope renders an `output` or a test name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    Text,
    Html,
    SimpleFormat,
    Md,
    Ansi,
}

impl Format {
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Text => "text",
            Format::Html => "html",
            Format::SimpleFormat => "simple_format",
            Format::Md => "md",
            Format::Ansi => "ansi",
        }
    }
}

/// A test's `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Passed,
    Failed,
}

/// One entry of `tests`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Test {
    #[serde(default)]
    pub score: Option<f64>,
    #[serde(default)]
    pub max_score: Option<f64>,
    #[serde(default)]
    pub status: Option<Status>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub name_format: Option<Format>,
    /// `"1.1"`; a number is read as its text (gradescope-utils writes strings, others numbers).
    #[serde(default, deserialize_with = "text_or_number")]
    pub number: Option<String>,
    #[serde(default)]
    pub output: Option<String>,
    #[serde(default)]
    pub output_format: Option<Format>,
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default)]
    pub visibility: Option<Visibility>,
    #[serde(default)]
    pub extra_data: Option<Value>,
}

/// One entry of `leaderboard`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct LeaderboardEntry {
    pub name: String,
    /// A number or a text (`"*****"`).
    pub value: Value,
    #[serde(default)]
    pub order: Option<Order>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Order {
    Asc,
    Desc,
}

/// A whole `results.json`, validated.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Results {
    /// The submission's score; overrides the tests' sum when given.
    #[serde(default)]
    pub score: Option<f64>,
    /// Seconds. gradescope-utils writes it as text (`"0.42"`): a number or a text holding one.
    #[serde(default, deserialize_with = "number_or_numeric_text")]
    pub execution_time: Option<f64>,
    #[serde(default)]
    pub output: Option<String>,
    #[serde(default)]
    pub output_format: Option<Format>,
    #[serde(default)]
    pub test_output_format: Option<Format>,
    #[serde(default)]
    pub test_name_format: Option<Format>,
    /// The default of every test's visibility, and of the whole result's.
    #[serde(default)]
    pub visibility: Option<Visibility>,
    #[serde(default)]
    pub stdout_visibility: Option<Visibility>,
    #[serde(default)]
    pub extra_data: Option<Value>,
    #[serde(default)]
    pub tests: Vec<Test>,
    #[serde(default)]
    pub leaderboard: Vec<LeaderboardEntry>,
}

fn text_or_number<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    match Option::<Value>::deserialize(d)? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        Some(other) => Err(serde::de::Error::custom(format!(
            "expected a text or a number, found {other}"
        ))),
    }
}

fn number_or_numeric_text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    match Option::<Value>::deserialize(d)? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => Ok(n.as_f64()),
        Some(Value::String(s)) => s
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite())
            .map(Some)
            .ok_or_else(|| serde::de::Error::custom(format!("{s:?} is not a number"))),
        Some(other) => Err(serde::de::Error::custom(format!(
            "expected a number, found {other}"
        ))),
    }
}

/// The largest score or maximum a results file may give (either sign for scores): far beyond
/// any course's, and small enough that 5,000 tests' sum stays exact enough and finite.
const MAX_POINTS: f64 = 1e9;

impl Results {
    /// The contract's rules over the values, beyond their types.
    fn check(&self) -> Result<(), String> {
        // Finite alone is not enough: two tests of 1e308 sum to infinity, and a row of
        // infinity minus infinity (NaN) is neither a score nor an error.
        let bounded = |x: f64| x.is_finite() && x.abs() <= MAX_POINTS;
        if let Some(s) = self.score {
            if !bounded(s) {
                return Err(format!(
                    "score: must be a number between -{MAX_POINTS:e} and {MAX_POINTS:e}"
                ));
            }
        }
        if self.score.is_none() && self.tests.iter().all(|t| t.score.is_none()) {
            return Err(
                "no score: neither a top-level score nor a test with one (Gradescope requires one)"
                    .into(),
            );
        }
        for (i, t) in self.tests.iter().enumerate() {
            if t.score.is_some_and(|s| !bounded(s)) {
                return Err(format!(
                    "tests[{i}].score: must be a number between -{MAX_POINTS:e} and {MAX_POINTS:e}"
                ));
            }
            if let Some(m) = t.max_score {
                if !bounded(m) || m < 0.0 {
                    return Err(format!(
                        "tests[{i}].max_score: must be a number from 0 to {MAX_POINTS:e}"
                    ));
                }
            }
        }
        Ok(())
    }

    /// Reads and validates the bytes of a `results.json`.
    pub fn parse(bytes: &[u8]) -> Result<Results, ResultsError> {
        read(
            bytes,
            "Gradescope",
            |r: &Results| r.tests.len(),
            Results::check,
        )
    }

    /// The score Gradescope gives: the top-level `score`, else the sum of the tests'.
    pub fn total(&self) -> f64 {
        self.score
            .unwrap_or_else(|| self.tests.iter().filter_map(|t| t.score).sum())
    }
}

/// The rows of a Gradescope check, from its results.
#[derive(Debug, Clone, PartialEq)]
pub struct Mapped {
    /// One row per test, `CHECK/NUMBER`, else `CHECK/NAME`, else `CHECK/N` (its place, from
    /// 1; see [`row_id`]); by number when every test has one, as Gradescope shows them.
    pub tests: Vec<CheckResult>,
    /// The check's own row's points and maximum: what the tests' rows do not carry (the
    /// top-level score when there are no tests, or what it overrides of the tests' sum; the
    /// declared total's part the tests do not cover).
    pub points: f64,
    pub max_points: f64,
    /// Every test passed (and, with no tests, the score reached the maximum).
    pub passed: bool,
    /// What the check's row says: the top-level `output`, the score, and what is odd.
    pub message: String,
    /// Whether the check's own row is hidden from students (`visibility` not `visible`).
    pub hidden: bool,
    /// Observations for the check's row (leaderboard, execution time, extra data).
    pub script: Vec<ScriptEntry>,
    /// The leaderboard and top-level `extra_data`, for `--format gradescope` to carry through.
    pub extras: GradescopeExtras,
}

/// A test number's parts, in comparing order: numbers (`false`, value) before words (`true`,
/// text).
type NumberKey<'a> = Vec<(bool, u64, &'a str)>;

/// The order Gradescope shows tests in: by `number` when every test has one (`1.2` before
/// `1.10`: numeric parts compare as numbers), else as the results list them.
fn display_order(tests: &[Test]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..tests.len()).collect();
    let keys: Option<Vec<NumberKey<'_>>> = tests
        .iter()
        .map(|t| {
            let n = t
                .number
                .as_deref()
                .map(str::trim)
                .filter(|n| !n.is_empty())?;
            Some(
                n.split('.')
                    .map(|part| match part.parse::<u64>() {
                        Ok(v) => (false, v, ""),
                        Err(_) => (true, 0, part),
                    })
                    .collect(),
            )
        })
        .collect();
    if let Some(keys) = keys {
        order.sort_by(|&a, &b| keys[a].cmp(&keys[b]));
    }
    order
}

/// Maps validated results to rows of check `check_id`. `total` is the check's declared maximum
/// (the suite's `points`), when given; `check_hidden` hides every row.
pub fn map(results: &Results, check_id: &str, total: Option<f64>, check_hidden: bool) -> Mapped {
    let default_vis = results.visibility.unwrap_or(Visibility::Visible);
    let mut ids: Vec<String> = Vec::new();
    let mut tests = Vec::new();
    for i in display_order(&results.tests) {
        let t = &results.tests[i];
        let id = row_id(
            check_id,
            &[t.number.as_deref(), t.name.as_deref()],
            i + 1,
            &mut ids,
        );
        let base = id[check_id.len() + 1..].to_string();
        let score = t.score.unwrap_or(0.0);
        let max = t.max_score.unwrap_or(0.0);
        // Gradescope's rule: the status when given, else passed when the score reaches the
        // maximum (a test without a maximum is not failed).
        let passed = match t.status {
            Some(s) => s == Status::Passed,
            None => t.max_score.is_none_or(|m| score >= m),
        };
        let mut message = Vec::new();
        if let Some(o) = t.output.as_deref().filter(|o| !o.trim().is_empty()) {
            message.push(cap(o));
        }
        if !passed && message.is_empty() {
            message.push("test failed".into());
        }
        let name = t
            .name
            .clone()
            .filter(|n| !n.trim().is_empty())
            .unwrap_or_else(|| format!("test {base}"));
        let mut script = vec![ScriptEntry {
            expected: Observation::new("test", json!({"name": name, "max_score": t.max_score})),
            actual: Observation::new(
                "result",
                json!({"score": t.score, "status": t.status.map(|s| if s == Status::Passed { "passed" } else { "failed" })}),
            ),
        }];
        if !t.tags.is_empty() {
            script.push(ScriptEntry {
                expected: Observation::new("tags", json!(t.tags)),
                actual: Observation::new("tags", json!(t.tags)),
            });
        }
        if let Some(x) = t.extra_data.as_ref().filter(|x| !x.is_null()) {
            script.push(ScriptEntry {
                expected: Observation::new("extra_data", x.clone()),
                actual: Observation::new("extra_data", x.clone()),
            });
        }
        // How Gradescope renders the test's output (its own, else the results' default for
        // tests): `--format gradescope` says it again.
        if let Some(f) = t.output_format.or(results.test_output_format) {
            script.push(ScriptEntry {
                expected: Observation::new("output_format", f.as_str()),
                actual: Observation::new("output_format", f.as_str()),
            });
        }
        tests.push(CheckResult {
            dependencies: vec![check_id.to_string()],
            result: Some(passed),
            script,
            points: score,
            max_points: max,
            hidden: check_hidden || t.visibility.unwrap_or(default_vis).hides(),
            // corral has no due dates nor publishing: after_due_date and after_published
            // stay hidden rows (pass/fail, points) for students; hidden ones are left out.
            visibility: Some(t.visibility.unwrap_or(default_vis).as_str()),
            message: (!message.is_empty()).then(|| message.join("\n")),
            ..CheckResult::new(id, name)
        });
    }

    let test_points: f64 = tests.iter().map(|t| t.points).sum();
    let test_max: f64 = tests.iter().map(|t| t.max_points).sum();
    let score = results.total();
    let points = score - test_points;
    let max_points = match total {
        Some(t) => t - test_max,
        None => 0.0,
    };
    let mut message = Vec::new();
    if let Some(o) = results.output.as_deref().filter(|o| !o.trim().is_empty()) {
        message.push(cap(o));
    }
    let own_output = results
        .output
        .as_deref()
        .filter(|o| !o.trim().is_empty())
        .map(cap);
    let shown_max = total.unwrap_or(test_max);
    message.push(format!(
        "autograder score: {}/{}",
        fmt(score),
        fmt(shown_max)
    ));
    if !tests.is_empty() && results.score.is_some() && points != 0.0 {
        message.push(format!(
            "the top-level score {} overrides the tests' sum {} (Gradescope's rule): the difference is on this row",
            fmt(score),
            fmt(test_points)
        ));
    }
    if total.is_some_and(|t| t != test_max) && !tests.is_empty() {
        message.push(format!(
            "the tests' maximum {} differs from the check's points {}",
            fmt(test_max),
            fmt(shown_max)
        ));
    }
    if total.is_none() && tests.is_empty() {
        message.push("no tests and no `points` for the check: the maximum is unknown".into());
    } else if total.is_none() {
        // A run that fails before its tests (a module that does not import) reports fewer of
        // them, and so a smaller maximum than a good one: 0/0 where Gradescope says 0/14.
        message.push(format!(
            "the maximum {} is the sum of the tests this run reported; set the check's `points` to the assignment's total so that every submission is out of the same",
            fmt(test_max)
        ));
    }
    // Passed: every test passed and the score reached the maximum (with no tests and no
    // declared maximum, nothing says it passed).
    let passed = if tests.is_empty() {
        total.is_some_and(|t| score >= t)
    } else {
        tests.iter().all(|t| t.result == Some(true)) && score >= shown_max
    };
    let mut script = Vec::new();
    let mut extras = GradescopeExtras {
        output: own_output,
        output_format: results.output_format.map(Format::as_str),
        ..GradescopeExtras::default()
    };
    if let Some(t) = results.execution_time {
        // A record, not an expectation: the same both sides (as tags), so no view reads it as
        // what went wrong.
        script.push(ScriptEntry {
            expected: Observation::new("execution_time", json!(t)),
            actual: Observation::new("execution_time", json!(t)),
        });
    }
    for l in &results.leaderboard {
        let order = l
            .order
            .map(|o| if o == Order::Asc { "asc" } else { "desc" });
        let v = json!({"name": l.name, "value": l.value, "order": order});
        script.push(ScriptEntry {
            expected: Observation::new("leaderboard", v.clone()),
            actual: Observation::new("leaderboard", v),
        });
        // As written: Gradescope's default order (desc) stays implicit.
        let mut entry = json!({"name": l.name, "value": l.value});
        if let Some(o) = order {
            entry["order"] = json!(o);
        }
        extras.leaderboard.push(entry);
    }
    if let Some(x) = results.extra_data.as_ref().filter(|x| !x.is_null()) {
        script.push(ScriptEntry {
            expected: Observation::new("extra_data", x.clone()),
            actual: Observation::new("extra_data", x.clone()),
        });
        extras.extra_data = Some(x.clone());
    }
    Mapped {
        tests,
        points,
        max_points,
        passed,
        message: message.join("\n"),
        hidden: check_hidden || default_vis.hides(),
        script,
        extras,
    }
}

/// The assignment, as `submission_metadata.json` describes it.
#[derive(Debug, Clone, Default)]
pub struct Assignment {
    pub title: String,
    pub total_points: Option<f64>,
    pub dates: AssignmentDates,
}

/// An assignment's dates as a suite gives them (each `None` when it does not).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AssignmentDates {
    pub release: Option<Timestamp>,
    pub due: Option<Timestamp>,
    pub late_due: Option<Timestamp>,
}

/// How long after its submission a submission is due when the suite gives no due date: nothing
/// is late and nothing is past due, and adding a grace period cannot overflow a date type.
const DUE_BY_DEFAULT_AFTER: SignedDuration = SignedDuration::from_hours(24 * 365);

/// `submission_metadata.json` in Gradescope's documented shape, every field a type Gradescope
/// gives it (an autograder that computes a late penalty parses the dates; one that scales reads
/// `float(total_points)`; one that seeds per student reads `users[0]`). corral knows no course
/// nor previous submissions: ids 0, `previous_submissions` empty. `created` is when the
/// submission was made; the release date the suite's, else `created`; the due date the suite's,
/// else a year after `created`; the late due date the suite's or `null` (as Gradescope, when
/// none is set); one user, named `by` when the submitter is known.
pub fn submission_metadata(assignment: &Assignment, created: Timestamp, by: Option<&str>) -> Value {
    let dates = &assignment.dates;
    let due = dates
        .due
        .unwrap_or_else(|| created.checked_add(DUE_BY_DEFAULT_AFTER).unwrap_or(created));
    json!({
        "id": 0,
        "created_at": gradescope_time(created),
        "assignment": {
            "due_date": gradescope_time(due),
            "group_size": null,
            "group_submission": false,
            "id": 0,
            "course_id": 0,
            "late_due_date": dates.late_due.map(gradescope_time),
            "release_date": gradescope_time(dates.release.unwrap_or(created)),
            "title": assignment.title,
            "total_points": assignment.total_points.map(|p| format!("{p:.1}")),
        },
        "submission_method": "upload",
        "users": [{
            "email": "",
            "id": 0,
            "name": by.unwrap_or(""),
            "assigned_sections": [],
        }],
        "previous_submissions": [],
    })
}

/// A time as Gradescope writes them (`2018-07-31T23:00:00.000000-07:00`), in UTC: six digits of
/// fraction and a numeric offset are what `datetime.fromisoformat` reads on the Pythons of
/// Gradescope's images (before 3.11 it refuses a `Z`).
pub fn gradescope_time(t: Timestamp) -> String {
    let d = t.to_zoned(jiff::tz::TimeZone::UTC).datetime();
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}+00:00",
        d.year(),
        d.month(),
        d.day(),
        d.hour(),
        d.minute(),
        d.second(),
        d.subsec_nanosecond() / 1000
    )
}

/// A suite's date (`gradescope.due_date` …): a date and time with its offset, as RFC 3339 or
/// Gradescope write them (`2026-12-05T23:59:00-05:00`, `…Z`).
pub fn parse_date(key: &str, text: &str) -> Result<Timestamp, String> {
    let t: Timestamp = text.trim().parse().map_err(|e| {
        format!("{key}: {text:?} is not a date and time with its offset, like 2026-12-05T23:59:00-05:00 ({e})")
    })?;
    let year = t.to_zoned(jiff::tz::TimeZone::UTC).year();
    if !(1970..=9000).contains(&year) {
        return Err(format!(
            "{key}: {text:?} is out of range (years 1970 to 9000)"
        ));
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Results, ResultsError> {
        Results::parse(s.as_bytes())
    }

    #[test]
    fn the_documented_example_parses() {
        let r = parse(
            r#"{ "score": 44.0, "execution_time": 136, "output": "Text relevant to the entire submission",
                 "output_format": "simple_format", "test_output_format": "text", "test_name_format": "text",
                 "visibility": "after_due_date", "stdout_visibility": "visible", "extra_data": {},
                 "tests": [
                   {"score": 2.0, "max_score": 2.0, "status": "passed", "name": "Your name here",
                    "name_format": "text", "number": "1.1", "output": "Giant multiline string",
                    "output_format": "text", "tags": ["tag1", "tag2", "tag3"], "visibility": "visible",
                    "extra_data": {}}
                 ],
                 "leaderboard": [
                   {"name": "Accuracy", "value": 0.926},
                   {"name": "Time", "value": 15.1, "order": "asc"},
                   {"name": "Stars", "value": "*****"}
                 ] }"#,
        )
        .unwrap();
        assert_eq!(r.score, Some(44.0));
        assert_eq!(r.visibility, Some(Visibility::AfterDueDate));
        assert_eq!(r.tests[0].number.as_deref(), Some("1.1"));
        assert_eq!(r.tests[0].tags.len(), 3);
        assert_eq!(r.leaderboard[1].order, Some(Order::Asc));
        assert_eq!(r.total(), 44.0);
        let m = map(&r, "gs", None, false);
        assert_eq!(
            m.extras.leaderboard,
            [
                json!({"name": "Accuracy", "value": 0.926}),
                json!({"name": "Time", "value": 15.1, "order": "asc"}),
                json!({"name": "Stars", "value": "*****"}),
            ]
        );
        assert_eq!(m.extras.extra_data, Some(json!({})));
    }

    #[test]
    fn bad_files_are_refused_with_the_key() {
        for (text, says) in [
            ("", "EOF"),
            ("[]", "not a JSON object"),
            ("not json", "expected"),
            (r#"{"score": "10"}"#, "score"),
            (
                r#"{"score": 1, "tests": [{"score": 1, "visibility": "students"}]}"#,
                "tests[0].visibility",
            ),
            (
                r#"{"score": 1, "tests": [{"score": 1, "status": "ok"}]}"#,
                "tests[0].status",
            ),
            (
                r#"{"score": 1, "tests": [{"score": 1, "max_score": -1}]}"#,
                "tests[0].max_score",
            ),
            (
                r#"{"score": 1, "tests": [{"score": 1, "tags": "a"}]}"#,
                "tests[0].tags",
            ),
            (
                r#"{"score": 1, "tests": [{"score": 1, "number": [1]}]}"#,
                "tests[0].number",
            ),
            (r#"{"score": 1, "output_format": "pdf"}"#, "output_format"),
            (
                r#"{"score": 1, "leaderboard": [{"value": 1}]}"#,
                "leaderboard[0]",
            ),
            (r#"{"tests": [{"max_score": 1}]}"#, "no score"),
            (
                r#"{"tests": [{"name": "Public Tests", "status": "passed"}]}"#,
                "no score",
            ),
            (r#"{}"#, "no score"),
            (r#"{"score": 1} trailing"#, "trailing"),
            (r#"{"score": 1e999}"#, "out of range"),
            // Finite each, not in sum: 1e308 + 1e308 is infinity (the review's NaN row).
            (
                r#"{"tests": [{"score": 1e308, "max_score": 1}, {"score": 1e308, "max_score": 1}]}"#,
                "tests[0].score",
            ),
            (
                r#"{"tests": [{"score": 0, "max_score": 1.7e308}, {"score": 0, "max_score": 1.7e308}]}"#,
                "tests[0].max_score",
            ),
            (r#"{"score": -1e10}"#, "score"),
            (r#"{"score": "1e300"}"#, "score"),
            (
                r#"{"score": 1, "execution_time": "soon"}"#,
                "execution_time",
            ),
            (r#"{"score": 1, "execution_time": [1]}"#, "execution_time"),
        ] {
            let e = parse(text).expect_err(text).to_string();
            assert!(e.contains(says), "{text}: {e}");
        }
        let big = format!(
            "{{\"score\": 1, \"output\": \"{}\"}}",
            "x".repeat(MAX_RESULTS_BYTES)
        );
        assert_eq!(parse(&big), Err(ResultsError::TooLarge));
        let many = format!(
            "{{\"tests\": [{}]}}",
            vec!["{\"score\": 0}"; MAX_TESTS + 1].join(",")
        );
        assert!(parse(&many).unwrap_err().to_string().contains("more than"));
    }

    #[test]
    fn unknown_keys_are_ignored_and_numbers_read_as_text() {
        let r = parse(
            r#"{"tests": [{"score": 1, "max_score": 1, "number": 3, "future": true}], "x": 1}"#,
        )
        .unwrap();
        assert_eq!(r.tests[0].number.as_deref(), Some("3"));
        // gradescope-utils' JSONTestRunner writes the execution time as text.
        let r = parse(r#"{"score": 1, "execution_time": "0.42"}"#).unwrap();
        assert_eq!(r.execution_time, Some(0.42));
        assert_eq!(r.total(), 1.0);
    }

    /// As Gradescope shows them: by number when every test has one (`1.2` before `1.10`); a
    /// test without a number is its name's row, whichever tests came before it.
    #[test]
    fn rows_follow_the_numbers_and_unnumbered_tests_are_named() {
        let r = parse(
            r#"{"tests": [
                 {"score": 1, "max_score": 1, "name": "c", "number": "2.1"},
                 {"score": 1, "max_score": 1, "name": "b", "number": "1.10"},
                 {"score": 1, "max_score": 1, "name": "a", "number": "1.2"},
                 {"score": 1, "max_score": 1, "name": "z", "number": "1.x"}
               ]}"#,
        )
        .unwrap();
        let ids = |m: &Mapped| m.tests.iter().map(|t| t.id.clone()).collect::<Vec<_>>();
        assert_eq!(
            ids(&map(&r, "gs", None, false)),
            ["gs/1.2", "gs/1.10", "gs/1.x", "gs/2.1"]
        );
        let r = parse(
            r#"{"tests": [
                 {"score": 0, "max_score": 1, "name": "test_unknown (_FailedTest)"},
                 {"score": 1, "max_score": 1, "name": "Check submitted files"},
                 {"score": 1, "max_score": 1, "name": "b", "number": "1"}
               ]}"#,
        )
        .unwrap();
        assert_eq!(
            ids(&map(&r, "gs", None, false)),
            [
                "gs/test_unknown (_FailedTest)",
                "gs/Check submitted files",
                "gs/1"
            ]
        );
    }

    #[test]
    fn tests_become_rows_with_their_points_and_visibility() {
        let r = parse(
            r#"{"tests": [
                 {"score": 2, "max_score": 2, "name": "adds", "number": "1.1"},
                 {"score": 0, "max_score": 3, "name": "divides", "number": "1.2", "output": "ZeroDivisionError"},
                 {"score": 1, "max_score": 1, "visibility": "hidden", "number": "2"},
                 {"score": 0, "max_score": 1, "visibility": "after_due_date", "number": "2"},
                 {"score": 1, "max_score": 1, "visibility": "after_published", "status": "failed"},
                 {"score": 0.5}
               ]}"#,
        )
        .unwrap();
        let m = map(&r, "gs", Some(10.0), false);
        let ids: Vec<&str> = m.tests.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids, ["gs/1.1", "gs/1.2", "gs/2", "gs/2~2", "gs/5", "gs/6"]);
        let points: Vec<(f64, f64)> = m.tests.iter().map(|t| (t.points, t.max_points)).collect();
        assert_eq!(
            points,
            [
                (2.0, 2.0),
                (0.0, 3.0),
                (1.0, 1.0),
                (0.0, 1.0),
                (1.0, 1.0),
                (0.5, 0.0)
            ]
        );
        let results: Vec<Option<bool>> = m.tests.iter().map(|t| t.result).collect();
        assert_eq!(
            results,
            [
                Some(true),
                Some(false),
                Some(true),
                Some(false),
                Some(false),
                Some(true)
            ]
        );
        let hidden: Vec<bool> = m.tests.iter().map(|t| t.hidden).collect();
        assert_eq!(hidden, [false, false, true, true, true, false]);
        assert_eq!(m.tests[1].message.as_deref(), Some("ZeroDivisionError"));
        assert_eq!(m.tests[0].description, "adds");
        assert_eq!(m.tests[2].description, "test 2");
        // The check's row carries the declared total's part the tests do not cover.
        assert_eq!((m.points, m.max_points), (0.0, 2.0));
        assert!(!m.passed);
        let sum: f64 = m.tests.iter().map(|t| t.points).sum::<f64>() + m.points;
        assert_eq!(sum, 4.5);
    }

    /// Otter-Grader 7's results (`GradingResults.to_gradescope_dict`): a "Public Tests" summary
    /// with a status and no score, then each question with its score.
    #[test]
    fn a_test_without_a_score_is_a_row_worth_nothing() {
        let r = parse(
            r#"{"tests": [
                 {"name": "Public Tests", "visibility": "visible", "output": "q1 results: All test cases passed!", "status": "passed"},
                 {"name": "q1", "score": 0.0, "max_score": 2.0, "visibility": "hidden", "output": "q1 results: ..."},
                 {"name": "q2", "max_score": 3.0}
               ]}"#,
        )
        .unwrap();
        assert_eq!(r.total(), 0.0);
        let m = map(&r, "gs", Some(5.0), false);
        let rows: Vec<(f64, f64, Option<bool>, bool)> = m
            .tests
            .iter()
            .map(|t| (t.points, t.max_points, t.result, t.hidden))
            .collect();
        assert_eq!(
            rows,
            [
                (0.0, 0.0, Some(true), false),
                (0.0, 2.0, Some(false), true),
                // No score and a maximum: 0 of it, failed (never a pass by accident).
                (0.0, 3.0, Some(false), false),
            ]
        );
        assert!(!m.passed);
        assert_eq!((m.points, m.max_points), (0.0, 0.0));
    }

    #[test]
    fn the_top_level_score_overrides_and_stands_alone() {
        let r = parse(r#"{"score": 7, "tests": [{"score": 2, "max_score": 2}, {"score": 1, "max_score": 8}]}"#).unwrap();
        let m = map(&r, "gs", Some(10.0), false);
        assert_eq!((m.points, m.max_points), (4.0, 0.0));
        assert!(m.message.contains("overrides"), "{}", m.message);
        let total: f64 = m.tests.iter().map(|t| t.points).sum::<f64>() + m.points;
        assert_eq!(total, 7.0);

        let r = parse(r#"{"score": 6.5, "output": "good job", "visibility": "after_published"}"#)
            .unwrap();
        let m = map(&r, "gs", Some(10.0), false);
        assert!(m.tests.is_empty());
        assert_eq!((m.points, m.max_points), (6.5, 10.0));
        assert!(m.hidden && !m.passed);
        assert!(
            m.message.starts_with("good job\nautograder score: 6.5/10"),
            "{}",
            m.message
        );
        let m = map(&parse(r#"{"score": 10}"#).unwrap(), "gs", Some(10.0), false);
        assert!(m.passed);
        let m = map(&parse(r#"{"score": 3}"#).unwrap(), "gs", None, false);
        assert_eq!((m.points, m.max_points), (3.0, 0.0));
        assert!(m.message.contains("maximum is unknown"));
    }

    #[test]
    fn the_top_level_visibility_is_the_tests_default() {
        let r = parse(r#"{"visibility": "hidden", "tests": [{"score": 1, "max_score": 1}, {"score": 1, "max_score": 1, "visibility": "visible"}]}"#).unwrap();
        let m = map(&r, "gs", None, false);
        assert_eq!(
            m.tests.iter().map(|t| t.hidden).collect::<Vec<_>>(),
            [true, false]
        );
        assert!(m.hidden);
        assert!(m.passed);
        assert_eq!((m.points, m.max_points), (0.0, 0.0));
        // A hidden check hides everything.
        let m = map(&r, "gs", None, true);
        assert!(m.tests.iter().all(|t| t.hidden));
    }

    #[test]
    fn long_outputs_are_cut() {
        let r = parse(&format!(
            r#"{{"tests": [{{"score": 0, "max_score": 1, "output": "{}é"}}]}}"#,
            "a".repeat(MAX_OUTPUT - 1)
        ))
        .unwrap();
        let m = map(&r, "gs", None, false);
        let msg = m.tests[0].message.as_deref().unwrap();
        assert!(
            msg.ends_with("[… cut at 16384 bytes]"),
            "{}",
            &msg[msg.len() - 40..]
        );
        assert!(msg.len() < MAX_OUTPUT + 64);
    }

    #[test]
    fn metadata_has_the_documented_keys_each_of_gradescopes_type() {
        let t = |s: &str| parse_date("t", s).unwrap();
        let now = t("2026-11-26T08:00:00Z");
        let m = submission_metadata(
            &Assignment {
                title: "hw1".into(),
                total_points: Some(20.0),
                dates: AssignmentDates::default(),
            },
            now,
            None,
        );
        assert_eq!(m["assignment"]["title"], "hw1");
        assert_eq!(m["assignment"]["total_points"], "20.0");
        // Python 3.10's fromisoformat reads these (no `Z`, six digits of fraction).
        assert_eq!(m["created_at"], "2026-11-26T08:00:00.000000+00:00");
        assert_eq!(m["assignment"]["release_date"], m["created_at"]);
        assert_eq!(
            m["assignment"]["due_date"],
            "2027-11-26T08:00:00.000000+00:00"
        );
        assert_eq!(m["assignment"]["late_due_date"], Value::Null);
        assert_eq!(m["users"][0]["name"], "");
        assert_eq!(m["users"].as_array().unwrap().len(), 1);
        assert!(m["previous_submissions"].as_array().unwrap().is_empty());

        // A suite's dates and a known submission: theirs, in UTC.
        let m = submission_metadata(
            &Assignment {
                title: "hw1".into(),
                total_points: None,
                dates: AssignmentDates {
                    release: Some(t("2026-11-01T00:00:00-05:00")),
                    due: Some(t("2026-12-05T23:59:00.5-05:00")),
                    late_due: Some(t("2026-12-07T23:59:00-05:00")),
                },
            },
            t("2026-12-06T01:00:00-05:00"),
            Some("ada"),
        );
        assert_eq!(m["created_at"], "2026-12-06T06:00:00.000000+00:00");
        assert_eq!(
            m["assignment"]["release_date"],
            "2026-11-01T05:00:00.000000+00:00"
        );
        assert_eq!(
            m["assignment"]["due_date"],
            "2026-12-06T04:59:00.500000+00:00"
        );
        assert_eq!(
            m["assignment"]["late_due_date"],
            "2026-12-08T04:59:00.000000+00:00"
        );
        assert_eq!(m["assignment"]["total_points"], Value::Null);
        assert_eq!(m["users"][0]["name"], "ada");
    }

    #[test]
    fn a_suites_date_needs_its_offset() {
        for bad in [
            "2026-12-05",
            "2026-12-05T23:59:00",
            "tomorrow",
            "0001-01-01T00:00:00Z",
        ] {
            let e = parse_date("gradescope.due_date", bad).unwrap_err();
            assert!(e.starts_with("gradescope.due_date: "), "{e}");
        }
        assert!(parse_date("d", "2026-12-05T23:59:00Z").is_ok());
    }
}

/// Variables `setup.sh` and `run_autograder` get, as Gradescope's base images give them what
/// they need: Gradescope's Ubuntu images let `pip3 install` write to the system Python, which
/// Debian's and newer Ubuntu's refuse (PEP 668: `error: externally-managed-environment`), so an
/// unmodified `setup.sh` that `pip3 install -r requirements.txt` works on such a base too.
pub const ENV: &[(&str, &str)] = &[("PIP_BREAK_SYSTEM_PACKAGES", "1")];

/// A script with Unix line endings: Gradescope's image build runs `dos2unix` on
/// `/autograder/run_autograder` and `setup.sh`, so autograders written on Windows (CRLF) run
/// there, and must here (`#!/bin/bash\r` names no interpreter).
pub fn unix_line_endings(script: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(script.len());
    let mut bytes = script.iter().peekable();
    while let Some(&b) = bytes.next() {
        if b == b'\r' && bytes.peek() == Some(&&b'\n') {
            continue;
        }
        out.push(b);
    }
    out
}

#[cfg(test)]
mod line_ending_tests {
    use super::unix_line_endings;

    #[test]
    fn crlf_becomes_lf_and_nothing_else_changes() {
        assert_eq!(
            unix_line_endings(b"#!/bin/sh\r\necho a\r\n"),
            b"#!/bin/sh\necho a\n"
        );
        assert_eq!(unix_line_endings(b"a\rb\n\r"), b"a\rb\n\r");
        assert_eq!(unix_line_endings(b"\r\r\n"), b"\r\n");
        assert_eq!(unix_line_endings(b""), b"");
    }
}
