//! Revisions of the browser editor's files: what a user had when they pressed Run, Check or Save,
//! with how it went. Small text files, kept as JSON in the database (not as blobs: a revision is
//! read whole, and outlives the uploads' retention). Each owner keeps their newest
//! [`MAX_PER_OWNER`]; older ones are dropped when new ones arrive.

use sqlx::Row;

use crate::{now, random_hex, Result, SqliteStore, StoreError};

/// Revisions kept per owner.
pub const MAX_PER_OWNER: i64 = 500;

/// What a revision was made by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RevisionKind {
    Run,
    Check,
    Save,
}

impl RevisionKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RevisionKind::Run => "run",
            RevisionKind::Check => "check",
            RevisionKind::Save => "save",
        }
    }
}

impl std::str::FromStr for RevisionKind {
    type Err = StoreError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "run" => Ok(RevisionKind::Run),
            "check" => Ok(RevisionKind::Check),
            "save" => Ok(RevisionKind::Save),
            other => Err(StoreError::Invalid(format!(
                "unknown revision kind {other:?}: use run, check or save"
            ))),
        }
    }
}

/// One file of a revision (text).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RevisionFile {
    pub path: String,
    pub content: String,
}

/// A revision to store; paths must already be validated.
#[derive(Debug, Clone)]
pub struct NewRevision {
    pub owner: String,
    pub kind: RevisionKind,
    pub language: String,
    pub status: String,
    pub suite: Option<String>,
    pub score: Option<f64>,
    pub max_score: Option<f64>,
    pub summary: String,
    pub files: Vec<RevisionFile>,
}

/// A revision without its files (lists).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RevisionMeta {
    pub id: String,
    pub owner: String,
    pub created_at: i64,
    pub kind: RevisionKind,
    pub language: String,
    pub status: String,
    pub suite: Option<String>,
    pub score: Option<f64>,
    pub max_score: Option<f64>,
    pub summary: String,
    pub files_count: u32,
    pub total_bytes: u64,
}

/// A revision with its files.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Revision {
    #[serde(flatten)]
    pub meta: RevisionMeta,
    pub files: Vec<RevisionFile>,
}

/// Which revisions to list, newest first.
#[derive(Debug, Clone, Default)]
pub struct RevisionFilter {
    /// One owner's; `None`: everyone's (staff views).
    pub owner: Option<String>,
    pub kind: Option<RevisionKind>,
    pub limit: u32,
}

const META: &str = "id, owner, created_at, kind, language, status, suite, score, max_score, summary, files_count, total_bytes";

fn meta_row(r: &sqlx::sqlite::SqliteRow) -> Result<RevisionMeta> {
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

impl SqliteStore {
    pub(crate) async fn sqlite_create_revision(&self, rev: NewRevision) -> Result<RevisionMeta> {
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
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
        // Bounded per owner: the oldest beyond the newest MAX_PER_OWNER go.
        sqlx::query(
            "DELETE FROM revisions WHERE owner = ? AND seq <= (SELECT seq FROM revisions \
             WHERE owner = ? ORDER BY seq DESC LIMIT 1 OFFSET ?)",
        )
        .bind(&meta.owner)
        .bind(&meta.owner)
        .bind(MAX_PER_OWNER)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(meta)
    }

    pub(crate) async fn sqlite_list_revisions(
        &self,
        f: &RevisionFilter,
    ) -> Result<Vec<RevisionMeta>> {
        let sql = format!(
            "SELECT {META} FROM revisions WHERE (?1 IS NULL OR owner = ?1) AND (?2 IS NULL OR kind = ?2) \
             ORDER BY seq DESC LIMIT ?3"
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

    pub(crate) async fn sqlite_get_revision(&self, id: &str) -> Result<Option<Revision>> {
        let sql = format!("SELECT {META}, files FROM revisions WHERE id = ?");
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Store;

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
