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

#[cfg(test)]
mod tests {
    use super::StoreError;

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
