//! One student's stored result, and the report rows every result of a suite has.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::image_root::UsedImage;
use crate::suite::{CheckKind, Suite};

/// Where per-student results go, under the output folder.
pub const RESULTS_DIR: &str = "results";

/// A file name for a student's result: the id, with anything unusual replaced — and then, as
/// two ids can become the same name that way (`kim lee`, `kim_lee`), with a digest of the id
/// appended. An id with nothing replaced keeps its plain name, unless it ends as such a digest
/// does (`kim_lee-d273994c`, the name `kim lee` gets): then it gets its own digest too, so no id
/// can take another's file.
pub fn result_file(student: &str) -> String {
    use sha2::{Digest, Sha256};
    let safe: String = student
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || "-_.@+".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let looks_digested = student.len() > 9
        && student.as_bytes()[student.len() - 9] == b'-'
        && student[student.len() - 8..]
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if safe == student && !looks_digested {
        return format!("{safe}.json");
    }
    let digest = hex::encode(&Sha256::digest(student.as_bytes())[..4]);
    format!("{safe}-{digest}.json")
}

/// The name of `student`'s feedback file in `feedback/`: [`result_file`]'s, as text.
pub fn feedback_file(student: &str) -> String {
    let json = result_file(student);
    format!("{}.txt", json.strip_suffix(".json").unwrap_or(&json))
}

/// The folder of the students' feedback files, in the output folder.
pub const FEEDBACK_DIR: &str = "feedback";

/// How a submission's grading went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RowStatus {
    /// Every check was judged (passed or failed).
    Graded,
    /// Some check could not be judged (sandbox failure, an invalid pytest/check50 run), or the
    /// submission could not be graded at all: look at `reason`.
    Error,
    /// A grader refused the submission (PrairieLearn's `gradable: false`, a syntax error): the
    /// student's to fix, not an infrastructure error; `reason` has the grader's message.
    NotGradable,
}

impl RowStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RowStatus::Graded => "graded",
            RowStatus::Error => "error",
            RowStatus::NotGradable => "not_gradable",
        }
    }
}

/// One student's stored result (`results/STUDENT.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub student: String,
    pub status: RowStatus,
    pub score: f64,
    pub max_score: f64,
    /// Why points were lost or the submission could not be graded, in one line per cause.
    pub reason: Option<String>,
    /// Protected files the submission replaced (`path (reason)`).
    pub integrity: Vec<String>,
    /// The static safety check's findings, when it ran.
    pub safety: Option<Vec<String>>,
    /// Per report row: (result, points).
    pub checks: BTreeMap<String, (Option<bool>, f64)>,
    pub time_ms: u64,
    /// Seconds since the epoch.
    pub graded_at: u64,
    /// What was graded (suite and submission contents); a changed submission is graded again.
    pub fingerprint: String,
    /// corral's staff JSON report (`null` when the submission could not be graded).
    pub report: Value,
    /// The container images the submission was graded in (empty: the host root).
    #[serde(default)]
    pub images: Vec<UsedImage>,
    /// The checks graded under gVisor, in suite order (empty: every check ran natively).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gvisor: Vec<String>,
    /// What the student may read (`feedback/STUDENT.txt`): the text report in the students'
    /// view (hidden checks pass/fail only), or why the submission could not be graded. `None`
    /// in a result stored before feedback was written: it is graded again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<String>,
}

/// The rows every report of this suite has, in order: (id, description, max points).
pub fn columns(suite: &Suite) -> Vec<(String, String, f64)> {
    let mut out = Vec::new();
    for c in &suite.checks {
        match c.rubric() {
            Some(items) => {
                out.push((c.id.clone(), c.description.clone(), 0.0));
                for i in items {
                    out.push((i.id.to_string(), i.description.to_string(), i.points));
                }
            }
            None => out.push((c.id.clone(), c.description.clone(), c.points)),
        }
    }
    out
}

/// [`columns`] with the rows only known once graders ran (the tests of `gradescope` and
/// `prairielearn` checks) after their check, in natural order of their ids, with the largest
/// maximum any student's report gave them.
pub fn columns_seen(suite: &Suite, rows: &[Row]) -> Vec<(String, String, f64)> {
    let mut out = Vec::new();
    for col in columns(suite) {
        let prefix = format!("{}/", col.0);
        let dynamic = suite.check(&col.0).is_some_and(|c| {
            matches!(
                c.kind,
                CheckKind::Gradescope(_) | CheckKind::PrairieLearn(_)
            )
        });
        out.push(col);
        if !dynamic {
            continue;
        }
        let mut seen: Vec<(String, String, f64)> = Vec::new();
        for r in rows {
            for id in r.checks.keys().filter(|k| k.starts_with(&prefix)) {
                let row = &r.report["results"][id];
                let max = row["max_points"].as_f64().unwrap_or(0.0);
                match seen.iter_mut().find(|(s, _, _)| s == id) {
                    Some(s) => s.2 = s.2.max(max),
                    None => seen.push((
                        id.clone(),
                        row["description"].as_str().unwrap_or(id).to_string(),
                        max,
                    )),
                }
            }
        }
        seen.sort_by_key(|c| natural(&c.0));
        out.extend(seen);
    }
    out
}

/// A sort key comparing runs of digits as numbers (`t/2` before `t/10`).
fn natural(s: &str) -> Vec<(u8, u128, String)> {
    let mut out = Vec::new();
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits > 0 {
            out.push((
                0,
                rest[..digits].parse().unwrap_or(u128::MAX),
                String::new(),
            ));
            rest = &rest[digits..];
        } else {
            let text = rest
                .find(|c: char| c.is_ascii_digit())
                .unwrap_or(rest.len());
            out.push((1, 0, rest[..text].to_string()));
            rest = &rest[text..];
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod test_rows {
    use super::*;

    /// A graded row of `student` with nothing else recorded.
    pub(crate) fn graded(student: &str, score: f64, max_score: f64) -> Row {
        Row {
            student: student.into(),
            status: RowStatus::Graded,
            score,
            max_score,
            reason: None,
            integrity: vec![],
            safety: None,
            checks: BTreeMap::new(),
            time_ms: 0,
            graded_at: 0,
            fingerprint: String::new(),
            report: Value::Null,
            images: vec![],
            gvisor: vec![],
            feedback: Some(String::new()),
        }
    }
}

#[cfg(test)]
mod result_file_tests {
    use super::result_file;

    /// Two ids that read the same once unusual characters are replaced get two files (one
    /// overwrote the other, so every `corral grade` re-graded one of them).
    #[test]
    fn ids_that_sanitise_alike_get_their_own_files() {
        assert_eq!(result_file("kim_lee"), "kim_lee.json");
        let spaced = result_file("kim lee");
        assert!(
            spaced.starts_with("kim_lee-") && spaced.ends_with(".json"),
            "{spaced}"
        );
        assert_ne!(spaced, result_file("kim/lee"));
        assert_eq!(spaced, result_file("kim lee"), "stable across runs");
        // An id spelled as the digested name of another (the review's `kim_lee-d273994c`)
        // does not take its file; one that merely ends in hex keeps its plain name.
        let lookalike = spaced.trim_end_matches(".json");
        assert_ne!(result_file(lookalike), spaced);
        assert!(result_file(lookalike).starts_with(&format!("{lookalike}-")));
        assert_eq!(result_file("kim-2024"), "kim-2024.json");
        assert_eq!(result_file("ada-deadbeef1"), "ada-deadbeef1.json");
    }
}
