//! Submissions by the page (`GET /submissions`): staff see everyone's, filtered by owner, suite
//! and status; a student sees its own. Pages run newest first and end at an opaque cursor (the
//! last one's place in the arrival order), so a page never shifts as new submissions arrive.

use corral_judge::VerdictKind;
use corral_store::{JobFilter, JobState, ListedJob};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::view::SubmissionView;
use crate::error::ApiError;
use crate::service::caller::Caller;
use crate::state::SharedState;

/// Submissions a page holds unless asked for fewer, and the most it holds.
const DEFAULT_LIMIT: u32 = 50;
const MAX_LIMIT: u32 = 500;

#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// Only this token's submissions (its id, as in `owner`). Staff only, unless it is the
    /// caller's own.
    #[param(example = "3f2a9c0d1b4e5f60")]
    pub owner: Option<String>,
    /// Only those graded by this suite.
    #[param(example = "hello")]
    pub suite: Option<String>,
    /// Only those with this status: `queued`, `running`, `done` or `failed`.
    #[param(example = "done")]
    pub status: Option<String>,
    /// Submissions per page (1 to 500, default 50).
    #[param(example = 50, minimum = 1, maximum = 500)]
    pub limit: Option<u32>,
    /// Where the previous page ended (its `next_cursor`).
    #[param(example = "1042")]
    pub cursor: Option<String>,
}

/// A submission in a list: who, what, and how it went (`GET /submissions/{id}` has the rest).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SubmissionSummary {
    pub id: String,
    /// The submitting token's id.
    pub owner: String,
    /// That token's name, when it still exists.
    pub owner_name: Option<String>,
    /// The suite that grades it (suite submissions).
    pub suite: Option<String>,
    /// The language it runs in (language submissions).
    pub language: Option<String>,
    /// `queued`, `running`, `done` or `failed`.
    pub status: String,
    pub verdict: Option<VerdictKind>,
    pub score: Option<f64>,
    pub max_score: Option<f64>,
    /// Unix milliseconds.
    pub created_at: i64,
    pub finished_at: Option<i64>,
    /// A regrade: the original submission it judges again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub regrade_of: Option<String>,
}

impl SubmissionSummary {
    pub fn of(listed: &ListedJob) -> SubmissionSummary {
        let view = SubmissionView::of(&listed.job);
        let spec: Option<corral_judge::JobSpec> = serde_json::from_str(&listed.job.spec).ok();
        SubmissionSummary {
            id: view.id,
            owner: listed.job.owner.clone(),
            owner_name: listed.owner_name.clone(),
            suite: listed.suite.clone(),
            language: spec.and_then(|s| s.language),
            status: view.status,
            verdict: view.verdict,
            score: view.score,
            max_score: view.max_score,
            created_at: view.created_at,
            finished_at: view.finished_at,
            regrade_of: view.regrade_of,
        }
    }
}

/// One page of submissions.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SubmissionPage {
    /// Newest first.
    pub submissions: Vec<SubmissionSummary>,
    /// Give it as `cursor` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// The page `q` asks for, as `caller` may see it.
pub async fn list(
    st: &SharedState,
    caller: &Caller,
    q: ListQuery,
) -> Result<SubmissionPage, ApiError> {
    let owner = match q.owner {
        Some(o) if o != caller.id => {
            caller
                .require_staff()
                .map_err(|_| ApiError::forbidden("only staff list other tokens' submissions"))?;
            Some(o)
        }
        Some(o) => Some(o),
        None if caller.role.is_staff() => None,
        // A student's list is its own.
        None => Some(caller.id.clone()),
    };
    let state = match q.status.as_deref() {
        None => None,
        Some(s) => Some(JobState::parse(s).map_err(|_| {
            ApiError::bad_request(format!(
                "status {s:?}: one of queued, running, done, failed"
            ))
        })?),
    };
    let limit = q.limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ApiError::bad_request(format!(
            "limit {limit}: from 1 to {MAX_LIMIT}"
        )));
    }
    let before = match q.cursor.as_deref() {
        None => None,
        Some(c) => Some(c.parse::<i64>().ok().filter(|n| *n > 0).ok_or_else(|| {
            ApiError::bad_request(format!(
                "cursor {c:?} is not one this server gave (a page's next_cursor)"
            ))
        })?),
    };
    let page = st
        .store
        .list_jobs(&JobFilter {
            owner,
            suite: q.suite,
            state,
            regrade_of: None,
            before,
            limit,
        })
        .await?;
    // A full page may have more after it; an empty next page then says it ended.
    let next_cursor = (page.len() == limit as usize)
        .then(|| page.last().map(|l| l.seq.to_string()))
        .flatten();
    Ok(SubmissionPage {
        submissions: page.iter().map(SubmissionSummary::of).collect(),
        next_cursor,
    })
}
