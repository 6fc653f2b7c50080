//! Keeping a job's lease while it is judged: a task renews it every so often until dropped, and
//! notes when the server (or store) says the lease is gone.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Keeps renewing a lease until dropped; `lost` is set when the store says it is gone.
pub struct Heartbeat {
    task: tokio::task::JoinHandle<()>,
    pub lost: Arc<AtomicBool>,
}

impl Heartbeat {
    pub fn start<F, Fut>(every: Duration, mut beat: F) -> Heartbeat
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Option<bool>> + Send,
    {
        let lost = Arc::new(AtomicBool::new(false));
        let lost2 = lost.clone();
        let task = tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                // None: the store could not be asked (try again next time).
                if beat().await == Some(false) {
                    lost2.store(true, Ordering::SeqCst);
                    break;
                }
            }
        });
        Heartbeat { task, lost }
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.task.abort();
    }
}
