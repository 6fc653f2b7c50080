//! The remote workers that asked this node for work lately (`corral_remote_workers`): a queue
//! whose oldest submission keeps waiting while this reads 0 has no one to judge it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a worker that asked counts as there: longer than a claim's longest wait (30 s), so
/// a worker in its long poll is counted.
pub const SEEN_WITHIN: Duration = Duration::from_secs(60);

/// Each remote worker (its token and name) and when it last asked for work.
#[derive(Default)]
pub struct WorkersSeen(Mutex<HashMap<String, Instant>>);

impl WorkersSeen {
    /// Worker `name` asks for work now.
    pub fn saw(&self, name: &str) {
        let mut seen = self.0.lock().unwrap_or_else(|e| e.into_inner());
        seen.insert(name.to_string(), Instant::now());
    }

    /// The workers that asked within [`SEEN_WITHIN`]; the others are forgotten.
    pub fn count(&self) -> usize {
        let mut seen = self.0.lock().unwrap_or_else(|e| e.into_inner());
        seen.retain(|_, at| at.elapsed() < SEEN_WITHIN);
        seen.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_worker_counts_once_until_it_stops_asking() {
        let w = WorkersSeen::default();
        assert_eq!(w.count(), 0);
        w.saw("remote:t1:a");
        w.saw("remote:t1:a");
        w.saw("remote:t2:b");
        assert_eq!(w.count(), 2);
        let long_ago = Instant::now() - SEEN_WITHIN - Duration::from_secs(1);
        w.0.lock().unwrap().insert("remote:t1:a".into(), long_ago);
        assert_eq!(w.count(), 1);
        assert!(!w.0.lock().unwrap().contains_key("remote:t1:a"));
    }
}
