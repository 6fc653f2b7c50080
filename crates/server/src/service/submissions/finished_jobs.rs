//! Requests waiting for a job to finish (`GET /submissions/{id}?wait=true`), woken per job. A
//! finish wakes only that job's waiters, each of which then reads it once: one signal for all
//! jobs woke every waiter at every verdict, and with a 200 ms poll for other nodes' verdicts on
//! top, 300 waiting requests cost ~21 % of a core in database reads.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use tokio::sync::Notify;

/// Each waited-for job's wake-up, while anyone waits for it.
#[derive(Default)]
pub struct FinishedJobs {
    waiting: Mutex<HashMap<String, Weak<Notify>>>,
    /// Every finish here, whoever waits (the callback deliverer: a finished job may have a
    /// callback to send).
    any: Notify,
}

/// One request's interest in one job; its entry goes with the last such watch.
pub struct Watch<'a> {
    jobs: &'a FinishedJobs,
    id: String,
    notify: Arc<Notify>,
}

impl Watch<'_> {
    /// Completes when the job is said to have finished, from the moment it is made (before
    /// its first poll), so a finish between making it and reading the job is not missed.
    pub fn notified(&self) -> tokio::sync::futures::Notified<'_> {
        self.notify.notified()
    }
}

impl Drop for Watch<'_> {
    fn drop(&mut self) {
        let mut w = self.jobs.lock();
        // Under the lock, so no watch of this job is being made meanwhile.
        if Arc::strong_count(&self.notify) == 1 {
            w.remove(&self.id);
        }
    }
}

impl FinishedJobs {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Weak<Notify>>> {
        // A map of wake-ups stays consistent whatever panicked while it was held.
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts waiting for job `id`.
    pub fn watch(&self, id: &str) -> Watch<'_> {
        let mut w = self.lock();
        let notify = match w.get(id).and_then(Weak::upgrade) {
            Some(n) => n,
            None => {
                let n = Arc::new(Notify::new());
                w.insert(id.to_string(), Arc::downgrade(&n));
                n
            }
        };
        Watch {
            jobs: self,
            id: id.to_string(),
            notify,
        }
    }

    /// Job `id` finished here: its waiters look, and so does the callback deliverer.
    pub fn finished(&self, id: &str) {
        self.finished_elsewhere(id);
        self.any.notify_waiters();
    }

    /// A callback is due without a finish (staff asked for it again): the deliverer looks.
    pub fn callback_due(&self) {
        self.any.notify_waiters();
    }

    /// Job `id` finished on another node: its waiters here look.
    pub fn finished_elsewhere(&self, id: &str) {
        if let Some(n) = self.lock().get(id).and_then(Weak::upgrade) {
            n.notify_waiters();
        }
    }

    /// Completes at the next finish here, of any job.
    pub fn any_finished(&self) -> tokio::sync::futures::Notified<'_> {
        self.any.notified()
    }

    /// Some jobs may have finished unheard: every waiter looks.
    pub fn all(&self) {
        for n in self.lock().values().filter_map(Weak::upgrade) {
            n.notify_waiters();
        }
    }

    /// Jobs someone waits for.
    pub fn waited_for(&self) -> usize {
        self.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use futures_util::FutureExt;

    use super::*;

    #[test]
    fn a_finish_wakes_that_jobs_waiters_only() {
        let jobs = FinishedJobs::default();
        let (a1, a2, b) = (jobs.watch("a"), jobs.watch("a"), jobs.watch("b"));
        let (mut fa1, mut fa2, mut fb) = (
            Box::pin(a1.notified()),
            Box::pin(a2.notified()),
            Box::pin(b.notified()),
        );
        jobs.finished("a");
        jobs.finished("nobody-waits");
        assert!((&mut fa1).now_or_never().is_some());
        assert!((&mut fa2).now_or_never().is_some());
        assert!((&mut fb).now_or_never().is_none(), "b's waiter woke for a");
        jobs.all();
        assert!(fb.now_or_never().is_some());
    }

    #[test]
    fn a_jobs_entry_goes_with_its_last_watch() {
        let jobs = FinishedJobs::default();
        let (a1, a2) = (jobs.watch("a"), jobs.watch("a"));
        assert_eq!(jobs.waited_for(), 1);
        drop(a1);
        assert_eq!(jobs.waited_for(), 1);
        drop(a2);
        assert_eq!(jobs.waited_for(), 0);
        // A new watch after that gets a fresh entry, and is woken.
        let a3 = jobs.watch("a");
        let f = a3.notified();
        jobs.finished("a");
        assert!(f.now_or_never().is_some());
    }
}
