//! Revisions of the browser editor's files: what a user had when they pressed Run, Check or Save,
//! with how it went. Small text files, kept as JSON in the database (not as blobs: a revision is
//! read whole, and outlives the uploads' retention). Each owner keeps their newest
//! [`MAX_PER_OWNER`]; older ones are dropped when new ones arrive.

use crate::error::{Result, StoreError};

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

/// Reads a stored kind.
impl TryFrom<String> for RevisionKind {
    type Error = StoreError;
    fn try_from(s: String) -> Result<Self> {
        s.parse()
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
#[derive(Debug, Clone, PartialEq, serde::Serialize, sqlx::FromRow)]
pub struct RevisionMeta {
    pub id: String,
    pub owner: String,
    pub created_at: i64,
    #[sqlx(try_from = "String")]
    pub kind: RevisionKind,
    pub language: String,
    pub status: String,
    pub suite: Option<String>,
    pub score: Option<f64>,
    pub max_score: Option<f64>,
    pub summary: String,
    #[sqlx(try_from = "i64")]
    pub files_count: u32,
    #[sqlx(try_from = "i64")]
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
