//! A suite's gradebook (`GET /suites/{id}/gradebook`): each student token's latest finished
//! submission graded by it (a regrade standing where its original stands; staff's tries left
//! out), as JSON or as the CSV `corral grade` writes for local folders (the same quoting, and
//! the same defusing of cells a spreadsheet would run as formulas). A row is a token: a student
//! whose token was replaced has a row per token.

use corral_checks::batch::{csv_field, num};
use corral_judge::VerdictKind;
use serde::Serialize;
use utoipa::ToSchema;

use super::listing::SubmissionSummary;
use crate::error::ApiError;
use crate::service::caller::Caller;
use crate::service::suites;
use crate::state::SharedState;

/// One student's line: its latest finished submission of the suite.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct GradebookRow {
    /// The student's token name (its id when the token is gone).
    pub student: String,
    /// The token's id.
    pub owner: String,
    /// The submission the grade comes from (a regrade, or the original).
    pub submission: String,
    /// When that submission was handed in (a regrade's original's time), Unix ms.
    pub submitted_at: i64,
    /// When the grade comes from a regrade: the original it judged again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub regrade_of: Option<String>,
    /// `done`, or `failed` (could not be judged).
    pub status: String,
    pub verdict: Option<VerdictKind>,
    pub score: Option<f64>,
    pub max_score: Option<f64>,
    /// Unix milliseconds.
    pub finished_at: Option<i64>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Gradebook {
    pub suite: String,
    /// By student name.
    pub rows: Vec<GradebookRow>,
}

/// Suite `id`'s gradebook (staff only), by student name. A suite nobody submitted to and that this server does
/// not know is a 404; one it no longer has still lists the submissions it graded.
pub async fn gradebook(st: &SharedState, caller: &Caller, id: &str) -> Result<Gradebook, ApiError> {
    caller.require_staff()?;
    let rows = st.store.gradebook(id).await?;
    if rows.is_empty() {
        suites::resolve(st, id).await?;
    }
    let rows = rows
        .iter()
        .map(|l| {
            let s = SubmissionSummary::of(l);
            GradebookRow {
                student: s
                    .owner_name
                    .filter(|n| !n.is_empty())
                    .unwrap_or(s.owner.clone()),
                owner: s.owner,
                submission: s.id,
                submitted_at: l.job.submitted_ms.unwrap_or(l.job.created_ms),
                regrade_of: s.regrade_of,
                status: s.status,
                verdict: s.verdict,
                score: s.score,
                max_score: s.max_score,
                finished_at: s.finished_at,
            }
        })
        .collect();
    Ok(Gradebook {
        suite: id.to_string(),
        rows,
    })
}

/// A Unix time in milliseconds as a spreadsheet reads it: RFC 3339 in UTC, to the millisecond.
fn utc(ms: i64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms.max(0) as u64);
    humantime::format_rfc3339_millis(at).to_string()
}

/// The gradebook as CSV, one line per student:
/// `student,owner,submission,score,max_score,percent,verdict,status,submitted_at,finished_at`
/// (times in UTC, RFC 3339; the JSON gradebook keeps Unix milliseconds).
pub fn csv(book: &Gradebook) -> String {
    let mut out = String::from(
        "student,owner,submission,score,max_score,percent,verdict,status,submitted_at,finished_at\n",
    );
    for r in &book.rows {
        let percent = match (r.score, r.max_score) {
            (Some(s), Some(m)) if m > 0.0 => format!("{:.1}", 100.0 * s / m),
            _ => String::new(),
        };
        let fields = [
            r.student.clone(),
            r.owner.clone(),
            r.submission.clone(),
            r.score.map(num).unwrap_or_default(),
            r.max_score.map(num).unwrap_or_default(),
            percent,
            r.verdict
                .map(|v| v.as_str().to_string())
                .unwrap_or_default(),
            r.status.clone(),
            utc(r.submitted_at),
            r.finished_at.map(utc).unwrap_or_default(),
        ];
        let line: Vec<String> = fields.iter().map(|f| csv_field(f)).collect();
        out.push_str(&line.join(","));
        out.push('\n');
    }
    out
}
