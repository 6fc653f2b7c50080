//! The callbacks this node is delivering: at most `total` at once, and at most `per_owner` of one
//! token's submissions, so a token whose targets never answer (a tarpit: each try waits out
//! `callback_timeout`) cannot hold every slot and delay everyone else's callbacks.

use std::collections::HashMap;
use std::future::Future;

use tokio::task::{Id, JoinError, JoinSet};

pub struct CallbackSlots {
    total: usize,
    per_owner: usize,
    tasks: JoinSet<()>,
    /// Each delivery's owner, by its task.
    owner_of: HashMap<Id, String>,
    /// Deliveries under way per owner (owners with none are not kept).
    in_flight: HashMap<String, usize>,
}

impl CallbackSlots {
    pub fn new(total: usize, per_owner: usize) -> Self {
        CallbackSlots {
            total: total.max(1),
            per_owner: per_owner.max(1),
            tasks: JoinSet::new(),
            owner_of: HashMap::new(),
            in_flight: HashMap::new(),
        }
    }

    /// Whether every slot is taken.
    pub fn full(&self) -> bool {
        self.tasks.len() >= self.total
    }

    /// Owners with as many deliveries under way as one owner may have: claims skip them.
    pub fn owners_at_limit(&self) -> Vec<String> {
        self.in_flight
            .iter()
            .filter(|(_, n)| **n >= self.per_owner)
            .map(|(o, _)| o.clone())
            .collect()
    }

    /// Runs one delivery of `owner`'s in a slot.
    pub fn spawn(&mut self, owner: &str, delivery: impl Future<Output = ()> + Send + 'static) {
        let id = self.tasks.spawn(delivery).id();
        self.owner_of.insert(id, owner.to_string());
        *self.in_flight.entry(owner.to_string()).or_default() += 1;
    }

    /// Waits until a delivery ends and frees its slot; never resolves while none is under way.
    pub async fn one_finished(&mut self) {
        match self.tasks.join_next_with_id().await {
            Some(r) => self.free(r),
            None => std::future::pending().await,
        }
    }

    /// Waits for every delivery under way.
    pub async fn finish_all(&mut self) {
        while let Some(r) = self.tasks.join_next_with_id().await {
            self.free(r);
        }
    }

    /// Frees the slots of the deliveries that ended.
    pub fn reap(&mut self) {
        while let Some(r) = self.tasks.try_join_next_with_id() {
            self.free(r);
        }
    }

    fn free(&mut self, ended: Result<(Id, ()), JoinError>) {
        let id = match ended {
            Ok((id, ())) => id,
            Err(e) => {
                if e.is_panic() {
                    tracing::error!(error = %e, "a callback delivery panicked");
                }
                e.id()
            }
        };
        let Some(owner) = self.owner_of.remove(&id) else {
            return;
        };
        if let Some(n) = self.in_flight.get_mut(&owner) {
            *n -= 1;
            if *n == 0 {
                self.in_flight.remove(&owner);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_owner_at_its_limit_is_skipped_until_one_of_its_deliveries_ends() {
        let mut slots = CallbackSlots::new(3, 2);
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        slots.spawn("a", async move {
            let _ = rx.await;
        });
        assert!(slots.owners_at_limit().is_empty());
        slots.spawn("a", std::future::pending());
        assert_eq!(slots.owners_at_limit(), vec!["a".to_string()]);
        assert!(!slots.full());
        slots.spawn("b", std::future::pending());
        assert!(slots.full());
        tx.send(()).unwrap();
        slots.one_finished().await;
        assert!(slots.owners_at_limit().is_empty(), "a has one left");
        assert!(!slots.full());
        slots.reap();
    }
}
