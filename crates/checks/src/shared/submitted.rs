//! A submission's time and submitter, as far as the grading's caller knows: a Gradescope
//! autograder reads both in its `submission_metadata.json`.

/// When and by whom a submission was made (each `None` when the caller does not know).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Submitted {
    pub at: Option<jiff::Timestamp>,
    /// The submitter's name (a token's, a student folder's).
    pub by: Option<String>,
}

impl Submitted {
    /// Made at `ms` (Unix milliseconds) by `by`.
    pub fn at_ms(ms: Option<i64>, by: Option<String>) -> Submitted {
        Submitted {
            at: ms.and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok()),
            by,
        }
    }
}
