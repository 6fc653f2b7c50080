//! A cap on the checks one process runs at once across all its gradings (a server's queued
//! submissions and `/check` requests, a remote worker's jobs). More CPU-bound programs than
//! CPUs stretch each one's wall clock: a correct program that needs a second of CPU misses its
//! check's `timeout` when the machine is busy, and its grade depends on the load. A check waits
//! for a slot before its sandbox is leased, so its timeout starts once it has one. Gradings a
//! student watches (`/check`) are served before queued ones.
//!
//! Hand-written: the standard library has no semaphore, and tokio's is async while checks run
//! on plain threads.

use std::sync::{Arc, Condvar, Mutex};

/// Who waits for a slot: a grading someone watches goes first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    /// A `/check` request: its student waits for the answer.
    Interactive,
    /// A queued submission.
    Queued,
}

/// Slots for checks running at once; see the module's documentation.
#[derive(Debug)]
pub struct GradingSlots {
    size: usize,
    state: Mutex<State>,
    freed: Condvar,
}

#[derive(Debug)]
struct State {
    free: usize,
    /// Interactive gradings waiting: queued ones let them pass.
    interactive_waiting: usize,
}

/// A slot held; given back when dropped.
#[derive(Debug)]
pub struct Slot<'a>(&'a GradingSlots);

impl GradingSlots {
    /// `size` slots (at least one).
    pub fn new(size: usize) -> Arc<Self> {
        let size = size.max(1);
        Arc::new(GradingSlots {
            size,
            state: Mutex::new(State {
                free: size,
                interactive_waiting: 0,
            }),
            freed: Condvar::new(),
        })
    }

    pub fn size(&self) -> usize {
        self.size
    }

    /// Waits for a free slot: an interactive grading for any, a queued one also until no
    /// interactive grading waits.
    pub fn take(&self, priority: Priority) -> Slot<'_> {
        // The counts stay consistent between statements: a panic elsewhere cannot leave them
        // half-done, so a poisoned lock is taken as it is.
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match priority {
            Priority::Interactive => {
                st.interactive_waiting += 1;
                while st.free == 0 {
                    st = self.freed.wait(st).unwrap_or_else(|p| p.into_inner());
                }
                st.interactive_waiting -= 1;
            }
            Priority::Queued => {
                while st.free == 0 || st.interactive_waiting > 0 {
                    st = self.freed.wait(st).unwrap_or_else(|p| p.into_inner());
                }
            }
        }
        st.free -= 1;
        Slot(self)
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let mut st = self.0.state.lock().unwrap_or_else(|p| p.into_inner());
        st.free += 1;
        drop(st);
        // Every waiter looks again: an interactive one may pass a queued one.
        self.0.freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    #[test]
    fn at_most_size_at_once() {
        let slots = GradingSlots::new(2);
        let (now, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    let _slot = slots.take(Priority::Queued);
                    let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(n, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(20));
                    now.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        assert_eq!(most.load(Ordering::SeqCst), 2);
        assert_eq!(GradingSlots::new(0).size(), 1);
    }

    #[test]
    fn an_interactive_grading_passes_queued_ones() {
        let slots = GradingSlots::new(1);
        let order = Mutex::new(Vec::new());
        std::thread::scope(|s| {
            let held = slots.take(Priority::Queued);
            let interactive_waiting = || slots.state.lock().unwrap().interactive_waiting;
            s.spawn(|| {
                let _slot = slots.take(Priority::Queued);
                order.lock().unwrap().push("queued");
            });
            // The queued one waits first; then an interactive one comes.
            std::thread::sleep(Duration::from_millis(50));
            s.spawn(|| {
                let _slot = slots.take(Priority::Interactive);
                order.lock().unwrap().push("interactive");
            });
            while interactive_waiting() == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
            drop(held);
        });
        assert_eq!(*order.lock().unwrap(), ["interactive", "queued"]);
    }
}
