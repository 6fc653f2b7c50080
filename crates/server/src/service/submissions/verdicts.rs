//! Recording a verdict for a lease: the in-process workers', a remote claim that failed for the
//! job's own reason, and a job given back too often (`give_back.rs`) all end this way.

use std::time::Duration;

use corral_judge::{Verdict, VerdictKind};
use corral_store::{Completion, JobState};

use crate::state::SharedState;

/// The store's record of the image a verdict was reached in.
pub fn job_image(i: &corral_judge::ImageDoc) -> corral_store::JobImage {
    corral_store::JobImage {
        name: i.name.clone(),
        digest: i.digest.clone(),
    }
}

/// Records a verdict for a lease, retrying while the store is unreachable (at most one lease).
pub async fn record(st: &SharedState, id: &str, lease: &str, verdict: &Verdict) {
    let state = if verdict.verdict == VerdictKind::InternalError {
        JobState::Failed
    } else {
        JobState::Done
    };
    let body = serde_json::to_string(verdict).expect("a verdict serialises");
    let image = verdict.image.as_ref().map(job_image);
    let deadline = tokio::time::Instant::now() + st.config.submissions.lease();
    let mut wait = Duration::from_millis(100);
    loop {
        match st
            .store
            .complete_job(id, lease, state, &body, image.as_ref())
            .await
        {
            Ok(Completion::Recorded) => {
                st.queue
                    .metrics
                    .judged
                    .with_label_values(&[verdict.verdict.as_str()])
                    .inc();
                st.metrics.judged(verdict.verdict);
                tracing::info!(submission = %id, verdict = verdict.verdict.as_str(), "judged");
                st.queue.finished.finished(id);
                return;
            }
            Ok(Completion::AlreadyRecorded) => return,
            Ok(Completion::LeaseLost) => {
                tracing::warn!(submission = %id, "result refused: the lease is no longer ours");
                return;
            }
            Err(e) if tokio::time::Instant::now() < deadline => {
                tracing::warn!(submission = %id, error = %e, "recording the result failed; retrying");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(2));
            }
            Err(e) => {
                tracing::error!(submission = %id, error = %e, "recording the result failed; the lease will expire and the job run again");
                return;
            }
        }
    }
}
