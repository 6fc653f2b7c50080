//! PrairieLearn's external grader contract, as its documentation describes it: the grader reads
//! `/grade/` (`student/`, `tests/`, `serverFilesCourse/`, `data/data.json`) and writes
//! `/grade/results/results.json`. Read here: plain data, validated; mapped to corral rows.
//!
//! What is refused (the check errors, it never passes): a file over [`MAX_RESULTS_BYTES`], text
//! that is not a JSON object, a known key of the wrong type, a `score` outside 0–1, a missing
//! `score` on a gradable result, more than [`MAX_TESTS`] tests, a test without a `name`, negative
//! points; and a result the grader itself marks `succeeded: false` is an error row with the
//! grader's message. `gradable: false` is no error: the grader refused the submission (a syntax
//! error), a failed row with its message, format errors and output for the student. `images`
//! (the whole result's and a test's) are not kept — a report carries text — but counted in the
//! row's message, so nobody wonders where the plot went. Unknown keys are ignored.

use serde::Deserialize;
use serde_json::{json, Value};

use super::results_file::{cap, fmt_num as fmt, read, row_id, without_colours};
pub use super::results_file::{ResultsError, MAX_OUTPUT, MAX_RESULTS_BYTES, MAX_TESTS};
use crate::report::{CheckResult, Observation, ScriptEntry};

/// One entry of `tests`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Test {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub points: Option<f64>,
    #[serde(default)]
    pub max_points: Option<f64>,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub output: Option<String>,
    #[serde(default)]
    pub images: Images,
}

/// A result's or a test's `images` (data URLs or links), only counted.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(from = "Value")]
pub struct Images(usize);

impl From<Value> for Images {
    fn from(v: Value) -> Self {
        Images(match v {
            Value::Array(a) => a.len(),
            Value::Null => 0,
            _ => 1,
        })
    }
}

impl Images {
    /// What the row says of them, when there are any.
    fn note(&self) -> Option<String> {
        match self.0 {
            0 => None,
            1 => Some("(the grader attached an image, which corral's reports do not carry)".into()),
            n => Some(format!(
                "(the grader attached {n} images, which corral's reports do not carry)"
            )),
        }
    }
}

/// A whole `results.json`, validated.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Results {
    /// `false`: the grading itself failed.
    #[serde(default)]
    pub succeeded: Option<bool>,
    /// `false`: the submission cannot be graded (the grader says why in `message`).
    #[serde(default)]
    pub gradable: Option<bool>,
    /// 0–1.
    #[serde(default)]
    pub score: Option<f64>,
    #[serde(default)]
    pub message: Option<String>,
    /// What the grader shows under "Output" (PrairieLearn's Python grader: the student code's
    /// printed output, a syntax error's traceback).
    #[serde(default)]
    pub output: Option<String>,
    /// Why the submission is not gradable, as PrairieLearn shows it ("Error: …"): a list of
    /// texts (its Python grader's), or an object of them by element; kept as written.
    #[serde(default)]
    pub format_errors: Option<Value>,
    #[serde(default)]
    pub tests: Vec<Test>,
    #[serde(default)]
    pub images: Images,
}

impl Results {
    /// The texts of `format_errors`, in order (an object's with their keys).
    pub fn format_errors(&self) -> Vec<String> {
        fn texts(v: &Value, key: Option<&str>, out: &mut Vec<String>) {
            match v {
                Value::String(s) if !s.trim().is_empty() => out.push(match key {
                    Some(k) => format!("{k}: {s}"),
                    None => s.clone(),
                }),
                Value::Array(items) => items.iter().for_each(|i| texts(i, key, out)),
                Value::Object(m) => m.iter().for_each(|(k, i)| texts(i, Some(k), out)),
                Value::Null | Value::String(_) => {}
                other => out.push(other.to_string()),
            }
        }
        let mut out = Vec::new();
        if let Some(v) = &self.format_errors {
            texts(v, None, &mut out);
        }
        out
    }

    /// What the grader says beyond its tests, as PrairieLearn shows it: its `message`, its
    /// format errors (`Error: …`), and its `output`.
    fn said(&self) -> Vec<String> {
        let mut said = Vec::new();
        if let Some(m) = self.message.as_deref().filter(|m| !m.trim().is_empty()) {
            said.push(cap(m));
        }
        said.extend(
            self.format_errors()
                .iter()
                .map(|e| format!("Error: {}", cap(e))),
        );
        said
    }

    /// The grader's `output`, headed, when it wrote one.
    fn output_shown(&self) -> Option<String> {
        self.output
            .as_deref()
            .filter(|o| !o.trim().is_empty())
            .map(|o| format!("output:\n{}", cap(&without_colours(o.trim_end()))))
    }

    /// The contract's rules over the values, beyond their types.
    fn check(&self) -> Result<(), String> {
        match self.score {
            Some(s) if !(0.0..=1.0).contains(&s) => {
                return Err(format!("score: {s} is not between 0 and 1"))
            }
            None if self.judged() => return Err("score: missing".into()),
            _ => {}
        }
        for (i, t) in self.tests.iter().enumerate() {
            for (key, v) in [("points", t.points), ("max_points", t.max_points)] {
                if v.is_some_and(|p| !p.is_finite() || p < 0.0) {
                    return Err(format!("tests[{i}].{key}: must be a number >= 0"));
                }
            }
        }
        Ok(())
    }

    /// Reads and validates the bytes of a `results.json`.
    pub fn parse(bytes: &[u8]) -> Result<Results, ResultsError> {
        read(
            bytes,
            "PrairieLearn",
            |r: &Results| r.tests.len(),
            Results::check,
        )
    }

    /// The grader graded the submission (not `gradable: false`, not `succeeded: false`).
    pub fn judged(&self) -> bool {
        self.gradable != Some(false) && self.succeeded != Some(false)
    }
}

/// The rows of a PrairieLearn check, from its results.
#[derive(Debug, Clone, PartialEq)]
pub enum Mapped {
    /// The grader graded the submission.
    Graded {
        /// `score × points` of the check's `points`.
        points: f64,
        /// One row per test, `CHECK/NAME` (see [`row_id`]), worth no points of their own: the
        /// score is PrairieLearn's, the tests' points are shown in their messages.
        tests: Vec<CheckResult>,
        /// The grader's `message`, then the score.
        message: String,
        passed: bool,
    },
    /// `gradable: false`: the submission is invalid (PrairieLearn does not count it and shows
    /// the student the grader's message), a failed row, not an error.
    NotGradable(String),
    /// `succeeded: false`: grading itself failed, an error row with the grader's message.
    Failed(String),
}

/// Maps validated results to rows of check `check_id` worth `points` in all.
pub fn map(results: &Results, check_id: &str, points: f64, hidden: bool) -> Mapped {
    if !results.judged() {
        // A grader that failed may also say "not gradable": its failure comes first.
        let failed = results.succeeded == Some(false);
        let what = if failed {
            "the grader says grading did not succeed"
        } else {
            "the grader marked the submission not gradable"
        };
        let said = results.said();
        let mut why = if said.is_empty() {
            what.to_string()
        } else {
            format!("{what}: {}", said.join("\n"))
        };
        if let Some(o) = results.output_shown() {
            why.push('\n');
            why.push_str(&o);
        }
        return if failed {
            Mapped::Failed(why)
        } else {
            Mapped::NotGradable(why)
        };
    }
    let score = results.score.unwrap_or(0.0);
    let mut ids = Vec::new();
    let tests: Vec<CheckResult> = results
        .tests
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let passed = match (t.points, t.max_points) {
                (Some(p), Some(m)) => p >= m,
                (Some(p), None) => p > 0.0,
                _ => true,
            };
            let mut message = Vec::new();
            if let (Some(p), Some(m)) = (t.points, t.max_points) {
                message.push(format!("{}/{} points", fmt(p), fmt(m)));
            }
            for m in [&t.message, &t.output].into_iter().flatten() {
                if !m.trim().is_empty() {
                    message.push(cap(&without_colours(m)));
                }
            }
            message.extend(t.images.note());
            let id = row_id(check_id, &[Some(t.name.as_str())], i + 1, &mut ids);
            let description = match &t.description {
                Some(d) if !d.trim().is_empty() => format!("{}: {d}", t.name),
                _ => t.name.clone(),
            };
            CheckResult {
                dependencies: vec![check_id.to_string()],
                result: Some(passed),
                script: vec![ScriptEntry {
                    expected: Observation::new(
                        "test",
                        json!({"name": t.name, "max_points": t.max_points}),
                    ),
                    actual: Observation::new("points", json!(t.points)),
                }],
                hidden,
                message: (!message.is_empty()).then(|| message.join("\n")),
                ..CheckResult::new(id, description)
            }
        })
        .collect();
    let mut message = results.said();
    message.push(format!(
        "score: {}%",
        fmt((score * 10000.0).round() / 100.0)
    ));
    message.extend(results.output_shown());
    message.extend(results.images.note());
    Mapped::Graded {
        points: score * points,
        tests,
        message: message.join("\n"),
        passed: score >= 1.0,
    }
}

/// `data/data.json`: what PrairieLearn gives a grader about the submission. corral knows the
/// files (also under `student/`, and base64 in `submitted_answers._files` as PrairieLearn's file
/// editors submit them) and the parameters the suite declares; the rest is empty.
pub fn data_json(params: &Value, correct_answers: &Value, files: &[(String, Vec<u8>)]) -> Value {
    use base64::Engine;
    let files: Vec<Value> = files
        .iter()
        .map(|(name, bytes)| {
            json!({"name": name, "contents": base64::engine::general_purpose::STANDARD.encode(bytes)})
        })
        .collect();
    json!({
        "params": params,
        "correct_answers": correct_answers,
        "submitted_answers": {"_files": files},
        "format_errors": {},
        "partial_scores": {},
        "score": 0,
        "feedback": {},
        "variant_seed": 0,
        "options": {},
        "raw_submitted_answers": {},
        "editable": false,
        "panel": "question",
        "extensions": {},
        "num_valid_submissions": 0,
        "manual_grading": false,
        "answers_names": {},
        "gradable": true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Results, ResultsError> {
        Results::parse(s.as_bytes())
    }

    #[test]
    fn the_documented_shape_parses_and_maps() {
        let r = parse(
            r#"{"gradable": true, "score": 0.25, "message": "Tests completed successfully.",
                "output": "Running tests...", "images": [],
                "tests": [
                  {"name": "Test 1", "description": "adds", "points": 1, "max_points": 1, "message": "ok", "output": "1+1=2"},
                  {"name": "Test 2", "points": 0, "max_points": 3, "message": "expected 4, got 5"}
                ]}"#,
        )
        .unwrap();
        let Mapped::Graded {
            points,
            tests,
            message,
            passed,
        } = map(&r, "pl", 4.0, false)
        else {
            panic!("graded")
        };
        assert_eq!(points, 1.0);
        assert!(!passed);
        assert_eq!(
            message,
            "Tests completed successfully.\nscore: 25%\noutput:\nRunning tests..."
        );
        assert_eq!(tests[0].id, "pl/Test 1");
        assert_eq!(tests[0].description, "Test 1: adds");
        assert_eq!(tests[0].result, Some(true));
        assert_eq!(tests[1].result, Some(false));
        assert_eq!(
            tests[1].message.as_deref(),
            Some("0/3 points\nexpected 4, got 5")
        );
        assert!(tests.iter().all(|t| t.points == 0.0 && t.max_points == 0.0));
    }

    /// Images are not kept, but said: the check's row and a test's count theirs.
    #[test]
    fn images_are_counted_where_they_were_attached() {
        let r = parse(
            r#"{"score": 1, "images": ["data:image/png;base64,iVBOR", "data:image/png;base64,iVBOR"],
                "tests": [{"name": "plot", "points": 1, "max_points": 1, "images": ["data:image/png;base64,iVBOR"]}]}"#,
        )
        .unwrap();
        let Mapped::Graded { tests, message, .. } = map(&r, "pl", 1.0, false) else {
            panic!("graded")
        };
        assert!(
            message
                .ends_with("(the grader attached 2 images, which corral's reports do not carry)"),
            "{message}"
        );
        let m = tests[0].message.as_deref().unwrap();
        assert!(
            m.ends_with("(the grader attached an image, which corral's reports do not carry)"),
            "{m}"
        );
        assert!(!format!("{message}{m}").contains("iVBOR"));
    }

    #[test]
    fn not_gradable_carries_the_graders_message_and_a_failure_is_apart() {
        let r = parse(r#"{"gradable": false, "message": "no file named fib.py"}"#).unwrap();
        assert_eq!(
            map(&r, "pl", 1.0, false),
            Mapped::NotGradable(
                "the grader marked the submission not gradable: no file named fib.py".into()
            )
        );
        let r = parse(r#"{"succeeded": false, "score": 0}"#).unwrap();
        assert!(matches!(map(&r, "pl", 1.0, false), Mapped::Failed(_)));
        let r = parse(r#"{"succeeded": false, "gradable": false}"#).unwrap();
        assert!(matches!(map(&r, "pl", 1.0, false), Mapped::Failed(_)));
    }

    /// PrairieLearn's Python grader says why a submission is not gradable in `format_errors`
    /// and shows the traceback in `output`, with no `message`: both reach the row.
    #[test]
    fn not_gradable_carries_the_format_errors_and_the_output() {
        let r = parse(
            r#"{"tests": [], "score": 0.0, "succeeded": true, "gradable": false,
                "output": "  File \"user_code.py\", line 1\nSyntaxError: '(' was never closed\n",
                "format_errors": ["Your code has a syntax error."]}"#,
        )
        .unwrap();
        assert_eq!(
            map(&r, "pl", 1.0, false),
            Mapped::NotGradable(
                "the grader marked the submission not gradable: Error: Your code has a syntax \
                 error.\noutput:\n  File \"user_code.py\", line 1\nSyntaxError: '(' was never \
                 closed"
                    .into()
            )
        );
        let r = parse(
            r#"{"gradable": false, "format_errors": {"x": "not a number", "y": ["a", "b"]}}"#,
        )
        .unwrap();
        assert_eq!(r.format_errors(), ["x: not a number", "y: a", "y: b"]);
    }

    #[test]
    fn bad_files_are_refused_with_the_key() {
        for (text, says) in [
            ("", "EOF"),
            ("[1]", "not a JSON object"),
            (r#"{"gradable": true}"#, "score: missing"),
            (r#"{"score": 1.5}"#, "not between 0 and 1"),
            (r#"{"score": -0.1}"#, "not between 0 and 1"),
            (r#"{"score": "1"}"#, "score"),
            (r#"{"score": 1, "gradable": "yes"}"#, "gradable"),
            (r#"{"score": 1, "tests": [{"points": 1}]}"#, "tests[0]"),
            (
                r#"{"score": 1, "tests": [{"name": "a", "points": -1}]}"#,
                "tests[0].points",
            ),
            (
                r#"{"score": 1, "tests": [{"name": "a", "max_points": "2"}]}"#,
                "tests[0].max_points",
            ),
            (r#"{"score": 1, "message": 3}"#, "message"),
            (r#"{"score": 1}{}"#, "trailing"),
        ] {
            let e = parse(text).expect_err(text).to_string();
            assert!(e.contains(says), "{text}: {e}");
        }
        let big = format!(
            r#"{{"score": 1, "output": "{}"}}"#,
            "x".repeat(MAX_RESULTS_BYTES)
        );
        assert_eq!(parse(&big), Err(ResultsError::TooLarge));
    }

    #[test]
    fn a_full_score_passes_and_scales_to_the_checks_points() {
        let r = parse(r#"{"score": 1}"#).unwrap();
        let Mapped::Graded {
            points,
            passed,
            tests,
            ..
        } = map(&r, "pl", 5.0, true)
        else {
            panic!()
        };
        assert_eq!(points, 5.0);
        assert!(passed && tests.is_empty());
    }

    #[test]
    fn data_json_carries_the_files_and_parameters() {
        let d = data_json(
            &json!({"n": 5}),
            &json!({}),
            &[("fib.py".into(), b"def fib(n): pass\n".to_vec())],
        );
        assert_eq!(d["params"]["n"], 5);
        assert_eq!(d["submitted_answers"]["_files"][0]["name"], "fib.py");
        assert_eq!(
            d["submitted_answers"]["_files"][0]["contents"],
            "ZGVmIGZpYihuKTogcGFzcwo="
        );
    }
}
