//! The library's one error type: one variant per step that can fail.

use std::fmt::Display;
use std::path::PathBuf;

/// What went wrong, with the file, entry or reference involved.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("not a sha256 digest: {0:?} (expected sha256: and 64 lowercase hex digits)")]
    BadDigest(String),
    #[error("digest mismatch for {what}: expected {expected}, got {actual} (the data was altered or truncated)")]
    DigestMismatch {
        what: String,
        expected: String,
        actual: String,
    },
    #[error("layer refused: entry {entry:?}: {reason}")]
    LayerRefused { entry: String, reason: String },
    #[error("layer refused: {0}")]
    LayerLimit(String),
    // No `#[source]`: the message says it already (a chain would print it twice).
    #[error("layer stream: {0}")]
    LayerStream(std::io::Error),
    #[error("not an image reference: {0:?} (expected NAME[:TAG], NAME@sha256:…, or a digest or ≥12-hex prefix; a NAME of 12 or more hex digits alone would read as a digest)")]
    BadReference(String),
    #[error("no image {0:?} in this store (see `corral env ls`)")]
    NotFound(String),
    #[error("{prefix:?} names more than one image ({count}); give more digits")]
    Ambiguous { prefix: String, count: usize },
    #[error("{what} is not valid: {reason}")]
    BadManifest { what: String, reason: String },
    #[error("the archive has no blob {digest} for {what}")]
    MissingBlob { what: String, digest: String },
    #[error("the archive has no file {file:?} for {what} (only regular files are read from an archive; links are not followed)")]
    MissingFile { what: String, file: String },
    #[error("{path}: only {left} left on its filesystem, under the 5% kept free for the host: remove images (`corral env rm`, then `corral env gc`) or give the store more room")]
    NoRoom {
        path: std::path::PathBuf,
        left: String,
    },
    #[error("the image is for {image} and this host is {host}: its programs cannot run here (import or pull its {host} variant)")]
    WrongPlatform { image: String, host: String },
    #[error("the image could never run: {0}")]
    Unusable(String),
    #[error("unsupported media type {0:?}")]
    UnsupportedMediaType(String),
    #[error("no image for this host's platform ({0}) in the index")]
    NoPlatform(String),
    #[error("{path}: not an OCI image layout, docker-archive, or root-filesystem tar: {reason}")]
    UnknownImport { path: PathBuf, reason: String },
    #[error("the archive names its image {name:?}, which names another image already ({other}): give the name to use (--name, or ?name= over HTTP), or remove the old name first (corral env rm {name})")]
    NameTaken { name: String, other: String },
    #[error("registry {registry}: {reason}")]
    Registry { registry: String, reason: String },
    #[error("registry credentials: {0}")]
    Credentials(String),
    #[error("the image store index {path} is damaged: {reason}")]
    Index { path: PathBuf, reason: String },
}

impl Error {
    /// Data that is not what its digest says: altered on the way or on disk, which an operator
    /// should hear about even when the caller retries.
    pub(crate) fn digest_mismatch(
        what: impl Into<String>,
        expected: impl Display,
        actual: impl Display,
    ) -> Error {
        let what = what.into();
        tracing::warn!(%what, %expected, %actual, "digest mismatch");
        Error::DigestMismatch {
            what,
            expected: expected.to_string(),
            actual: actual.to_string(),
        }
    }
}

pub(crate) trait IoContext<T> {
    fn at(self, path: impl Into<PathBuf>) -> Result<T, Error>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn at(self, path: impl Into<PathBuf>) -> Result<T, Error> {
        self.map_err(|source| Error::Io {
            path: path.into(),
            source,
        })
    }
}
