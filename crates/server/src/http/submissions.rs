//! `POST /submissions`, `POST /submissions/batch`, `GET /submissions/{id}`.

use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::json::ApiJson;
use crate::error::{ApiError, ErrorBody};
use crate::service::caller::Caller;
use crate::service::submissions::accept::{self, SubmissionRequest};
use crate::service::submissions::view::{wait_for, SubmissionView};
use crate::state::SharedState;

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SubmissionCreated {
    pub id: String,
    /// `queued`.
    pub status: String,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchRequest {
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
#[utoipa::path(
    post, path = "/submissions", tag = "submissions",
    request_body(content = SubmissionRequest, example = json!({"cmd": "cat hello.txt", "files": [{"path": "hello.txt", "content": "hello\n"}], "expected_output": "hello"})),
    responses(
        (status = 202, description = "Queued", body = SubmissionCreated,
            links(("GetSubmission" = (operation_id = "get_submission", parameters(("id" = "$response.body#/id")))))),
        (status = 404, description = "No such suite, or no such upload of this caller", body = ErrorBody),
        (status = 413, description = "Too many files or bytes", body = ErrorBody),
        (status = 422, description = "Invalid: modes, language, limits, callback URL", body = ErrorBody),
        (status = 429, description = "Rate limited, or too many of this token's submissions are waiting", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn submit(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
    ApiJson(req): ApiJson<SubmissionRequest>,
) -> Result<(StatusCode, Json<SubmissionCreated>), ApiError> {
    let id = accept::submit(&st, &caller, req).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(SubmissionCreated {
            id,
            status: "queued".into(),
        }),
    ))
}

/// Submit many at once.
///
/// Each item is a `POST /submissions` body; each gets an id or its own error (the others are
/// queued regardless). At most `submissions.batch_max` items.
#[utoipa::path(
    post, path = "/submissions/batch", tag = "submissions",
    request_body(content = BatchRequest, example = json!({"submissions": [
        {"cmd": "cat hello.txt", "files": [{"path": "hello.txt", "content": "hello\n"}], "expected_output": "hello"},
        {"cmd": "cat hello.txt", "files": [{"path": "hello.txt", "content": "bye\n"}], "expected_output": "hello"}
    ]})),
    responses(
        (status = 202, description = "Queued (items may carry their own error)", body = BatchResponse),
        (status = 413, description = "Too many items", body = ErrorBody),
        (status = 422, description = "Not a list of submissions", body = ErrorBody),
        (status = 429, description = "Too many of this token's submissions are waiting", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn submit_batch(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
    ApiJson(req): ApiJson<BatchRequest>,
) -> Result<(StatusCode, Json<BatchResponse>), ApiError> {
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
        ("timeout" = Option<f64>, Query, description = "Seconds to wait at most", example = 1.0),
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
    let wait = if is_true(&q.wait) {
        q.timeout
            .filter(|t| t.is_finite() && *t >= 0.0)
            .map(|t| Duration::from_secs_f64(t.min(3600.0)))
            .unwrap_or(max)
            .min(max)
    } else {
        Duration::ZERO
    };
    let job = wait_for(&st, &caller, &id, wait).await?;
    Ok(Json(SubmissionView::of(&job)))
}
