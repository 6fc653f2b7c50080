//! A claimed job the host could not prepare — a temporary folder, copying its files in, reading
//! the store — is not the job's fault: it goes back to the queue instead of ending `failed` (on a
//! full disk every queued job failed, one a millisecond). Only a job given back
//! [`MAX_HOST_RELEASES`] times fails, naming the last error, so one that can never be prepared
//! here does not circle for ever. What is the job's own (its spec unreadable, its files gone)
//! still fails it at once.

use crate::state::SharedState;
use corral_judge::Verdict;

/// Why a claimed job could not be prepared.
#[derive(Debug)]
pub enum Unprepared {
    /// The job's own: it fails.
    Job(String),
    /// The host's (I/O, the store): the job goes back to the queue.
    Host(String),
}

impl Unprepared {
    /// The host's error `e` while doing `what`.
    pub fn host(what: &str, e: impl std::fmt::Display) -> Self {
        Unprepared::Host(format!("{what}: {e}"))
    }

    /// The store's error `e` while copying `what` (a job's or its suite's files) in: the job's
    /// own when a file is lost from the store (no host will ever find it), else the host's.
    pub fn copying(what: &str, e: corral_store::StoreError) -> Self {
        match e {
            corral_store::StoreError::BlobMissing(m) => {
                Unprepared::Job(format!("{what} cannot be judged: {m}"))
            }
            e => Unprepared::host(&format!("copying {what}"), e),
        }
    }
}

/// The `released` event's detail for a job given back because of the host.
const HOST_RELEASE: &str = "the host could not prepare it: ";

/// Host errors after which a job fails.
pub const MAX_HOST_RELEASES: usize = 5;

/// What became of a job the host could not prepare.
#[derive(Debug, PartialEq, Eq)]
pub enum GaveBack {
    /// Queued again, its attempt not counted.
    Queued,
    /// Failed: the host could not prepare it [`MAX_HOST_RELEASES`] times.
    Failed,
    /// Neither could be recorded (the store is unreachable): the lease expires.
    Left,
}

/// Gives back a job the host could not prepare (see the module's comment).
pub async fn give_back(st: &SharedState, id: &str, lease: &str, why: &str) -> GaveBack {
    let before = match st.store.job_events(id).await {
        Ok(events) => events
            .iter()
            .filter(|e| {
                e.kind == "released"
                    && e.detail
                        .as_deref()
                        .is_some_and(|d| d.starts_with(HOST_RELEASE))
            })
            .count(),
        Err(e) => {
            tracing::warn!(submission = %id, error = %e, "reading a job's events failed");
            0
        }
    };
    if before + 1 >= MAX_HOST_RELEASES {
        let message =
            format!("the host could not prepare the job {MAX_HOST_RELEASES} times; last: {why}");
        super::verdicts::record(st, id, lease, &Verdict::internal(message)).await;
        return GaveBack::Failed;
    }
    match st
        .store
        .release_job(id, lease, &format!("{HOST_RELEASE}{why}"))
        .await
    {
        Ok(_) => {
            tracing::warn!(submission = %id, error = %why, "the host could not prepare a job; queued again");
            st.queue.work.notify_one();
            GaveBack::Queued
        }
        Err(e) => {
            tracing::warn!(submission = %id, error = %e, "giving a job back failed; its lease will expire");
            GaveBack::Left
        }
    }
}
