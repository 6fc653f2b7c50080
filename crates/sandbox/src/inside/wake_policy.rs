//! PID 1's scheduling policy: `SCHED_BATCH` from a run's end until the next request, an
//! ordinary task (`SCHED_OTHER`) otherwise.
//!
//! Why: the supervisor's next `Run` wakes PID 1 with a synchronous wake-up, which puts it on the
//! supervisor's CPU — and an ordinary task woken there preempts the supervisor before it goes to
//! sleep in its wait for the run. PID 1 then hands the run to its confined thread while the
//! supervisor is still runnable on that CPU, so the scheduler starts the thread (and the program
//! after it) on the other CPU, whose wake-up costs ~60 µs in a VM that halts an idle vCPU (`perf
//! sched timehist`, docs/architecture.md). A `SCHED_BATCH` task never preempts on wake-up: the
//! supervisor reaches its wait first, and the hand-offs stay on one CPU. PID 1 is ordinary again
//! as soon as it reads the request, so it serves a run — a wall limit, a `Kill`, a seccomp
//! notification — as promptly as before, and the processes it starts inherit the ordinary
//! policy. Batch only after a run, not after a reset: a sandbox waiting in the pool takes its
//! next run as before (runs/s at parallelism 2 fell ~4 % with PID 1 batch there too).
//! A hint to the scheduler only: a failure changes no limit and is only logged.

/// PID 1's main thread's policy, changed only when it must change.
pub(crate) struct WakePolicy {
    /// Off under gVisor, whose kernel schedules its own tasks.
    enabled: bool,
    batch: bool,
}

impl WakePolicy {
    /// An ordinary task, as PID 1 starts.
    pub(crate) fn new(enabled: bool) -> Self {
        WakePolicy {
            enabled,
            batch: false,
        }
    }

    /// A run ended: wait for the next request as a batch task.
    pub(crate) fn run_ended(&mut self) {
        self.switch(true);
    }

    /// A request arrived: serve it as an ordinary task.
    pub(crate) fn request_arrived(&mut self) {
        self.switch(false);
    }

    fn switch(&mut self, batch: bool) {
        if self.enabled && self.batch != batch {
            set(batch);
            self.batch = batch;
        }
    }
}

/// Makes the calling thread `SCHED_BATCH` (`batch`) or `SCHED_OTHER`, keeping its nice value.
fn set(batch: bool) {
    let policy = if batch {
        libc::SCHED_BATCH
    } else {
        libc::SCHED_OTHER
    };
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid `sched_param` for the call's duration; pid 0 is this thread.
    // (nix and rustix have no wrapper for sched_setscheduler.)
    if unsafe { libc::sched_setscheduler(0, policy, &param) } != 0 {
        let e = std::io::Error::last_os_error();
        tracing::debug!(error = %e, batch, "scheduling policy unchanged");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> i32 {
        // SAFETY: no arguments but this thread's id.
        unsafe { libc::sched_getscheduler(0) }
    }

    #[test]
    fn batch_from_a_runs_end_to_the_next_request() {
        // A thread of its own: the policy belongs to a thread, and the test runner's stay as
        // they are.
        std::thread::spawn(|| {
            let mut p = WakePolicy::new(true);
            assert_eq!(policy(), libc::SCHED_OTHER);
            p.run_ended();
            assert_eq!(policy(), libc::SCHED_BATCH);
            p.request_arrived();
            assert_eq!(policy(), libc::SCHED_OTHER);
            let mut off = WakePolicy::new(false);
            off.run_ended();
            assert_eq!(policy(), libc::SCHED_OTHER, "changed while disabled");
        })
        .join()
        .unwrap();
    }
}
