//! A submission's verdict: what a worker reports and the server stores and answers.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

/// The verdict of a submission.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum VerdictKind {
    Accepted,
    WrongAnswer,
    CompileError,
    RuntimeError,
    TimeLimit,
    MemoryLimit,
    OutputLimit,
    /// A grader refused the submission (PrairieLearn's `gradable: false`): the student's to fix,
    /// judged (`done`), and left out of the gradebook's standing.
    NotGradable,
    InternalError,
}

impl VerdictKind {
    /// Every verdict (for metrics that show each one from the start, at 0), in the enum's order
    /// (a test holds it to `as_str`'s arms).
    pub const ALL: [VerdictKind; 9] = [
        VerdictKind::Accepted,
        VerdictKind::WrongAnswer,
        VerdictKind::CompileError,
        VerdictKind::RuntimeError,
        VerdictKind::TimeLimit,
        VerdictKind::MemoryLimit,
        VerdictKind::OutputLimit,
        VerdictKind::NotGradable,
        VerdictKind::InternalError,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            VerdictKind::Accepted => "accepted",
            VerdictKind::WrongAnswer => "wrong_answer",
            VerdictKind::CompileError => "compile_error",
            VerdictKind::RuntimeError => "runtime_error",
            VerdictKind::TimeLimit => "time_limit",
            VerdictKind::MemoryLimit => "memory_limit",
            VerdictKind::OutputLimit => "output_limit",
            VerdictKind::NotGradable => "not_gradable",
            VerdictKind::InternalError => "internal_error",
        }
    }
}

/// What a worker reports for a submission. Checked field by field when a remote worker posts it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Verdict {
    pub verdict: VerdictKind,
    /// Points earned: 1 or 0 for a run, the suite's score for checks.
    pub score: f64,
    pub max_score: f64,
    /// The run's result (the object of `corral run --json`), for language and command modes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub run: Option<Value>,
    /// The compile step's result, when the language compiles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub compile: Option<Value>,
    /// The check report (corral's JSON report), for suites, as the submitter sees it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub checks: Option<Value>,
    /// The same report as staff see it (hidden checks' details), when the submitter is not staff:
    /// a staff reader of the submission gets it as `checks`; the submitter never sees it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub staff_checks: Option<Value>,
    /// Why, in a sentence (wrong answer, which limit, what failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The container image it ran in (for suites: the first check's); absent on the host root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageDoc>,
}

/// A container image as results record it: the name it was chosen by and the image manifest's
/// digest (what actually ran).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"name": "python:3.12-slim", "digest": "sha256:4c3f0ef8d6e9b1a2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a"}))]
pub struct ImageDoc {
    pub name: String,
    pub digest: String,
}

impl From<corral_checks::UsedImage> for ImageDoc {
    fn from(i: corral_checks::UsedImage) -> Self {
        ImageDoc {
            name: i.name,
            digest: i.digest,
        }
    }
}

impl Verdict {
    /// Why the verdict's numbers cannot be stored and summed, or `None`: both finite, the
    /// maximum not negative. A score above the maximum (extra credit) or below zero (a
    /// penalty) is a grader's to give.
    pub fn unusable(&self) -> Option<String> {
        if !self.score.is_finite() || !self.max_score.is_finite() {
            Some(format!(
                "a score that is not a number ({} of {})",
                self.score, self.max_score
            ))
        } else if self.max_score < 0.0 {
            Some(format!("a negative maximum score ({})", self.max_score))
        } else {
            None
        }
    }

    pub fn internal(message: impl Into<String>) -> Verdict {
        Verdict {
            verdict: VerdictKind::InternalError,
            score: 0.0,
            max_score: 1.0,
            run: None,
            compile: None,
            checks: None,
            staff_checks: None,
            message: Some(message.into()),
            image: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ALL` names every verdict once: as many as `as_str` has arms (its match is exhaustive,
    /// so a new verdict gets an arm there and must join `ALL` too).
    #[test]
    fn all_holds_every_verdict_once() {
        let arms = include_str!("verdict.rs")
            .lines()
            .filter(|l| l.trim_start().starts_with("VerdictKind::") && l.contains(" => \""))
            .count();
        let names: std::collections::BTreeSet<_> =
            VerdictKind::ALL.iter().map(|v| v.as_str()).collect();
        assert_eq!((names.len(), VerdictKind::ALL.len()), (arms, arms));
    }

    #[test]
    fn only_numbers_a_store_and_a_gradebook_can_hold_are_usable() {
        let with = |score: f64, max_score: f64| Verdict {
            score,
            max_score,
            ..Verdict::internal("x")
        };
        // Extra credit and penalties are a grader's to give (a remote worker's too).
        for (s, m) in [(1.0, 2.0), (3.0, 2.0), (-1.0, 2.0), (0.0, 0.0)] {
            assert_eq!(with(s, m).unusable(), None, "{s} of {m}");
        }
        for (s, m) in [
            (f64::NAN, 2.0),
            (f64::INFINITY, 2.0),
            (1.0, f64::NEG_INFINITY),
            (1.0, -2.0),
        ] {
            assert!(with(s, m).unusable().is_some(), "{s} of {m}");
        }
    }
}
