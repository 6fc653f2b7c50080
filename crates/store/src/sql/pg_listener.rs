//! PostgreSQL's notifications between nodes: one `LISTEN` connection per process, held for the
//! life of the store and reconnected when it drops. It hears two channels: `corral_work` (new
//! work: wakes this process's waiting workers) and `corral_finished` (a job finished on some
//! node, its id as payload: wakes the requests waiting for that job here).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::postgres::PgListener;
use sqlx::PgPool;
use tokio::sync::broadcast;

use crate::jobs::FinishNotice;

/// The channel new work is announced on.
pub const WORK_CHANNEL: &str = "corral_work";
/// The channel finished jobs are announced on (payload: the job's id).
pub const FINISHED_CHANNEL: &str = "corral_finished";

/// Finish notices a slow subscriber may fall behind by before it is told it missed some.
const FINISHED_BACKLOG: usize = 1024;

pub struct Listener {
    /// Woken on every `corral_work` notification.
    work: Arc<tokio::sync::Notify>,
    finished: broadcast::Sender<FinishNotice>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Listener {
    /// Starts listening on a connection of its own from `db`.
    pub fn start(db: PgPool) -> Listener {
        let work = Arc::new(tokio::sync::Notify::new());
        let (finished, _) = broadcast::channel(FINISHED_BACKLOG);
        let task = tokio::spawn(listen(db, work.clone(), finished.clone()));
        Listener {
            work,
            finished,
            task: Mutex::new(Some(task)),
        }
    }

    /// Waits for a notification of new work or `timeout`; true when a notification came.
    pub async fn wait(&self, timeout: Duration) -> bool {
        let notified = self.work.notified();
        tokio::time::timeout(timeout, notified).await.is_ok()
    }

    /// Every node's finished jobs from now on.
    pub fn finished(&self) -> broadcast::Receiver<FinishNotice> {
        self.finished.subscribe()
    }

    /// Stops listening (the store is closing).
    pub fn stop(&self) {
        if let Some(t) = self.task.lock().ok().and_then(|mut g| g.take()) {
            t.abort();
        }
    }
}

async fn listen(
    db: PgPool,
    work: Arc<tokio::sync::Notify>,
    finished: broadcast::Sender<FinishNotice>,
) {
    loop {
        let mut l = match PgListener::connect_with(&db).await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, "LISTEN connection failed; retrying in 1 s (workers poll meanwhile)");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        if let Err(e) = l.listen_all([WORK_CHANNEL, FINISHED_CHANNEL]).await {
            tracing::warn!(error = %e, "LISTEN {WORK_CHANNEL}, {FINISHED_CHANNEL} failed; retrying in 1 s");
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        // Whatever finished while no connection listened is unknown.
        let _ = finished.send(FinishNotice::Missed);
        loop {
            match l.recv().await {
                Ok(n) if n.channel() == FINISHED_CHANNEL => {
                    // No subscriber yet (nobody waits): nothing to tell.
                    let _ = finished.send(FinishNotice::Job(n.payload().to_string()));
                }
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
