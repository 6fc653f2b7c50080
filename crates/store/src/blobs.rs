//! Content-addressed file contents: `ROOT/ab/abcdef…` named by sha256. Written to a temporary name
//! and renamed into place, so a blob is either complete or absent.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Result, StoreError};
use crate::ids::sha256_hex;

#[derive(Debug, Clone)]
pub struct BlobStore {
    root: PathBuf,
}

fn is_hash(h: &str) -> bool {
    h.len() == 64
        && h.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl BlobStore {
    /// Uses (and creates) `root`.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self> {
        let root = root.into();
        std::fs::create_dir_all(root.join("tmp"))
            .map_err(|e| StoreError::io(format!("creating {}", root.display()), e))?;
        Ok(BlobStore { root })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn path(&self, hash: &str) -> Result<PathBuf> {
        if !is_hash(hash) {
            return Err(StoreError::Corrupt(format!("bad blob name {hash:?}")));
        }
        Ok(self.root.join(&hash[..2]).join(hash))
    }

    /// Stores `data` (once, whatever how many uploads hold it) and returns its sha256.
    pub fn put(&self, data: &[u8]) -> Result<String> {
        let hash = sha256_hex(data);
        let dest = self.path(&hash)?;
        if dest.exists() && refresh(&dest) {
            return Ok(hash);
        }
        let dir = dest.parent().expect("blob paths have a parent");
        std::fs::create_dir_all(dir)
            .map_err(|e| StoreError::io(format!("creating {}", dir.display()), e))?;
        let mut tmp = tempfile::NamedTempFile::new_in(self.root.join("tmp"))
            .map_err(|e| StoreError::io("creating a temporary blob", e))?;
        tmp.write_all(data)
            .and_then(|_| tmp.as_file().sync_data())
            .map_err(|e| StoreError::io("writing a blob", e))?;
        tmp.persist(&dest)
            .map_err(|e| StoreError::io(format!("storing {}", dest.display()), e.error))?;
        // The rename is durable only once its folder is: the upload's row is committed after
        // this returns, and after a power loss it must not name a blob that was never there.
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| StoreError::io(format!("syncing {}", dir.display()), e))?;
        Ok(hash)
    }

    pub fn read(&self, hash: &str) -> Result<Vec<u8>> {
        let p = self.path(hash)?;
        std::fs::read(&p).map_err(|e| self.read_error(hash, &p, e))
    }

    /// A blob that could not be opened: [`StoreError::BlobMissing`] when it is not there.
    fn read_error(&self, hash: &str, path: &Path, e: std::io::Error) -> StoreError {
        if e.kind() != std::io::ErrorKind::NotFound {
            return StoreError::io(format!("reading blob {hash}"), e);
        }
        tracing::error!(blob = %hash, path = %path.display(), "a blob the store names is missing");
        StoreError::BlobMissing(format!(
            "blob {hash} is missing from the server's file store"
        ))
    }

    /// Copies a blob to `dest` (created, not overwritten) with `mode`.
    pub fn copy_to(&self, hash: &str, dest: &Path, mode: u32) -> Result<()> {
        use std::os::unix::fs::OpenOptionsExt;
        let src = self.path(hash)?;
        let mut from = std::fs::File::open(&src).map_err(|e| self.read_error(hash, &src, e))?;
        let mut to = std::fs::File::options()
            .write(true)
            .create_new(true)
            .mode(mode & 0o777)
            .custom_flags(libc::O_NOFOLLOW)
            .open(dest)
            .map_err(|e| StoreError::io(format!("writing {}", dest.display()), e))?;
        std::io::copy(&mut from, &mut to)
            .map_err(|e| StoreError::io(format!("writing {}", dest.display()), e))?;
        Ok(())
    }

    /// Deletes every blob not in `keep` whose file is older than `older_than` (seconds since the
    /// epoch): blobs written or refreshed since then may belong to an upload being recorded.
    pub fn collect_garbage(
        &self,
        keep: &std::collections::HashSet<String>,
        older_than: i64,
    ) -> Result<u64> {
        let mut n = 0;
        let rd = std::fs::read_dir(&self.root)
            .map_err(|e| StoreError::io(format!("listing {}", self.root.display()), e))?;
        for shard in rd.flatten() {
            let name = shard.file_name();
            let name = name.to_string_lossy();
            if name.len() != 2 || !shard.path().is_dir() {
                continue;
            }
            let Ok(files) = std::fs::read_dir(shard.path()) else {
                continue;
            };
            for f in files.flatten() {
                let h = f.file_name().to_string_lossy().into_owned();
                if !is_hash(&h) || keep.contains(&h) {
                    continue;
                }
                if older(&f.path(), older_than) {
                    match self.retire(&f.path(), &h, older_than) {
                        Ok(true) => n += 1,
                        Ok(false) => {}
                        Err(e) => {
                            tracing::warn!(blob = %h, error = %e, "removing an unused blob failed")
                        }
                    }
                }
            }
        }
        self.sweep_trash();
        tracing::debug!(removed = n, "blob garbage collected");
        Ok(n)
    }

    /// Removes one blob that looked unused and old, unless a [`put`](Self::put) refreshed it
    /// since the look. The blob is first moved aside (atomically), then its time read again: a
    /// `put` that refreshed it before the move, or through a descriptor it opened before the
    /// move, shows here and the blob goes back (unless a new copy is already in place); a `put`
    /// that comes after the move finds no blob and writes it anew. Removing it where it lies
    /// would lose a blob a `put` had just refreshed and was about to record. True when removed.
    fn retire(&self, path: &Path, hash: &str, older_than: i64) -> std::io::Result<bool> {
        let aside = self.root.join("tmp").join(format!(
            "{TRASH}{}-{hash}-{}",
            crate::clock::now(),
            crate::ids::random_hex(4)
        ));
        match std::fs::rename(path, &aside) {
            Ok(()) => {}
            // Another collection (a node sharing this folder) took it first.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e),
        }
        if !older(&aside, older_than) {
            // `link` never replaces: a copy a `put` wrote meanwhile stays as it is.
            match std::fs::hard_link(&aside, path) {
                Ok(()) => std::fs::remove_file(&aside)?,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    std::fs::remove_file(&aside)?
                }
                // A file system without hard links: moved back unless a copy is there by now
                // (the same content, so a rare overwrite in between loses nothing).
                Err(_) if !path.exists() => std::fs::rename(&aside, path)?,
                Err(_) => std::fs::remove_file(&aside)?,
            }
            return Ok(false);
        }
        std::fs::remove_file(&aside)?;
        Ok(true)
    }

    /// Blobs moved aside by a collection that stopped before it finished (a crash), an hour on:
    /// never one a running collection may still give back.
    fn sweep_trash(&self) {
        let Ok(rd) = std::fs::read_dir(self.root.join("tmp")) else {
            return;
        };
        let stale_before = crate::clock::now() - 3600;
        for e in rd.flatten() {
            let name = e.file_name();
            let moved_at = name
                .to_str()
                .and_then(|n| n.strip_prefix(TRASH))
                .and_then(|n| n.split('-').next())
                .and_then(|t| t.parse::<i64>().ok());
            if moved_at.is_some_and(|t| t < stale_before) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

/// The prefix of a blob moved aside by [`BlobStore::retire`], in `ROOT/tmp`.
const TRASH: &str = "gc-";

/// Whether the file at `path` was last modified before `older_than` (seconds since the epoch).
fn older(path: &Path, older_than: i64) -> bool {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .is_some_and(|d| (d.as_secs() as i64) < older_than)
}

/// Marks an existing blob as just used, so that a collection running now keeps it; false when it
/// is no longer there afterwards (a collection moved it aside): the caller writes it anew.
fn refresh(dest: &Path) -> bool {
    let touched = std::fs::File::options()
        .append(true)
        .open(dest)
        .and_then(|f| f.set_modified(std::time::SystemTime::now()));
    touched.is_ok() && dest.exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A blob store in a folder of its own (kept while the first value lives).
    fn store() -> (tempfile::TempDir, BlobStore) {
        let d = tempfile::tempdir().unwrap();
        let b = BlobStore::open(d.path().join("blobs")).unwrap();
        (d, b)
    }

    #[test]
    fn stores_once_and_collects() {
        let (d, b) = store();
        let h1 = b.put(b"hello").unwrap();
        let h2 = b.put(b"hello").unwrap();
        assert_eq!(h1, h2);
        assert_eq!(b.read(&h1).unwrap(), b"hello");
        let out = d.path().join("x");
        b.copy_to(&h1, &out, 0o755).unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), b"hello");
        assert!(b.copy_to(&h1, &out, 0o644).is_err(), "never overwrites");
        assert!(b.read("../../etc/passwd").is_err());
        let keep = std::collections::HashSet::new();
        assert_eq!(
            b.collect_garbage(&keep, 0).unwrap(),
            0,
            "new blobs are kept"
        );
        assert_eq!(b.collect_garbage(&keep, i64::MAX).unwrap(), 1);
        assert!(b.read(&h1).is_err());
        assert_eq!(trash(&b), 0, "nothing is left aside");
    }

    fn trash(b: &BlobStore) -> usize {
        std::fs::read_dir(b.root().join("tmp"))
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(TRASH))
            .count()
    }

    fn age(b: &BlobStore, hash: &str, secs: u64) {
        let then = std::time::SystemTime::now() - std::time::Duration::from_secs(secs);
        std::fs::File::options()
            .append(true)
            .open(b.path(hash).unwrap())
            .and_then(|f| f.set_modified(then))
            .unwrap();
    }

    #[test]
    fn a_blob_refreshed_after_the_look_is_given_back() {
        let (_d, b) = store();
        let h = b.put(b"shared starter code").unwrap();
        let path = b.path(&h).unwrap();
        // The collection looked when the blob was old; a `put` refreshed it before the move.
        let cutoff = crate::clock::now() - 60;
        assert!(!b.retire(&path, &h, cutoff).unwrap());
        assert_eq!(b.read(&h).unwrap(), b"shared starter code");
        // Still old at the move: removed.
        age(&b, &h, 3600);
        assert!(b.retire(&path, &h, cutoff).unwrap());
        assert!(b.read(&h).is_err());
        assert_eq!(trash(&b), 0);
        // Gone already (another node's collection took it): nothing to do.
        assert!(!b.retire(&path, &h, cutoff).unwrap());
    }

    #[test]
    fn a_put_after_the_blob_was_moved_aside_writes_it_again() {
        let (_d, b) = store();
        let h = b.put(b"x").unwrap();
        let path = b.path(&h).unwrap();
        std::fs::rename(&path, b.root().join("tmp").join("elsewhere")).unwrap();
        assert!(!refresh(&path), "a refresh says the blob is not there");
        assert_eq!(b.put(b"x").unwrap(), h);
        assert_eq!(b.read(&h).unwrap(), b"x");
    }

    #[test]
    fn stale_blobs_moved_aside_are_swept_fresh_ones_kept() {
        let (_d, b) = store();
        let tmp = b.root().join("tmp");
        let now = crate::clock::now();
        std::fs::write(tmp.join(format!("{TRASH}{}-abc-1", now - 7200)), b"").unwrap();
        std::fs::write(tmp.join(format!("{TRASH}{now}-abc-2")), b"").unwrap();
        std::fs::write(tmp.join("upload-in-progress"), b"").unwrap();
        b.collect_garbage(&std::collections::HashSet::new(), now - 60)
            .unwrap();
        let mut left: Vec<String> = std::fs::read_dir(&tmp)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [format!("{TRASH}{now}-abc-2"), "upload-in-progress".into()]
        );
    }

    /// A collection racing uploads of the same content: after `put` returns, the blob survives
    /// every collection (here: the one under way and the next whole one), as the upload that
    /// holds it is recorded only then. Removing a blob where it lay, after looking at its time,
    /// lost it whenever a `put` refreshed it between the look and the removal.
    #[test]
    fn collections_racing_puts_never_lose_a_refreshed_blob() {
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        use std::sync::Arc;
        let (_d, b) = store();
        let passes = Arc::new(AtomicU64::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let collector = {
            let (b, passes, done) = (b.clone(), passes.clone(), done.clone());
            std::thread::spawn(move || {
                let keep = std::collections::HashSet::new();
                while !done.load(Ordering::SeqCst) {
                    b.collect_garbage(&keep, crate::clock::now() - 60).unwrap();
                    passes.fetch_add(1, Ordering::SeqCst);
                }
            })
        };
        let mut lost = 0;
        for i in 0..1500 {
            let h = b
                .put(b"the same starter file every student uploads")
                .unwrap();
            let seen = passes.load(Ordering::SeqCst);
            while passes.load(Ordering::SeqCst) < seen + 2 {
                std::hint::spin_loop();
            }
            if b.read(&h).is_err() {
                lost += 1;
                continue;
            }
            // Time passes: the blob is old again for the next round (every other round, so
            // that some `put`s also find no blob at all).
            if i % 2 == 0 {
                age(&b, &h, 3600);
            }
        }
        done.store(true, Ordering::SeqCst);
        collector.join().unwrap();
        assert_eq!(lost, 0, "blobs lost right after a put of them");
    }
}
