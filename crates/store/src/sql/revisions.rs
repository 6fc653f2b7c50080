//! The browser editor's revisions: the files as JSON text in the row, each owner's newest
//! [`MAX_PER_OWNER`] kept.

use sqlx::{ColumnIndex, Decode, Encode, Executor, IntoArguments, Type};

use super::{Dialect, SqlStore};
use crate::revisions::MAX_PER_OWNER;
use crate::{
    now, random_hex, NewRevision, Result, Revision, RevisionFile, RevisionFilter, RevisionKind,
    RevisionMeta, StoreError,
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
    for<'q> Option<i64>: Encode<'q, D>,
    for<'q> &'q str: Encode<'q, D> + Type<D> + ColumnIndex<D::Row>,
    for<'q> Option<&'q str>: Encode<'q, D>,
    for<'q> f64: Decode<'q, D> + Type<D>,
    for<'q> Option<f64>: Encode<'q, D>,
    for<'q> String: Decode<'q, D> + Type<D>,
    usize: ColumnIndex<D::Row>,
{
    pub(super) async fn insert_revision(&self, rev: NewRevision) -> Result<RevisionMeta> {
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

#[cfg(test)]
mod tests {
    use crate::revisions::MAX_PER_OWNER;
    use crate::{NewRevision, RevisionFile, RevisionFilter, RevisionKind, SqliteStore, Store};

    fn new(owner: &str, kind: RevisionKind, content: &str) -> NewRevision {
        NewRevision {
            owner: owner.into(),
            kind,
            language: "c".into(),
            status: "ok".into(),
            suite: None,
            score: None,
            max_score: None,
            summary: String::new(),
            files: vec![RevisionFile {
                path: "main.c".into(),
                content: content.into(),
            }],
        }
    }

    #[tokio::test]
    async fn revisions_roundtrip_newest_first_bounded() {
        let d = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", d.path().join("corral.db").display());
        let s = SqliteStore::open(&url, &d.path().join("blobs"))
            .await
            .unwrap();
        let a = s
            .create_revision(new("alice", RevisionKind::Run, "int main(){}"))
            .await
            .unwrap();
        let mut c = new("alice", RevisionKind::Check, "v2");
        c.suite = Some("hello".into());
        c.score = Some(2.5);
        c.max_score = Some(6.0);
        let b = s.create_revision(c).await.unwrap();
        s.create_revision(new("bob", RevisionKind::Save, "bob's"))
            .await
            .unwrap();
        let mine = s
            .list_revisions(&RevisionFilter {
                owner: Some("alice".into()),
                kind: None,
                limit: 10,
            })
            .await
            .unwrap();
        assert_eq!(
            mine.iter().map(|m| &m.id).collect::<Vec<_>>(),
            [&b.id, &a.id]
        );
        assert_eq!(mine[0].score, Some(2.5));
        let checks = s
            .list_revisions(&RevisionFilter {
                owner: None,
                kind: Some(RevisionKind::Check),
                limit: 10,
            })
            .await
            .unwrap();
        assert_eq!(checks.len(), 1);
        let all = s
            .list_revisions(&RevisionFilter {
                limit: 2,
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(all.len(), 2);
        let got = s.get_revision(&a.id).await.unwrap().unwrap();
        assert_eq!(got.meta, a);
        assert_eq!(got.files[0].content, "int main(){}");
        assert!(s.get_revision("nope").await.unwrap().is_none());
        let mut bad = new("alice", RevisionKind::Save, "");
        bad.files.push(RevisionFile {
            path: "main.c/x".into(),
            content: String::new(),
        });
        assert!(s.create_revision(bad).await.is_err());
        // Bounded: only the newest MAX_PER_OWNER stay.
        for i in 0..MAX_PER_OWNER {
            s.create_revision(new("carol", RevisionKind::Save, &i.to_string()))
                .await
                .unwrap();
        }
        let newest = s
            .create_revision(new("carol", RevisionKind::Save, "last"))
            .await
            .unwrap();
        let carol = s
            .list_revisions(&RevisionFilter {
                owner: Some("carol".into()),
                kind: None,
                limit: 1000,
            })
            .await
            .unwrap();
        assert_eq!(carol.len() as i64, MAX_PER_OWNER);
        assert_eq!(carol[0].id, newest.id);
        assert_eq!(
            s.list_revisions(&RevisionFilter {
                owner: Some("alice".into()),
                kind: None,
                limit: 10
            })
            .await
            .unwrap()
            .len(),
            2
        );
    }
}
