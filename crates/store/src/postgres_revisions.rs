//! The browser editor's revisions on PostgreSQL (the same rules as on SQLite: see `revisions`).

use sqlx::Row;

use crate::revisions::MAX_PER_OWNER;
use crate::{
    now, random_hex, NewRevision, PgStore, Result, Revision, RevisionFile, RevisionFilter,
    RevisionKind, RevisionMeta, StoreError,
};

const META: &str = "id, owner, created_at, kind, language, status, suite, score, max_score, summary, files_count, total_bytes";

fn meta_row(r: &sqlx::postgres::PgRow) -> Result<RevisionMeta> {
    Ok(RevisionMeta {
        id: r.try_get("id")?,
        owner: r.try_get("owner")?,
        created_at: r.try_get("created_at")?,
        kind: r.try_get::<String, _>("kind")?.parse()?,
        language: r.try_get("language")?,
        status: r.try_get("status")?,
        suite: r.try_get("suite")?,
        score: r.try_get("score")?,
        max_score: r.try_get("max_score")?,
        summary: r.try_get("summary")?,
        files_count: r.try_get::<i64, _>("files_count")? as u32,
        total_bytes: r.try_get::<i64, _>("total_bytes")? as u64,
    })
}

impl PgStore {
    pub(crate) async fn pg_create_revision(&self, rev: NewRevision) -> Result<RevisionMeta> {
        let paths: Vec<&str> = rev.files.iter().map(|f| f.path.as_str()).collect();
        crate::check_tree(&paths)?;
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
        let mut tx = self.db.begin().await?;
        sqlx::query(
            "INSERT INTO revisions (id, owner, created_at, kind, language, status, suite, score, \
             max_score, summary, files_count, total_bytes, files) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
        )
        .bind(&meta.id)
        .bind(&meta.owner)
        .bind(meta.created_at)
        .bind(meta.kind.as_str())
        .bind(&meta.language)
        .bind(&meta.status)
        .bind(&meta.suite)
        .bind(meta.score)
        .bind(meta.max_score)
        .bind(&meta.summary)
        .bind(meta.files_count as i64)
        .bind(meta.total_bytes as i64)
        .bind(files)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "DELETE FROM revisions WHERE owner = $1 AND seq <= (SELECT seq FROM revisions \
             WHERE owner = $1 ORDER BY seq DESC LIMIT 1 OFFSET $2)",
        )
        .bind(&meta.owner)
        .bind(MAX_PER_OWNER)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(meta)
    }

    pub(crate) async fn pg_list_revisions(&self, f: &RevisionFilter) -> Result<Vec<RevisionMeta>> {
        let sql = format!(
            "SELECT {META} FROM revisions WHERE ($1::text IS NULL OR owner = $1) \
             AND ($2::text IS NULL OR kind = $2) ORDER BY seq DESC LIMIT $3"
        );
        sqlx::query(&sql)
            .bind(f.owner.as_deref())
            .bind(f.kind.map(RevisionKind::as_str))
            .bind(f.limit as i64)
            .fetch_all(&self.db)
            .await?
            .iter()
            .map(meta_row)
            .collect()
    }

    pub(crate) async fn pg_get_revision(&self, id: &str) -> Result<Option<Revision>> {
        let sql = format!("SELECT {META}, files FROM revisions WHERE id = $1");
        let Some(row) = sqlx::query(&sql).bind(id).fetch_optional(&self.db).await? else {
            return Ok(None);
        };
        let files: String = row.try_get("files")?;
        let files: Vec<RevisionFile> = serde_json::from_str(&files)
            .map_err(|e| StoreError::Corrupt(format!("revision {id}: {e}")))?;
        Ok(Some(Revision {
            meta: meta_row(&row)?,
            files,
        }))
    }
}
