//! The embedded store: SQLite through sqlx (migrations in `migrations/sqlite`), blobs in a folder
//! next to the database. Each claim is one `UPDATE … RETURNING` statement, so it takes SQLite's
//! write lock once and two claimers can never get the same job; WAL keeps readers going.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};
use sqlx::Sqlite;

use super::{Dialect, SqlStore};
use crate::Result;

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
        MIGRATIONS.run(&db).await?;
        SqlStore::with_pool(db, blob_dir).await
    }
}

impl Dialect for Sqlite {
    const SKIP_LOCKED: &'static str = "";
    const FOR_UPDATE: &'static str = "";
    const NEXT_SERVED: &'static str = "(SELECT COALESCE(MAX(served), 0) + 1 FROM queue_owners)";
    const NOTIFY_WORK: Option<&'static str> = None;

    fn rows_affected(r: &sqlx::sqlite::SqliteQueryResult) -> u64 {
        r.rows_affected()
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::{NewFile, Role, Store};

    async fn store(dir: &Path) -> SqliteStore {
        let url = format!("sqlite://{}", dir.join("corral.db").display());
        SqliteStore::open(&url, &dir.join("blobs")).await.unwrap()
    }

    #[tokio::test]
    async fn tokens_are_hashed_and_revocable() {
        let d = tempfile::tempdir().unwrap();
        let s = store(d.path()).await;
        let t = s.create_token(Role::Staff, "ta").await.unwrap();
        assert!(t.secret.starts_with("corral_"));
        let got = s.token_by_secret(&t.secret).await.unwrap().unwrap();
        assert_eq!(got.role, Role::Staff);
        assert!(s.token_by_secret("corral_nope").await.unwrap().is_none());
        assert_eq!(s.count_tokens(Role::Staff).await.unwrap(), 1);
        // The secret is nowhere in the database file.
        s.close().await;
        let s = store(d.path()).await;
        let db = std::fs::read(d.path().join("corral.db")).unwrap();
        assert!(!db.windows(t.secret.len()).any(|w| w == t.secret.as_bytes()));
        assert!(s.revoke_token(&got.id).await.unwrap());
        assert!(s.token_by_secret(&t.secret).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn uploads_roundtrip_and_expire() {
        let d = tempfile::tempdir().unwrap();
        let s = store(d.path()).await;
        let u = s
            .create_upload(
                "me",
                vec![
                    NewFile {
                        path: "hello.c".into(),
                        content: b"int main(){}".to_vec(),
                        mode: 0o644,
                    },
                    NewFile {
                        path: "sub/run.sh".into(),
                        content: b"#!/bin/sh\n".to_vec(),
                        mode: 0o700,
                    },
                ],
            )
            .await
            .unwrap();
        assert_eq!(u.id.len(), 32);
        let back = s.get_upload(&u.id).await.unwrap().unwrap();
        assert_eq!(back, u);
        let out = d.path().join("out");
        std::fs::create_dir(&out).unwrap();
        s.materialize(&back, &out).await.unwrap();
        assert_eq!(std::fs::read(out.join("hello.c")).unwrap(), b"int main(){}");
        use std::os::unix::fs::PermissionsExt;
        let m = std::fs::metadata(out.join("sub/run.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(m & 0o111, 0o111 & !umask());
        let dup = s
            .create_upload(
                "me",
                vec![
                    NewFile {
                        path: "a".into(),
                        content: vec![],
                        mode: 0,
                    },
                    NewFile {
                        path: "a/b".into(),
                        content: vec![],
                        mode: 0,
                    },
                ],
            )
            .await;
        assert!(dup.is_err());
        let suite = s
            .put_suite("hello", "staff1", "Hello", &u.id)
            .await
            .unwrap();
        assert_eq!(s.get_suite("hello").await.unwrap().unwrap(), suite);
        assert!(s.put_suite("hello", "other", "x", &u.id).await.is_err());
        // Uploads held by a suite survive retention.
        assert_eq!(s.delete_uploads_before(i64::MAX).await.unwrap(), 0);
        let u2 = s
            .create_upload(
                "me",
                vec![NewFile {
                    path: "x".into(),
                    content: b"only here".to_vec(),
                    mode: 0,
                }],
            )
            .await
            .unwrap();
        assert_eq!(s.delete_uploads_before(i64::MAX).await.unwrap(), 1);
        assert!(s.get_upload(&u2.id).await.unwrap().is_none());
        assert!(s.blobs().read(&u2.files[0].sha256).is_err());
        assert!(s.blobs().read(&u.files[0].sha256).is_ok());
    }

    fn umask() -> u32 {
        0o022 & 0o111
    }
}
