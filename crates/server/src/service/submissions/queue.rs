//! The submission queue's in-process state: wake-ups for workers and waiting requests, this
//! node's name, the callback key and where callbacks may go, the queue's metrics.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::callback_targets::TargetPolicy;
use super::finished_jobs::FinishedJobs;
use super::workers_seen::WorkersSeen;
use crate::config::Config;
use crate::error::ServerError;
use crate::metrics::Metrics;

/// The queue's in-process signals, part of the server's state.
#[derive(Default)]
pub struct QueueHandle {
    /// New work was enqueued here (local workers wake at once; other nodes poll or LISTEN).
    pub work: tokio::sync::Notify,
    /// The `?wait=true` requests here, woken when their job finishes (here or, told by the
    /// store, on another node).
    pub finished: FinishedJobs,
    /// Jobs being judged by this process's workers right now.
    pub in_flight: AtomicUsize,
    /// Those jobs' ids and leases: what a shutdown gives back to the queue when their runs
    /// outlast the grace period.
    pub in_hand: std::sync::Mutex<std::collections::HashMap<String, String>>,
    /// A name for this process in leases and events: the host's name and the node's id.
    pub node: String,
    /// The remote workers that asked this node for work lately.
    pub workers_seen: WorkersSeen,
    /// The key callbacks are signed with.
    pub callback_secret: Vec<u8>,
    /// Where callbacks may go (`submissions.callback_allow`), checked when a submission is
    /// accepted and when its callback is delivered.
    pub callback_policy: Arc<TargetPolicy>,
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
    /// How long the queued submission that has waited longest has waited (0: none queued); with
    /// `submissions`, refreshed by the reaper. Growing: nothing is claiming work.
    pub oldest_queued_seconds: prometheus::Gauge,
    /// The servers sharing this store that have not stopped and were heard from lately.
    pub nodes_live: prometheus::IntGauge,
    /// This node's in-process workers (`submissions.workers`).
    pub local_workers: prometheus::IntGauge,
    /// The remote workers that asked this node for work within the last minute.
    pub remote_workers: prometheus::IntGauge,
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
            oldest_queued_seconds: prometheus::Gauge::new(
                "submissions_oldest_queued_seconds",
                "How long the longest-waiting queued submission has waited (0: none queued)",
            )
            .expect("valid metric"),
            nodes_live: prometheus::IntGauge::new(
                "nodes_live",
                "Servers sharing this store, not stopped and heard from within 35 s",
            )
            .expect("valid metric"),
            local_workers: prometheus::IntGauge::new(
                "local_workers",
                "This node's in-process submission workers",
            )
            .expect("valid metric"),
            remote_workers: prometheus::IntGauge::new(
                "remote_workers",
                "Remote workers (corral worker) that asked this node for work within the last minute",
            )
            .expect("valid metric"),
        }
    }
}

impl QueueMetrics {
    /// Registers the metrics, each labelled series at 0 from the start (an alert on a rate sees
    /// 0, not "no data", until the first event).
    pub fn register(&self, m: &Metrics) {
        for s in ["queued", "running", "done", "failed"] {
            self.submissions.with_label_values(&[s]);
        }
        for v in corral_judge::VerdictKind::ALL {
            self.judged.with_label_values(&[v.as_str()]);
        }
        for o in ["requeued", "failed"] {
            self.expired.with_label_values(&[o]);
        }
        for o in ["delivered", "retry", "gave_up"] {
            self.callbacks.with_label_values(&[o]);
        }
        m.register(Box::new(self.submissions.clone()));
        m.register(Box::new(self.judged.clone()));
        m.register(Box::new(self.expired.clone()));
        m.register(Box::new(self.callbacks.clone()));
        m.register(Box::new(self.oldest_queued_seconds.clone()));
        m.register(Box::new(self.nodes_live.clone()));
        m.register(Box::new(self.local_workers.clone()));
        m.register(Box::new(self.remote_workers.clone()));
    }
}

impl QueueHandle {
    /// The queue's state for node `node_id` with this configuration: the callback key is the
    /// configured one, or the one kept in the data folder (made now when missing).
    pub fn new(config: &Config, node_id: &str) -> Result<Self, ServerError> {
        let callback_secret = match &config.submissions.callback_secret {
            Some(s) if s.len() >= 16 => s.clone().into_bytes(),
            Some(_) => {
                return Err(ServerError::Config(
                    "submissions.callback_secret must be at least 16 characters".into(),
                ))
            }
            None => secret_file(&config.data_dir.join("callback-secret"))?,
        };
        // Refused at start: read later, a bad range turned every callback off.
        let callback_policy = TargetPolicy::parse(&config.submissions.callback_allow)
            .map_err(|e| ServerError::Config(format!("submissions.callback_allow: {e}")))?;
        Ok(QueueHandle {
            // The node's id, as its log's "this server's node" line says it.
            node: format!(
                "{}-{node_id}",
                hostname().unwrap_or_else(|| "corral".into())
            ),
            callback_secret,
            callback_policy: Arc::new(callback_policy),
            ..Default::default()
        })
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// The jobs this process's workers hold now: (id, lease).
    pub fn in_hand(&self) -> Vec<(String, String)> {
        let held = self.in_hand.lock().unwrap_or_else(|e| e.into_inner());
        held.iter()
            .map(|(id, lease)| (id.clone(), lease.clone()))
            .collect()
    }
}

/// Reads a key file, or creates it (32 random bytes as hex, mode 0600) when it does not exist.
fn secret_file(path: &std::path::Path) -> Result<Vec<u8>, ServerError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let io = |e: std::io::Error| ServerError::Io {
        what: format!("the callback key {}", path.display()),
        source: e,
    };
    match std::fs::read_to_string(path) {
        Ok(s) if s.trim().len() >= 16 => return Ok(s.trim().as_bytes().to_vec()),
        Ok(_) => {
            return Err(ServerError::Config(format!(
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
