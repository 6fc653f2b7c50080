//! The SQLite database file a store opened, to notice that it was deleted or replaced while the
//! store kept writing to it (the write probe asks, `health.rs`).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::error::{Result, StoreError};

/// The SQLite database file a store opened: its path and the file (device, inode) there then.
pub(super) struct DbFile {
    path: PathBuf,
    dev: u64,
    ino: u64,
}

impl DbFile {
    /// The file now at `path`; `None` when there is none (an in-memory database).
    pub(super) fn opened(path: &Path) -> Option<DbFile> {
        let m = std::fs::metadata(path).ok()?;
        Some(DbFile {
            path: path.to_path_buf(),
            dev: m.dev(),
            ino: m.ino(),
        })
    }

    /// Fails when the file at the path is gone or is another file.
    pub(super) fn check(&self) -> Result<()> {
        let changed = |what: &str| {
            Err(StoreError::FileChanged(format!(
                "the database file {} {what} after this process opened it: what it writes \
                 is lost; restore the file and restart",
                self.path.display()
            )))
        };
        match std::fs::metadata(&self.path) {
            Ok(m) if (m.dev(), m.ino()) == (self.dev, self.ino) => Ok(()),
            Ok(_) => changed("was replaced"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => changed("was deleted"),
            Err(e) => Err(StoreError::io(
                format!("looking at the database file {}", self.path.display()),
                e,
            )),
        }
    }
}
