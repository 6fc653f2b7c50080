//! The submission queue over HTTP: `POST /submissions` (202, judged later by a worker),
//! `GET /submissions/{id}` (with `?wait=true`), `POST /submissions/batch`; the in-process workers
//! of `corral serve` and the housekeeping that puts expired leases back.
//!
//! - [`api`]: the handlers and their bodies.
//! - [`worker`]: in-process workers and the lease reaper.

pub mod api;
pub mod callbacks;
pub mod judge0;
pub mod remote;
pub mod worker;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use corral_sandbox::Millis;
use serde::Deserialize;

pub use corral_judge::{JobSpec, Verdict, VerdictKind};

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
    /// The key callbacks are signed with (every API node needs the same one). Default: a random
    /// key kept in `DATA/callback-secret` (created at the first start).
    pub callback_secret: Option<String>,
    /// Address ranges callbacks may reach although they are not public (`127.0.0.1/32`,
    /// `10.0.0.0/8`, `::1`); by default loopback, private, link-local, multicast and other
    /// non-public addresses are refused.
    pub callback_allow: Vec<String>,
    /// One callback request's time limit.
    pub callback_timeout: Millis,
    /// Tries before a callback is given up.
    pub callback_max_attempts: u32,
    /// The wait before the second try; doubled for each further one (capped at 1 h).
    pub callback_backoff: Millis,
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
            callback_secret: None,
            callback_allow: Vec::new(),
            callback_timeout: Millis::ms(10_000),
            callback_max_attempts: 8,
            callback_backoff: Millis::ms(2_000),
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
    /// The key callbacks are signed with.
    pub callback_secret: Vec<u8>,
    pub metrics: QueueMetrics,
}

/// The queue's Prometheus metrics (`corral_submissions{state}`, …), registered at start.
#[derive(Clone)]
pub struct QueueMetrics {
    /// Submissions by state, in the whole store (refreshed by the reaper).
    pub submissions: prometheus::IntGaugeVec,
    /// Verdicts recorded by this node (in-process and remote workers), by verdict.
    pub judged: prometheus::IntCounterVec,
    /// Leases this node found expired: `requeued` or `failed`.
    pub expired: prometheus::IntCounterVec,
    /// Callback tries this node made, by outcome (`delivered`, `retry`, `gave_up`).
    pub callbacks: prometheus::IntCounterVec,
}

impl Default for QueueMetrics {
    fn default() -> Self {
        use prometheus::{IntCounterVec, IntGaugeVec, Opts};
        QueueMetrics {
            submissions: IntGaugeVec::new(
                Opts::new("submissions", "Submissions in the store by state"),
                &["state"],
            )
            .expect("valid metric"),
            judged: IntCounterVec::new(
                Opts::new("submissions_judged_total", "Verdicts recorded by this node"),
                &["verdict"],
            )
            .expect("valid metric"),
            expired: IntCounterVec::new(
                Opts::new(
                    "submission_leases_expired_total",
                    "Expired leases found by this node",
                ),
                &["outcome"],
            )
            .expect("valid metric"),
            callbacks: IntCounterVec::new(
                Opts::new("callbacks_total", "Callback tries made by this node"),
                &["outcome"],
            )
            .expect("valid metric"),
        }
    }
}

impl QueueMetrics {
    pub fn register(&self, m: &crate::metrics::Metrics) {
        m.register(Box::new(self.submissions.clone()));
        m.register(Box::new(self.judged.clone()));
        m.register(Box::new(self.expired.clone()));
        m.register(Box::new(self.callbacks.clone()));
    }
}

impl QueueHandle {
    /// The queue's state for a server with this configuration: the callback key is the
    /// configured one, or the one kept in the data folder (made now when missing).
    pub fn new(config: &crate::Config) -> Result<Self, crate::ServerError> {
        let callback_secret = match &config.submissions.callback_secret {
            Some(s) if s.len() >= 16 => s.clone().into_bytes(),
            Some(_) => {
                return Err(crate::ServerError::Config(
                    "submissions.callback_secret must be at least 16 characters".into(),
                ))
            }
            None => secret_file(&config.data_dir.join("callback-secret"))?,
        };
        Ok(QueueHandle {
            node: format!(
                "{}-{}",
                hostname().unwrap_or_else(|| "corral".into()),
                &corral_store::random_hex(3)
            ),
            callback_secret,
            ..Default::default()
        })
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }
}

/// Reads a key file, or creates it (32 random bytes as hex, mode 0600) when it does not exist.
fn secret_file(path: &std::path::Path) -> Result<Vec<u8>, crate::ServerError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let io = |e: std::io::Error| crate::ServerError::Io {
        what: format!("the callback key {}", path.display()),
        source: e,
    };
    match std::fs::read_to_string(path) {
        Ok(s) if s.trim().len() >= 16 => return Ok(s.trim().as_bytes().to_vec()),
        Ok(_) => {
            return Err(crate::ServerError::Config(format!(
                "{} is too short for a key (delete it to make a new one)",
                path.display()
            )))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(e)),
    }
    let key = corral_store::random_hex(32);
    let mut f = match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(f) => f,
        // Another process made it first: use theirs.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            std::thread::sleep(std::time::Duration::from_millis(100));
            return secret_file(path);
        }
        Err(e) => return Err(io(e)),
    };
    f.write_all(key.as_bytes()).map_err(io)?;
    f.sync_all().map_err(io)?;
    Ok(key.into_bytes())
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

/// The queue's routes (behind authentication): submissions, and the remote workers' endpoints.
pub fn routes() -> axum::Router<crate::SharedState> {
    use axum::routing::{get, post};
    axum::Router::new()
        .route("/submissions", post(api::submit))
        .route("/submissions/batch", post(api::submit_batch))
        .route("/submissions/{id}", get(api::get_submission))
        .route("/worker/claim", post(remote::claim))
        .route("/worker/jobs/{id}/heartbeat", post(remote::heartbeat))
        .route(
            "/worker/jobs/{id}/result",
            // A verdict carries the run's output (up to the output cap, three times over).
            post(remote::result).layer(axum::extract::DefaultBodyLimit::max(64 << 20)),
        )
        .merge(judge0::routes())
}

/// The queue's part of the OpenAPI document (merged into the server's).
#[derive(utoipa::OpenApi)]
#[openapi(
    paths(api::submit, api::submit_batch, api::get_submission, remote::claim, remote::heartbeat, remote::result),
    components(schemas(
        api::SubmissionRequest, api::SubmissionFile, api::SubmissionCreated, api::BatchRequest,
        api::BatchResponse, api::BatchItem, api::SubmissionView, api::CallbackInfo, VerdictKind,
        Verdict, corral_judge::ClaimRequest, corral_judge::ClaimedJob, corral_judge::JobFile, corral_judge::LeaseRequest,
        corral_judge::ResultRequest, corral_judge::ResultResponse,
    )),
    tags(
        (name = "submissions", description = "The submission queue: submit, then get the verdict or a callback"),
        (name = "workers", description = "Remote workers (worker tokens): claim, heartbeat, result"),
    ),
)]
pub struct ApiDoc;
