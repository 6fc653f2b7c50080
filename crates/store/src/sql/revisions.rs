//! The browser editor's revisions: the files as JSON text in the row, each owner's newest
//! [`MAX_PER_OWNER`] kept.

use sqlx::{ColumnIndex, Decode, Encode, Executor, IntoArguments, Type};

use super::dialect::Dialect;
use super::store::SqlStore;
use crate::clock::now;
use crate::error::{Result, StoreError};
use crate::ids::random_hex;
use crate::paths::check_tree;
use crate::revisions::{
    NewRevision, Revision, RevisionFile, RevisionFilter, RevisionKind, RevisionMeta, MAX_PER_OWNER,
};

const META: &str = "id, owner, created_at, kind, language, status, suite, score, max_score, \
    summary, files_count, total_bytes";

/// A revision as stored: its files still JSON text.
#[derive(sqlx::FromRow)]
struct RevisionRow {
    #[sqlx(flatten)]
    meta: RevisionMeta,
    files: String,
}

impl<D> SqlStore<D>
where
    D: Dialect,
    for<'c> &'c mut D::Connection: Executor<'c, Database = D>,
    for<'q> D::Arguments<'q>: IntoArguments<'q, D>,
    for<'q> i64: Encode<'q, D> + Decode<'q, D> + Type<D>,
    for<'q> &'q str: Encode<'q, D> + Type<D> + ColumnIndex<D::Row>,
    for<'q> Option<&'q str>: Encode<'q, D>,
    for<'q> f64: Decode<'q, D> + Type<D>,
    for<'q> Option<f64>: Encode<'q, D>,
    for<'q> String: Decode<'q, D> + Type<D>,
{
    pub(super) async fn insert_revision(&self, rev: NewRevision) -> Result<RevisionMeta> {
        let paths: Vec<&str> = rev.files.iter().map(|f| f.path.as_str()).collect();
        check_tree(&paths)?;
        let files = serde_json::to_string(&rev.files)
            .map_err(|e| StoreError::Invalid(format!("revision files: {e}")))?;
        let meta = RevisionMeta {
            id: random_hex(16),
            owner: rev.owner,
            created_at: now(),
            kind: rev.kind,
            language: rev.language,
            status: rev.status,
            suite: rev.suite,
            score: rev.score,
            max_score: rev.max_score,
            summary: rev.summary,
            files_count: rev.files.len() as u32,
            total_bytes: rev.files.iter().map(|f| f.content.len() as u64).sum(),
        };
        let mut tx = self.begin_write().await?;
        sqlx::query(&format!(
            "INSERT INTO revisions ({META}, files) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)"
        ))
        .bind(meta.id.as_str())
        .bind(meta.owner.as_str())
        .bind(meta.created_at)
        .bind(meta.kind.as_str())
        .bind(meta.language.as_str())
        .bind(meta.status.as_str())
        .bind(meta.suite.as_deref())
        .bind(meta.score)
        .bind(meta.max_score)
        .bind(meta.summary.as_str())
        .bind(meta.files_count as i64)
        .bind(meta.total_bytes as i64)
        .bind(files.as_str())
        .execute(&mut *tx)
        .await?;
        // Bounded per owner: the oldest beyond the newest MAX_PER_OWNER go.
        sqlx::query(
            "DELETE FROM revisions WHERE owner = $1 AND seq <= (SELECT seq FROM revisions \
             WHERE owner = $1 ORDER BY seq DESC LIMIT 1 OFFSET $2)",
        )
        .bind(meta.owner.as_str())
        .bind(MAX_PER_OWNER)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(meta)
    }

    pub(super) async fn select_revisions(&self, f: &RevisionFilter) -> Result<Vec<RevisionMeta>> {
        // The casts give PostgreSQL the parameters' type when they are NULL.
        Ok(sqlx::query_as(&format!(
            "SELECT {META} FROM revisions WHERE (CAST($1 AS TEXT) IS NULL OR owner = $1) \
             AND (CAST($2 AS TEXT) IS NULL OR kind = $2) ORDER BY seq DESC LIMIT $3"
        ))
        .bind(f.owner.as_deref())
        .bind(f.kind.map(RevisionKind::as_str))
        .bind(f.limit as i64)
        .fetch_all(&self.db)
        .await?)
    }

    pub(super) async fn select_revision(&self, id: &str) -> Result<Option<Revision>> {
        let row: Option<RevisionRow> = sqlx::query_as(&format!(
            "SELECT {META}, files FROM revisions WHERE id = $1"
        ))
        .bind(id)
        .fetch_optional(&self.db)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let files: Vec<RevisionFile> = serde_json::from_str(&row.files)
            .map_err(|e| StoreError::Corrupt(format!("revision {id}: {e}")))?;
        Ok(Some(Revision {
            meta: row.meta,
            files,
        }))
    }
}
