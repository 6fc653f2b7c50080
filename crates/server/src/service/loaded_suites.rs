//! Suites as loaded when submissions are accepted, kept by the content of their files: accepting
//! a submission reads its suite for the images it names and, with a `runtime`, for what it
//! hides — and loading a check50 problem compiles its Python in a process of its own. A class
//! submitting to one assignment loaded the same files each time: ~80 ms of CPU per accepted
//! submission to CS50's mario on this 2-core host, 9 s for a batch of 100.
//!
//! The key is the files themselves (each path, mode and SHA-256, and the request's image),
//! never the suite's id: a folder suite may be stored as a new upload per submission, and an edit
//! to it or a suite registered again is new content, so nothing loaded from an older version
//! answers for it. Loading and the lookup are [`crate::service::suites::loaded`]'s (this
//! module is a leaf: the shared state holds it).
//! A suite that fails to load is not kept (each acceptance tries again and says why).
//! The loaded suite is used only for what it names; its paths point into a scratch folder that
//! is gone (judging loads the job's own copy).

use std::sync::{Arc, Mutex};

use corral_checks::Suite;
use corral_store::UploadFile;
use hashlink::LruCache;

/// Suites kept at most: many assignments at once on one server, each a few kilobytes loaded.
const CAPACITY: usize = 64;

pub struct LoadedSuites {
    entries: Mutex<LruCache<String, Arc<Suite>>>,
}

impl Default for LoadedSuites {
    fn default() -> Self {
        LoadedSuites {
            entries: Mutex::new(LruCache::new(CAPACITY)),
        }
    }
}

impl LoadedSuites {
    pub fn get(&self, key: &str) -> Option<Arc<Suite>> {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.get(key).cloned()
    }

    pub fn insert(&self, key: String, suite: Arc<Suite>) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.insert(key, suite);
    }
}

/// What identifies a loaded suite: its files' paths, modes and contents (in path order), and
/// the image it is loaded for (a check50 problem is compiled by that image's Python, not now).
pub fn content_key(image: Option<&str>, files: &[UploadFile]) -> String {
    let mut files: Vec<&UploadFile> = files.iter().collect();
    files.sort_by(|a, b| a.path.cmp(&b.path));
    // Paths hold no control characters (`validate_path`) and hashes are hex: `\0` and `\n`
    // cannot occur inside a field, so two different lists never make one key.
    let mut key = format!("{}\n", image.map_or("-", |i| i));
    for f in files {
        key.push_str(&format!("{}\0{:o}\0{}\n", f.path, f.mode, f.sha256));
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, mode: u32, sha256: &str) -> UploadFile {
        UploadFile {
            path: path.into(),
            sha256: sha256.into(),
            size: 1,
            mode,
        }
    }

    #[test]
    fn the_key_is_the_files_and_the_image_in_any_order() {
        let a = [
            file("suite.yaml", 0o644, "aa"),
            file("t/1.txt", 0o644, "bb"),
        ];
        let b = [
            file("t/1.txt", 0o644, "bb"),
            file("suite.yaml", 0o644, "aa"),
        ];
        assert_eq!(content_key(None, &a), content_key(None, &b));
        let differ = [
            content_key(Some("py:1"), &a),
            content_key(None, &[file("suite.yaml", 0o644, "aa")]),
            content_key(None, &[a[0].clone(), file("t/1.txt", 0o755, "bb")]),
            content_key(None, &[a[0].clone(), file("t/1.txt", 0o644, "cc")]),
            content_key(None, &[a[0].clone(), file("t/2.txt", 0o644, "bb")]),
        ];
        for (i, k) in differ.iter().enumerate() {
            assert_ne!(k, &content_key(None, &a), "variant {i}");
        }
    }

    #[test]
    fn at_most_capacity_suites_are_kept_the_least_recently_used_go() {
        let cache = LoadedSuites::default();
        let text = "name: x\nchecks:\n  - id: a\n    steps: [{run: \"true\"}]\n";
        let suite = Arc::new(Suite::parse(text, "x.yaml".as_ref(), false).unwrap());
        for i in 0..=CAPACITY {
            cache.insert(format!("k{i}"), suite.clone());
            if i == 0 {
                continue;
            }
            // k0 is used again each time, so it stays; k1 is the one pushed out.
            assert!(cache.get("k0").is_some());
        }
        assert!(cache.get("k1").is_none());
        assert!(cache.get(&format!("k{CAPACITY}")).is_some());
    }
}
