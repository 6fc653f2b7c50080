//! The endpoints remote workers (`corral worker`) use: long-poll for a job, renew its lease,
//! post its verdict. A worker needs nothing but its `worker` token: the claim carries the job's
//! spec and files, and the result is signed with the token
//! (`Corral-Signature: t=UNIX,v1=HEX(HMAC-SHA256(sha256_hex(token), "{t}.{body}"))`), so the
//! server checks both who sent it and that the body is the one the worker signed.

use std::path::Path as FsPath;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use base64::Engine;
use corral_store::{Completion, Role};

use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody};
use crate::state::SharedState;
use crate::types::ApiJson;
use corral_judge::{
    ClaimRequest, ClaimedJob, JobFile, JobSpec, LeaseRequest, ResultRequest, ResultResponse,
    SIGNATURE_TOLERANCE,
};

fn require_worker(caller: &Caller) -> Result<(), ApiError> {
    // Only worker tokens: an admin's token does not take jobs by accident.
    if caller.role == Role::Worker {
        Ok(())
    } else {
        Err(ApiError::forbidden(
            "this needs a worker token (corral token create --role worker)",
        ))
    }
}

fn lease_lost() -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        "lease_lost",
        "this lease is not current any more (it expired, or the job is finished): stop and claim another",
    )
}

fn encode_files(files: Vec<(String, u32, Vec<u8>)>) -> Vec<JobFile> {
    files
        .into_iter()
        .map(|(path, mode, data)| JobFile {
            path,
            mode,
            content_base64: base64::engine::general_purpose::STANDARD.encode(data),
        })
        .collect()
}

async fn upload_files(st: &SharedState, id: &str) -> Result<Vec<(String, u32, Vec<u8>)>, ApiError> {
    let upload = st
        .store
        .get_upload(id)
        .await?
        .ok_or_else(|| ApiError::internal(format!("upload {id} is gone")))?;
    let dir = tempfile::Builder::new()
        .prefix("claim-")
        .tempdir_in(&st.tmp_dir)
        .map_err(ApiError::internal)?;
    st.store.materialize(&upload, dir.path()).await?;
    let mut out = Vec::new();
    for f in &upload.files {
        let data = std::fs::read(dir.path().join(&f.path)).map_err(ApiError::internal)?;
        out.push((f.path.clone(), f.mode, data));
    }
    Ok(out)
}

/// Plain files of a folder (the suites folder), never following links.
fn folder_files(root: &FsPath) -> Result<Vec<(String, u32, Vec<u8>)>, ApiError> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = Vec::new();
    let mut stack = vec![(root.to_path_buf(), String::new())];
    while let Some((dir, prefix)) = stack.pop() {
        for e in std::fs::read_dir(&dir)
            .map_err(ApiError::internal)?
            .flatten()
        {
            let name = e.file_name().to_string_lossy().into_owned();
            let rel = if prefix.is_empty() {
                name
            } else {
                format!("{prefix}/{name}")
            };
            let meta = std::fs::symlink_metadata(e.path()).map_err(ApiError::internal)?;
            if meta.is_dir() {
                stack.push((e.path(), rel));
            } else if meta.is_file() {
                let mode = if meta.permissions().mode() & 0o111 != 0 {
                    0o755
                } else {
                    0o644
                };
                out.push((
                    rel,
                    mode,
                    std::fs::read(e.path()).map_err(ApiError::internal)?,
                ));
            }
        }
    }
    Ok(out)
}

/// Claim a job (long poll).
///
/// Waits up to `wait` seconds (30 at most) for a queued submission; 204 when none came.
#[utoipa::path(
    post, path = "/worker/claim", tag = "workers",
    request_body = ClaimRequest,
    responses(
        (status = 200, description = "A job, now leased to this worker", body = ClaimedJob),
        (status = 204, description = "No job within the wait"),
        (status = 403, description = "Not a worker token", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn claim(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
    ApiJson(req): ApiJson<ClaimRequest>,
) -> Result<Response, ApiError> {
    require_worker(&caller)?;
    let name: String = req
        .worker
        .unwrap_or_default()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
        .take(64)
        .collect();
    let worker = format!("remote:{}:{}", caller.id, name);
    let wait = Duration::from_secs_f64(req.wait.unwrap_or(25.0).clamp(0.0, 30.0));
    let deadline = tokio::time::Instant::now() + wait;
    let lease = st.config.submissions.lease();
    let mut stop = st.shutdown.subscribe();
    let claim = loop {
        let work = st.queue.work.notified();
        if let Some(c) = st.store.claim_job(&worker, lease).await? {
            break c;
        }
        let now = tokio::time::Instant::now();
        if now >= deadline || *stop.borrow() {
            return Ok(StatusCode::NO_CONTENT.into_response());
        }
        tokio::select! {
            _ = work => {}
            _ = st.store.wait_for_work((deadline - now).min(Duration::from_millis(500))) => {}
            _ = stop.changed() => {}
        }
    };
    let id = claim.job.id.clone();
    // From here on the job is leased: anything failing gives it back through lease expiry.
    let spec: JobSpec = serde_json::from_str(&claim.job.spec)
        .map_err(|e| ApiError::internal(format!("job {id}: unreadable spec: {e}")))?;
    let files = match &claim.job.upload_id {
        Some(u) => encode_files(upload_files(&st, u).await?),
        None => Vec::new(),
    };
    let suite_files = match &spec.suite {
        None => None,
        Some(s) => Some(encode_files(match &s.upload {
            Some(u) => upload_files(&st, u).await?,
            None => {
                let dir = super::worker::suites_dir(&st).join(&s.id);
                tokio::task::spawn_blocking(move || folder_files(&dir))
                    .await
                    .map_err(ApiError::internal)??
            }
        })),
    };
    tracing::info!(submission = %id, worker = %worker, attempt = claim.job.attempts, "claimed by a remote worker");
    Ok(Json(ClaimedJob {
        id,
        lease: claim.lease,
        lease_ms: lease.as_millis() as u64,
        heartbeat_ms: st.config.submissions.heartbeat_every().as_millis() as u64,
        attempt: claim.job.attempts,
        spec,
        files,
        suite_files,
    })
    .into_response())
}

/// Renew a job's lease.
#[utoipa::path(
    post, path = "/worker/jobs/{id}/heartbeat", tag = "workers",
    params(("id" = String, Path, description = "Submission id")),
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
    require_worker(&caller)?;
    if st
        .store
        .heartbeat_job(&id, &req.lease, st.config.submissions.lease())
        .await?
    {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(lease_lost())
    }
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
/// The body is `{"lease", "verdict"}`; the `Corral-Signature` header signs its exact bytes with
/// the key `sha256_hex(worker token)`. Recorded once: the same result again is acknowledged
/// without change; a result for a lease that is not current is refused (409).
#[utoipa::path(
    post, path = "/worker/jobs/{id}/result", tag = "workers",
    params(("id" = String, Path, description = "Submission id")),
    request_body = ResultRequest,
    responses(
        (status = 200, description = "Recorded (or recorded before)", body = ResultResponse),
        (status = 401, description = "Missing or wrong signature", body = ErrorBody),
        (status = 403, description = "Not a worker token", body = ErrorBody),
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
    require_worker(&caller)?;
    let key = corral_store::sha256_hex(
        bearer_token(&headers)
            .ok_or_else(|| ApiError::unauthorized("no token"))?
            .as_bytes(),
    );
    let sig = headers
        .get("corral-signature")
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| ApiError::unauthorized("the result must carry a Corral-Signature header"))?;
    corral_judge::verify(
        key.as_bytes(),
        sig,
        &body,
        corral_store::now(),
        SIGNATURE_TOLERANCE,
    )
    .map_err(|why| ApiError::unauthorized(format!("result signature: {why}")))?;
    let req: ResultRequest = serde_json::from_slice(&body)
        .map_err(|e| ApiError::unprocessable(format!("result: {e}")))?;
    let v = &req.verdict;
    if !(v.score.is_finite() && v.max_score.is_finite() && v.score >= 0.0 && v.score <= v.max_score)
    {
        return Err(ApiError::unprocessable(
            "score must be within 0..=max_score",
        ));
    }
    let state = if v.verdict == corral_judge::VerdictKind::InternalError {
        corral_store::JobState::Failed
    } else {
        corral_store::JobState::Done
    };
    let text = serde_json::to_string(v).expect("a verdict serialises");
    match st.store.complete_job(&id, &req.lease, state, &text).await? {
        Completion::Recorded => {
            st.queue
                .metrics
                .judged
                .with_label_values(&[v.verdict.as_str()])
                .inc();
            tracing::info!(submission = %id, verdict = v.verdict.as_str(), worker = %caller.id, "judged by a remote worker");
            st.queue.finished.notify_waiters();
            Ok(Json(ResultResponse {
                result: "recorded".into(),
            }))
        }
        Completion::AlreadyRecorded => Ok(Json(ResultResponse {
            result: "already_recorded".into(),
        })),
        Completion::LeaseLost => Err(lease_lost()),
    }
}
