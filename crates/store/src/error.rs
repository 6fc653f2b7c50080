//! The store's one error type.

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
    #[error("database migration: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Invalid(String),
    #[error("not found: {0}")]
    NotFound(String),
    #[error("conflict: {0}")]
    Conflict(String),
    #[error("stored data is inconsistent: {0}")]
    Corrupt(String),
    /// The SQLite database file was deleted or replaced after the store opened it: what is
    /// written goes to a file no one will open again.
    #[error("{0}")]
    FileChanged(String),
    /// The database holds a migration newer than this build's newest: a newer corral upgraded it.
    #[error("{0}")]
    SchemaTooNew(String),
    /// A file the database names is not in the blob folder: its contents are lost (a restore
    /// that missed it, a file deleted by hand). Not the host's passing trouble: trying again
    /// never finds it. The message names the file, never the server's paths.
    #[error("{0}")]
    BlobMissing(String),
}

impl StoreError {
    pub fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        StoreError::Io {
            what: what.into(),
            source,
        }
    }
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

impl StoreError {
    /// The database's own message when it refused a statement ("database or disk is full",
    /// "attempt to write a readonly database", …); `None` for any other error.
    pub fn database_message(&self) -> Option<&str> {
        match self {
            StoreError::Db(e) => e.as_database_error().map(|d| d.message()),
            _ => None,
        }
    }

    /// The storage is full: SQLite's SQLITE_FULL (its disk, or its `max_page_count`),
    /// PostgreSQL's `disk_full` (53100), a file (a blob) that could not be written for want of
    /// room or quota. Worth a retry once there is room, not the caller's fault nor corrupt data.
    pub fn is_storage_full(&self) -> bool {
        match self {
            StoreError::Db(e) => e.as_database_error().is_some_and(database_full),
            StoreError::Io { source, .. } => is_storage_full_io(source),
            _ => false,
        }
    }

    /// The database did not answer (no connection within the pool's timeout, the connection
    /// broke): worth a retry, not the caller's fault nor corrupt data.
    pub fn is_unreachable(&self) -> bool {
        matches!(
            self,
            StoreError::Db(
                sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_)
            )
        )
    }
}

/// A file write that failed for want of room (ENOSPC) or quota (EDQUOT). By its kind: an error
/// that names its path (tempfile's) keeps the kind but not the OS's number.
pub fn is_storage_full_io(e: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    matches!(e.kind(), ErrorKind::StorageFull | ErrorKind::QuotaExceeded)
}

/// A database's refusal for want of room. The codes are read per database: SQLite's are numbers
/// (SQLITE_FULL is 13, its extended codes keep it in the low byte), PostgreSQL's SQLSTATEs.
fn database_full(e: &dyn sqlx::error::DatabaseError) -> bool {
    if e.try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
        .is_some()
    {
        return e.code().as_deref() == Some("53100");
    }
    e.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some()
        && e.code()
            .and_then(|c| c.parse::<i32>().ok())
            .is_some_and(|c| c & 0xff == 13)
}

#[cfg(test)]
mod tests {
    use super::StoreError;

    #[test]
    fn a_file_without_room_or_quota_is_storage_full() {
        for errno in [libc::ENOSPC, libc::EDQUOT] {
            let e = StoreError::io("writing a blob", std::io::Error::from_raw_os_error(errno));
            assert!(e.is_storage_full(), "{e}");
            assert!(!e.is_unreachable(), "{e}");
        }
        // With the path it was writing, as tempfile reports it: the kind is kept, not the errno.
        let named = std::io::Error::new(
            std::io::ErrorKind::StorageFull,
            "No space left on device (os error 28) at path \"/srv/blobs/tmp/.tmp1\"",
        );
        assert!(StoreError::io("writing a blob", named).is_storage_full());
        for errno in [libc::EACCES, libc::EIO, libc::EROFS] {
            let e = StoreError::io("writing a blob", std::io::Error::from_raw_os_error(errno));
            assert!(!e.is_storage_full(), "{e}");
        }
        assert!(!StoreError::Db(sqlx::Error::PoolTimedOut).is_storage_full());
        assert!(!StoreError::Invalid("full".into()).is_storage_full());
    }

    #[test]
    fn a_database_that_does_not_answer_is_unreachable() {
        assert!(StoreError::Db(sqlx::Error::PoolTimedOut).is_unreachable());
        assert!(StoreError::Db(sqlx::Error::Io(
            std::io::ErrorKind::ConnectionRefused.into()
        ))
        .is_unreachable());
        assert!(!StoreError::Db(sqlx::Error::RowNotFound).is_unreachable());
        assert!(!StoreError::Invalid("x".into()).is_unreachable());
    }
}
