//! Execution slots handed out fairly between callers. While every slot is busy, waiting requests
//! queue per caller, and a freed slot goes to the waiting callers in turn (round robin), each
//! caller's own requests in the order they came. A first-come queue let one caller with many
//! waiting `/check` requests push every other caller's single run behind all of them.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;

pub struct FairSlots {
    inner: Arc<Mutex<Inner>>,
}

/// The slots were closed (the server is shutting down).
#[derive(Debug)]
pub struct Closed;

struct Inner {
    free: usize,
    closed: bool,
    next_ticket: u64,
    /// Callers with waiting requests, in the order they get the next free slots.
    turns: VecDeque<String>,
    /// Each waiting caller's requests, oldest first; a send hands the request a slot.
    waiting: HashMap<String, VecDeque<(u64, oneshot::Sender<()>)>>,
}

fn lock(m: &Mutex<Inner>) -> MutexGuard<'_, Inner> {
    // The state stays consistent between statements: a panic elsewhere cannot leave it half-done.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A slot: freed (handed to the next waiting caller) when dropped.
pub struct Slot {
    inner: Arc<Mutex<Inner>>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        release(&self.inner);
    }
}

/// Hands a freed slot to the caller whose turn it is, else counts it free.
fn release(inner: &Mutex<Inner>) {
    let mut i = lock(inner);
    while let Some(caller) = i.turns.pop_front() {
        let Some(queue) = i.waiting.get_mut(&caller) else {
            continue;
        };
        let next = queue.pop_front();
        if queue.is_empty() {
            i.waiting.remove(&caller);
        } else {
            // Back of the line: every other waiting caller goes first.
            i.turns.push_back(caller);
        }
        // A waiter leaves the queue before its receiver goes, so a send only fails if that
        // promise is broken; then the next one gets the slot.
        if let Some((_, tx)) = next {
            if tx.send(()).is_ok() {
                return;
            }
        }
    }
    i.free += 1;
}

/// A request in the queue. Dropped before it got its slot (the client went away), it leaves
/// the queue; dropped after, the slot it will never use goes to the next.
pub struct Waiting {
    inner: Arc<Mutex<Inner>>,
    caller: String,
    ticket: u64,
    rx: oneshot::Receiver<()>,
    done: bool,
}

/// Where a waiting request stands, readable while it waits (a progress stream says it).
#[derive(Clone)]
pub struct Place {
    inner: Arc<Mutex<Inner>>,
    caller: String,
    ticket: u64,
}

impl Place {
    /// How many waiting requests get a slot before this one, if no other caller comes: its
    /// caller's `k` older requests, and of every other waiting caller as many as it gets in the
    /// `k` rounds before (one more when its turn comes first), at most as many as it has.
    /// `None` once it has its slot or left the queue.
    pub fn ahead(&self) -> Option<usize> {
        let i = lock(&self.inner);
        let k = i
            .waiting
            .get(&self.caller)?
            .iter()
            .position(|(t, _)| *t == self.ticket)?;
        let mine = i.turns.iter().position(|c| *c == self.caller)?;
        let others: usize = i
            .turns
            .iter()
            .enumerate()
            .filter(|(_, c)| **c != self.caller)
            .map(|(at, c)| {
                let has = i.waiting.get(c).map_or(0, VecDeque::len);
                has.min(k + usize::from(at < mine))
            })
            .sum();
        Some(k + others)
    }
}

impl Waiting {
    /// Where this request stands while it waits.
    pub fn place(&self) -> Place {
        Place {
            inner: self.inner.clone(),
            caller: self.caller.clone(),
            ticket: self.ticket,
        }
    }

    /// Waits for this request's turn.
    pub async fn granted(mut self) -> Result<Slot, Closed> {
        let r = (&mut self.rx).await;
        self.done = true;
        match r {
            Ok(()) => Ok(Slot {
                inner: self.inner.clone(),
            }),
            // The queue was cleared by `close`.
            Err(_) => Err(Closed),
        }
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut i = lock(&self.inner);
        if let Some(queue) = i.waiting.get_mut(&self.caller) {
            if let Some(at) = queue.iter().position(|(t, _)| *t == self.ticket) {
                queue.remove(at);
                if queue.is_empty() {
                    i.waiting.remove(&self.caller);
                    i.turns.retain(|c| *c != self.caller);
                }
                return;
            }
        }
        drop(i);
        if self.rx.try_recv().is_ok() {
            release(&self.inner);
        }
    }
}

/// A slot at once, or a place in the queue.
pub enum Ticket {
    Now(Slot),
    Queued(Waiting),
}

impl FairSlots {
    pub fn new(slots: usize) -> Self {
        FairSlots {
            inner: Arc::new(Mutex::new(Inner {
                free: slots,
                closed: false,
                next_ticket: 0,
                turns: VecDeque::new(),
                waiting: HashMap::new(),
            })),
        }
    }

    /// A free slot for `caller`, or its place in the queue (taken now, so the order is the
    /// order of the calls).
    pub fn ticket(&self, caller: &str) -> Result<Ticket, Closed> {
        let mut i = lock(&self.inner);
        if i.closed {
            return Err(Closed);
        }
        if i.free > 0 && i.turns.is_empty() {
            i.free -= 1;
            return Ok(Ticket::Now(Slot {
                inner: self.inner.clone(),
            }));
        }
        let ticket = i.next_ticket;
        i.next_ticket += 1;
        let (tx, rx) = oneshot::channel();
        let queue = i.waiting.entry(caller.to_string()).or_default();
        queue.push_back((ticket, tx));
        if queue.len() == 1 {
            i.turns.push_back(caller.to_string());
        }
        Ok(Ticket::Queued(Waiting {
            inner: self.inner.clone(),
            caller: caller.to_string(),
            ticket,
            rx,
            done: false,
        }))
    }

    /// A slot for `caller`, once it is its turn.
    pub async fn acquire(&self, caller: &str) -> Result<Slot, Closed> {
        match self.ticket(caller)? {
            Ticket::Now(slot) => Ok(slot),
            Ticket::Queued(w) => w.granted().await,
        }
    }

    /// Slots free now (a hint: one may be taken or freed right after).
    pub fn available(&self) -> usize {
        lock(&self.inner).free
    }

    /// Refuses every waiting and future request; slots in use stay theirs until dropped.
    pub fn close(&self) {
        let mut i = lock(&self.inner);
        i.closed = true;
        i.turns.clear();
        // Dropping the senders tells every waiter.
        i.waiting.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queued(s: &FairSlots, caller: &str) -> Waiting {
        match s.ticket(caller).unwrap() {
            Ticket::Queued(w) => w,
            Ticket::Now(_) => panic!("{caller} got a slot while all were busy"),
        }
    }

    fn now(s: &FairSlots, caller: &str) -> Slot {
        match s.ticket(caller).unwrap() {
            Ticket::Now(slot) => slot,
            Ticket::Queued(_) => panic!("{caller} had to wait for a free slot"),
        }
    }

    /// Whether `w` still waits (else it was handed a slot).
    fn in_queue(s: &FairSlots, w: &Waiting) -> bool {
        lock(&s.inner)
            .waiting
            .get(&w.caller)
            .is_some_and(|q| q.iter().any(|(t, _)| *t == w.ticket))
    }

    #[test]
    fn callers_take_turns_and_each_keeps_its_own_order() {
        let s = FairSlots::new(1);
        let held = now(&s, "a");
        // a queues three requests before b and c queue theirs.
        let mut waiting: Vec<(&str, Waiting)> = ["a1", "a2", "a3", "b1", "c1", "b2"]
            .into_iter()
            .map(|name| (name, queued(&s, &name[..1])))
            .collect();
        // Each knows how many go before it.
        let ahead: Vec<(&str, usize)> = waiting
            .iter()
            .map(|(name, w)| (*name, w.place().ahead().unwrap()))
            .collect();
        assert_eq!(
            ahead,
            [
                ("a1", 0),
                ("a2", 3),
                ("a3", 5),
                ("b1", 1),
                ("c1", 2),
                ("b2", 4)
            ]
        );
        let places: Vec<Place> = waiting.iter().map(|(_, w)| w.place()).collect();
        let mut order = Vec::new();
        drop(held);
        while !waiting.is_empty() {
            let granted: Vec<usize> = (0..waiting.len())
                .filter(|&i| !in_queue(&s, &waiting[i].1))
                .collect();
            assert_eq!(granted.len(), 1, "one slot, one request served at a time");
            let (name, w) = waiting.remove(granted[0]);
            order.push(name);
            // The rest move up by one, and still know their place exactly.
            let rest = &["a1", "b1", "c1", "a2", "b2", "a3"][order.len()..];
            for (name, w) in &waiting {
                let at = rest.iter().position(|n| n == name);
                assert_eq!(w.place().ahead(), at, "{name} after {order:?}");
            }
            // That request runs, then frees its slot.
            let slot = futures_util::FutureExt::now_or_never(w.granted())
                .expect("granted without waiting")
                .unwrap();
            drop(slot);
        }
        assert_eq!(order, ["a1", "b1", "c1", "a2", "b2", "a3"]);
        assert!(places.iter().all(|p| p.ahead().is_none()), "none waits");
        assert_eq!(s.available(), 1);
    }

    #[test]
    fn a_request_that_leaves_the_queue_is_skipped_and_a_granted_one_passes_its_slot_on() {
        let s = FairSlots::new(1);
        let held = now(&s, "a");
        let gone = queued(&s, "a");
        let next = queued(&s, "b");
        let last = queued(&s, "c");
        drop(gone);
        drop(held);
        assert!(!in_queue(&s, &next), "b is next once a's request left");
        assert!(in_queue(&s, &last));
        // b was handed the slot but went away without using it: c gets it.
        drop(next);
        assert!(!in_queue(&s, &last));
        assert_eq!(s.available(), 0);
        drop(last);
        assert_eq!(s.available(), 1);
        let i = lock(&s.inner);
        assert!(i.waiting.is_empty() && i.turns.is_empty());
    }

    #[tokio::test]
    async fn close_refuses_waiting_and_new_requests() {
        let s = FairSlots::new(1);
        let held = s.acquire("a").await.unwrap();
        let w = queued(&s, "b");
        s.close();
        assert!(w.granted().await.is_err());
        assert!(s.ticket("c").is_err());
        drop(held);
    }
}
