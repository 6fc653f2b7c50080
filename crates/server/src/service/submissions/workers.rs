//! In-process workers: each claims a job from the store, judges it on a blocking thread while a
//! heartbeat keeps its lease, and records the verdict. The reaper puts expired leases back in the
//! queue (or fails jobs that used up their attempts) and applies retention to finished jobs.
//! At shutdown, [`drain`] waits for the jobs in hand.

use std::sync::atomic::Ordering;
use std::time::Duration;

use corral_store::{Claim, FinishNotice};

use super::give_back::{give_back, Unprepared};
use super::queue::QueueHandle;
use super::verdicts::record;
use crate::service::nodes;
use crate::service::suites::suites_dir;
use crate::state::SharedState;
use corral_judge::{execute, Heartbeat, JobFiles, JobSpec, Verdict};

/// Starts the configured number of workers and the reaper.
pub fn spawn(st: SharedState) -> Vec<tokio::task::JoinHandle<()>> {
    let n = st
        .config
        .submissions
        .workers
        .unwrap_or(st.config.parallelism);
    st.queue.metrics.register(&st.metrics);
    st.queue.metrics.local_workers.set(n as i64);
    let mut tasks: Vec<_> = (0..n)
        .map(|i| tokio::spawn(worker_loop(st.clone(), i)))
        .collect();
    tasks.push(tokio::spawn(reaper(st.clone())));
    if let Some(heard) = st.store.finished_jobs() {
        tasks.push(tokio::spawn(relay_finished(st.clone(), heard)));
    }
    tasks.push(tokio::spawn(super::callbacks::delivery_loop(st.clone())));
    tracing::info!(workers = n, node = %st.queue.node, "submission workers started");
    tasks
}

/// Wakes the requests here waiting for jobs other nodes finished (PostgreSQL), as the store
/// hears of them.
async fn relay_finished(
    st: SharedState,
    mut heard: tokio::sync::broadcast::Receiver<FinishNotice>,
) {
    use tokio::sync::broadcast::error::RecvError;
    loop {
        match heard.recv().await {
            Ok(FinishNotice::Job(id)) => st.queue.finished.finished_elsewhere(&id),
            // Some went unheard: every waiter looks.
            Ok(FinishNotice::Missed) | Err(RecvError::Lagged(_)) => st.queue.finished.all(),
            Err(RecvError::Closed) => return,
        }
    }
}

/// Counts a job as in flight, and its lease as in hand, while it lives.
struct InFlight<'a>(&'a QueueHandle, String);

impl<'a> InFlight<'a> {
    fn new(q: &'a QueueHandle, claim: &Claim) -> Self {
        q.in_flight.fetch_add(1, Ordering::SeqCst);
        q.in_hand
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(claim.job.id.clone(), claim.lease.clone());
        InFlight(q, claim.job.id.clone())
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0
            .in_hand
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.1);
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn worker_loop(st: SharedState, i: usize) {
    let name = format!("{}/w{i}", st.queue.node);
    let mut stop = st.shutdown.subscribe();
    let mut backoff = Duration::ZERO;
    loop {
        if *stop.borrow() {
            break;
        }
        match st
            .store
            .claim_job(&name, st.config.submissions.lease())
            .await
        {
            Ok(Some(claim)) => {
                if judge_claim(&st, &name, claim).await {
                    backoff = Duration::ZERO;
                } else {
                    // The host could not prepare the job: whatever failed (a full disk, the
                    // store) would fail the next one too, so wait before claiming again.
                    backoff = (backoff * 2).clamp(Duration::from_secs(1), Duration::from_secs(60));
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {}
                        _ = stop.changed() => {}
                    }
                }
            }
            Ok(None) => {
                tokio::select! {
                    _ = st.queue.work.notified() => {}
                    _ = st.store.wait_for_work(Duration::from_millis(500)) => {}
                    _ = stop.changed() => {}
                }
            }
            Err(e) => {
                tracing::warn!(worker = %name, error = %e, "claiming a submission failed; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// Judges a claimed job and records its verdict; false when the host could not prepare it (the
/// job is given back: [`give_back`]).
async fn judge_claim(st: &SharedState, worker: &str, claim: Claim) -> bool {
    let _in_flight = InFlight::new(&st.queue, &claim);
    let id = claim.job.id.clone();
    let lease = claim.lease.clone();
    tracing::info!(submission = %id, worker, attempt = claim.job.attempts, "judging");
    let hb = {
        let st = st.clone();
        let (id, lease) = (id.clone(), lease.clone());
        let extend = st.config.submissions.lease();
        Heartbeat::start(st.config.submissions.heartbeat_every(), move || {
            let st = st.clone();
            let (id, lease) = (id.clone(), lease.clone());
            async move { st.store.heartbeat_job(&id, &lease, extend).await.ok() }
        })
    };
    let verdict = match judge(st, &claim).await {
        Ok(v) => v,
        Err(Unprepared::Job(why)) => Verdict::internal(why),
        Err(Unprepared::Host(why)) => {
            drop(hb);
            give_back(st, &id, &lease, &why).await;
            return false;
        }
    };
    let lost = hb.lost.load(Ordering::SeqCst);
    drop(hb);
    if lost {
        tracing::warn!(submission = %id, worker, "the lease was lost while judging; the result is offered anyway");
    }
    record(st, &id, &lease, &verdict).await;
    true
}

async fn judge(st: &SharedState, claim: &Claim) -> Result<Verdict, Unprepared> {
    let spec: JobSpec = serde_json::from_str(&claim.job.spec)
        .map_err(|e| Unprepared::Job(format!("the stored job is unreadable: {e}")))?;
    let work = tempfile::Builder::new()
        .prefix("job-")
        .tempdir_in(&st.tmp_dir)
        .map_err(|e| Unprepared::host("a temporary folder", e))?;
    let files = work.path().join("files");
    std::fs::create_dir(&files).map_err(|e| Unprepared::host("a temporary folder", e))?;
    if let Some(u) = &claim.job.upload_id {
        let upload = st
            .store
            .get_upload(u)
            .await
            .map_err(|e| Unprepared::host("reading the store", e))?
            .ok_or_else(|| Unprepared::Job(format!("the submission's files ({u}) are gone")))?;
        st.store
            .materialize(&upload, &files)
            .await
            .map_err(|e| Unprepared::copying("the submission's files", e))?;
    }
    let suite_dir = match &spec.suite {
        None => None,
        Some(s) => Some(match &s.upload {
            Some(u) => {
                let upload = st
                    .store
                    .get_upload(u)
                    .await
                    .map_err(|e| Unprepared::host("reading the store", e))?
                    .ok_or_else(|| {
                        Unprepared::Job(format!("the files of suite {:?} are gone", s.id))
                    })?;
                let dir = work.path().join("suite");
                std::fs::create_dir(&dir).map_err(|e| Unprepared::host("a temporary folder", e))?;
                st.store
                    .materialize(&upload, &dir)
                    .await
                    .map_err(|e| Unprepared::copying("the suite's files", e))?;
                dir
            }
            // Accepted before folder suites were pinned (their upload): the folder as it is.
            None => suites_dir(st).join(&s.id),
        }),
    };
    let pool = st.pool.clone();
    let registry = st.languages.clone();
    let images = st.images.clone();
    let slots = st.grading_slots.clone();
    tokio::task::spawn_blocking(move || {
        let v = execute(
            &pool,
            &registry,
            Some(&images),
            Some(&slots),
            &spec,
            &JobFiles {
                files: &files,
                suite_dir: suite_dir.as_deref(),
            },
        );
        drop(work);
        v
    })
    .await
    .map_err(|e| Unprepared::Job(format!("the worker thread failed: {e}")))
}

async fn reaper(st: SharedState) {
    let every = (st.config.submissions.lease() / 4)
        .clamp(Duration::from_millis(50), Duration::from_secs(5));
    let retention_every = (st.config.retention.duration() / 4)
        .clamp(Duration::from_millis(500), Duration::from_secs(600));
    let mut last_retention: Option<tokio::time::Instant> = None;
    let mut stop = st.shutdown.subscribe();
    // Alone on its store (SQLite), a starting server knows the jobs its predecessor's workers
    // held will never be answered (it was killed): they go back to the queue now, not when
    // their leases run out.
    match st.store.expire_predecessors_leases(&st.queue.node).await {
        Ok(e) => put_back(&st, e, "the previous server's jobs queued again"),
        Err(e) => tracing::warn!(error = %e, "expiring the previous server's leases failed"),
    }
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.changed() => break,
        }
        match st.store.expire_leases().await {
            Ok(e) => put_back(&st, e, "expired leases: submissions queued again"),
            Err(e) => tracing::warn!(error = %e, "expiring leases failed"),
        }
        if let Ok(s) = st.store.queue_stats().await {
            let g = &st.queue.metrics.submissions;
            g.with_label_values(&["queued"]).set(s.queued as i64);
            g.with_label_values(&["running"]).set(s.running as i64);
            g.with_label_values(&["done"]).set(s.done as i64);
            g.with_label_values(&["failed"]).set(s.failed as i64);
            let waited = s
                .oldest_queued_ms
                .map_or(0, |at| (corral_store::now_ms() - at).max(0));
            let m = &st.queue.metrics;
            m.oldest_queued_seconds.set(waited as f64 / 1000.0);
        }
        let heard_since = corral_store::now_ms() - nodes::GONE_AFTER.as_millis() as i64;
        if let Ok(n) = st.store.count_live_nodes(heard_since).await {
            st.queue.metrics.nodes_live.set(n as i64);
        }
        let remote = st.queue.workers_seen.count();
        st.queue.metrics.remote_workers.set(remote as i64);
        if last_retention.is_none_or(|t| t.elapsed() >= retention_every) {
            last_retention = Some(tokio::time::Instant::now());
            let cutoff = corral_store::now_ms() - st.config.retention.duration().as_millis() as i64;
            match st.store.delete_jobs_before(cutoff).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(count = n, "old submissions deleted"),
                Err(e) => tracing::warn!(error = %e, "deleting old submissions failed"),
            }
        }
    }
}

/// Gives back to the queue, at once and without using an attempt, the jobs (id, lease) this
/// process's workers were judging when it stopped them (a shutdown whose grace period ended
/// first): they are not the jobs' fault, and waiting for their leases to expire cost a lease of
/// latency and an attempt each — rolling restarts failed good submissions. Called once the
/// workers are stopped (no heartbeat or result can follow).
pub async fn release_abandoned(st: &SharedState, abandoned: Vec<(String, String)>) {
    for (id, lease) in abandoned {
        match st
            .store
            .release_job(&id, &lease, "its node shut down before the run ended")
            .await
        {
            Ok(true) => tracing::info!(
                submission = %id,
                "shutting down: a job still being judged was queued again (no attempt used)"
            ),
            Ok(false) => {}
            Err(e) => tracing::warn!(
                submission = %id,
                error = %e,
                "shutting down: giving a job back failed; it runs again when its lease expires"
            ),
        }
    }
}

/// Waits until this process's workers finished their jobs, or `grace` passes.
pub async fn drain(st: &SharedState, grace: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + grace;
    while st.queue.in_flight() > 0 {
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    true
}

/// Counts and announces the jobs an expiry put back (`requeued`, said as `what`) or failed.
fn put_back(st: &SharedState, e: corral_store::Expired, what: &str) {
    let m = &st.queue.metrics.expired;
    m.with_label_values(&["requeued"])
        .inc_by(e.requeued.len() as u64);
    m.with_label_values(&["failed"])
        .inc_by(e.failed.len() as u64);
    if !e.requeued.is_empty() {
        tracing::warn!(count = e.requeued.len(), "{what}");
        st.queue.work.notify_waiters();
    }
    if !e.failed.is_empty() {
        tracing::warn!(
            count = e.failed.len(),
            "submissions failed: their workers stopped answering too often"
        );
        for id in &e.failed {
            st.queue.finished.finished(id);
        }
    }
}
