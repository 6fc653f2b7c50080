//! [`SqlStore`]: what a store on either database holds.

use std::path::Path;

use super::db_file::DbFile;
use super::dialect::Dialect;
use super::pg_listener::Listener;
use crate::blobs::BlobStore;
use crate::error::{Result, StoreError};

/// A store on a SQL database `D`: its connection pool and the blob folder for file contents.
/// `SqliteStore` and `PgStore` are its two kinds.
pub struct SqlStore<D: sqlx::Database> {
    pub(super) db: sqlx::Pool<D>,
    blobs: BlobStore,
    /// PostgreSQL: notifications of new work and finished jobs from every node. SQLite: none
    /// (one process: it wakes its own workers and waiters).
    pub(super) listener: Option<Listener>,
    /// SQLite: the database file as opened, for the write probe to see it deleted or replaced.
    pub(super) file: Option<DbFile>,
}

impl<D: sqlx::Database> SqlStore<D> {
    /// A store on an open, migrated pool, with the blob folder at `blob_dir` (created when
    /// missing).
    pub(super) async fn with_pool(db: sqlx::Pool<D>, blob_dir: &Path) -> Result<Self> {
        let dir = blob_dir.to_path_buf();
        let blobs = tokio::task::spawn_blocking(move || BlobStore::open(dir))
            .await
            .map_err(|e| StoreError::Invalid(format!("blob store task: {e}")))??;
        Ok(SqlStore {
            db,
            blobs,
            listener: None,
            file: None,
        })
    }

    pub fn blobs(&self) -> &BlobStore {
        &self.blobs
    }

    /// Runs blob-folder work off the async threads.
    pub(super) async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(BlobStore) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let b = self.blobs.clone();
        tokio::task::spawn_blocking(move || f(b))
            .await
            .map_err(|e| StoreError::Invalid(format!("blob store task: {e}")))?
    }
}

impl<D: Dialect> SqlStore<D> {
    /// Begins a transaction that writes. Every transaction of the store that writes begins here,
    /// whatever its first statement: on SQLite it takes the write lock first
    /// ([`Dialect::BEGIN_WRITE`], waiting up to the busy timeout), so a read inside it never has
    /// to upgrade to a write — a deferred transaction that does fails at once with "database is
    /// locked" when another connection wrote in between.
    ///
    /// The `BEGIN` runs in a task of its own, to completion even when the caller's future is
    /// dropped (an HTTP client hanging up, a long-poll ended by a revocation): sqlx 0.8 cancelled
    /// between sending `BEGIN` and returning its `Transaction` (SQLite: its in-transaction check;
    /// PostgreSQL: before it counts the depth) gives the connection back to the pool *inside* the
    /// transaction, with nothing to end it — SQLite then refused every other writer ("database is
    /// locked") and nothing written through that connection was ever committed. Finished in the
    /// task, an unwanted `Transaction` is dropped there and rolled back.
    pub(super) async fn begin_write(&self) -> Result<sqlx::Transaction<'static, D>> {
        let db = self.db.clone();
        tokio::spawn(async move { db.begin_with(D::BEGIN_WRITE).await })
            .await
            .map_err(|e| StoreError::Invalid(format!("beginning a transaction: {e}")))?
            .map_err(Into::into)
    }
}
