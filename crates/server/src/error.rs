//! Errors: [`ServerError`] for starting and stopping the service, [`ApiError`] for one request.
//! An [`ApiError`] says what kind of failure it is ([`ErrorKind`]), not how a protocol spells it:
//! the HTTP adapter maps kinds to status codes (`http::error`), and every adapter answers the
//! same JSON body, `{"error": CODE, "message": TEXT}` ([`ErrorBody`]). Internal errors keep their
//! detail for the logs only.

use serde::Serialize;
use utoipa::ToSchema;

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("configuration: {0}")]
    Config(String),
    #[error("store: {0}")]
    Store(#[from] corral_store::StoreError),
    #[error("sandbox: {0}")]
    Sandbox(#[from] corral_sandbox::SandboxError),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

/// The body of every error response.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// A stable machine-readable code (`bad_request`, `not_found`, `rate_limited`, …).
    #[schema(example = "not_found")]
    pub error: String,
    /// What went wrong and what to do, for people.
    pub message: String,
}

/// What kind of failure a request met (each adapter says it its own way: a status code, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The request is malformed.
    BadRequest,
    /// No or an unknown token, or a bad signature.
    Unauthorized,
    /// The caller's role may not do this.
    Forbidden,
    /// No such thing (of this caller).
    NotFound,
    /// A known endpoint, another method.
    MethodNotAllowed,
    /// The thing is busy or in another state.
    Conflict,
    /// The thing was there and is no longer kept (retention deleted it).
    Gone,
    /// Too many files, bytes or items.
    TooLarge,
    /// A body of the wrong media type.
    UnsupportedMediaType,
    /// Well-formed but invalid (types, values, limits).
    Invalid,
    /// Too many requests or waiting items for this caller.
    TooManyRequests,
    /// A fault of the server: its detail is logged, never answered.
    Internal,
    /// Overloaded or shutting down: retry later.
    Unavailable,
    /// The client took too long to send its request.
    TimedOut,
    /// Another server must answer it (a sandbox another node keeps, which cannot be sent on).
    Misdirected,
    /// The server that must answer it did not (another node, sent a request on).
    BadGateway,
}

/// Seconds a client waits before retrying work a server shutting down refused: about a restart.
pub const SHUTTING_DOWN_RETRY: u64 = 5;

/// Seconds a client waits before retrying a write the full storage refused: room comes from an
/// operator (or retention), not within seconds.
pub const STORAGE_FULL_RETRY: u64 = 30;

#[derive(Debug)]
pub struct ApiError {
    pub kind: ErrorKind,
    pub code: &'static str,
    /// What the caller is told.
    pub message: String,
    /// Seconds, sent as `Retry-After` (429, 503).
    pub retry_after: Option<u64>,
    /// What an internal error really was: for the logs, never for the caller.
    detail: Option<String>,
}

impl ApiError {
    pub fn new(kind: ErrorKind, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            kind,
            code,
            message: message.into(),
            retry_after: None,
            detail: None,
        }
    }
    pub fn bad_request(m: impl Into<String>) -> Self {
        Self::new(ErrorKind::BadRequest, "bad_request", m)
    }
    pub fn unprocessable(m: impl Into<String>) -> Self {
        Self::new(ErrorKind::Invalid, "invalid", m)
    }
    pub fn not_found(what: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, "not_found", what)
    }
    pub fn unauthorized(m: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unauthorized, "unauthorized", m)
    }
    pub fn forbidden(m: impl Into<String>) -> Self {
        Self::new(ErrorKind::Forbidden, "forbidden", m)
    }
    pub fn conflict(m: impl Into<String>) -> Self {
        Self::new(ErrorKind::Conflict, "conflict", m)
    }
    pub fn gone(m: impl Into<String>) -> Self {
        Self::new(ErrorKind::Gone, "gone", m)
    }
    pub fn too_large(m: impl Into<String>) -> Self {
        Self::new(ErrorKind::TooLarge, "too_large", m)
    }
    pub fn overloaded(m: impl Into<String>, retry_after: u64) -> Self {
        ApiError {
            retry_after: Some(retry_after),
            ..Self::new(ErrorKind::Unavailable, "overloaded", m)
        }
    }
    /// The server is shutting down: the request would start work it may not finish (503).
    pub fn shutting_down() -> Self {
        ApiError {
            retry_after: Some(SHUTTING_DOWN_RETRY),
            ..Self::new(
                ErrorKind::Unavailable,
                "shutting_down",
                format!(
                    "the server is shutting down and starts no new work; retry in \
                     {SHUTTING_DOWN_RETRY} s (another server or this one restarted will answer)"
                ),
            )
        }
    }
    pub fn rate_limited(retry_after: u64) -> Self {
        ApiError {
            retry_after: Some(retry_after),
            ..Self::new(
                ErrorKind::TooManyRequests,
                "rate_limited",
                format!("too many requests for this token; retry in {retry_after} s"),
            )
        }
    }
    /// A per-caller cap reached (429): `message` names the cap; retry in `retry_after` seconds.
    pub fn too_many(code: &'static str, message: impl Into<String>, retry_after: u64) -> Self {
        ApiError {
            retry_after: Some(retry_after),
            ..Self::new(ErrorKind::TooManyRequests, code, message)
        }
    }
    /// A fault of the server. The caller gets a generic message; `m` is kept for the log (the
    /// HTTP adapter logs it with the request id and answers that id).
    pub fn internal(m: impl std::fmt::Display) -> Self {
        ApiError {
            detail: Some(m.to_string()),
            ..Self::new(ErrorKind::Internal, "internal", "internal error")
        }
    }

    /// The server's storage (its disk, its database's) is full: a 503 to retry once there is
    /// room, not a 500. What failed is logged (the caller is not told the server's paths).
    pub fn storage_full(detail: impl std::fmt::Display) -> Self {
        tracing::warn!(error = %detail, "a write failed: the server's storage is full");
        ApiError {
            retry_after: Some(STORAGE_FULL_RETRY),
            ..Self::new(
                ErrorKind::Unavailable,
                "storage_full",
                "the server's storage is full, so nothing new can be stored now; retry later",
            )
        }
    }

    /// A failed file operation of the server's own (a temporary folder, a file written there):
    /// [`storage_full`](Self::storage_full) when the disk or a quota is full, else internal.
    pub fn io(e: std::io::Error) -> Self {
        if corral_store::is_storage_full_io(&e) {
            return Self::storage_full(e);
        }
        Self::internal(e)
    }

    /// The internal detail (internal errors only): for logs.
    pub fn detail(&self) -> Option<&str> {
        self.detail.as_deref()
    }

    /// Logs an internal error's detail where the error is not answered as a response (a batch
    /// item, a WebSocket message): the request's span carries its id.
    pub fn log_detail(&self) {
        if let Some(d) = &self.detail {
            tracing::error!(error = %d, "internal error");
        }
    }
}

impl From<corral_store::StoreError> for ApiError {
    fn from(e: corral_store::StoreError) -> Self {
        use corral_store::StoreError as E;
        match e {
            E::Invalid(m) => ApiError::bad_request(m),
            E::NotFound(m) => ApiError::not_found(m),
            E::Conflict(m) => ApiError::conflict(m),
            // Lost for good: said as it is (no server path in it), not hidden as internal, so
            // the caller knows to send the files again rather than to retry.
            E::BlobMissing(m) => {
                // The operator's side of it: with several servers, the usual cause is a server
                // whose blobs_dir is its own folder, not the one the others write.
                tracing::error!(
                    detail = %m,
                    "a stored file is missing from blobs_dir: deleted, not restored with the \
                     database, or (servers sharing a database) this server's blobs_dir is not \
                     the folder the others write"
                );
                ApiError::new(
                    ErrorKind::Internal,
                    "files_lost",
                    format!("{m}; upload the files again"),
                )
            }
            // A full disk or database fails every write until there is room: a 503 to retry.
            e if e.is_storage_full() => ApiError::storage_full(e),
            // The database is down or unreachable: a quick 503 to retry, not a 500.
            e if e.is_unreachable() => {
                tracing::warn!(error = %e, "the store is unreachable");
                ApiError::overloaded("the database does not answer; retry shortly", 5)
            }
            other => ApiError::internal(other),
        }
    }
}
