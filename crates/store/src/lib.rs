//! corral's persistent state, behind one trait ([`Store`]) so the server does not care which
//! database holds it.
//!
//! - **Tokens**: API tokens with a role (`admin`, `staff`, `student`). Only `sha256(token)` is
//!   stored; the token itself is shown once, when it is created.
//! - **Uploads**: immutable collections of files owned by one token. File contents live in a
//!   content-addressed blob directory ([`BlobStore`], `blobs/ab/abcdef…` by sha256); the database
//!   holds the names, sizes, modes and hashes.
//! - **Suites**: registered check suites, each pointing at an upload that holds the suite file and
//!   the assignment's files.
//!
//! - **Submissions**: the durable queue workers claim jobs from ([`JobStore`]); **revisions** of
//!   the browser editor's files.
//!
//! Two databases hold it, with one set of queries ([`sql`]): [`SqliteStore`] (embedded; migrations
//! in `migrations/sqlite`) and [`PgStore`] (several API nodes and workers sharing one PostgreSQL
//! database; migrations in `migrations/postgres`). [`open`] picks one by the URL's scheme.

mod blobs;
mod jobs;
mod revisions;
pub mod sql;

use std::path::{Component, Path};

pub use blobs::BlobStore;
pub use jobs::*;
pub use revisions::{
    NewRevision, Revision, RevisionFile, RevisionFilter, RevisionKind, RevisionMeta,
    MAX_PER_OWNER as MAX_REVISIONS_PER_OWNER,
};
pub use sql::{PgStore, SqliteStore};

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
    /// Relative, `/`-separated path (validated by [`validate_path`]).
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

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
    #[error("database migration: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Invalid(String),
    #[error("not found: {0}")]
    NotFound(String),
    #[error("conflict: {0}")]
    Conflict(String),
    #[error("stored data is inconsistent: {0}")]
    Corrupt(String),
}

impl StoreError {
    pub fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        StoreError::Io {
            what: what.into(),
            source,
        }
    }
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Everything corral keeps across restarts. Implementations must be safe to share between tasks.
///
/// Ownership is the caller's job to check (`owner` fields); the store only records it.
#[async_trait::async_trait]
pub trait Store: Send + Sync + JobStore {
    /// Creates a token with this role; the returned secret is not stored anywhere.
    async fn create_token(&self, role: Role, name: &str) -> Result<NewToken>;
    /// The live (not revoked) token whose secret this is.
    async fn token_by_secret(&self, secret: &str) -> Result<Option<TokenInfo>>;
    /// Revokes a token by its public id; false when there was none.
    async fn revoke_token(&self, id: &str) -> Result<bool>;
    /// Live tokens with this role.
    async fn count_tokens(&self, role: Role) -> Result<u64>;

    /// Stores the files (contents into the blob store first) and records the upload.
    async fn create_upload(&self, owner: &str, files: Vec<NewFile>) -> Result<Upload>;
    async fn get_upload(&self, id: &str) -> Result<Option<Upload>>;
    /// Writes an upload's files below `dest` (an empty folder), with their modes.
    async fn materialize(&self, upload: &Upload, dest: &Path) -> Result<()>;
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

/// Opens the store a database URL names: `sqlite://PATH` (created when missing) or
/// `postgres://…`. File contents go to `blob_dir`.
pub async fn open(url: &str, blob_dir: &Path) -> Result<std::sync::Arc<dyn Store>> {
    if url.starts_with("sqlite:") {
        return Ok(std::sync::Arc::new(SqliteStore::open(url, blob_dir).await?));
    }
    if url.starts_with("postgres:") || url.starts_with("postgresql:") {
        return Ok(std::sync::Arc::new(PgStore::open(url, blob_dir).await?));
    }
    let scheme = url.split(':').next().unwrap_or(url);
    Err(StoreError::Invalid(format!(
        "database URL scheme {scheme:?} is not supported: use sqlite://PATH or postgres://…"
    )))
}

/// `n` random bytes from the kernel, as lowercase hex (`n = 16` gives 128 bits).
pub fn random_hex(n: usize) -> String {
    let mut b = vec![0u8; n];
    getrandom::fill(&mut b).expect("the kernel's random source is available");
    hex::encode(b)
}

/// sha256 of `data` in lowercase hex.
pub fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(data))
}

pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Limits on the names of uploaded files.
pub const MAX_COMPONENT: usize = 255;
pub const MAX_PATH: usize = 1024;

/// Checks that `path` is a plain relative path (`a/b/c.txt`) at most `max_depth` components deep:
/// no `..` or `.`, not absolute, no empty component, no NUL, no backslash, no control characters.
/// Returns the normalised form.
pub fn validate_path(path: &str, max_depth: usize) -> Result<String> {
    let bad = |why: &str| Err(StoreError::Invalid(format!("file name {path:?}: {why}")));
    if path.is_empty() {
        return bad("empty name");
    }
    if path.len() > MAX_PATH {
        return bad("name too long");
    }
    if path.contains('\0') {
        return bad("contains a NUL byte");
    }
    if path.contains('\\') {
        return bad("contains a backslash; use '/' between folders");
    }
    if path.chars().any(|c| c.is_control()) {
        return bad("contains a control character");
    }
    if path.starts_with('/') {
        return bad("absolute paths are not allowed");
    }
    let mut parts = Vec::new();
    for c in path.split('/') {
        match c {
            "" => return bad("empty folder name (double or trailing '/')"),
            "." | ".." => return bad("'.' and '..' are not allowed"),
            c if c.len() > MAX_COMPONENT => return bad("a name is longer than 255 bytes"),
            c => parts.push(c),
        }
    }
    if parts.len() > max_depth {
        return bad(&format!("nested deeper than {max_depth} levels"));
    }
    // Belt and braces: what the OS would make of it.
    if Path::new(path)
        .components()
        .any(|c| !matches!(c, Component::Normal(_)))
    {
        return bad("not a plain relative path");
    }
    Ok(parts.join("/"))
}

/// Checks that no file of the set is also a folder of another (`a` and `a/b`) and that names are
/// unique.
pub fn check_tree(paths: &[&str]) -> Result<()> {
    let mut files = std::collections::BTreeSet::new();
    let mut dirs = std::collections::BTreeSet::new();
    for p in paths {
        if !files.insert(*p) {
            return Err(StoreError::Invalid(format!("file name {p:?} given twice")));
        }
        let mut acc = String::new();
        let parts: Vec<&str> = p.split('/').collect();
        for part in &parts[..parts.len() - 1] {
            if !acc.is_empty() {
                acc.push('/');
            }
            acc.push_str(part);
            dirs.insert(acc.clone());
        }
    }
    if let Some(clash) = files.iter().find(|f| dirs.contains(**f)) {
        return Err(StoreError::Invalid(format!(
            "{clash:?} is both a file and a folder"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_plain_and_relative() {
        assert_eq!(validate_path("hello.c", 8).unwrap(), "hello.c");
        assert_eq!(validate_path("src/a/b.c", 8).unwrap(), "src/a/b.c");
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../b",
            "a/./b",
            "a//b",
            "a/",
            "a\\b",
            "a\0b",
            "a\nb",
            ".",
        ] {
            assert!(validate_path(bad, 8).is_err(), "{bad:?} accepted");
        }
        assert!(validate_path("a/b/c", 2).is_err());
        assert!(validate_path(&"x".repeat(300), 8).is_err());
    }

    #[test]
    fn trees_have_no_clashes() {
        assert!(check_tree(&["a/b", "a/c", "d"]).is_ok());
        assert!(check_tree(&["a", "a/b"]).is_err());
        assert!(check_tree(&["a", "a"]).is_err());
    }

    #[test]
    fn randomness_and_hashes() {
        let a = random_hex(16);
        assert_eq!(a.len(), 32);
        assert_ne!(a, random_hex(16));
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
