//! The [`Store`] trait's queries: tokens, uploads (rows here, contents in the blob folder) and
//! suites. Revisions have their own module.

use std::collections::HashSet;
use std::path::Path;

use sqlx::{ColumnIndex, Decode, Encode, Executor, IntoArguments, Type};

use super::dialect::Dialect;
use super::store::SqlStore;
use crate::clock::now;
use crate::error::{Result, StoreError};
use crate::ids::{random_hex, sha256_hex};
use crate::paths::{check_tree, validate_path};
use crate::revisions::{NewRevision, Revision, RevisionFilter, RevisionMeta};
use crate::store::{NewFile, NewToken, Role, Store, Suite, TokenInfo, Upload, UploadFile};

/// The uploads retention keeps: a suite's files, and those of a submission still to be judged —
/// its own and those of the suite it was accepted with (a suite registered again since points
/// at a new upload; the submission is still graded with the old one).
const UPLOAD_NOT_IN_USE: &str = "id NOT IN (SELECT upload_id FROM suites) AND id NOT IN \
     (SELECT upload_id FROM submissions WHERE upload_id IS NOT NULL \
      AND state IN ('queued', 'running')) AND id NOT IN \
     (SELECT suite_upload_id FROM submissions WHERE suite_upload_id IS NOT NULL \
      AND state IN ('queued', 'running'))";

/// A missing blob said as the file of `upload` it holds.
fn file_lost(e: StoreError, upload: &str, path: &str) -> StoreError {
    match e {
        StoreError::BlobMissing(_) => StoreError::BlobMissing(format!(
            "the contents of {path:?} in upload {upload} are missing from the server's file \
             store (lost: deleted, or not restored from a backup)"
        )),
        e => e,
    }
}

/// Stores a new token (on the caller's connection or transaction); its secret is returned only.
async fn insert_token<D>(conn: &mut D::Connection, role: Role, name: &str) -> Result<NewToken>
where
    D: Dialect,
    for<'c> &'c mut D::Connection: Executor<'c, Database = D>,
    for<'q> D::Arguments<'q>: IntoArguments<'q, D>,
    for<'q> i64: Encode<'q, D> + Type<D>,
    for<'q> &'q str: Encode<'q, D> + Type<D>,
{
    let secret = format!("corral_{}", random_hex(32));
    let hash = sha256_hex(secret.as_bytes());
    let info = TokenInfo {
        id: random_hex(8),
        role,
        name: name.to_string(),
        created_at: now(),
    };
    sqlx::query(
        "INSERT INTO tokens (id, secret_hash, role, name, created_at) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(info.id.as_str())
    .bind(hash.as_str())
    .bind(role.as_str())
    .bind(name)
    .bind(info.created_at)
    .execute(&mut *conn)
    .await?;
    Ok(NewToken { secret, info })
}

#[async_trait::async_trait]
impl<D> Store for SqlStore<D>
where
    D: Dialect,
    for<'c> &'c mut D::Connection: Executor<'c, Database = D>,
    for<'q> D::Arguments<'q>: IntoArguments<'q, D>,
    for<'q> i64: Encode<'q, D> + Decode<'q, D> + Type<D>,
    for<'q> Option<i64>: Encode<'q, D>,
    for<'q> &'q str: Encode<'q, D> + Type<D> + ColumnIndex<D::Row>,
    for<'q> Option<&'q str>: Encode<'q, D>,
    for<'q> f64: Decode<'q, D> + Type<D>,
    for<'q> Option<f64>: Encode<'q, D>,
    for<'q> String: Decode<'q, D> + Type<D>,
    usize: ColumnIndex<D::Row>,
{
    async fn create_token(&self, role: Role, name: &str) -> Result<NewToken> {
        let mut conn = self.db.acquire().await?;
        insert_token::<D>(&mut conn, role, name).await
    }

    async fn token_by_secret(&self, secret: &str) -> Result<Option<TokenInfo>> {
        let hash = sha256_hex(secret.as_bytes());
        Ok(sqlx::query_as(
            "SELECT id, role, name, created_at FROM tokens WHERE secret_hash = $1 AND revoked_at IS NULL",
        )
        .bind(hash.as_str())
        .fetch_optional(&self.db)
        .await?)
    }

    async fn revoke_token(&self, id: &str) -> Result<bool> {
        // One step: no moment where the token is revoked and its workers' jobs still wait for
        // their leases (30 s) to end, whichever path revokes it (the API, `corral token revoke`).
        let mut tx = self.begin_write().await?;
        let r =
            sqlx::query("UPDATE tokens SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL")
                .bind(now())
                .bind(id)
                .execute(&mut *tx)
                .await?;
        if D::rows_affected(&r) == 0 {
            return Ok(false);
        }
        let released = Self::release_jobs_of_token(&mut tx, id).await?;
        tx.commit().await?;
        for job in &released {
            tracing::info!(submission = %job, token = %id, "its worker's token was revoked; queued again");
        }
        Ok(true)
    }

    async fn tokens_revoked_since(&self, since: i64) -> Result<Vec<String>> {
        Ok(
            sqlx::query_scalar("SELECT id FROM tokens WHERE revoked_at >= $1")
                .bind(since)
                .fetch_all(&self.db)
                .await?,
        )
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

    async fn create_first_admin(&self, name: &str) -> Result<Option<NewToken>> {
        // Counted and created under a lock every node's bootstrap takes (SQLite's write lock;
        // PostgreSQL's advisory lock, since its transactions see only committed rows): counted
        // outside one, two nodes starting together each found none and each made one.
        let mut tx = self.begin_write().await?;
        if let Some(lock) = D::LOCK_KEY {
            sqlx::query(lock)
                .bind("first-admin")
                .execute(&mut *tx)
                .await?;
        }
        let admins: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM tokens WHERE role = $1 AND revoked_at IS NULL",
        )
        .bind(Role::Admin.as_str())
        .fetch_one(&mut *tx)
        .await?;
        if admins > 0 {
            return Ok(None);
        }
        let t = insert_token::<D>(&mut tx, Role::Admin, name).await?;
        tx.commit().await?;
        Ok(Some(t))
    }

    async fn create_upload(&self, owner: &str, mut files: Vec<NewFile>) -> Result<Upload> {
        files.sort_by(|a, b| a.path.cmp(&b.path));
        let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
        check_tree(&paths)?;
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
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "INSERT INTO uploads (id, owner, created_at, total_bytes) VALUES ($1, $2, $3, $4)",
        )
        .bind(upload.id.as_str())
        .bind(upload.owner.as_str())
        .bind(upload.created_at)
        .bind(upload.total_bytes as i64)
        .execute(&mut *tx)
        .await?;
        for f in &upload.files {
            sqlx::query(
                "INSERT INTO upload_files (upload_id, path, sha256, size, mode) VALUES ($1, $2, $3, $4, $5)",
            )
            .bind(upload.id.as_str())
            .bind(f.path.as_str())
            .bind(f.sha256.as_str())
            .bind(f.size as i64)
            .bind(f.mode as i64)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(upload)
    }

    async fn get_upload(&self, id: &str) -> Result<Option<Upload>> {
        let Some(mut upload) = sqlx::query_as::<_, Upload>(
            "SELECT id, owner, created_at, total_bytes FROM uploads WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&self.db)
        .await?
        else {
            return Ok(None);
        };
        upload.files = sqlx::query_as(
            "SELECT path, sha256, size, mode FROM upload_files WHERE upload_id = $1 ORDER BY path",
        )
        .bind(id)
        .fetch_all(&self.db)
        .await?;
        Ok(Some(upload))
    }

    async fn materialize(&self, upload: &Upload, dest: &Path) -> Result<()> {
        let files = upload.files.clone();
        let dest = dest.to_path_buf();
        let id = upload.id.clone();
        self.blocking(move |b| {
            for f in &files {
                // Re-checked: what the database holds is not trusted to be a plain path.
                let rel = validate_path(&f.path, 64)?;
                let target = dest.join(&rel);
                if let Some(parent) = target.parent() {
                    std::fs::create_dir_all(parent)
                        .map_err(|e| StoreError::io(format!("creating {}", parent.display()), e))?;
                }
                b.copy_to(&f.sha256, &target, f.mode)
                    .map_err(|e| file_lost(e, &id, &f.path))?;
            }
            Ok(())
        })
        .await
    }

    async fn read_upload_file(&self, upload: &Upload, path: &str) -> Result<Option<Vec<u8>>> {
        let Some(sha) = upload
            .files
            .iter()
            .find(|f| f.path == path)
            .map(|f| f.sha256.clone())
        else {
            return Ok(None);
        };
        let (id, path) = (upload.id.clone(), path.to_string());
        self.blocking(move |b| b.read(&sha).map(Some).map_err(|e| file_lost(e, &id, &path)))
            .await
    }

    async fn delete_uploads_before(&self, before: i64) -> Result<u64> {
        let mut tx = self.begin_write().await?;
        sqlx::query(&format!(
            "DELETE FROM upload_files WHERE upload_id IN \
             (SELECT id FROM uploads WHERE created_at < $1 AND {UPLOAD_NOT_IN_USE})"
        ))
        .bind(before)
        .execute(&mut *tx)
        .await?;
        let r = sqlx::query(&format!(
            "DELETE FROM uploads WHERE created_at < $1 AND {UPLOAD_NOT_IN_USE}"
        ))
        .bind(before)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        let keep: HashSet<String> = sqlx::query_scalar("SELECT DISTINCT sha256 FROM upload_files")
            .fetch_all(&self.db)
            .await?
            .into_iter()
            .collect();
        self.blocking(move |b| b.collect_garbage(&keep, before))
            .await?;
        Ok(D::rows_affected(&r))
    }

    async fn put_suite(&self, id: &str, owner: &str, name: &str, upload_id: &str) -> Result<Suite> {
        let mut tx = self.begin_write().await?;
        let existing: Option<String> = sqlx::query_scalar(&format!(
            "SELECT owner FROM suites WHERE id = $1{}",
            D::FOR_UPDATE
        ))
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?;
        if existing.is_some_and(|o| o != owner) {
            return Err(StoreError::Conflict(format!(
                "suite {id:?} was registered by someone else"
            )));
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
        .bind(suite.id.as_str())
        .bind(suite.owner.as_str())
        .bind(suite.name.as_str())
        .bind(suite.upload_id.as_str())
        .bind(suite.created_at)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(suite)
    }

    async fn get_suite(&self, id: &str) -> Result<Option<Suite>> {
        Ok(sqlx::query_as(
            "SELECT id, owner, name, upload_id, created_at FROM suites WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&self.db)
        .await?)
    }

    async fn list_suites(&self) -> Result<Vec<Suite>> {
        Ok(
            sqlx::query_as("SELECT id, owner, name, upload_id, created_at FROM suites ORDER BY id")
                .fetch_all(&self.db)
                .await?,
        )
    }

    async fn create_revision(&self, rev: NewRevision) -> Result<RevisionMeta> {
        self.insert_revision(rev).await
    }

    async fn list_revisions(&self, f: &RevisionFilter) -> Result<Vec<RevisionMeta>> {
        self.select_revisions(f).await
    }

    async fn get_revision(&self, id: &str) -> Result<Option<Revision>> {
        self.select_revision(id).await
    }

    async fn close(&self) {
        if let Some(l) = &self.listener {
            l.stop();
        }
        self.db.close().await;
    }
}
