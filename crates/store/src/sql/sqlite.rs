//! The embedded store: SQLite through sqlx (migrations in `migrations/sqlite`), blobs in a folder
//! next to the database. Each claim is one `UPDATE … RETURNING` statement, so it takes SQLite's
//! write lock once and two claimers can never get the same job; WAL keeps readers going.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};
use sqlx::Sqlite;

use super::dialect::Dialect;
use super::store::SqlStore;
use crate::error::Result;

static MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");

/// The store on SQLite.
pub type SqliteStore = SqlStore<Sqlite>;

impl SqlStore<Sqlite> {
    /// Opens (creating when missing) the database at `url` (`sqlite://PATH`) and the blob folder,
    /// and brings the schema up to date.
    pub async fn open(url: &str, blob_dir: &Path) -> Result<Self> {
        let opts = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(10));
        let db = SqlitePoolOptions::new()
            .max_connections(8)
            .connect_with(opts)
            .await?;
        super::migrate::migrate(&db, &MIGRATIONS).await?;
        SqlStore::with_pool(db, blob_dir).await
    }
}

impl Dialect for Sqlite {
    const SKIP_LOCKED: &'static str = "";
    const FOR_UPDATE: &'static str = "";
    const BEGIN_WRITE: &'static str = "BEGIN IMMEDIATE";
    const NEXT_SERVED: &'static str = "(SELECT COALESCE(MAX(served), 0) + 1 FROM queue_owners)";
    const LOCK_KEY: Option<&'static str> = None;
    const NOTIFY_WORK: Option<&'static str> = None;
    // julianday('now') has millisecond resolution; day 2440587.5 is the Unix epoch.
    const NOW_MS: &'static str = "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)";

    fn rows_affected(r: &sqlx::sqlite::SqliteQueryResult) -> u64 {
        r.rows_affected()
    }
}

/// What only SQLite's file or the blob folder shows; everything else is in `tests/store.rs`, on
/// both databases.
#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::store::{NewFile, Role, Store};

    async fn store(dir: &Path) -> SqliteStore {
        let url = format!("sqlite://{}", dir.join("corral.db").display());
        SqliteStore::open(&url, &dir.join("blobs")).await.unwrap()
    }

    #[tokio::test]
    async fn token_secrets_are_not_stored() {
        let d = tempfile::tempdir().unwrap();
        let s = store(d.path()).await;
        let t = s.create_token(Role::Staff, "ta").await.unwrap();
        s.close().await;
        let s = store(d.path()).await;
        let db = std::fs::read(d.path().join("corral.db")).unwrap();
        assert!(!db.windows(t.secret.len()).any(|w| w == t.secret.as_bytes()));
        // Still known by its hash after reopening; once revoked, listed as revoked.
        let before = crate::clock::now() - 1;
        assert!(s.revoke_token(&t.info.id).await.unwrap());
        assert_eq!(
            s.tokens_revoked_since(before).await.unwrap(),
            vec![t.info.id.clone()]
        );
        assert!(s
            .tokens_revoked_since(before + 3600)
            .await
            .unwrap()
            .is_empty());
        assert!(s.token_by_secret(&t.secret).await.unwrap().is_none());
    }

    /// Why every writing transaction begins with `BEGIN_WRITE`: a deferred one that read first
    /// fails at once when another connection committed in between, while one that took the write
    /// lock first makes the other writer wait instead.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_deferred_read_then_write_fails_where_begin_write_waits() {
        let d = tempfile::tempdir().unwrap();
        let s = std::sync::Arc::new(store(d.path()).await);
        let count = "SELECT COUNT(*) FROM tokens";
        let write = "UPDATE tokens SET name = name";

        let mut deferred = s.db.begin().await.unwrap();
        let _: i64 = sqlx::query_scalar(count)
            .fetch_one(&mut *deferred)
            .await
            .unwrap();
        s.create_token(Role::Student, "other").await.unwrap();
        let e = sqlx::query(write)
            .execute(&mut *deferred)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("database is locked"), "{e}");
        drop(deferred);

        let mut first = s.begin_write().await.unwrap();
        let _: i64 = sqlx::query_scalar(count)
            .fetch_one(&mut *first)
            .await
            .unwrap();
        let other = {
            let s = s.clone();
            tokio::spawn(async move { s.create_token(Role::Student, "waits").await })
        };
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        assert!(!other.is_finished(), "the other writer waits for the lock");
        sqlx::query(write).execute(&mut *first).await.unwrap();
        first.commit().await.unwrap();
        other.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn retention_collects_the_blobs_no_upload_holds() {
        let d = tempfile::tempdir().unwrap();
        let s = store(d.path()).await;
        let one = |content: &[u8]| {
            vec![NewFile {
                path: "x".into(),
                content: content.to_vec(),
                mode: 0,
            }]
        };
        let kept = s.create_upload("me", one(b"kept")).await.unwrap();
        s.put_suite("hello", "staff1", "Hello", &kept.id)
            .await
            .unwrap();
        assert_eq!(s.delete_uploads_before(i64::MAX).await.unwrap(), 0);
        let gone = s.create_upload("me", one(b"only here")).await.unwrap();
        assert_eq!(s.delete_uploads_before(i64::MAX).await.unwrap(), 1);
        assert!(s.blobs().read(&gone.files[0].sha256).is_err());
        assert!(s.blobs().read(&kept.files[0].sha256).is_ok());
    }
}
