//! The PostgreSQL store (`--database-url postgres://…`): the same tables as SQLite (migrations in
//! `migrations/postgres`, a copy of the SQLite ones in PostgreSQL's types), so several API nodes
//! and many workers can share one database. File contents stay in a [`BlobStore`] folder, which
//! every API node must see (a shared filesystem): see `docs/deploy.md`.
//!
//! New work is announced with `NOTIFY corral_work` (inside the enqueuing transaction, so it
//! arrives after the commit); one `LISTEN` connection per process wakes that process's waiting
//! workers.

use std::collections::HashSet;
use std::path::Path;
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use sqlx::{PgPool, Row};

use crate::{
    now, random_hex, sha256_hex, BlobStore, NewFile, NewToken, Result, Role, Store, StoreError,
    Suite, TokenInfo, Upload, UploadFile,
};

static MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

/// The channel new work is announced on.
pub const WORK_CHANNEL: &str = "corral_work";

pub struct PgStore {
    pub(crate) db: PgPool,
    blobs: BlobStore,
    /// Woken on every `corral_work` notification.
    pub(crate) work: Arc<tokio::sync::Notify>,
    listener: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl PgStore {
    /// Connects to `url` (`postgres://USER@HOST/DB`, or a unix socket folder with `?host=/dir`),
    /// brings the schema up to date and starts listening for new work.
    pub async fn open(url: &str, blob_dir: &Path) -> Result<Self> {
        let opts = PgConnectOptions::from_str(url)?;
        let db = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(opts)
            .await?;
        // Several nodes starting at once: migrations take an advisory lock (sqlx does).
        MIGRATIONS.run(&db).await?;
        let dir = blob_dir.to_path_buf();
        let blobs = tokio::task::spawn_blocking(move || BlobStore::open(dir))
            .await
            .map_err(|e| StoreError::Invalid(format!("blob store task: {e}")))??;
        let work = Arc::new(tokio::sync::Notify::new());
        let listener = tokio::spawn(listen(db.clone(), work.clone()));
        Ok(PgStore {
            db,
            blobs,
            work,
            listener: Mutex::new(Some(listener)),
        })
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

/// Holds a LISTEN connection for the life of the store, reconnecting when it drops.
async fn listen(db: PgPool, work: Arc<tokio::sync::Notify>) {
    loop {
        let mut l = match PgListener::connect_with(&db).await {
            Ok(l) => l,
            Err(_) => {
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        if l.listen(WORK_CHANNEL).await.is_err() {
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        loop {
            match l.recv().await {
                Ok(_) => work.notify_waiters(),
                Err(_) => {
                    // Anything missed while reconnecting is found by the workers' polling.
                    work.notify_waiters();
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    break;
                }
            }
        }
    }
}

fn token_info(r: &sqlx::postgres::PgRow) -> Result<TokenInfo> {
    Ok(TokenInfo {
        id: r.try_get("id")?,
        role: r.try_get::<String, _>("role")?.parse()?,
        name: r.try_get("name")?,
        created_at: r.try_get("created_at")?,
    })
}

fn suite_row(r: &sqlx::postgres::PgRow) -> Result<Suite> {
    Ok(Suite {
        id: r.try_get("id")?,
        owner: r.try_get("owner")?,
        name: r.try_get("name")?,
        upload_id: r.try_get("upload_id")?,
        created_at: r.try_get("created_at")?,
    })
}

#[async_trait::async_trait]
impl Store for PgStore {
    async fn create_token(&self, role: Role, name: &str) -> Result<NewToken> {
        let secret = format!("corral_{}", random_hex(32));
        let info = TokenInfo {
            id: random_hex(8),
            role,
            name: name.to_string(),
            created_at: now(),
        };
        sqlx::query(
            "INSERT INTO tokens (id, secret_hash, role, name, created_at) VALUES ($1, $2, $3, $4, $5)",
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
            "SELECT id, role, name, created_at FROM tokens WHERE secret_hash = $1 AND revoked_at IS NULL",
        )
        .bind(sha256_hex(secret.as_bytes()))
        .fetch_optional(&self.db)
        .await?;
        row.as_ref().map(token_info).transpose()
    }

    async fn revoke_token(&self, id: &str) -> Result<bool> {
        let r =
            sqlx::query("UPDATE tokens SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL")
                .bind(now())
                .bind(id)
                .execute(&self.db)
                .await?;
        Ok(r.rows_affected() > 0)
    }

    async fn count_tokens(&self, role: Role) -> Result<u64> {
        let n: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM tokens WHERE role = $1 AND revoked_at IS NULL",
        )
        .bind(role.as_str())
        .fetch_one(&self.db)
        .await?;
        Ok(n as u64)
    }

    async fn create_upload(&self, owner: &str, mut files: Vec<NewFile>) -> Result<Upload> {
        files.sort_by(|a, b| a.path.cmp(&b.path));
        let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
        crate::check_tree(&paths)?;
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
        sqlx::query(
            "INSERT INTO uploads (id, owner, created_at, total_bytes) VALUES ($1, $2, $3, $4)",
        )
        .bind(&upload.id)
        .bind(&upload.owner)
        .bind(upload.created_at)
        .bind(upload.total_bytes as i64)
        .execute(&mut *tx)
        .await?;
        for f in &upload.files {
            sqlx::query(
                "INSERT INTO upload_files (upload_id, path, sha256, size, mode) VALUES ($1, $2, $3, $4, $5)",
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
            sqlx::query("SELECT id, owner, created_at, total_bytes FROM uploads WHERE id = $1")
                .bind(id)
                .fetch_optional(&self.db)
                .await?
        else {
            return Ok(None);
        };
        let files = sqlx::query(
            "SELECT path, sha256, size, mode FROM upload_files WHERE upload_id = $1 ORDER BY path",
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
        let keep_clause = "id NOT IN (SELECT upload_id FROM suites) AND id NOT IN \
             (SELECT upload_id FROM submissions WHERE upload_id IS NOT NULL \
              AND state IN ('queued', 'running'))";
        let mut tx = self.db.begin().await?;
        sqlx::query(&format!(
            "DELETE FROM upload_files WHERE upload_id IN (SELECT id FROM uploads WHERE created_at < $1 AND {keep_clause})"
        ))
        .bind(before)
        .execute(&mut *tx)
        .await?;
        let deleted = sqlx::query(&format!(
            "DELETE FROM uploads WHERE created_at < $1 AND {keep_clause}"
        ))
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
        let existing = sqlx::query("SELECT owner FROM suites WHERE id = $1 FOR UPDATE")
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
            "INSERT INTO suites (id, owner, name, upload_id, created_at) VALUES ($1, $2, $3, $4, $5) \
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
            sqlx::query("SELECT id, owner, name, upload_id, created_at FROM suites WHERE id = $1")
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

    async fn create_revision(&self, rev: crate::NewRevision) -> Result<crate::RevisionMeta> {
        self.pg_create_revision(rev).await
    }

    async fn list_revisions(&self, f: &crate::RevisionFilter) -> Result<Vec<crate::RevisionMeta>> {
        self.pg_list_revisions(f).await
    }

    async fn get_revision(&self, id: &str) -> Result<Option<crate::Revision>> {
        self.pg_get_revision(id).await
    }

    async fn close(&self) {
        if let Some(l) = self.listener.lock().ok().and_then(|mut g| g.take()) {
            l.abort();
        }
        self.db.close().await;
    }
}
