//! Revoked tokens reaching connections that are already open: WebSockets, `?wait` long-polls and
//! remote workers' claims authenticated once, at their start. One watch per process polls the
//! store for recent revocations (one cheap query every [`POLL`], whatever the number of
//! connections, so a token revoked on another node sharing the database is noticed too) and
//! wakes the connections of a revoked token; a revocation made on this node is noted at once.
//!
//! Tokens have no expiry in the store, so revocation is the only way a token stops working.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use corral_store::Store;
use tokio::sync::watch;

/// How often the store is asked: well within the one second a revocation may take to reach an
/// open connection.
pub const POLL: Duration = Duration::from_millis(250);

/// How far back each poll looks (seconds): revocations are recorded with the revoking node's
/// clock, so this covers clocks that differ between nodes.
const LOOKBACK_SECS: i64 = 300;

/// The tokens this process knows to be revoked, and the connections waiting to hear of one.
pub struct Revocations {
    revoked: watch::Sender<HashSet<String>>,
    /// When the last poll that succeeded was sent: every revocation made before then is known.
    polled_at: Mutex<Option<Instant>>,
}

impl Default for Revocations {
    fn default() -> Self {
        Revocations {
            revoked: watch::Sender::new(HashSet::new()),
            polled_at: Mutex::new(None),
        }
    }
}

impl Revocations {
    /// Notes revoked tokens (a revocation on this node, or what the store lists); wakes the
    /// connections of any token not known before.
    pub fn note<I: IntoIterator<Item = String>>(&self, ids: I) {
        let ids: Vec<String> = ids.into_iter().collect();
        self.revoked.send_if_modified(|set| {
            let mut added = false;
            for id in &ids {
                added |= set.insert(id.clone());
            }
            added
        });
    }

    /// Whether this token is known to be revoked (by this node, or by the last poll).
    pub fn is_revoked(&self, id: &str) -> bool {
        self.revoked.borrow().contains(id)
    }

    /// Records a poll that succeeded: revocations made before `sent` (when it was asked) are
    /// all noted.
    pub fn polled(&self, sent: Instant) {
        let mut at = self.polled_at.lock().unwrap_or_else(|e| e.into_inner());
        *at = Some(at.map_or(sent, |a| a.max(sent)));
    }

    /// Whether every revocation older than `within` (on any node) is known here: a poll sent less
    /// than `within` ago succeeded. False when nothing polls (a process without the watch).
    pub fn known_within(&self, within: Duration) -> bool {
        let at = self.polled_at.lock().unwrap_or_else(|e| e.into_inner());
        at.is_some_and(|a| a.elapsed() < within)
    }

    /// Resolves once the token with this public id is revoked (at once when it already is).
    pub async fn revoked(&self, id: &str) {
        let mut rx = self.revoked.subscribe();
        if rx.wait_for(|set| set.contains(id)).await.is_err() {
            // The state (and so the watch) is gone: nothing will be revoked any more.
            std::future::pending::<()>().await;
        }
    }
}

/// Polls the store for revocations until aborted (at shutdown).
pub fn spawn(store: Arc<dyn Store>, revocations: Arc<Revocations>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let since = corral_store::now() - LOOKBACK_SECS;
            let sent = Instant::now();
            match store.tokens_revoked_since(since).await {
                Ok(ids) => {
                    revocations.note(ids);
                    revocations.polled(sent);
                }
                Err(e) => tracing::warn!(error = %e, "polling the store for revoked tokens failed"),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_noted_revocation_wakes_its_waiters_only() {
        let r = Revocations::default();
        let waiting = tokio::time::timeout(Duration::from_millis(50), r.revoked("a"));
        assert!(waiting.await.is_err(), "woke before any revocation");
        let (a, b) = (r.revoked("a"), r.revoked("b"));
        r.note(["a".to_string()]);
        tokio::time::timeout(Duration::from_secs(1), a)
            .await
            .expect("the revoked token's waiter woke");
        assert!(tokio::time::timeout(Duration::from_millis(50), b)
            .await
            .is_err());
        // A waiter that starts after the revocation is told at once.
        tokio::time::timeout(Duration::from_millis(50), r.revoked("a"))
            .await
            .expect("already revoked");
    }
}
