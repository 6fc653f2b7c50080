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
//! - **Submissions**: the durable queue workers claim jobs from ([`JobStore`]); **revisions** of
//!   the browser editor's files; **nodes**: the servers sharing the database ([`NodeStore`]).
//!
//! Two databases hold it, with one set of queries ([`sql`]): [`SqliteStore`] (embedded; migrations
//! in `migrations/sqlite`) and [`PgStore`] (several API nodes and workers sharing one PostgreSQL
//! database; migrations in `migrations/postgres`). [`open`] picks one by the URL's scheme.

mod backup;
mod blobs;
mod clock;
mod error;
mod ids;
mod jobs;
mod nodes;
mod paths;
mod revisions;
mod shown_url;
pub mod sql;
mod store;

use std::path::Path;

pub use backup::{backup_sqlite, copy_named_blobs, snapshot_sqlite, Backup};
pub use blobs::BlobStore;
pub use clock::{now, now_ms, skew_for_tests};
pub use error::{is_storage_full_io, Result, StoreError};
pub use ids::{random_hex, sha256_hex};
pub use jobs::*;
pub use nodes::{Node, NodeStore};
pub use paths::{check_tree, validate_path, MAX_COMPONENT, MAX_PATH};
pub use revisions::{
    NewRevision, Revision, RevisionFile, RevisionFilter, RevisionKind, RevisionMeta,
    MAX_PER_OWNER as MAX_REVISIONS_PER_OWNER,
};
pub use shown_url::shown_url;
pub use sql::{PgStore, SqliteStore};
pub use store::{NewFile, NewToken, Role, Store, Suite, TokenInfo, Upload, UploadFile, WriteProbe};

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
