//! A suite's gradebook (`GET /suites/{id}/gradebook`): each student token's latest finished
//! submission graded by it (a regrade standing where its original stands; staff's tries left
//! out), as JSON or as the CSV `corral grade` writes for local folders (the same quoting, and
//! the same defusing of cells a spreadsheet would run as formulas). A row is a token: a student
//! whose token was replaced has a row per token.

use corral_checks::batch::{check_cell, csv_field, num};
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
    /// A suite's report rows as staff see them (hidden ones included), in the report's order
    /// (the suite's; a report stored before corral kept it: by id); empty when the grading wrote
    /// no report (a failure, a command submission).
    pub checks: Vec<GradebookCheck>,
}

/// One row of a graded submission's report.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct GradebookCheck {
    /// The report row's id (a check's, or `check/test` for a test of a pytest check).
    pub id: String,
    /// `true` passed, `false` failed, `null` not run (a dependency failed).
    pub result: Option<bool>,
    pub points: f64,
    pub max_points: f64,
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
                checks: report_rows(l.job.result.as_deref()),
            }
        })
        .collect();
    Ok(Gradebook {
        suite: id.to_string(),
        rows,
    })
}

/// The report rows of a stored verdict, the staff view's when it has both (a student's
/// submission keeps the student's view as `checks` and staff's as `staff_checks`).
fn report_rows(result: Option<&str>) -> Vec<GradebookCheck> {
    let Some(v) = result.and_then(|r| serde_json::from_str::<serde_json::Value>(r).ok()) else {
        return Vec::new();
    };
    let report = v.get("staff_checks").unwrap_or(&v["checks"]);
    let Some(rows) = report["results"].as_object() else {
        return Vec::new();
    };
    rows.iter()
        .map(|(id, r)| GradebookCheck {
            id: id.clone(),
            result: r["result"].as_bool(),
            points: r["points"].as_f64().unwrap_or(0.0),
            max_points: r["max_points"].as_f64().unwrap_or(0.0),
        })
        .collect()
}

/// Every report row id of the gradebook, by id (submissions graded before the suite changed
/// may have rows the others lack).
fn columns(book: &Gradebook) -> Vec<(String, f64)> {
    // In the reports' order (the suite's, an autograder's tests by number), each once, with the
    // most points any row is worth there: a cell holds points when the column is worth any, as
    // `corral grade`'s does, whatever this student's row is worth.
    let mut cols: Vec<(String, f64)> = Vec::new();
    for c in book.rows.iter().flat_map(|r| &r.checks) {
        match cols.iter_mut().find(|(id, _)| *id == c.id) {
            Some((_, max)) => *max = max.max(c.max_points),
            None => cols.push((c.id.clone(), c.max_points)),
        }
    }
    cols
}

/// A Unix time in milliseconds as a spreadsheet reads it: RFC 3339 in UTC, to the millisecond.
fn utc(ms: i64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms.max(0) as u64);
    humantime::format_rfc3339_millis(at).to_string()
}

/// The gradebook as CSV, one line per student:
/// `student,owner,submission,score,max_score,percent,verdict,status,submitted_at,finished_at`
/// (times in UTC, RFC 3339; the JSON gradebook keeps Unix milliseconds), then a column per report
/// row, as `corral grade`'s: its points when it is worth points, else `pass` / `fail` / `skip`
/// (empty: that submission's report has no such row).
pub fn csv(book: &Gradebook) -> String {
    let cols = columns(book);
    let mut head: Vec<String> =
        "student,owner,submission,score,max_score,percent,verdict,status,submitted_at,finished_at"
            .split(',')
            .map(str::to_string)
            .collect();
    head.extend(cols.iter().map(|(id, _)| id.clone()));
    let mut out = head
        .iter()
        .map(|h| csv_field(h))
        .collect::<Vec<_>>()
        .join(",");
    out.push('\n');
    for r in &book.rows {
        let percent = match (r.score, r.max_score) {
            (Some(s), Some(m)) if m > 0.0 => format!("{:.1}", 100.0 * s / m),
            _ => String::new(),
        };
        let mut fields = vec![
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
        for (id, max) in &cols {
            fields.push(match r.checks.iter().find(|c| &c.id == id) {
                Some(c) => check_cell(c.result, c.points, *max),
                None => String::new(),
            });
        }
        let line: Vec<String> = fields.iter().map(|f| csv_field(f)).collect();
        out.push_str(&line.join(","));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(student: &str, checks: &[(&str, Option<bool>, f64, f64)]) -> GradebookRow {
        GradebookRow {
            student: student.into(),
            owner: format!("{student}-id"),
            submission: format!("{student}-sub"),
            submitted_at: 0,
            regrade_of: None,
            status: "done".into(),
            verdict: None,
            score: Some(0.0),
            max_score: Some(14.0),
            finished_at: None,
            checks: checks
                .iter()
                .map(|(id, result, points, max_points)| GradebookCheck {
                    id: id.to_string(),
                    result: *result,
                    points: *points,
                    max_points: *max_points,
                })
                .collect(),
        }
    }

    /// Columns in the reports' order (an autograder's `1.2` before `1.10`), and a column worth
    /// points in any row holds points in every row (the autograder's own row is worth the
    /// whole total when its tests never ran, 0 when they did), as `corral grade`'s gradebook.
    #[test]
    fn columns_keep_the_reports_order_and_a_columns_points() {
        let book = Gradebook {
            suite: "calc".into(),
            rows: vec![
                row(
                    "alice",
                    &[
                        ("ag", Some(false), 0.0, 0.0),
                        ("ag/1.2", Some(true), 2.0, 2.0),
                        ("ag/1.10", Some(false), 0.0, 12.0),
                    ],
                ),
                row("bob", &[("ag", Some(false), 0.0, 14.0)]),
            ],
        };
        let csv = csv(&book);
        let lines: Vec<&str> = csv.lines().collect();
        assert!(
            lines[0].ends_with(",finished_at,ag,ag/1.2,ag/1.10"),
            "{csv}"
        );
        assert!(lines[1].ends_with(",0,2,0"), "{csv}");
        assert!(lines[2].ends_with(",0,,"), "{csv}");
    }
}
