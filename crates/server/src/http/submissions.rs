//! `POST /submissions`, `POST /submissions/batch`, `GET /submissions/{id}`, `GET /submissions`
//! (a page of them), `POST /submissions/{id}/regrade`, `POST /submissions/{id}/callback`.

use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use corral_store::IdempotencyKey;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::json::{self, ApiJson, JsonBytes};
use crate::error::{ApiError, ErrorBody, ErrorKind};
use crate::http::path::Path;
use crate::service::caller::Caller;
use crate::service::submissions::accept::{self, SubmissionRequest, Submitted};
use crate::service::submissions::idempotency;
use crate::service::submissions::listing::{self, ListQuery, SubmissionPage};
use crate::service::submissions::redelivery;
use crate::service::submissions::regrade::{self, Regraded};
use crate::service::submissions::view::{wait_for, SubmissionView};
use crate::state::SharedState;

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SubmissionCreated {
    pub id: String,
    /// `queued`; for a retry under an `Idempotency-Key`, the submission's status now (`queued`,
    /// `running`, `done`, `failed`).
    pub status: String,
    /// True when nothing new was stored: the `Idempotency-Key` named this submission, made by an
    /// earlier request (also said by the `Idempotent-Replayed: true` header).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub replayed: bool,
}

/// The request header that names a request, so that its retries make one submission.
pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

/// The answer header of a retry answered with the submission an earlier request made.
pub const IDEMPOTENT_REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");

/// The request's `Idempotency-Key`, checked (400 when malformed or sent twice).
pub fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let mut values = headers.get_all(&IDEMPOTENCY_KEY).iter();
    let Some(first) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(ApiError::new(
            ErrorKind::BadRequest,
            "bad_idempotency_key",
            "more than one Idempotency-Key: send one",
        ));
    }
    idempotency::parse_key(first.as_bytes()).map(Some)
}

/// Refuses an `Idempotency-Key` where it is not supported (400): a client that relies on one
/// must not believe it is protected.
pub fn refuse_idempotency_key(headers: &HeaderMap, where_: &str) -> Result<(), ApiError> {
    if headers.contains_key(&IDEMPOTENCY_KEY) {
        return Err(ApiError::new(
            ErrorKind::BadRequest,
            "idempotency_key_unsupported",
            format!(
                "Idempotency-Key is not supported on {where_}: send each submission alone, with \
                 its own key"
            ),
        ));
    }
    Ok(())
}

/// The request's key with the fingerprint of its JSON `body` (bytes already parsed once), as
/// `what` (the endpoint and what changes the body's meaning) reads it.
pub fn keyed_request(
    key: Option<String>,
    what: &str,
    body: &[u8],
) -> Result<Option<IdempotencyKey>, ApiError> {
    let Some(key) = key else {
        return Ok(None);
    };
    let value: Value =
        serde_json::from_slice(body).map_err(|e| ApiError::bad_request(e.to_string()))?;
    Ok(Some(IdempotencyKey {
        key,
        fingerprint: idempotency::fingerprint(what, &value),
    }))
}

/// Marks an answer as a retry's (`Idempotent-Replayed: true`) when it is one.
pub fn mark_replayed(mut r: Response, replayed: bool) -> Response {
    if replayed {
        r.headers_mut()
            .insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
    }
    r
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchRequest {
    /// Each the body of a `POST /submissions`. Items are read one by one: an item that is not
    /// one is refused on its own (its `error` in the answer) and the others are queued.
    #[schema(value_type = Vec<SubmissionRequest>)]
    pub submissions: Vec<Value>,
}

/// One item of a batch answer: an id, or why that item was refused.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct BatchItem {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct BatchResponse {
    /// In the order of the request.
    pub submissions: Vec<BatchItem>,
}

#[derive(Debug, Clone, Deserialize, Default)]
pub struct WaitQuery {
    #[serde(default)]
    pub wait: Option<String>,
    /// Seconds to wait at most (capped by the server's `submissions.wait_max`).
    #[serde(default)]
    pub timeout: Option<f64>,
}

fn is_true(v: &Option<String>) -> bool {
    matches!(v.as_deref(), Some("true" | "1" | "yes" | ""))
}

/// Submit code to be judged.
///
/// Answers 202 at once with the submission's id; a worker judges it later. The submission is
/// stored durably before the answer: it survives a restart or crash of the server and of its
/// workers. `GET /submissions/{id}` tells the verdict; with `callback_url` the verdict is also
/// POSTed there, signed.
///
/// A client that may retry (after a timeout, a dropped connection) sends an `Idempotency-Key`:
/// a request with a key this token already used, and the same body, stores nothing and is
/// answered the submission the first request made (202, `"replayed": true`, the header
/// `Idempotent-Replayed: true`, `status` as it is now), also when the two requests race. The
/// same key with another body is refused (422 `idempotency_key_reused`). A key is remembered as
/// long as its submission is kept (see `retention`).
#[utoipa::path(
    post, path = "/submissions", tag = "submissions",
    params(
        ("Idempotency-Key" = Option<String>, Header,
            description = "A key of 1 to 255 visible ASCII characters (a UUID), bare or in double quotes, naming this request: its retries with the same key and body make no second submission",
            example = "8e03978e-40d5-43e8-bc93-6894a57f9324"),
    ),
    request_body(content = SubmissionRequest, example = json!({"cmd": "cat hello.txt", "files": [{"path": "hello.txt", "content": "hello\n"}], "expected_output": "hello"})),
    responses(
        (status = 202, description = "Queued; or, for a retry under an `Idempotency-Key`, the submission the first request made (`replayed`)", body = SubmissionCreated,
            headers(("Idempotent-Replayed" = String, description = "`true` when the answer is an earlier request's submission (a retry under the same `Idempotency-Key`)")),
            links(("GetSubmission" = (operation_id = "get_submission", parameters(("id" = "$response.body#/id")))))),
        (status = 400, description = "A malformed `Idempotency-Key` (`bad_idempotency_key`), a body that is not JSON (`bad_json`), or one that ended before its Content-Length or was badly chunked (`bad_body`)", body = ErrorBody),
        (status = 404, description = "No such suite, or no such upload of this caller", body = ErrorBody),
        (status = 413, description = "Too many files or bytes", body = ErrorBody),
        (status = 422, description = "Invalid: modes, language, limits, callback URL, a `language` without its program (`source_code`, `files` or `upload`); or an `Idempotency-Key` this token sent before with another body (`idempotency_key_reused`)", body = ErrorBody),
        (status = 429, description = "Rate limited, or too many of this token's submissions are waiting", body = ErrorBody),
        (status = 503, description = "Shutting down, the database does not answer, or the server's storage is full (`storage_full`): retry after `Retry-After`", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn submit(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    JsonBytes(body): JsonBytes,
) -> Result<Response, ApiError> {
    let key = idempotency_key(&headers)?;
    let req: SubmissionRequest = json::parse(&body)?;
    let key = keyed_request(key, "POST /submissions", &body)?;
    let Submitted { id, replayed } = accept::submit(&st, &caller, req, key).await?;
    let created = SubmissionCreated {
        id,
        status: replayed.map_or("queued", |s| s.as_str()).into(),
        replayed: replayed.is_some(),
    };
    Ok(mark_replayed(
        (StatusCode::ACCEPTED, Json(created)).into_response(),
        replayed.is_some(),
    ))
}

/// Submit many at once.
///
/// Each item is a `POST /submissions` body; each gets an id or its own error (the others are
/// queued regardless). At most `submissions.batch_max` items. An `Idempotency-Key` is refused
/// here (400 `idempotency_key_unsupported`): send submissions that need one alone.
#[utoipa::path(
    post, path = "/submissions/batch", tag = "submissions",
    request_body(content = BatchRequest, example = json!({"submissions": [
        {"cmd": "cat hello.txt", "files": [{"path": "hello.txt", "content": "hello\n"}], "expected_output": "hello"},
        {"cmd": "cat hello.txt", "files": [{"path": "hello.txt", "content": "bye\n"}], "expected_output": "hello"}
    ]})),
    responses(
        (status = 202, description = "Queued (items may carry their own error)", body = BatchResponse),
        (status = 400, description = "An `Idempotency-Key` (not supported on batches)", body = ErrorBody),
        (status = 413, description = "Too many items", body = ErrorBody),
        (status = 422, description = "Not a list of submissions", body = ErrorBody),
        (status = 429, description = "Too many of this token's submissions are waiting", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn submit_batch(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    ApiJson(req): ApiJson<BatchRequest>,
) -> Result<(StatusCode, Json<BatchResponse>), ApiError> {
    refuse_idempotency_key(&headers, "POST /submissions/batch")?;
    let items = accept::submit_batch(&st, &caller, req.submissions)
        .await?
        .into_iter()
        .map(|r| match r {
            Ok(id) => BatchItem {
                id: Some(id),
                status: Some("queued".into()),
                error: None,
                message: None,
            },
            Err(e) => {
                e.log_detail();
                BatchItem {
                    id: None,
                    status: None,
                    error: Some(e.code.to_string()),
                    message: Some(e.message),
                }
            }
        })
        .collect();
    Ok((
        StatusCode::ACCEPTED,
        Json(BatchResponse { submissions: items }),
    ))
}

/// A submission's status and verdict.
///
/// `?wait=true` waits until it is finished, at most `timeout` seconds (capped by the server's
/// `submissions.wait_max`, default 30 s), then answers whatever the status is.
#[utoipa::path(
    get, path = "/submissions/{id}", tag = "submissions",
    params(
        ("id" = String, Path, description = "Submission id", example = "0123456789abcdef0123456789abcdef"),
        ("wait" = Option<bool>, Query, description = "Wait for the verdict (bounded)", example = false),
        ("timeout" = Option<f64>, Query, description = "Seconds to wait at most", example = 1.0, minimum = 0),
    ),
    responses(
        (status = 200, description = "The submission", body = SubmissionView),
        (status = 401, description = "No or unknown token, or revoked while waiting", body = ErrorBody),
        (status = 404, description = "No such submission of this caller", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn get_submission(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    q: Result<Query<WaitQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<SubmissionView>, ApiError> {
    let Query(q) = q.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let max = st.config.submissions.wait_max.duration();
    if let Some(t) = q.timeout.filter(|t| !t.is_finite() || *t < 0.0) {
        // A negative wait was taken as the longest one.
        return Err(ApiError::bad_request(format!(
            "timeout {t}: seconds, 0 or more"
        )));
    }
    let wait = if is_true(&q.wait) {
        q.timeout
            .map(|t| Duration::from_secs_f64(t.min(3600.0)))
            .unwrap_or(max)
            .min(max)
    } else {
        Duration::ZERO
    };
    let job = wait_for(&st, &caller, &id, wait).await?;
    Ok(Json(SubmissionView::read_by(&job, caller.role.is_staff())))
}

/// A page of submissions, newest first.
///
/// Staff see every token's, filtered by `owner`, `suite` and `status`; a student sees its own.
/// Follow `next_cursor` for the next page (absent on the last one).
#[utoipa::path(
    get, path = "/submissions", tag = "submissions", operation_id = "list_submissions",
    params(ListQuery),
    responses(
        (status = 200, description = "A page of submissions", body = SubmissionPage),
        (status = 400, description = "A bad filter, limit or cursor", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 403, description = "A student asked for another token's submissions", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn list_submissions(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
    q: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<SubmissionPage>, ApiError> {
    let Query(q) = q.map_err(|e| ApiError::bad_request(e.body_text()))?;
    Ok(Json(listing::list(&st, &caller, q).await?))
}

/// Judge a finished submission again (staff).
///
/// A new submission of the same owner, files and request, graded by its suite as the suite is
/// now (a fixed test, a changed weight); the old one keeps its verdict. The regrade names the
/// original (`regrade_of`) and stands in its place in a gradebook. No callback is sent, and a
/// student's cap on waiting submissions does not count it.
#[utoipa::path(
    post, path = "/submissions/{id}/regrade", tag = "submissions", operation_id = "regrade_submission",
    params(("id" = String, Path, description = "Submission id", example = "0123456789abcdef0123456789abcdef")),
    responses(
        (status = 202, description = "Queued: the new submission's id", body = Regraded),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 403, description = "Not a staff token", body = ErrorBody),
        (status = 404, description = "No such submission", body = ErrorBody),
        (status = 409, description = "Still being judged, or its suite is no longer on this server", body = ErrorBody),
        (status = 410, description = "Its files are no longer kept (retention)", body = ErrorBody),
        (status = 422, description = "Its suite does not load (nothing is queued)", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn regrade_submission(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<Regraded>), ApiError> {
    let new = regrade::regrade(&st, &caller, &id).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(Regraded {
            id: Some(new),
            regrade_of: id,
            error: None,
            message: None,
        }),
    ))
}

/// Send a finished submission's callback again (staff).
///
/// Its callback goes back to `pending`, due now, with its tries counted afresh: the next delivery
/// carries `Corral-Delivery-Attempt: 1` and, failing, is retried as a first one is. For a
/// receiver that was down for longer than the tries last (`failed`), or that lost what it was
/// sent (`delivered`). Answers the submission as it is now.
#[utoipa::path(
    post, path = "/submissions/{id}/callback", tag = "submissions", operation_id = "redeliver_callback",
    params(("id" = String, Path, description = "Submission id", example = "0123456789abcdef0123456789abcdef")),
    responses(
        (status = 200, description = "To be delivered again: the submission (`callback.state` is `pending`, `callback.attempts` 0)", body = SubmissionView),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 403, description = "Not a staff token", body = ErrorBody),
        (status = 404, description = "No such submission", body = ErrorBody),
        (status = 409, description = "Not finished yet (`not_finished`), no `callback_url` (`no_callback`), or a try is under way (`callback_delivering`)", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn redeliver_callback(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Json<SubmissionView>, ApiError> {
    let job = redelivery::redeliver(&st, &caller, &id).await?;
    Ok(Json(SubmissionView::of(&job)))
}
