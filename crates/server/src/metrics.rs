//! Prometheus metrics, served as text at `/metrics`.

use std::time::Duration;

use corral_sandbox::{Outcome, Status};

/// The status of a run whose kept sandbox was deleted while it ran (an answer's, and a
/// `runs_total` label). Here, not with the runs: this module is the state's, which the runs use.
pub const CANCELLED: &str = "cancelled";
use prometheus::{
    Encoder, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, Opts, Registry,
    TextEncoder,
};

pub struct Metrics {
    registry: Registry,
    pub runs: IntCounterVec,
    pub run_seconds: Histogram,
    pub checks: IntCounterVec,
    pub check_seconds: Histogram,
    pub queued: IntGauge,
    pub in_flight: IntGauge,
    pub oom: IntCounter,
    pub timeouts: IntCounter,
    pub held_sandboxes: IntGauge,
    pub pool_idle: IntGauge,
    pub pool_active: IntGauge,
    pub rejected: IntCounterVec,
    pub uploads: IntCounter,
    pub http_connections: IntGauge,
}

impl Metrics {
    pub fn new() -> Self {
        let registry = Registry::new_custom(Some("corral".into()), None).expect("valid prefix");
        let runs = IntCounterVec::new(
            Opts::new(
                "runs_total",
                "Finished /run and WebSocket runs by status (cancelled: its sandbox was deleted while it ran)",
            ),
            &["status"],
        )
        .expect("valid metric");
        let run_seconds = Histogram::with_opts(
            HistogramOpts::new(
                "run_duration_seconds",
                "Wall time of /run and WebSocket runs, start to result",
            )
            .buckets(vec![
                0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
            ]),
        )
        .expect("valid metric");
        let checks = IntCounterVec::new(
            Opts::new(
                "checks_total",
                "Finished /check gradings by result (passed: every check passed; error: a check could not be judged; cancelled: its client went away, the checks not started were not run)",
            ),
            &["result"],
        )
        .expect("valid metric");
        let check_seconds = Histogram::with_opts(
            HistogramOpts::new(
                "check_duration_seconds",
                "Wall time of /check gradings, start to report",
            )
            .buckets(vec![
                0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
            ]),
        )
        .expect("valid metric");
        let g = |n: &str, h: &str| IntGauge::new(n, h).expect("valid metric");
        let c = |n: &str, h: &str| IntCounter::new(n, h).expect("valid metric");
        let m = Metrics {
            runs,
            run_seconds,
            checks,
            check_seconds,
            queued: g(
                "runs_queued",
                "Runs and /check gradings waiting for a free slot (queued submissions: corral_submissions)",
            ),
            in_flight: g(
                "runs_in_flight",
                "Runs and /check gradings executing now (submissions being judged: corral_submissions)",
            ),
            oom: c(
                "oom_total",
                "Runs ended by the memory limit, and submissions judged memory_limit (a suite's checks are not counted)",
            ),
            timeouts: c(
                "timeouts_total",
                "Runs ended by the CPU or wall time limit, and submissions judged time_limit (a suite's checks are not counted)",
            ),
            held_sandboxes: g(
                "held_sandboxes",
                "Sandboxes kept for follow-up runs (busy or idle)",
            ),
            pool_idle: g("pool_idle_sandboxes", "Warm sandboxes in the pool"),
            pool_active: g("pool_active_sandboxes", "Sandboxes leased from the pool"),
            rejected: IntCounterVec::new(
                Opts::new(
                    "rejected_total",
                    "Requests refused by overload or rate limits",
                ),
                &["reason"],
            )
            .expect("valid metric"),
            uploads: c("uploads_total", "Uploads stored"),
            http_connections: g(
                "http_connections",
                "HTTP connections open, WebSockets included (at most http.max_connections)",
            ),
            registry,
        };
        for x in [
            Box::new(m.runs.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(m.run_seconds.clone()),
            Box::new(m.checks.clone()),
            Box::new(m.check_seconds.clone()),
            Box::new(m.queued.clone()),
            Box::new(m.in_flight.clone()),
            Box::new(m.oom.clone()),
            Box::new(m.timeouts.clone()),
            Box::new(m.held_sandboxes.clone()),
            Box::new(m.pool_idle.clone()),
            Box::new(m.pool_active.clone()),
            Box::new(m.rejected.clone()),
            Box::new(m.uploads.clone()),
            Box::new(m.http_connections.clone()),
        ] {
            m.registry.register(x).expect("metric registered once");
        }
        // Each labelled series from the start, at 0: an alert on a rate (`runs_total`
        // {status="sandbox_error"}) sees 0, not "no data", until the first one.
        for s in Status::ALL {
            m.runs.with_label_values(&[s.as_str()]);
        }
        m.runs.with_label_values(&[CANCELLED]);
        for r in ["passed", "failed", "error", "cancelled"] {
            m.checks.with_label_values(&[r]);
        }
        for r in ["overloaded", "rate_limited"] {
            m.rejected.with_label_values(&[r]);
        }
        m
    }

    /// A finished run; `cancelled`: its kept sandbox was deleted while it ran (the answer's
    /// status is `cancelled`, not the kill's `signaled`).
    pub fn observe(&self, o: &Outcome, cancelled: bool, elapsed: Duration) {
        let status = if cancelled {
            CANCELLED
        } else {
            o.status.as_str()
        };
        self.runs.with_label_values(&[status]).inc();
        self.run_seconds.observe(elapsed.as_secs_f64());
        match o.status {
            Status::MemoryLimit => self.oom.inc(),
            Status::TimeLimit | Status::WallTimeLimit => self.timeouts.inc(),
            _ => {}
        }
    }

    /// A finished `/check` grading: `passed` (every check), `failed`, or `error` (a check could
    /// not be judged, or the grading itself failed).
    pub fn checked(&self, result: &str, elapsed: Duration) {
        self.checks.with_label_values(&[result]).inc();
        // A cancelled grading's time says how long its client waited, not how long a grading
        // takes.
        if result != "cancelled" {
            self.check_seconds.observe(elapsed.as_secs_f64());
        }
    }

    /// A submission's verdict recorded by this node (an in-process or a remote worker's): the
    /// limit counters cover the queue too (`runs_total` and the duration stay `/run`'s and the
    /// WebSocket's; `submissions_judged_total` counts verdicts).
    pub fn judged(&self, kind: corral_judge::VerdictKind) {
        match kind {
            corral_judge::VerdictKind::MemoryLimit => self.oom.inc(),
            corral_judge::VerdictKind::TimeLimit => self.timeouts.inc(),
            _ => {}
        }
    }

    /// Adds a collector of another part of the server (the submission queue's) to `/metrics`.
    pub fn register(&self, c: Box<dyn prometheus::core::Collector>) {
        if let Err(e) = self.registry.register(c) {
            tracing::warn!(error = %e, "a metric could not be registered");
        }
    }

    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut buf);
        String::from_utf8(buf).unwrap_or_default()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}
