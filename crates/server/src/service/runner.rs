//! Admission and parallelism for sandbox work: at most `parallelism` runs execute at once (each on
//! a blocking thread, never on the async runtime), at most `queue` more wait; beyond that a run is
//! refused as overloaded (503 + `Retry-After` over HTTP) instead of queueing without bound. The
//! waiting runs get free slots by turns between callers ([`FairSlots`]).
//!
//! Two kinds of work share the slots: programs (`/run`, WebSocket runs: an editor's button,
//! milliseconds each) and gradings (`/check`: a whole suite, seconds each). Programs may also
//! take `reserved_run_slots` slots of their own on top of `parallelism`, so a storm of checks
//! (a class checking at once, each holding a slot for seconds) does not put an editor's 20 ms run
//! behind all of them: with the shared slots alone it waited ~35 s behind 30 checks. A program
//! takes a free shared slot first, and a reserved one only when its caller holds no slot: one
//! token's long runs (four `sleep 20`s) took the shared slot and the reserved one and held every
//! other editor's run for 38 s.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::service::fair_slots::{Closed, FairSlots, Place, Slot, Ticket};

/// What a slot is asked for: programs may also take the reserved slots.
#[derive(Clone, Copy)]
enum Work {
    Program,
    Grading,
}

pub struct Runner {
    slots: FairSlots,
    /// Only programs take these; `None` when none are reserved.
    reserved: Option<FairSlots>,
    /// The slots each caller holds now (callers holding none are absent).
    holding: Arc<Mutex<HashMap<String, usize>>>,
    admitted: AtomicUsize,
    max_admitted: usize,
    /// Admissions gradings may not take: the reserved slots' (a storm of checks that filled the
    /// queue would otherwise refuse an editor's run while its reserved slot idled).
    for_programs_only: usize,
    metrics: Arc<Metrics>,
}

/// Where a watched grading is, before its checks' own progress: it waits for a slot (others'
/// work holds them all), or it has one and starts.
#[derive(Clone)]
pub enum Turn {
    /// Waiting, at this place in the queue.
    Queued(Place),
    Started,
}

/// A slot, counted as its caller's until dropped (the run ended, or its request went away).
struct Held {
    _slot: Slot,
    holding: Arc<Mutex<HashMap<String, usize>>>,
    caller: String,
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut h = lock(&self.holding);
        if let Some(n) = h.get_mut(&self.caller) {
            *n -= 1;
            if *n == 0 {
                h.remove(&self.caller);
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Counts stay consistent between statements: a panic elsewhere cannot leave them half-done.
    m.lock().unwrap_or_else(|e| e.into_inner())
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
    /// `parallelism` slots for all work, `reserved` more for programs only, `queue` waiting.
    pub fn new(parallelism: usize, reserved: usize, queue: usize, metrics: Arc<Metrics>) -> Self {
        Runner {
            slots: FairSlots::new(parallelism),
            reserved: (reserved > 0).then(|| FairSlots::new(reserved)),
            holding: Arc::default(),
            admitted: AtomicUsize::new(0),
            max_admitted: parallelism + reserved + queue,
            for_programs_only: reserved,
            metrics,
        }
    }

    /// Grades on a blocking thread once a shared slot is free and it is `caller`'s turn (the
    /// token's id). The slot is held until `f` returns, even when the caller stops waiting (a
    /// client that disconnects does not free a slot early).
    pub async fn grade<T: Send + 'static>(
        &self,
        caller: &str,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, ApiError> {
        self.execute(Work::Grading, caller, |_| {}, move || (f(), ()))
            .await
    }

    /// [`grade`](Self::grade), telling `watch` when it must wait for a slot ([`Turn::Queued`]
    /// with its place, only then) and when it has one ([`Turn::Started`]). Refused (overloaded) before either.
    pub async fn grade_watched<T: Send + 'static>(
        &self,
        caller: &str,
        watch: impl Fn(Turn) + Send + Sync,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, ApiError> {
        self.execute(Work::Grading, caller, watch, move || (f(), ()))
            .await
    }

    /// Runs a program as [`grade`](Self::grade) does, in a reserved slot when one is free, and
    /// with a tail: `f` returns the answer and what is left to drop (leases to give back to the
    /// pool, which talks to their inits). The caller gets the answer first; the tail is dropped
    /// after it on the same blocking thread, past the slot. Handing the tail to a second
    /// blocking task instead costs another thread wake-up per request.
    pub async fn run_then<T: Send + 'static, L: Send + 'static>(
        &self,
        caller: &str,
        f: impl FnOnce() -> (T, L) + Send + 'static,
    ) -> Result<T, ApiError> {
        self.execute(Work::Program, caller, |_| {}, f).await
    }

    /// A slot for `work`, counted as `caller`'s while held; `watch` is told when it must wait.
    async fn slot(&self, work: Work, caller: &str, watch: &impl Fn(Turn)) -> Result<Held, Closed> {
        let slot = self.take(work, caller, watch).await?;
        *lock(&self.holding).entry(caller.to_string()).or_default() += 1;
        Ok(Held {
            _slot: slot,
            holding: self.holding.clone(),
            caller: caller.to_string(),
        })
    }

    /// A program takes a free shared slot; else, when its caller holds no slot, whichever frees
    /// for it first of a reserved one and a shared one. A grading waits for a shared one.
    async fn take(&self, work: Work, caller: &str, watch: &impl Fn(Turn)) -> Result<Slot, Closed> {
        let shared = match self.slots.ticket(caller)? {
            Ticket::Now(slot) => return Ok(slot),
            Ticket::Queued(w) => w,
        };
        let reserved = match (&self.reserved, work) {
            (Some(r), Work::Program) => r,
            _ => {
                watch(Turn::Queued(shared.place()));
                return shared.granted().await;
            }
        };
        // The reserved slots are for callers with nothing running: one token's many runs
        // would otherwise hold them beside the shared ones.
        if lock(&self.holding).contains_key(caller) {
            watch(Turn::Queued(shared.place()));
            return shared.granted().await;
        }
        match reserved.ticket(caller)? {
            // Dropping the other place in line leaves that queue (or passes on a slot it got).
            Ticket::Now(slot) => Ok(slot),
            Ticket::Queued(in_reserve) => {
                watch(Turn::Queued(shared.place()));
                tokio::select! {
                    s = in_reserve.granted() => s,
                    s = shared.granted() => s,
                }
            }
        }
    }

    async fn execute<T: Send + 'static, L: Send + 'static>(
        &self,
        work: Work,
        caller: &str,
        watch: impl Fn(Turn) + Send + Sync,
        f: impl FnOnce() -> (T, L) + Send + 'static,
    ) -> Result<T, ApiError> {
        let cap = match work {
            Work::Grading => self.max_admitted - self.for_programs_only,
            Work::Program => self.max_admitted,
        };
        if self.admitted.fetch_add(1, Ordering::SeqCst) >= cap {
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
        let permit = self.slot(work, caller, &watch).await;
        drop(waiting);
        if permit.is_ok() {
            watch(Turn::Started);
        }
        let permit = permit.map_err(|_| ApiError::shutting_down())?;
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
    pub fn has_free_slot_for_a_program(&self) -> bool {
        self.slots.available() > 0 || self.reserved.as_ref().is_some_and(|r| r.available() > 0)
    }

    pub fn close(&self) {
        self.slots.close();
        if let Some(r) = &self.reserved {
            r.close();
        }
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
    /// Fails instead of hanging when the gauge never gets there (a slot given to the wrong work).
    async fn until(gauge: &prometheus::IntGauge, n: i64) {
        let since = std::time::Instant::now();
        while gauge.get() != n {
            assert!(
                since.elapsed() < std::time::Duration::from_secs(20),
                "the gauge stayed at {} (waited for {n})",
                gauge.get()
            );
            tokio::task::yield_now().await;
        }
    }

    // One thread: a spawned request has queued once the gauge counts it (its whole poll ran).
    #[tokio::test(flavor = "current_thread")]
    async fn one_callers_waiting_runs_do_not_hold_back_another_callers_run() {
        let metrics = Arc::new(Metrics::new());
        let runner = Arc::new(Runner::new(1, 0, 10, metrics.clone()));
        let order = Arc::new(Mutex::new(Vec::new()));
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let r = runner.clone();
        let mut tasks = vec![tokio::spawn(async move {
            r.grade("a", move || wait.recv().unwrap()).await.unwrap()
        })];
        until(&metrics.in_flight, 1).await;
        // a queues three more (a /check flood), then b one run.
        for (n, (caller, name)) in [("a", "a1"), ("a", "a2"), ("a", "a3"), ("b", "b1")]
            .into_iter()
            .enumerate()
        {
            let (r, order) = (runner.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                r.grade(caller, move || order.lock().unwrap().push(name))
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
        let runner = Arc::new(Runner::new(1, 0, 10, metrics.clone()));
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let r = runner.clone();
        let busy = tokio::spawn(async move { r.grade("a", move || wait.recv().unwrap()).await });
        until(&metrics.in_flight, 1).await;
        let r = runner.clone();
        let queued = tokio::spawn(async move { r.grade("b", || ()).await });
        until(&metrics.queued, 1).await;
        // The client goes away: its request's future is dropped while it waits.
        queued.abort();
        let _ = queued.await;
        assert_eq!(metrics.queued.get(), 0);
        go.send(()).unwrap();
        busy.await.unwrap().unwrap();
    }

    /// Starts `f` as `work` for `caller` on `runner`, blocked until its sender is dropped or sent.
    fn blocked(
        runner: &Arc<Runner>,
        work: Work,
        caller: &'static str,
    ) -> (std::sync::mpsc::Sender<()>, tokio::task::JoinHandle<()>) {
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let r = runner.clone();
        let task = tokio::spawn(async move {
            r.execute(
                work,
                caller,
                |_| {},
                move || {
                    let _ = wait.recv();
                    ((), ())
                },
            )
            .await
            .unwrap()
        });
        (go, task)
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_watched_grading_is_told_queued_only_when_it_waits() {
        let metrics = Arc::new(Metrics::new());
        let runner = Arc::new(Runner::new(1, 0, 10, metrics.clone()));
        // What the watch was told; a queued turn with its place read when told.
        let turns = Arc::new(Mutex::new(Vec::new()));
        let places = Arc::new(Mutex::new(Vec::new()));
        let watch = || {
            let (t, p) = (turns.clone(), places.clone());
            move |turn: Turn| match turn {
                Turn::Queued(place) => {
                    t.lock()
                        .unwrap()
                        .push(format!("queued, {:?} ahead", place.ahead()));
                    p.lock().unwrap().push(place);
                }
                Turn::Started => t.lock().unwrap().push("started".to_string()),
            }
        };
        runner.grade_watched("a", watch(), || ()).await.unwrap();
        assert_eq!(*turns.lock().unwrap(), ["started"], "a free slot");
        turns.lock().unwrap().clear();
        let (go, a) = blocked(&runner, Work::Grading, "a");
        until(&metrics.in_flight, 1).await;
        let (go_c, c) = blocked(&runner, Work::Grading, "c");
        until(&metrics.queued, 1).await;
        let (r, w) = (runner.clone(), watch());
        let b = tokio::spawn(async move { r.grade_watched("b", w, || ()).await.unwrap() });
        until(&metrics.queued, 2).await;
        assert_eq!(*turns.lock().unwrap(), ["queued, Some(1) ahead"]);
        // a ends: c runs, b is next.
        go.send(()).unwrap();
        a.await.unwrap();
        until(&metrics.queued, 1).await;
        assert_eq!(places.lock().unwrap()[0].ahead(), Some(0));
        go_c.send(()).unwrap();
        c.await.unwrap();
        b.await.unwrap();
        assert_eq!(*turns.lock().unwrap(), ["queued, Some(1) ahead", "started"]);
        assert_eq!(places.lock().unwrap()[0].ahead(), None, "b waits no more");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_program_runs_in_a_reserved_slot_while_gradings_hold_and_wait_for_the_shared_ones() {
        let metrics = Arc::new(Metrics::new());
        let runner = Arc::new(Runner::new(1, 1, 10, metrics.clone()));
        let (check_a, a) = blocked(&runner, Work::Grading, "a");
        until(&metrics.in_flight, 1).await;
        // A second grading waits, though the reserved slot is free: it is not for gradings.
        let (check_b, b) = blocked(&runner, Work::Grading, "b");
        until(&metrics.queued, 1).await;
        tokio::task::yield_now().await;
        assert_eq!(
            metrics.in_flight.get(),
            1,
            "a grading took the reserved slot"
        );
        // A program does not wait for either grading.
        let r = runner.clone();
        let ran = tokio::time::timeout(
            std::time::Duration::from_secs(20),
            r.run_then("c", || ("ran", ())),
        )
        .await
        .expect("the program waited for a grading to end")
        .unwrap();
        assert_eq!(ran, "ran");
        assert!(!a.is_finished() && !b.is_finished());
        assert_eq!(metrics.queued.get(), 1);
        check_a.send(()).unwrap();
        a.await.unwrap();
        check_b.send(()).unwrap();
        b.await.unwrap();
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_waiting_program_takes_whichever_slot_frees_first_and_leaves_the_other_queue() {
        let metrics = Arc::new(Metrics::new());
        let runner = Arc::new(Runner::new(1, 1, 10, metrics.clone()));
        let (check_a, a) = blocked(&runner, Work::Grading, "a");
        until(&metrics.in_flight, 1).await;
        let (run_c, c) = blocked(&runner, Work::Program, "c");
        until(&metrics.in_flight, 2).await;
        // Both slots busy: d waits in both lines; the reserved one frees first.
        let (run_d, d) = blocked(&runner, Work::Program, "d");
        until(&metrics.queued, 1).await;
        run_c.send(()).unwrap();
        c.await.unwrap();
        until(&metrics.queued, 0).await;
        until(&metrics.in_flight, 2).await;
        assert!(!a.is_finished(), "the grading still holds the shared slot");
        // d left the shared line: a grading queued now gets the shared slot when a ends.
        let (check_e, e) = blocked(&runner, Work::Grading, "e");
        until(&metrics.queued, 1).await;
        check_a.send(()).unwrap();
        a.await.unwrap();
        until(&metrics.queued, 0).await;
        assert_eq!(metrics.in_flight.get(), 2, "d and e run");
        run_d.send(()).unwrap();
        check_e.send(()).unwrap();
        d.await.unwrap();
        e.await.unwrap();
        assert_eq!(runner.slots.available(), 1);
        assert_eq!(runner.reserved.as_ref().unwrap().available(), 1);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_caller_running_a_program_does_not_take_the_reserved_slot_too() {
        let metrics = Arc::new(Metrics::new());
        let runner = Arc::new(Runner::new(1, 1, 10, metrics.clone()));
        // The shared slot is free: a's first long run takes it.
        let (first, a1) = blocked(&runner, Work::Program, "a");
        until(&metrics.in_flight, 1).await;
        assert_eq!(runner.slots.available(), 0);
        // a's second run waits for the shared slot, though the reserved one is free...
        let (second, a2) = blocked(&runner, Work::Program, "a");
        until(&metrics.queued, 1).await;
        tokio::task::yield_now().await;
        assert_eq!(
            metrics.in_flight.get(),
            1,
            "one caller took the reserved slot too"
        );
        // ...which another caller's run takes at once.
        let r = runner.clone();
        let ran = tokio::time::timeout(
            std::time::Duration::from_secs(20),
            r.run_then("b", || ("ran", ())),
        )
        .await
        .expect("b's run waited for a's")
        .unwrap();
        assert_eq!(ran, "ran");
        first.send(()).unwrap();
        a1.await.unwrap();
        until(&metrics.queued, 0).await;
        second.send(()).unwrap();
        a2.await.unwrap();
        assert!(
            lock(&runner.holding).is_empty(),
            "{:?}",
            lock(&runner.holding)
        );
    }
}
