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
        if dest.exists() {
            // Refresh the time so a concurrent garbage collection keeps it.
            let _ = std::fs::File::options()
                .append(true)
                .open(&dest)
                .and_then(|f| f.set_modified(std::time::SystemTime::now()));
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
        Ok(hash)
    }

    pub fn read(&self, hash: &str) -> Result<Vec<u8>> {
        let p = self.path(hash)?;
        std::fs::read(&p).map_err(|e| StoreError::io(format!("reading blob {hash}"), e))
    }

    /// Copies a blob to `dest` (created, not overwritten) with `mode`.
    pub fn copy_to(&self, hash: &str, dest: &Path, mode: u32) -> Result<()> {
        use std::os::unix::fs::OpenOptionsExt;
        let src = self.path(hash)?;
        let mut from = std::fs::File::open(&src)
            .map_err(|e| StoreError::io(format!("reading blob {hash}"), e))?;
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
                let old = f
                    .metadata()
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .is_some_and(|d| (d.as_secs() as i64) < older_than);
                if old {
                    match std::fs::remove_file(f.path()) {
                        Ok(()) => n += 1,
                        Err(e) => {
                            tracing::warn!(blob = %h, error = %e, "removing an unused blob failed")
                        }
                    }
                }
            }
        }
        tracing::debug!(removed = n, "blob garbage collected");
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stores_once_and_collects() {
        let d = tempfile::tempdir().unwrap();
        let b = BlobStore::open(d.path().join("blobs")).unwrap();
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
    }
}
