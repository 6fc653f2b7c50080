//! Folder suites pinned a moment ago, by the state of their folder: each accepted submission to a
//! suite of the suites folder pins its files as an upload (`crate::service::folder_suites`), and
//! reading and hashing a folder with an autograder's data in it is most of what accepting costs
//! (a 20 MB folder: ~170 ms a submission, a class's deadline night of them). A folder whose every
//! entry is as it was (path, kind, size, mode, inode, modification and change times) is pinned
//! by the upload made from it then, while that upload is young enough that retention cannot have
//! deleted it (`folder_suites::pin` decides). This module is a leaf: the shared state holds it.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use hashlink::LruCache;

/// Folder suites remembered at most (a server's assignments).
const CAPACITY: usize = 256;

struct Pinned {
    fingerprint: String,
    upload: String,
    at: Instant,
}

pub struct PinnedFolders {
    entries: Mutex<LruCache<String, Pinned>>,
}

impl Default for PinnedFolders {
    fn default() -> Self {
        PinnedFolders {
            entries: Mutex::new(LruCache::new(CAPACITY)),
        }
    }
}

impl PinnedFolders {
    /// The upload that pinned suite `suite` when its folder was last `fingerprint`, if that
    /// was less than `max_age` ago.
    pub fn get(&self, suite: &str, fingerprint: &str, max_age: Duration) -> Option<String> {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let p = entries.get(suite)?;
        (p.fingerprint == fingerprint && p.at.elapsed() < max_age).then(|| p.upload.clone())
    }

    pub fn insert(&self, suite: &str, fingerprint: String, upload: String) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.insert(
            suite.to_string(),
            Pinned {
                fingerprint,
                upload,
                at: Instant::now(),
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pin_answers_for_its_folder_state_while_young() {
        let p = PinnedFolders::default();
        p.insert("mario", "f1".into(), "u1".into());
        let day = Duration::from_secs(86_400);
        assert_eq!(p.get("mario", "f1", day).as_deref(), Some("u1"));
        assert_eq!(
            p.get("mario", "f2", day),
            None,
            "another state of the folder"
        );
        assert_eq!(p.get("cash", "f1", day), None, "another suite");
        assert_eq!(p.get("mario", "f1", Duration::ZERO), None, "too old");
        p.insert("mario", "f2".into(), "u2".into());
        assert_eq!(p.get("mario", "f1", day), None, "replaced");
        assert_eq!(p.get("mario", "f2", day).as_deref(), Some("u2"));
    }
}
