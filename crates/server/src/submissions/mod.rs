//! The submission queue over HTTP: `POST /submissions` (202, judged later by a worker),
//! `GET /submissions/{id}` (with `?wait=true`), `POST /submissions/batch`; the in-process workers
//! of `corral serve` and the housekeeping that puts expired leases back.
//!
//! - [`exec`]: judging one job (shared with `corral worker`).
//! - [`api`]: the handlers and their bodies.
//! - [`worker`]: in-process workers and the lease reaper.

pub mod api;
pub mod exec;
pub mod worker;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use corral_sandbox::Millis;
use serde::Deserialize;

pub use exec::{JobSpec, Verdict, VerdictKind};

/// `[submissions]` in the configuration file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QueueConfig {
    /// In-process workers judging submissions (default: `parallelism`; 0: only remote workers).
    pub workers: Option<usize>,
    /// How long a claim lasts without a heartbeat (workers renew it every third of it).
    pub lease: Millis,
    /// Claims of one job whose worker stopped answering before the job is marked failed.
    pub max_attempts: u32,
    /// The longest `?wait=true` waits for a result.
    pub wait_max: Millis,
    /// Submissions in one `POST /submissions/batch`.
    pub batch_max: usize,
    /// Submissions waiting (queued or running) per token; more are refused with 429.
    pub max_pending_per_owner: u64,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            workers: None,
            lease: Millis::ms(30_000),
            max_attempts: 3,
            wait_max: Millis::ms(30_000),
            batch_max: 100,
            max_pending_per_owner: 10_000,
        }
    }
}

impl QueueConfig {
    pub fn lease(&self) -> Duration {
        self.lease.duration().max(Duration::from_millis(100))
    }
    pub fn heartbeat_every(&self) -> Duration {
        self.lease() / 3
    }
}

/// The queue's in-process signals, part of the server's state.
#[derive(Default)]
pub struct QueueHandle {
    /// New work was enqueued here (local workers wake at once; other nodes poll or LISTEN).
    pub work: tokio::sync::Notify,
    /// A job finished here (local `?wait=true` requests look again at once).
    pub finished: tokio::sync::Notify,
    /// Jobs being judged by this process's workers right now.
    pub in_flight: AtomicUsize,
    /// A name for this process in leases and events.
    pub node: String,
}

impl QueueHandle {
    pub fn new() -> Self {
        QueueHandle {
            node: format!(
                "{}-{}",
                hostname().unwrap_or_else(|| "corral".into()),
                &corral_store::random_hex(3)
            ),
            ..Default::default()
        }
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }
}

fn hostname() -> Option<String> {
    let h = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    let h = h.trim();
    (!h.is_empty()).then(|| {
        h.chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect()
    })
}

/// Waits until this process's workers finished their jobs, or `grace` passes.
pub async fn drain(st: &crate::SharedState, grace: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + grace;
    while st.queue.in_flight() > 0 {
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    true
}

/// The queue's part of the OpenAPI document (merged into the server's).
#[derive(utoipa::OpenApi)]
#[openapi(
    paths(api::submit, api::submit_batch, api::get_submission),
    components(schemas(
        api::SubmissionRequest, api::SubmissionFile, api::SubmissionCreated, api::BatchRequest,
        api::BatchResponse, api::BatchItem, api::SubmissionView, api::CallbackInfo, VerdictKind,
        Verdict,
    )),
    tags((name = "submissions", description = "The submission queue: submit, then get the verdict or a callback")),
)]
pub struct ApiDoc;
