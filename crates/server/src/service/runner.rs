//! Admission and parallelism for sandbox work: at most `parallelism` runs execute at once (each on
//! a blocking thread, never on the async runtime), at most `queue` more wait; beyond that a run is
//! refused as overloaded (503 + `Retry-After` over HTTP) instead of queueing without bound.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::Semaphore;

use crate::error::ApiError;
use crate::metrics::Metrics;

pub struct Runner {
    slots: Arc<Semaphore>,
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

impl Runner {
    pub fn new(parallelism: usize, queue: usize, metrics: Arc<Metrics>) -> Self {
        Runner {
            slots: Arc::new(Semaphore::new(parallelism)),
            admitted: AtomicUsize::new(0),
            max_admitted: parallelism + queue,
            metrics,
        }
    }

    /// Runs `f` on a blocking thread once a slot is free. The slot is held until `f` returns,
    /// even when the caller stops waiting (a client that disconnects does not free a slot early).
    pub async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, ApiError> {
        self.run_then(move || (f(), ())).await
    }

    /// [`run`](Self::run) for work with a tail: `f` returns the answer and what is left to drop
    /// (leases to give back to the pool, which talks to their inits). The caller gets the answer
    /// first; the tail is dropped after it on the same blocking thread, past the slot. Handing
    /// the tail to a second blocking task instead costs another thread wake-up per request.
    pub async fn run_then<T: Send + 'static, L: Send + 'static>(
        &self,
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
        self.metrics.queued.inc();
        let permit = self.slots.clone().acquire_owned().await;
        self.metrics.queued.dec();
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
        self.slots.available_permits() > 0
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
