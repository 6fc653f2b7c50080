//! PostgreSQL's wake-up for waiting workers: one `LISTEN corral_work` connection per process,
//! held for the life of the store and reconnected when it drops.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::postgres::PgListener;
use sqlx::PgPool;

/// The channel new work is announced on.
pub const WORK_CHANNEL: &str = "corral_work";

pub struct WorkListener {
    /// Woken on every `corral_work` notification.
    work: Arc<tokio::sync::Notify>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl WorkListener {
    /// Starts listening on a connection of its own from `db`.
    pub fn start(db: PgPool) -> WorkListener {
        let work = Arc::new(tokio::sync::Notify::new());
        let task = tokio::spawn(listen(db, work.clone()));
        WorkListener {
            work,
            task: Mutex::new(Some(task)),
        }
    }

    /// Waits for a notification or `timeout`; true when a notification came.
    pub async fn wait(&self, timeout: Duration) -> bool {
        let notified = self.work.notified();
        tokio::time::timeout(timeout, notified).await.is_ok()
    }

    /// Stops listening (the store is closing).
    pub fn stop(&self) {
        if let Some(t) = self.task.lock().ok().and_then(|mut g| g.take()) {
            t.abort();
        }
    }
}

async fn listen(db: PgPool, work: Arc<tokio::sync::Notify>) {
    loop {
        let mut l = match PgListener::connect_with(&db).await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, "LISTEN connection failed; retrying in 1 s (workers poll meanwhile)");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        if let Err(e) = l.listen(WORK_CHANNEL).await {
            tracing::warn!(error = %e, "LISTEN {WORK_CHANNEL} failed; retrying in 1 s");
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        loop {
            match l.recv().await {
                Ok(_) => work.notify_waiters(),
                Err(e) => {
                    tracing::info!(error = %e, "the LISTEN connection dropped; reconnecting");
                    // Anything missed while reconnecting is found by the workers' polling.
                    work.notify_waiters();
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    break;
                }
            }
        }
    }
}
