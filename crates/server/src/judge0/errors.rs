//! Judge0's error shapes: `{"error": "..."}` with Judge0's status, a field's refusal as its
//! model's errors (422), and a full queue as Judge0's 503 "queue is full".

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::translate::Invalid;

/// A Judge0-style error: `{"error": "..."}` (Judge0 answers its 400s, 401s, 404s and 503s so).
/// A refusal to queue: a token over `max_pending_per_owner` (which `config_info` calls
/// `max_queue_size`) is Judge0's 503 "queue is full", with corral's `Retry-After`; the rest
/// as corral answers them.
pub(super) fn j0_refusal(e: crate::error::ApiError) -> Response {
    if e.code != "queue_full" {
        return e.into_response();
    }
    let mut r = j0_error(StatusCode::SERVICE_UNAVAILABLE, "queue is full");
    if let Some(s) = e.retry_after {
        r.headers_mut()
            .insert(axum::http::header::RETRY_AFTER, s.into());
    }
    r
}

pub(super) fn j0_error(code: StatusCode, msg: impl Into<String>) -> Response {
    (code, Json(json!({"error": msg.into()}))).into_response()
}

/// Why one submission was not taken: a field Judge0's validations would refuse (422 with the
/// model's errors), or a refusal of another kind (`{"error"}` with its status).
pub(super) enum Refusal {
    Invalid(Invalid),
    Other(StatusCode, String),
    /// A refusal to retry after this many seconds (a full storage, a database that does not
    /// answer): said in `Retry-After` too.
    Later(StatusCode, String, u64),
}

impl From<Invalid> for Refusal {
    fn from(i: Invalid) -> Self {
        Refusal::Invalid(i)
    }
}

impl Refusal {
    pub(super) fn body(&self) -> Value {
        match self {
            Refusal::Invalid(i) => i.body(),
            Refusal::Other(_, m) | Refusal::Later(_, m, _) => json!({"error": m}),
        }
    }

    pub(super) fn into_response(self) -> Response {
        let (code, retry_after) = match &self {
            Refusal::Invalid(_) => (StatusCode::UNPROCESSABLE_ENTITY, None),
            Refusal::Other(c, _) => (*c, None),
            Refusal::Later(c, _, s) => (*c, Some(*s)),
        };
        let mut r = (code, Json(self.body())).into_response();
        if let Some(s) = retry_after {
            r.headers_mut()
                .insert(axum::http::header::RETRY_AFTER, s.max(1).into());
        }
        r
    }
}
