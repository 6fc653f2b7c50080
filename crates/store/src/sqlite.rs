//! The embedded store: SQLite through sqlx, blobs in a folder next to the database.

use std::collections::HashSet;
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};
use sqlx::{Row, SqlitePool};

use crate::{
    now, random_hex, sha256_hex, BlobStore, NewFile, NewToken, Result, Role, Store, StoreError,
    Suite, TokenInfo, Upload, UploadFile,
};

static MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");

pub struct SqliteStore {
    pub(crate) db: SqlitePool,
    blobs: BlobStore,
}

impl SqliteStore {
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
        let dir = blob_dir.to_path_buf();
        let blobs = tokio::task::spawn_blocking(move || BlobStore::open(dir))
            .await
            .map_err(|e| StoreError::Invalid(format!("blob store task: {e}")))??;
        Ok(SqliteStore { db, blobs })
    }

    pub fn blobs(&self) -> &BlobStore {
        &self.blobs
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(BlobStore) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let b = self.blobs.clone();
        tokio::task::spawn_blocking(move || f(b))
            .await
            .map_err(|e| StoreError::Invalid(format!("blob store task: {e}")))?
    }
}

fn token_info(r: &sqlx::sqlite::SqliteRow) -> Result<TokenInfo> {
    Ok(TokenInfo {
        id: r.try_get("id")?,
        role: r.try_get::<String, _>("role")?.parse()?,
        name: r.try_get("name")?,
        created_at: r.try_get("created_at")?,
    })
}

fn suite_row(r: &sqlx::sqlite::SqliteRow) -> Result<Suite> {
    Ok(Suite {
        id: r.try_get("id")?,
        owner: r.try_get("owner")?,
        name: r.try_get("name")?,
        upload_id: r.try_get("upload_id")?,
        created_at: r.try_get("created_at")?,
    })
}

#[async_trait::async_trait]
impl Store for SqliteStore {
    async fn create_token(&self, role: Role, name: &str) -> Result<NewToken> {
        let secret = format!("corral_{}", random_hex(32));
        let info = TokenInfo {
            id: random_hex(8),
            role,
            name: name.to_string(),
            created_at: now(),
        };
        sqlx::query(
            "INSERT INTO tokens (id, secret_hash, role, name, created_at) VALUES (?, ?, ?, ?, ?)",
        )
        .bind(&info.id)
        .bind(sha256_hex(secret.as_bytes()))
        .bind(role.as_str())
        .bind(name)
        .bind(info.created_at)
        .execute(&self.db)
        .await?;
        Ok(NewToken { secret, info })
    }

    async fn token_by_secret(&self, secret: &str) -> Result<Option<TokenInfo>> {
        let row = sqlx::query(
            "SELECT id, role, name, created_at FROM tokens WHERE secret_hash = ? AND revoked_at IS NULL",
        )
        .bind(sha256_hex(secret.as_bytes()))
        .fetch_optional(&self.db)
        .await?;
        row.as_ref().map(token_info).transpose()
    }

    async fn revoke_token(&self, id: &str) -> Result<bool> {
        let r = sqlx::query("UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL")
            .bind(now())
            .bind(id)
            .execute(&self.db)
            .await?;
        Ok(r.rows_affected() > 0)
    }

    async fn count_tokens(&self, role: Role) -> Result<u64> {
        let n: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM tokens WHERE role = ? AND revoked_at IS NULL")
                .bind(role.as_str())
                .fetch_one(&self.db)
                .await?;
        Ok(n as u64)
    }

    async fn create_upload(&self, owner: &str, mut files: Vec<NewFile>) -> Result<Upload> {
        files.sort_by(|a, b| a.path.cmp(&b.path));
        let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
        crate::check_tree(&paths)?;
        // Contents first: a blob without a row is garbage; a row without its blob is never made.
        let stored = self
            .blocking(move |b| {
                files
                    .into_iter()
                    .map(|f| {
                        let sha256 = b.put(&f.content)?;
                        Ok(UploadFile {
                            path: f.path,
                            sha256,
                            size: f.content.len() as u64,
                            mode: if f.mode & 0o111 != 0 { 0o755 } else { 0o644 },
                        })
                    })
                    .collect::<Result<Vec<_>>>()
            })
            .await?;
        let upload = Upload {
            id: random_hex(16),
            owner: owner.to_string(),
            created_at: now(),
            total_bytes: stored.iter().map(|f| f.size).sum(),
            files: stored,
        };
        let mut tx = self.db.begin().await?;
        sqlx::query("INSERT INTO uploads (id, owner, created_at, total_bytes) VALUES (?, ?, ?, ?)")
            .bind(&upload.id)
            .bind(&upload.owner)
            .bind(upload.created_at)
            .bind(upload.total_bytes as i64)
            .execute(&mut *tx)
            .await?;
        for f in &upload.files {
            sqlx::query(
                "INSERT INTO upload_files (upload_id, path, sha256, size, mode) VALUES (?, ?, ?, ?, ?)",
            )
            .bind(&upload.id)
            .bind(&f.path)
            .bind(&f.sha256)
            .bind(f.size as i64)
            .bind(f.mode as i64)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(upload)
    }

    async fn get_upload(&self, id: &str) -> Result<Option<Upload>> {
        let Some(row) =
            sqlx::query("SELECT id, owner, created_at, total_bytes FROM uploads WHERE id = ?")
                .bind(id)
                .fetch_optional(&self.db)
                .await?
        else {
            return Ok(None);
        };
        let files = sqlx::query(
            "SELECT path, sha256, size, mode FROM upload_files WHERE upload_id = ? ORDER BY path",
        )
        .bind(id)
        .fetch_all(&self.db)
        .await?
        .iter()
        .map(|r| {
            Ok(UploadFile {
                path: r.try_get("path")?,
                sha256: r.try_get("sha256")?,
                size: r.try_get::<i64, _>("size")? as u64,
                mode: r.try_get::<i64, _>("mode")? as u32,
            })
        })
        .collect::<Result<Vec<_>>>()?;
        Ok(Some(Upload {
            id: row.try_get("id")?,
            owner: row.try_get("owner")?,
            created_at: row.try_get("created_at")?,
            total_bytes: row.try_get::<i64, _>("total_bytes")? as u64,
            files,
        }))
    }

    async fn materialize(&self, upload: &Upload, dest: &Path) -> Result<()> {
        let files = upload.files.clone();
        let dest = dest.to_path_buf();
        self.blocking(move |b| {
            for f in &files {
                // Re-checked: what the database holds is not trusted to be a plain path.
                let rel = crate::validate_path(&f.path, 64)?;
                let target = dest.join(&rel);
                if let Some(parent) = target.parent() {
                    std::fs::create_dir_all(parent)
                        .map_err(|e| StoreError::io(format!("creating {}", parent.display()), e))?;
                }
                b.copy_to(&f.sha256, &target, f.mode)?;
            }
            Ok(())
        })
        .await
    }

    async fn delete_uploads_before(&self, before: i64) -> Result<u64> {
        let mut tx = self.db.begin().await?;
        sqlx::query(
            "DELETE FROM upload_files WHERE upload_id IN (SELECT id FROM uploads WHERE created_at < ? \
             AND id NOT IN (SELECT upload_id FROM suites) AND id NOT IN (SELECT upload_id FROM \
             submissions WHERE upload_id IS NOT NULL AND state IN ('queued', 'running')))",
        )
        .bind(before)
        .execute(&mut *tx)
        .await?;
        let deleted = sqlx::query(
            "DELETE FROM uploads WHERE created_at < ? AND id NOT IN (SELECT upload_id FROM suites) \
             AND id NOT IN (SELECT upload_id FROM submissions WHERE upload_id IS NOT NULL \
             AND state IN ('queued', 'running'))",
        )
        .bind(before)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        tx.commit().await?;
        let keep: HashSet<String> = sqlx::query_scalar("SELECT DISTINCT sha256 FROM upload_files")
            .fetch_all(&self.db)
            .await?
            .into_iter()
            .collect();
        self.blocking(move |b| b.collect_garbage(&keep, before))
            .await?;
        Ok(deleted)
    }

    async fn put_suite(&self, id: &str, owner: &str, name: &str, upload_id: &str) -> Result<Suite> {
        let mut tx = self.db.begin().await?;
        let existing = sqlx::query("SELECT owner FROM suites WHERE id = ?")
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
        if let Some(r) = existing {
            let o: String = r.try_get("owner")?;
            if o != owner {
                return Err(StoreError::Conflict(format!(
                    "suite {id:?} was registered by someone else"
                )));
            }
        }
        let suite = Suite {
            id: id.to_string(),
            owner: owner.to_string(),
            name: name.to_string(),
            upload_id: upload_id.to_string(),
            created_at: now(),
        };
        sqlx::query(
            "INSERT INTO suites (id, owner, name, upload_id, created_at) VALUES (?, ?, ?, ?, ?) \
             ON CONFLICT (id) DO UPDATE SET name = excluded.name, upload_id = excluded.upload_id, \
             created_at = excluded.created_at",
        )
        .bind(&suite.id)
        .bind(&suite.owner)
        .bind(&suite.name)
        .bind(&suite.upload_id)
        .bind(suite.created_at)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(suite)
    }

    async fn get_suite(&self, id: &str) -> Result<Option<Suite>> {
        let row =
            sqlx::query("SELECT id, owner, name, upload_id, created_at FROM suites WHERE id = ?")
                .bind(id)
                .fetch_optional(&self.db)
                .await?;
        row.as_ref().map(suite_row).transpose()
    }

    async fn list_suites(&self) -> Result<Vec<Suite>> {
        sqlx::query("SELECT id, owner, name, upload_id, created_at FROM suites ORDER BY id")
            .fetch_all(&self.db)
            .await?
            .iter()
            .map(suite_row)
            .collect()
    }

    async fn close(&self) {
        self.db.close().await;
    }

    async fn create_revision(&self, rev: crate::NewRevision) -> Result<crate::RevisionMeta> {
        self.sqlite_create_revision(rev).await
    }

    async fn list_revisions(&self, f: &crate::RevisionFilter) -> Result<Vec<crate::RevisionMeta>> {
        self.sqlite_list_revisions(f).await
    }

    async fn get_revision(&self, id: &str) -> Result<Option<crate::Revision>> {
        self.sqlite_get_revision(id).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
