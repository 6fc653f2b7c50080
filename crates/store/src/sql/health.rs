//! The write probe ([`WriteProbe`]): one row written and committed, and on SQLite a look at the
//! database file, which a process keeps writing after someone deleted or replaced it.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use sqlx::{Encode, Executor, IntoArguments, Type};

use super::dialect::Dialect;
use super::store::SqlStore;
use crate::clock::now_ms;
use crate::error::{Result, StoreError};
use crate::store::WriteProbe;

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
    fn check(&self) -> Result<()> {
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

#[async_trait::async_trait]
impl<D> WriteProbe for SqlStore<D>
where
    D: Dialect,
    for<'c> &'c mut D::Connection: Executor<'c, Database = D>,
    for<'q> D::Arguments<'q>: IntoArguments<'q, D>,
    for<'q> i64: Encode<'q, D> + Type<D>,
{
    async fn check_writable(&self) -> Result<()> {
        if let Some(f) = &self.file {
            f.check()?;
        }
        sqlx::query(
            "INSERT INTO store_heartbeat (id, at) VALUES (1, $1) \
             ON CONFLICT (id) DO UPDATE SET at = excluded.at",
        )
        .bind(now_ms())
        .execute(&self.db)
        .await?;
        Ok(())
    }
}
