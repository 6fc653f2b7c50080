//! A cap on the checks one process runs at once across all its gradings (a server's queued
//! submissions and `/check` requests, a remote worker's jobs). More CPU-bound programs than
//! CPUs stretch each one's wall clock: a correct program that needs a second of CPU misses its
//! check's `timeout` when the machine is busy, and its grade depends on the load. A check waits
//! for a slot before its sandbox is leased, so its timeout starts once it has one. When both
//! wait, gradings a student watches (`/check`) and queued ones take turns: neither kind can
//! hold every slot while the other waits (strict priority for `/check` let a class clicking
//! Check stop the queue for minutes).
//!
//! Hand-written: the standard library has no semaphore, and tokio's is async while checks run
//! on plain threads.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// How often a waiting grading looks whether it was given up (a client gone frees its place
/// within this).
const GIVE_UP_POLL: Duration = Duration::from_millis(100);

/// What waits for a slot: the two kinds take turns when both wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GradingKind {
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
    interactive_waiting: usize,
    queued_waiting: usize,
    /// When both kinds wait, whose turn the next free slot is.
    queued_turn: bool,
}

impl State {
    /// The count of waiting gradings of one kind.
    fn waiting(&mut self, queued: bool) -> &mut usize {
        if queued {
            &mut self.queued_waiting
        } else {
            &mut self.interactive_waiting
        }
    }
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
                queued_waiting: 0,
                queued_turn: false,
            }),
            freed: Condvar::new(),
        })
    }

    pub fn size(&self) -> usize {
        self.size
    }

    /// Waits for a free slot, and for its kind's turn while the other kind waits too.
    pub fn take(&self, kind: GradingKind) -> Slot<'_> {
        self.take_unless(kind, &|| false)
            .expect("a wait that is never given up ends with a slot")
    }

    /// [`take`](Self::take), giving up (`None`) once `gave_up` says so — a grading whose client
    /// went away — looked at every [`GIVE_UP_POLL`]: it then neither waits on nor takes a slot,
    /// nor the turn of its kind.
    pub fn take_unless(&self, kind: GradingKind, gave_up: &dyn Fn() -> bool) -> Option<Slot<'_>> {
        let queued = kind == GradingKind::Queued;
        // The counts stay consistent between statements: a panic elsewhere cannot leave them
        // half-done, so a poisoned lock is taken as it is.
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        *st.waiting(queued) += 1;
        loop {
            let others_wait = if queued {
                st.interactive_waiting > 0
            } else {
                st.queued_waiting > 0
            };
            if st.free > 0 && (!others_wait || st.queued_turn == queued) {
                break;
            }
            if gave_up() {
                *st.waiting(queued) -= 1;
                drop(st);
                // The other kind may have been waiting for this one's turn to pass.
                self.freed.notify_all();
                return None;
            }
            st = self
                .freed
                .wait_timeout(st, GIVE_UP_POLL)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        *st.waiting(queued) -= 1;
        st.free -= 1;
        // The next slot goes to the other kind if it waits.
        st.queued_turn = !queued;
        Some(Slot(self))
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
                    let _slot = slots.take(GradingKind::Queued);
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

    /// A grading whose client left stops waiting: it takes no slot, and it is no longer counted
    /// as waiting, so it holds no turn from the other kind.
    #[test]
    fn a_wait_given_up_leaves_without_a_slot_or_a_turn() {
        let slots = GradingSlots::new(1);
        let held = slots.take(GradingKind::Queued);
        let gone = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            let waiter = s.spawn(|| {
                slots
                    .take_unless(GradingKind::Interactive, &|| gone.load(Ordering::SeqCst))
                    .is_none()
            });
            std::thread::sleep(Duration::from_millis(50));
            gone.store(true, Ordering::SeqCst);
            assert!(waiter.join().unwrap(), "it got a slot");
        });
        {
            let st = slots.state.lock().unwrap();
            assert_eq!(
                (st.interactive_waiting, st.queued_waiting, st.free),
                (0, 0, 0)
            );
        }
        drop(held);
        let _again = slots.take(GradingKind::Queued);
    }

    #[test]
    fn the_two_kinds_take_turns_while_both_wait() {
        let slots = GradingSlots::new(1);
        let order = Mutex::new(Vec::new());
        let waiting = || {
            let st = slots.state.lock().unwrap();
            (st.interactive_waiting, st.queued_waiting)
        };
        std::thread::scope(|s| {
            let held = slots.take(GradingKind::Queued);
            // Three of each wait for the one slot.
            for _ in 0..3 {
                for p in [GradingKind::Queued, GradingKind::Interactive] {
                    let (slots, order) = (&slots, &order);
                    s.spawn(move || {
                        let _slot = slots.take(p);
                        order.lock().unwrap().push(p);
                    });
                }
            }
            while waiting() != (3, 3) {
                std::thread::sleep(Duration::from_millis(1));
            }
            drop(held);
        });
        // The last slot went to a queued grading: an interactive one first, then by turns.
        use GradingKind::{Interactive as I, Queued as Q};
        assert_eq!(*order.lock().unwrap(), [I, Q, I, Q, I, Q]);
    }
}
