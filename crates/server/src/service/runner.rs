//! Admission and parallelism for sandbox work: at most `parallelism` runs execute at once (each on
//! a blocking thread, never on the async runtime), at most `queue` more wait; beyond that a run is
//! refused as overloaded (503 + `Retry-After` over HTTP) instead of queueing without bound. The
//! waiting runs get free slots by turns between callers ([`FairSlots`]).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::service::fair_slots::FairSlots;

pub struct Runner {
    slots: FairSlots,
    admitted: AtomicUsize,
    max_admitted: usize,
    metrics: Arc<Metrics>,
}

/// Gives back an admission when dropped (however the request ends).
struct Admission<'a>(&'a Runner);

impl Drop for Admission<'_> {
    fn drop(&mut self) {
        self.0.admitted.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Counts a run as queued while it waits for a slot, until it gets one or its request is
/// dropped (a client that went away while waiting left the gauge one too high).
struct Waiting<'a>(&'a prometheus::IntGauge);

impl<'a> Waiting<'a> {
    fn new(gauge: &'a prometheus::IntGauge) -> Self {
        gauge.inc();
        Waiting(gauge)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl Runner {
    pub fn new(parallelism: usize, queue: usize, metrics: Arc<Metrics>) -> Self {
        Runner {
            slots: FairSlots::new(parallelism),
            admitted: AtomicUsize::new(0),
            max_admitted: parallelism + queue,
            metrics,
        }
    }

    /// Runs `f` on a blocking thread once a slot is free and it is `caller`'s turn (the token's
    /// id). The slot is held until `f` returns, even when the caller stops waiting (a client that
    /// disconnects does not free a slot early).
    pub async fn run<T: Send + 'static>(
        &self,
        caller: &str,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, ApiError> {
        self.run_then(caller, move || (f(), ())).await
    }

    /// [`run`](Self::run) for work with a tail: `f` returns the answer and what is left to drop
    /// (leases to give back to the pool, which talks to their inits). The caller gets the answer
    /// first; the tail is dropped after it on the same blocking thread, past the slot. Handing
    /// the tail to a second blocking task instead costs another thread wake-up per request.
    pub async fn run_then<T: Send + 'static, L: Send + 'static>(
        &self,
        caller: &str,
        f: impl FnOnce() -> (T, L) + Send + 'static,
    ) -> Result<T, ApiError> {
        if self.admitted.fetch_add(1, Ordering::SeqCst) >= self.max_admitted {
            self.admitted.fetch_sub(1, Ordering::SeqCst);
            self.metrics
                .rejected
                .with_label_values(&["overloaded"])
                .inc();
            return Err(ApiError::overloaded(
                "all sandboxes are busy and the queue is full; retry shortly",
                2,
            ));
        }
        let _admission = Admission(self);
        let waiting = Waiting::new(&self.metrics.queued);
        let permit = self.slots.acquire(caller).await;
        drop(waiting);
        let permit = permit.map_err(|_| ApiError::overloaded("the server is shutting down", 5))?;
        let metrics = self.metrics.clone();
        metrics.in_flight.inc();
        let (answer, answered) = tokio::sync::oneshot::channel();
        let task = tokio::task::spawn_blocking(move || {
            let (r, tail) = f();
            metrics.in_flight.dec();
            drop(permit);
            // The caller may have gone (a client that disconnected): then nobody wants `r`.
            let _ = answer.send(r);
            drop(tail);
        });
        match answered.await {
            Ok(r) => Ok(r),
            // `f` panicked: the task's error says how.
            Err(_) => match task.await {
                Err(e) => Err(ApiError::internal(e)),
                Ok(()) => Err(ApiError::internal("the run ended without an answer")),
            },
        }
    }

    /// Whether a run admitted now would start at once (else it waits in the queue). Only a
    /// hint: a slot may free or be taken in between.
    pub fn has_free_slot(&self) -> bool {
        self.slots.available() > 0
    }

    pub fn close(&self) {
        self.slots.close();
    }

    /// Waits until no run executes, or `grace` passes. True when all finished.
    pub async fn drain(&self, grace: std::time::Duration) -> bool {
        let deadline = tokio::time::Instant::now() + grace;
        while self.metrics.in_flight.get() > 0 {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// Yields until `gauge` reads `n` (the tasks this test spawned have reached that point).
    async fn until(gauge: &prometheus::IntGauge, n: i64) {
        while gauge.get() != n {
            tokio::task::yield_now().await;
        }
    }

    // One thread: a spawned request has queued once the gauge counts it (its whole poll ran).
    #[tokio::test(flavor = "current_thread")]
    async fn one_callers_waiting_runs_do_not_hold_back_another_callers_run() {
        let metrics = Arc::new(Metrics::new());
        let runner = Arc::new(Runner::new(1, 10, metrics.clone()));
        let order = Arc::new(Mutex::new(Vec::new()));
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let r = runner.clone();
        let mut tasks = vec![tokio::spawn(async move {
            r.run("a", move || wait.recv().unwrap()).await.unwrap()
        })];
        until(&metrics.in_flight, 1).await;
        // a queues three more (a /check flood), then b one run.
        for (n, (caller, name)) in [("a", "a1"), ("a", "a2"), ("a", "a3"), ("b", "b1")]
            .into_iter()
            .enumerate()
        {
            let (r, order) = (runner.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                r.run(caller, move || order.lock().unwrap().push(name))
                    .await
                    .unwrap()
            }));
            until(&metrics.queued, n as i64 + 1).await;
        }
        go.send(()).unwrap();
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), ["a1", "b1", "a2", "a3"]);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_run_dropped_while_queued_is_no_longer_counted_as_queued() {
        let metrics = Arc::new(Metrics::new());
        let runner = Arc::new(Runner::new(1, 10, metrics.clone()));
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let r = runner.clone();
        let busy = tokio::spawn(async move { r.run("a", move || wait.recv().unwrap()).await });
        until(&metrics.in_flight, 1).await;
        let r = runner.clone();
        let queued = tokio::spawn(async move { r.run("b", || ()).await });
        until(&metrics.queued, 1).await;
        // The client goes away: its request's future is dropped while it waits.
        queued.abort();
        let _ = queued.await;
        assert_eq!(metrics.queued.get(), 0);
        go.send(()).unwrap();
        busy.await.unwrap().unwrap();
    }
}
