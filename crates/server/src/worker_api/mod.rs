//! The endpoints remote workers (`corral worker`) use: long-poll for a job, renew its lease,
//! post its verdict. A worker needs nothing but its `worker` token: the claim carries the job's
//! spec and files, and the result is signed with the token
//! (`Corral-Signature: t=UNIX,v1=HEX(HMAC-SHA256(sha256_hex(token), "{t}.{body}"))`), so the
//! server checks both who sent it and that the body is the one the worker signed. A worker that
//! lacks an image a job names fetches it from here by digest ([`images`]).

pub mod images;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use corral_judge::{
    ClaimRequest, ClaimedJob, LeaseRequest, ResultRequest, ResultResponse, SIGNATURE_TOLERANCE,
};

use crate::error::{ApiError, ErrorBody};
use crate::http::json::ApiJson;
use crate::http::path::Path;
use crate::service::caller::Caller;
use crate::service::submissions::remote;
use crate::state::SharedState;

/// Claim a job (long poll).
///
/// Waits up to `wait` seconds (30 at most) for a queued submission; 204 when none came.
#[utoipa::path(
    post, path = "/worker/claim", tag = "workers", operation_id = "claim_job",
    request_body = ClaimRequest,
    responses(
        (status = 200, description = "A job, now leased to this worker", body = ClaimedJob,
            links(
                ("RenewLease" = (operation_id = "renew_job_lease", description = "Renew the job's lease",
                    parameters(("id" = "$response.body#/id")),
                    request_body = json!({"lease": "$response.body#/lease"}))),
                ("PostResult" = (operation_id = "post_job_result", description = "Post the job's verdict (signed)",
                    parameters(("id" = "$response.body#/id")),
                    request_body = json!({"lease": "$response.body#/lease", "verdict": {"verdict": "accepted", "score": 1.0, "max_score": 1.0}}))),
            )),
        (status = 204, description = "No job within the wait"),
        (status = 401, description = "No or unknown token, or revoked while waiting: stop", body = ErrorBody),
        (status = 403, description = "Not a worker token", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn claim(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
    ApiJson(req): ApiJson<ClaimRequest>,
) -> Result<Response, ApiError> {
    match remote::claim(&st, &caller, req).await? {
        Some(job) => Ok(Json(job).into_response()),
        None => Ok(StatusCode::NO_CONTENT.into_response()),
    }
}

/// Renew a job's lease.
#[utoipa::path(
    post, path = "/worker/jobs/{id}/heartbeat", tag = "workers", operation_id = "renew_job_lease",
    params(("id" = String, Path, description = "Submission id", example = "0123456789abcdef0123456789abcdef")),
    request_body = LeaseRequest,
    responses(
        (status = 204, description = "Renewed"),
        (status = 403, description = "Not a worker token", body = ErrorBody),
        (status = 409, description = "The lease is lost: stop working on this job", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn heartbeat(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<LeaseRequest>,
) -> Result<StatusCode, ApiError> {
    remote::heartbeat(&st, &caller, &id, &req.lease).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The bearer token of the request (already authenticated by the middleware).
fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let h = headers
        .get(axum::http::header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, t) = h.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| t.trim())
}

/// Post a job's verdict (signed with the worker token).
///
/// Needs a worker token and the `Corral-Signature` HMAC below: a client without both gets 401 or
/// 403 only.
///
/// The body is `{"lease", "verdict"}`; the `Corral-Signature` header signs its exact bytes with
/// the key `sha256_hex(worker token)`. Recorded once: the same result again is acknowledged
/// without change; a result for a lease that is not current is refused (409).
#[utoipa::path(
    post, path = "/worker/jobs/{id}/result", tag = "workers", operation_id = "post_job_result",
    params(
        ("id" = String, Path, description = "Submission id", example = "0123456789abcdef0123456789abcdef"),
        ("Corral-Signature" = String, Header,
            description = "`t=UNIX,v1=HEX(HMAC-SHA256(sha256_hex(worker token), \"{t}.{body}\"))` over the exact body bytes; \
                without a valid one (made with the caller's own worker token) the answer is 401",
            example = "t=1767225600,v1=0000000000000000000000000000000000000000000000000000000000000000"),
    ),
    request_body = ResultRequest,
    responses(
        (status = 200, description = "Recorded (or recorded before)", body = ResultResponse),
        (status = 401, description = "Missing or wrong signature", body = ErrorBody),
        (status = 403, description = "Not a worker token", body = ErrorBody),
        (status = 404, description = "No such submission", body = ErrorBody),
        (status = 409, description = "The lease is lost", body = ErrorBody),
        (status = 422, description = "Not a valid verdict", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn result(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<ResultResponse>, ApiError> {
    caller.require_worker()?;
    let key = corral_store::sha256_hex(
        bearer_token(&headers)
            .ok_or_else(|| ApiError::unauthorized("no token"))?
            .as_bytes(),
    );
    let sig = headers
        .get("corral-signature")
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| ApiError::unauthorized("the result must carry a Corral-Signature header"))?
        .to_string();
    // Hashing a body of up to 64 MiB takes tens of milliseconds: not on the async workers.
    let signed = body.clone();
    tokio::task::spawn_blocking(move || {
        corral_judge::verify(
            key.as_bytes(),
            &sig,
            &signed,
            corral_store::now(),
            SIGNATURE_TOLERANCE,
        )
    })
    .await
    .map_err(ApiError::internal)?
    .map_err(|why| ApiError::unauthorized(format!("result signature: {why}")))?;
    let req: ResultRequest = serde_json::from_slice(&body)
        .map_err(|e| ApiError::unprocessable(format!("result: {e}")))?;
    Ok(Json(remote::record_result(&st, &caller, &id, req).await?))
}

/// The remote workers' routes (behind authentication; worker tokens reach nothing else).
pub fn routes() -> Router<SharedState> {
    Router::new()
        .route("/worker/claim", post(claim))
        .route("/worker/images/{*reference}", get(images::resolve))
        .route("/worker/blobs/{digest}", get(images::blob))
        .route("/worker/jobs/{id}/heartbeat", post(heartbeat))
        .route(
            "/worker/jobs/{id}/result",
            // A verdict carries the run's output (up to the output cap, three times over).
            post(result).layer(DefaultBodyLimit::max(64 << 20)),
        )
}
