//! The embedded store: SQLite through sqlx (migrations in `migrations/sqlite`), blobs in a folder
//! next to the database. Each claim is one `UPDATE … RETURNING` statement, so it takes SQLite's
//! write lock once and two claimers can never get the same job; WAL keeps readers going.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};
use sqlx::Sqlite;

use super::db_file::DbFile;
use super::dialect::Dialect;
use super::store::SqlStore;
use crate::error::{Result, StoreError};

static MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");

/// The store on SQLite.
pub type SqliteStore = SqlStore<Sqlite>;

impl SqlStore<Sqlite> {
    /// Opens (creating when missing) the database at `url` (`sqlite://PATH`) and the blob folder,
    /// and brings the schema up to date.
    pub async fn open(url: &str, blob_dir: &Path) -> Result<Self> {
        Self::open_with(SqliteConnectOptions::from_str(url)?, blob_dir).await
    }

    /// [`open`](Self::open) with the caller's connection options (tests: a database size cap).
    async fn open_with(opts: SqliteConnectOptions, blob_dir: &Path) -> Result<Self> {
        let file = opts.get_filename().to_path_buf();
        create_if_missing(&file);
        // The pool's connections never create the file: one opened while the database was
        // deleted (or moved aside) under the server made a new empty one there, and kept
        // answering "no such table" after the real one was back.
        let opts = opts
            .create_if_missing(false)
            .journal_mode(SqliteJournalMode::Wal)
            .foreign_keys(true)
            .busy_timeout(BUSY_TIMEOUT);
        let db = SqlitePoolOptions::new()
            .max_connections(8)
            .after_release(|conn, _| Box::pin(outside_any_transaction(conn)))
            .connect_lazy_with(opts);
        let ready = async {
            first_connection(&db).await?;
            super::migrate::migrate(&db, &MIGRATIONS, Some(<Sqlite as Dialect>::BEGIN_WRITE)).await
        };
        if let Err(e) = ready.await {
            // SQLite's own word for a read-only mount is "unable to open database file".
            return Err(unwritable_folder(&file).unwrap_or(e));
        }
        let mut store = SqlStore::with_pool(db, blob_dir).await?;
        store.file = DbFile::opened(file.as_path());
        Ok(store)
    }
}

/// Creates an empty database file at `file` when there is none: a file of no bytes is an empty
/// SQLite database, which the first connection then sets up. In-memory databases have no file.
/// Errors are left to SQLite's own open, which says them best (a missing or read-only folder).
fn create_if_missing(file: &Path) {
    if file.as_os_str().is_empty() || file == Path::new(":memory:") {
        return;
    }
    let _ = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(file);
}

/// How long a statement waits for another connection's lock before it fails.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Opens the pool's first connection. On a new database it switches the file to WAL, which takes
/// an exclusive lock SQLite does not wait for (the busy timeout does not apply): another process
/// opening the same new database at that moment made it fail at once with "database is locked".
/// Retried for as long as the busy timeout; once the file is in WAL mode, the switch is a no-op.
async fn first_connection(db: &sqlx::SqlitePool) -> Result<()> {
    let deadline = tokio::time::Instant::now() + BUSY_TIMEOUT;
    loop {
        match db.acquire().await {
            Ok(_) => return Ok(()),
            Err(e) if is_busy(&e) && tokio::time::Instant::now() < deadline => {
                // Jittered, so that processes retrying together do not collide again.
                let ms = 5 + u64::from(getrandom::u32().unwrap_or(0) % 20);
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// SQLITE_BUSY ("database is locked"), whichever its extended code.
fn is_busy(e: &sqlx::Error) -> bool {
    let code = e.as_database_error().and_then(|d| d.code());
    code.and_then(|c| c.parse::<i32>().ok())
        .is_some_and(|c| c & 0xff == 5)
}

/// Why a database at `file` could not be opened, when it is its folder that cannot be written
/// (SQLite writes its journal, `-wal` and `-shm`, beside the database).
fn unwritable_folder(file: &Path) -> Option<StoreError> {
    let folder = match file.parent() {
        Some(p) if p.as_os_str().is_empty() => Path::new("."),
        Some(p) => p,
        None => return None,
    };
    if !folder.is_dir() {
        return None;
    }
    let e = tempfile::tempfile_in(folder).err()?;
    Some(StoreError::io(
        format!(
            "the database's folder {} cannot be written (SQLite keeps the database's journal \
             there)",
            folder.display()
        ),
        e,
    ))
}

/// Whether a connection given back to the pool may be used again: not when it is still inside a
/// transaction. A write that fails with SQLITE_FULL (or an I/O error) makes SQLite roll the whole
/// transaction back itself; the `ROLLBACK` sqlx sends when the `Transaction` is dropped then fails
/// ("no transaction is active") and sqlx 0.8 keeps counting a transaction on that connection, so
/// every later `begin_write` on it failed ("attempted to call begin_with at non-zero transaction
/// depth") until a restart. Such a connection is closed instead (the pool opens a new one).
async fn outside_any_transaction(conn: &mut sqlx::SqliteConnection) -> sqlx::Result<bool> {
    use sqlx::Connection;
    if !conn.is_in_transaction() {
        return Ok(true);
    }
    // The dropped `Transaction`'s rollback may still be queued on the connection's worker
    // thread: a ping runs after it.
    conn.ping().await?;
    Ok(!conn.is_in_transaction())
}

impl Dialect for Sqlite {
    const SKIP_LOCKED: &'static str = "";
    const FOR_UPDATE: &'static str = "";
    const BEGIN_WRITE: &'static str = "BEGIN IMMEDIATE";
    const NEXT_SERVED: &'static str = "(SELECT COALESCE(MAX(served), 0) + 1 FROM queue_owners)";
    const LOCK_KEY: Option<&'static str> = None;
    const NOTIFY_WORK: Option<&'static str> = None;
    const NOTIFY_FINISHED: Option<&'static str> = None;
    // julianday('now') has millisecond resolution; day 2440587.5 is the Unix epoch.
    const NOW_MS: &'static str = "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)";
    const ONE_SERVER: bool = true;

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
    use crate::error::StoreError;
    use crate::revisions::{NewRevision, RevisionFile, RevisionKind};
    use crate::store::{NewFile, Role, Store, WriteProbe};

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

    /// A write that finds the disk full (SQLITE_FULL, here the database's page cap) fails; once
    /// there is room again, every later write succeeds on the same store. SQLite rolled the
    /// transaction back itself, sqlx's own rollback then failed and its connection went back to
    /// the pool still counting a transaction: every later `begin_write` on it failed with
    /// "attempted to call begin_with at non-zero transaction depth", until a restart.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_that_found_the_disk_full_does_not_break_later_writes() {
        use sqlx::Connection;
        let d = tempfile::tempdir().unwrap();
        store(d.path()).await.close().await;
        let url = format!("sqlite://{}", d.path().join("corral.db").display());
        // The "disk": the database as it is plus a filler, and not a page more.
        let mut other = sqlx::SqliteConnection::connect(&url).await.unwrap();
        sqlx::query("CREATE TABLE filler (b BLOB)")
            .execute(&mut other)
            .await
            .unwrap();
        sqlx::query("INSERT INTO filler VALUES (zeroblob(1 << 20))")
            .execute(&mut other)
            .await
            .unwrap();
        let pages: i64 = sqlx::query_scalar("PRAGMA page_count")
            .fetch_one(&mut other)
            .await
            .unwrap();
        let opts = SqliteConnectOptions::from_str(&url)
            .unwrap()
            .pragma("max_page_count", pages.to_string());
        let s = SqliteStore::open_with(opts, &d.path().join("blobs"))
            .await
            .unwrap();
        let revision = |content: String| NewRevision {
            owner: "me".into(),
            kind: RevisionKind::Save,
            language: "c".into(),
            status: "ok".into(),
            suite: None,
            score: None,
            max_score: None,
            summary: String::new(),
            files: vec![RevisionFile {
                path: "main.c".into(),
                content,
            }],
        };
        let e = s
            .create_revision(revision("x".repeat(256 << 10)))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("database or disk is full"), "{e}");
        assert!(e.is_storage_full(), "SQLITE_FULL is a full storage: {e:?}");
        // Room again (the filler's pages are free for reuse): writes work, on every connection.
        sqlx::query("DROP TABLE filler")
            .execute(&mut other)
            .await
            .unwrap();
        for i in 0..16 {
            s.create_revision(revision(format!("int main(void) {{ return {i}; }}")))
                .await
                .unwrap_or_else(|e| panic!("write {i} after the disk had room again: {e}"));
        }
    }

    /// Several processes opening one new database at once all open it. Each read the applied
    /// migrations, and ran them, under no lock (sqlx's migration lock is a no-op on SQLite): two
    /// both saw none and the second failed with "while executing migration 1: table tokens
    /// already exists" (every round here). With that serialised, the switch of the new file to
    /// WAL still failed now and then with "database is locked" (in 4 runs of 5 within the 100
    /// rounds).
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn opens_of_one_new_database_at_once_all_succeed() {
        for round in 0..100 {
            let d = tempfile::tempdir().unwrap();
            let url = format!("sqlite://{}", d.path().join("corral.db").display());
            let opens: Vec<_> = (0..4)
                .map(|_| {
                    let (url, blobs) = (url.clone(), d.path().join("blobs"));
                    tokio::spawn(async move { SqliteStore::open(&url, &blobs).await })
                })
                .collect();
            for o in opens {
                let s = o
                    .await
                    .unwrap()
                    .unwrap_or_else(|e| panic!("round {round}: {e}"));
                s.close().await;
            }
        }
    }

    /// The write probe sees the database file deleted or replaced at its path: SQLite goes on
    /// writing the file it opened, which no one will open again.
    #[tokio::test]
    async fn the_write_probe_sees_the_database_file_deleted_or_replaced() {
        let d = tempfile::tempdir().unwrap();
        let s = store(d.path()).await;
        s.check_writable().await.unwrap();
        let (db, aside) = (d.path().join("corral.db"), d.path().join("aside.db"));
        std::fs::rename(&db, &aside).unwrap();
        let e = s.check_writable().await.unwrap_err();
        assert!(matches!(e, StoreError::FileChanged(_)), "{e:?}");
        assert!(e.to_string().contains("corral.db was deleted"), "{e}");
        std::fs::copy(&aside, &db).unwrap();
        let e = s.check_writable().await.unwrap_err();
        assert!(e.to_string().contains("corral.db was replaced"), "{e}");
        std::fs::rename(&aside, &db).unwrap();
        s.check_writable().await.unwrap();
    }

    /// A connection the pool opens while the database file is away (deleted, or moved aside
    /// and back) makes no new empty database at its path: one did, and after the real file was
    /// back that connection still answered "no such table" to every write it got.
    #[tokio::test]
    async fn a_connection_opened_while_the_file_is_away_makes_no_new_database() {
        let d = tempfile::tempdir().unwrap();
        let s = store(d.path()).await;
        let (db, aside) = (d.path().join("corral.db"), d.path().join("aside.db"));
        std::fs::rename(&db, &aside).unwrap();
        // Every connection the pool may have, held at once: those it opens now find no file.
        let mut held = Vec::new();
        for _ in 0..8 {
            if let Ok(c) = s.db.acquire().await {
                held.push(c);
            }
        }
        assert!(!db.exists(), "a new database was made at {}", db.display());
        drop(held);
        std::fs::rename(&aside, &db).unwrap();
        // Every connection the pool has reads the real file again.
        let mut held = Vec::new();
        for _ in 0..8 {
            let mut c = s.db.acquire().await.unwrap();
            sqlx::query("SELECT count(*) FROM tokens")
                .fetch_one(&mut *c)
                .await
                .unwrap();
            held.push(c);
        }
        drop(held);
        s.check_writable().await.unwrap();
    }

    /// A database this process may not write is refused at open, as a rule (the migrations'
    /// transaction takes the write lock): here SQLite's `query_only`. A read-only folder fails
    /// earlier and is named (`unwritable_folder`); what still opens, `corral serve`'s write
    /// probe refuses.
    #[tokio::test]
    async fn a_database_that_cannot_be_written_is_refused_at_open() {
        let d = tempfile::tempdir().unwrap();
        store(d.path()).await.close().await;
        let url = format!("sqlite://{}", d.path().join("corral.db").display());
        let opts = SqliteConnectOptions::from_str(&url)
            .unwrap()
            .pragma("query_only", "ON");
        let e = SqliteStore::open_with(opts, &d.path().join("blobs"))
            .await
            .err()
            .expect("a read-only database was opened");
        assert!(e.to_string().contains("readonly database"), "{e}");
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
