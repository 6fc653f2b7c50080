//! What a submission looks like to its owner (and in its callback): status, verdict, timings,
//! callback delivery; and waiting (bounded) for it to finish.

use std::time::Duration;

use corral_judge::{JobSpec, Verdict, VerdictKind};
use corral_store::{Job, JobState};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::error::ApiError;
use crate::service::caller::Caller;
use crate::state::SharedState;

/// Callback delivery of a submission.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CallbackInfo {
    pub url: String,
    /// `waiting` (not finished), `pending`, `delivering`, `delivered`, `failed`.
    pub state: String,
    pub attempts: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A submission and, once judged, its verdict.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SubmissionView {
    pub id: String,
    /// `queued`, `running`, `done` or `failed` (could not be judged: `internal_error`).
    pub status: String,
    /// accepted, wrong_answer, compile_error, runtime_error, time_limit, memory_limit,
    /// output_limit, not_gradable (a grader refused it: `message` says why), internal_error;
    /// null until finished.
    pub verdict: Option<VerdictKind>,
    pub score: Option<f64>,
    pub max_score: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The run's result (the object of `corral run --json`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub run: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub compile: Option<Value>,
    /// The check report, for suites.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub checks: Option<Value>,
    /// Claims so far (more than 1: a worker stopped answering and another took over).
    pub attempts: u32,
    /// The worker holding (or that held) the last claim.
    pub worker: Option<String>,
    /// Unix milliseconds.
    pub created_at: i64,
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
    /// From submission to the first claim.
    pub queue_wait_ms: Option<i64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub limits_clamped: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub callback: Option<CallbackInfo>,
    /// The container image it was judged in (`{"name", "digest"}`, as the store recorded it);
    /// absent on the host root and until judged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<corral_judge::ImageDoc>,
    /// A regrade (staff's): the original submission it judges again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub regrade_of: Option<String>,
    /// A regrade: when the original was submitted (Unix ms; `created_at` is the regrade's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub submitted_at: Option<i64>,
}

impl SubmissionView {
    /// The submission as its owner sees it (and its callback says it).
    pub fn of(job: &Job) -> SubmissionView {
        Self::read_by(job, false)
    }

    /// The submission as its reader sees it: `staff` get a student's checks as staff see them
    /// (hidden checks' details), everyone else the submitter's view.
    pub fn read_by(job: &Job, staff: bool) -> SubmissionView {
        let spec: Option<JobSpec> = serde_json::from_str(&job.spec).ok();
        let verdict: Option<Verdict> = match (&job.result, job.state) {
            (Some(r), _) => Some(serde_json::from_str(r).unwrap_or_else(|e| {
                Verdict::internal(format!("the stored result is unreadable: {e}"))
            })),
            (None, JobState::Failed) => Some(Verdict::internal(
                job.error.clone().unwrap_or_else(|| "failed".into()),
            )),
            _ => None,
        };
        let (v, score, max, message, run, compile, checks) = match verdict {
            Some(v) => (
                Some(v.verdict),
                Some(v.score),
                Some(v.max_score),
                v.message,
                v.run,
                v.compile,
                match v.staff_checks {
                    Some(all) if staff => Some(all),
                    _ => v.checks,
                },
            ),
            None => (None, None, None, None, None, None, None),
        };
        SubmissionView {
            id: job.id.clone(),
            status: job.state.as_str().into(),
            verdict: v,
            score,
            max_score: max,
            message,
            run,
            compile,
            checks,
            attempts: job.attempts,
            worker: job.worker.clone(),
            created_at: job.created_ms,
            started_at: job.started_ms,
            finished_at: job.finished_ms,
            queue_wait_ms: job.started_ms.map(|s| s - job.created_ms),
            limits_clamped: spec.map(|s| s.limits_clamped).unwrap_or_default(),
            callback: job.callback_url.as_ref().map(|u| CallbackInfo {
                url: u.clone(),
                state: job.callback_state.clone(),
                attempts: job.callback_attempts,
                error: job.callback_error.clone(),
            }),
            image: match (&job.image_name, &job.image_digest) {
                (Some(name), Some(digest)) => Some(corral_judge::ImageDoc {
                    name: name.clone(),
                    digest: digest.clone(),
                }),
                _ => None,
            },
            regrade_of: job.regrade_of.clone(),
            submitted_at: job.submitted_ms,
        }
    }
}

/// The longest a waiting request goes without reading its job: every finish is told (here, or
/// by the store for other nodes, with a notice when some went unheard), so this only bounds what
/// a lost notice could cost. As long as the default `wait_max`: a test that waits less than it
/// sees only what it was told.
const LOOK_AGAIN: Duration = Duration::from_secs(30);

/// The caller's job, waiting up to `wait` for it to finish (401 as soon as the caller's token is
/// revoked).
pub async fn wait_for(
    st: &SharedState,
    caller: &Caller,
    id: &str,
    wait: Duration,
) -> Result<Job, ApiError> {
    caller
        .while_live(st, wait_unrevoked(st, caller, id, wait))
        .await
}

async fn wait_unrevoked(
    st: &SharedState,
    caller: &Caller,
    id: &str,
    wait: Duration,
) -> Result<Job, ApiError> {
    let deadline = tokio::time::Instant::now() + wait;
    let watch = st.queue.finished.watch(id);
    loop {
        // Register interest before looking, so a finish in between is not missed.
        let finished = watch.notified();
        let job = st
            .store
            .get_job(id)
            .await?
            // Staff read any submission (a student's, in the queue or a gradebook).
            .filter(|j| j.owner == caller.id || caller.role.is_staff())
            .ok_or_else(|| ApiError::not_found(format!("no submission {id:?}")))?;
        let now = tokio::time::Instant::now();
        if job.state.is_finished() || now >= deadline {
            return Ok(job);
        }
        let nap = (deadline - now).min(LOOK_AGAIN);
        tokio::select! {
            _ = finished => {}
            _ = tokio::time::sleep(nap) => {}
        }
    }
}
