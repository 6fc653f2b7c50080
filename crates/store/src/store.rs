//! What the server keeps across restarts ([`Store`]) and the plain types it speaks: tokens and
//! their roles, uploads and their files, suites.

use std::path::Path;

use crate::error::{Result, StoreError};
use crate::jobs::JobStore;
use crate::nodes::NodeStore;
use crate::revisions::{NewRevision, Revision, RevisionFilter, RevisionMeta};

/// A role decides what a token may do.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Student,
    Staff,
    Admin,
    /// A remote worker: claims submissions and posts their results, nothing else.
    Worker,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Staff => "staff",
            Role::Student => "student",
            Role::Worker => "worker",
        }
    }

    /// Staff and admins may register suites and see hidden results.
    pub fn is_staff(self) -> bool {
        matches!(self, Role::Staff | Role::Admin)
    }
}

impl std::str::FromStr for Role {
    type Err = StoreError;
    fn from_str(s: &str) -> Result<Self, StoreError> {
        match s {
            "admin" => Ok(Role::Admin),
            "staff" => Ok(Role::Staff),
            "student" => Ok(Role::Student),
            "worker" => Ok(Role::Worker),
            other => Err(StoreError::Invalid(format!(
                "unknown role {other:?}: use admin, staff, student or worker"
            ))),
        }
    }
}

/// Reads a stored role.
impl TryFrom<String> for Role {
    type Error = StoreError;
    fn try_from(s: String) -> Result<Self, StoreError> {
        s.parse()
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A token as the server sees it (never the secret).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, sqlx::FromRow)]
pub struct TokenInfo {
    pub id: String,
    #[sqlx(try_from = "String")]
    pub role: Role,
    pub name: String,
    pub created_at: i64,
}

/// A newly created token: the secret (shown once) and its record.
#[derive(Debug, Clone)]
pub struct NewToken {
    pub secret: String,
    pub info: TokenInfo,
}

/// One file of an upload.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, sqlx::FromRow)]
pub struct UploadFile {
    /// Relative, `/`-separated path (validated by [`validate_path`](crate::paths::validate_path)).
    pub path: String,
    pub sha256: String,
    #[sqlx(try_from = "i64")]
    pub size: u64,
    /// Permission bits: 0o644, or 0o755 for executables.
    #[sqlx(try_from = "i64")]
    pub mode: u32,
}

/// An immutable collection of files.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, sqlx::FromRow)]
pub struct Upload {
    pub id: String,
    pub owner: String,
    pub created_at: i64,
    #[sqlx(try_from = "i64")]
    pub total_bytes: u64,
    /// Read separately (another table).
    #[sqlx(skip)]
    pub files: Vec<UploadFile>,
}

/// A file to be stored in a new upload: its checked path, content and mode.
#[derive(Debug, Clone)]
pub struct NewFile {
    pub path: String,
    pub content: Vec<u8>,
    pub mode: u32,
}

/// A registered check suite.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, sqlx::FromRow)]
pub struct Suite {
    pub id: String,
    pub owner: String,
    pub name: String,
    pub upload_id: String,
    pub created_at: i64,
}

/// Whether the store can be written now: what a server checks when it starts and what `/health`
/// reports (at most about once a second: it writes). A trait of its own, as [`JobStore`] is.
#[async_trait::async_trait]
pub trait WriteProbe {
    /// Commits a one-row write and, on SQLite, checks that the database file at its path is still
    /// the file this store opened. The error says why the store cannot be written:
    /// [`StoreError::FileChanged`], the database's refusal (a full disk, a read-only file or
    /// database), or it being unreachable.
    async fn check_writable(&self) -> Result<()>;
}

/// Everything corral keeps across restarts. Implementations must be safe to share between tasks.
///
/// Ownership is the caller's job to check (`owner` fields); the store only records it.
#[async_trait::async_trait]
pub trait Store: Send + Sync + JobStore + WriteProbe + NodeStore {
    /// Creates a token with this role; the returned secret is not stored anywhere.
    async fn create_token(&self, role: Role, name: &str) -> Result<NewToken>;
    /// The live (not revoked) token whose secret this is.
    async fn token_by_secret(&self, secret: &str) -> Result<Option<TokenInfo>>;
    /// Revokes a token by its public id; false when there was none. The jobs its remote workers
    /// hold ([`remote_worker`](crate::remote_worker)) go back to the queue in the same step, the
    /// claim not counted as an attempt (as [`JobStore::release_job`]): another worker takes them
    /// now rather than when their leases end, and the revoked worker's leases are void.
    async fn revoke_token(&self, id: &str) -> Result<bool>;
    /// Public ids of the tokens revoked at or after `since` (Unix seconds): what a server polls
    /// to close the connections of tokens another node revoked.
    async fn tokens_revoked_since(&self, since: i64) -> Result<Vec<String>>;
    /// Live tokens with this role.
    async fn count_tokens(&self, role: Role) -> Result<u64>;
    /// Creates an admin token named `name` when there is no live admin token (a server's first
    /// start), else `None`. The check and the creation are one atomic step: nodes starting
    /// together on one fresh database create one token between them.
    async fn create_first_admin(&self, name: &str) -> Result<Option<NewToken>>;

    /// Stores the files (contents into the blob store first) and records the upload.
    async fn create_upload(&self, owner: &str, files: Vec<NewFile>) -> Result<Upload>;
    async fn get_upload(&self, id: &str) -> Result<Option<Upload>>;
    /// Writes an upload's files below `dest` (an empty folder), with their modes.
    async fn materialize(&self, upload: &Upload, dest: &Path) -> Result<()>;
    /// The contents of the upload's file at `path` (`None`: it has none there).
    async fn read_upload_file(&self, upload: &Upload, path: &str) -> Result<Option<Vec<u8>>>;
    /// Deletes uploads created before `before` (Unix seconds) that no suite uses, and blobs no
    /// upload references any more. Returns the number of uploads deleted.
    async fn delete_uploads_before(&self, before: i64) -> Result<u64>;

    /// Registers a suite under `id`, or replaces the one there when `owner` registered it.
    async fn put_suite(&self, id: &str, owner: &str, name: &str, upload_id: &str) -> Result<Suite>;
    async fn get_suite(&self, id: &str) -> Result<Option<Suite>>;
    async fn list_suites(&self) -> Result<Vec<Suite>>;

    /// Flushes and closes connections (graceful shutdown).
    async fn close(&self);

    /// Stores a revision of the browser editor's files (the owner keeps their newest few hundred).
    async fn create_revision(&self, rev: NewRevision) -> Result<RevisionMeta>;
    /// Revisions without their files, newest first.
    async fn list_revisions(&self, filter: &RevisionFilter) -> Result<Vec<RevisionMeta>>;
    /// One revision with its files (ownership is the caller's to check).
    async fn get_revision(&self, id: &str) -> Result<Option<Revision>>;
}
