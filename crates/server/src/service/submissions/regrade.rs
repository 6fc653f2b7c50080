//! Judging finished submissions again (`POST /submissions/{id}/regrade`, `POST
//! /suites/{id}/regrade`): after staff fixed a suite, each student's files are graded by the
//! suite as it is now. A regrade is a new submission of the same owner, files and request, with
//! the suite (and the images it names) pinned anew; the old one and its verdict stay. The new one
//! names the original (`regrade_of`, with its submission time) and stands where the original
//! stands in its owner's order: a gradebook takes a student's latest submission, and regrading an
//! older one must not replace a newer one's grade. A language or command submission runs again
//! as it was asked, in the images it was pinned to. Regrades are staff's: a student's cap on
//! waiting submissions does not count them.

use corral_judge::JobSpec;
use corral_store::{JobFilter, NewJob};
use serde::Serialize;
use utoipa::ToSchema;

use super::accept::enqueue;
use crate::error::{ApiError, ErrorKind};
use crate::service::caller::Caller;
use crate::service::{folder_suites, images, suites};
use crate::state::SharedState;

/// A regrade queued, or why a submission could not be regraded.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Regraded {
    /// The new submission (absent when refused).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The submission regraded.
    pub regrade_of: String,
    /// Why it was not regraded (absent when it was).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Queues a regrade of submission `id` (staff only): 404 unknown, 409 still being judged or its
/// suite no longer on this server, 410 its files were deleted by retention, 422 its suite does
/// not load (nothing is queued then: a broken edit is said to staff, not graded as a failure).
/// While a regrade of the same original waits or is being judged, that one is the answer: a
/// double click queues one.
pub async fn regrade(st: &SharedState, caller: &Caller, id: &str) -> Result<String, ApiError> {
    caller.require_staff()?;
    let (job, original) = prepare(st, id).await?;
    let _one_at_a_time = st.regrading.lock().await;
    if let Some(pending) = pending_regrade(st, &original).await? {
        tracing::info!(caller = %caller.id, submission = %pending, regrade_of = %id, "regrade already pending");
        return Ok(pending);
    }
    let new = enqueue(st, vec![job]).await?.remove(0);
    tracing::info!(caller = %caller.id, submission = %new, regrade_of = %id, "regrade queued");
    Ok(new)
}

/// A regrade of `original` that waits or is being judged, if there is one.
async fn pending_regrade(st: &SharedState, original: &str) -> Result<Option<String>, ApiError> {
    let regrades = st
        .store
        .list_jobs(&JobFilter {
            regrade_of: Some(original.to_string()),
            limit: 100,
            ..JobFilter::default()
        })
        .await?;
    Ok(regrades
        .into_iter()
        .find(|l| !l.job.state.is_finished())
        .map(|l| l.job.id))
}

/// Regrades each student's latest finished submission of suite `suite` (its gradebook's
/// rows), each on its own: one whose files are gone is reported, the others are queued.
pub async fn regrade_suite(
    st: &SharedState,
    caller: &Caller,
    suite: &str,
) -> Result<Vec<Regraded>, ApiError> {
    caller.require_staff()?;
    // The suite must load now: a broken edit is said once, not as every student's failure.
    let now = folder_suites::pin(st, suites::resolve(st, suite).await?).await?;
    suites::loaded(st, &now, None).await??;
    let rows = st.store.gradebook(suite).await?;
    let mut out = Vec::with_capacity(rows.len());
    let mut jobs = Vec::new();
    let mut of = Vec::new();
    let _one_at_a_time = st.regrading.lock().await;
    for row in &rows {
        match prepare(st, &row.job.id).await {
            // A row whose regrade waits or is being judged (a second click) keeps that one.
            Ok((_, original)) if let Some(pending) = pending_regrade(st, &original).await? => out
                .push(Regraded {
                    id: Some(pending),
                    regrade_of: row.job.id.clone(),
                    error: None,
                    message: None,
                }),
            Ok((job, _)) => {
                jobs.push(job);
                of.push(row.job.id.clone());
            }
            Err(e) => out.push(Regraded {
                id: None,
                regrade_of: row.job.id.clone(),
                error: Some(e.code.to_string()),
                message: Some(e.message.clone()),
            }),
        }
    }
    if !jobs.is_empty() {
        let ids = enqueue(st, jobs).await?;
        tracing::info!(caller = %caller.id, suite, count = ids.len(), "suite regrade queued");
        out.extend(of.into_iter().zip(ids).map(|(old, new)| Regraded {
            id: Some(new),
            regrade_of: old,
            error: None,
            message: None,
        }));
    }
    Ok(out)
}

/// The new job for a regrade of `id`, and the original it stands for (a regrade of a regrade
/// stands for the first original, as the store records it).
async fn prepare(st: &SharedState, id: &str) -> Result<(NewJob, String), ApiError> {
    let job = st
        .store
        .get_job(id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no submission {id:?}")))?;
    if !job.state.is_finished() {
        return Err(ApiError::conflict(format!(
            "submission {id} is still {}: regrade it once it is judged",
            job.state.as_str()
        )));
    }
    if let Some(upload) = &job.upload_id {
        if st.store.get_upload(upload).await?.is_none() {
            return Err(ApiError::gone(format!(
                "submission {id}'s files are no longer kept (retention deleted them)"
            )));
        }
    }
    let mut spec: JobSpec = serde_json::from_str(&job.spec)
        .map_err(|e| ApiError::internal(format!("submission {id}: its stored request: {e}")))?;
    if let Some(old) = spec.suite.take() {
        let found = suites::resolve(st, &old.id).await.map_err(|e| {
            if e.kind == ErrorKind::NotFound {
                ApiError::conflict(format!(
                    "submission {id} was graded by suite {:?}, which is no longer on this server",
                    old.id
                ))
            } else {
                e
            }
        })?;
        let now = folder_suites::pin(st, found).await?;
        let loaded = suites::loaded(st, &now, spec.image.as_deref()).await??;
        // The images the suite names now, pinned to the digests this server has now.
        let needed = corral_judge::suite_images(&loaded, &st.languages);
        spec.image_digests = if needed.is_empty() {
            Default::default()
        } else {
            images::pin(st, needed).await?
        };
        spec.suite = Some(now);
    }
    // Graded as the original was submitted (a job from before specs kept it: its own times).
    spec.submitted_ms
        .get_or_insert(job.submitted_ms.unwrap_or(job.created_ms));
    let original = job.regrade_of.clone().unwrap_or_else(|| id.to_string());
    let new = NewJob {
        owner: job.owner,
        upload_id: job.upload_id,
        suite_upload_id: spec.suite.as_ref().and_then(|s| s.upload.clone()),
        suite: spec.suite.as_ref().map(|s| s.id.clone()),
        spec: serde_json::to_string(&spec).expect("a job spec serialises"),
        regrade_of: Some(id.to_string()),
        // The owner's callback would announce a submission it never made.
        callback_url: None,
        max_attempts: st.config.submissions.max_attempts,
        idempotency: None,
    };
    Ok((new, original))
}
