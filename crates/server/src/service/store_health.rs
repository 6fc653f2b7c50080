//! Whether the store can be written, as `/health` reports it: the store's write probe, run at
//! most once per [`FRESH`] however often health is polled (it writes: a commit, an fsync), and
//! at most one at a time (the other callers wait for its answer).

use std::time::Duration;

use corral_store::{Store, StoreError};
use tokio::time::Instant;

/// How long a probe's answer is reused.
pub const FRESH: Duration = Duration::from_secs(1);
/// A probe that takes longer is a store that does not answer.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// What the last probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreState {
    Ok,
    /// The database does not answer (down, unreachable, or too busy to answer in time).
    Unreachable(String),
    /// It answers but a write fails: a full disk, a read-only file or database, the database
    /// file deleted or replaced under the server.
    Unwritable(String),
}

impl StoreState {
    pub fn is_ok(&self) -> bool {
        *self == StoreState::Ok
    }

    /// Why not, for anyone to read (`/health` is public): no paths, the details are logged.
    pub fn reason(&self) -> Option<&str> {
        match self {
            StoreState::Ok => None,
            StoreState::Unreachable(r) | StoreState::Unwritable(r) => Some(r),
        }
    }
}

/// The last probe and when it ran.
pub struct StoreHealth {
    fresh: Duration,
    last: tokio::sync::Mutex<Option<(Instant, StoreState)>>,
}

impl Default for StoreHealth {
    fn default() -> Self {
        StoreHealth::new(FRESH)
    }
}

impl StoreHealth {
    /// Reusing each answer for `fresh`.
    pub fn new(fresh: Duration) -> Self {
        StoreHealth {
            fresh,
            last: tokio::sync::Mutex::new(None),
        }
    }

    /// The store's state: the last probe's answer while fresh, else a new probe's.
    pub async fn check(&self, store: &dyn Store) -> StoreState {
        let mut last = self.last.lock().await;
        if let Some((at, state)) = &*last {
            if at.elapsed() < self.fresh {
                return state.clone();
            }
        }
        let (state, error) = probe(store).await;
        let before = last.as_ref().map(|(_, s)| s);
        if before != Some(&state) {
            match &state {
                StoreState::Ok if before.is_some() => {
                    tracing::info!("the store can be written again")
                }
                StoreState::Ok => {}
                bad => tracing::warn!(
                    reason = bad.reason(),
                    error = error.as_deref(),
                    "the store cannot be written"
                ),
            }
        }
        *last = Some((Instant::now(), state.clone()));
        state
    }
}

/// One write probe: the state, and the error in full (for the log).
async fn probe(store: &dyn Store) -> (StoreState, Option<String>) {
    let e = match tokio::time::timeout(PROBE_TIMEOUT, store.check_writable()).await {
        Ok(Ok(())) => return (StoreState::Ok, None),
        Ok(Err(e)) => e,
        Err(_) => {
            let why = format!(
                "the database did not answer a write within {} s",
                PROBE_TIMEOUT.as_secs()
            );
            return (StoreState::Unreachable(why), None);
        }
    };
    let state = if e.is_unreachable() {
        StoreState::Unreachable("the database does not answer".into())
    } else if let StoreError::FileChanged(_) = e {
        StoreState::Unwritable(
            "the database file was deleted or replaced after this server opened it: what it \
             writes is lost (restore the file and restart)"
                .into(),
        )
    } else if let Some(m) = e.database_message() {
        StoreState::Unwritable(format!("the database refused a write: {m}"))
    } else {
        StoreState::Unwritable("writing to the database failed (see the server's log)".into())
    };
    (state, Some(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A probe's answer is reused while fresh (the database file deleted meanwhile is seen only
    /// once it is stale), and a failed probe says why without the file's path.
    #[tokio::test]
    async fn answers_are_reused_while_fresh() {
        let d = tempfile::tempdir().unwrap();
        let db = d.path().join("corral.db");
        let url = format!("sqlite://{}", db.display());
        let store = corral_store::SqliteStore::open(&url, &d.path().join("blobs"))
            .await
            .unwrap();
        let health = StoreHealth::new(Duration::from_millis(300));
        assert_eq!(health.check(&store).await, StoreState::Ok);
        std::fs::rename(&db, d.path().join("aside.db")).unwrap();
        assert_eq!(health.check(&store).await, StoreState::Ok, "reused");
        tokio::time::sleep(Duration::from_millis(350)).await;
        let state = health.check(&store).await;
        assert!(matches!(state, StoreState::Unwritable(_)), "{state:?}");
        let why = state.reason().unwrap();
        assert!(why.contains("deleted or replaced"), "{why}");
        assert!(!why.contains(&d.path().display().to_string()), "{why}");
        std::fs::rename(d.path().join("aside.db"), &db).unwrap();
        tokio::time::sleep(Duration::from_millis(350)).await;
        assert_eq!(health.check(&store).await, StoreState::Ok);
    }
}
