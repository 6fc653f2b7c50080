//! The HTTP handlers (WebSocket: [`crate::ws`]).

use axum::extract::multipart::MultipartRejection;
use axum::extract::{Multipart, Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use corral_sandbox::{NoSink, Stdin};

use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody};
use crate::run::{execute, prepare, RunInput};
use crate::state::SharedState;
use crate::types::*;

/// Upload files.
///
/// CS50 Sandbox's `/upload`: the files become an immutable upload owned by the caller, usable as
/// `{"sandbox": {"homedir": id}}`.
#[utoipa::path(
    post, path = "/upload", tag = "sandbox",
    request_body(content = UploadForm, content_type = "multipart/form-data"),
    responses(
        (status = 200, description = "Stored", body = UploadResponse),
        (status = 400, description = "A bad name (`..`, absolute, NUL, backslash), a link or special file in an archive, or no files", body = ErrorBody),
        (status = 413, description = "Too many files or bytes", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 429, description = "Rate limited", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn upload(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
    form: Result<Multipart, MultipartRejection>,
) -> Result<Json<UploadResponse>, ApiError> {
    let form = form.map_err(crate::upload::rejection)?;
    let files = crate::upload::collect(form, &st.config.upload).await?;
    let upload = st.store.create_upload(&caller.id, files).await?;
    st.metrics.uploads.inc();
    tracing::info!(upload = %upload.id, files = upload.files.len(), bytes = upload.total_bytes, "upload stored");
    Ok(Json(UploadResponse {
        files: upload.files.iter().map(|f| f.path.clone()).collect(),
        id: upload.id,
    }))
}

/// Describe an upload (its owner only).
#[utoipa::path(
    get, path = "/uploads/{id}", tag = "sandbox",
    params(("id" = String, Path, description = "Upload id")),
    responses(
        (status = 200, description = "The upload", body = UploadInfo),
        (status = 404, description = "No such upload of this caller", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn get_upload(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Json<UploadInfo>, ApiError> {
    let u = st
        .store
        .get_upload(&id)
        .await?
        .filter(|u| u.owner == caller.id)
        .ok_or_else(|| ApiError::not_found(format!("no upload {id:?}")))?;
    Ok(Json(UploadInfo {
        files: u
            .files
            .iter()
            .map(|f| FileInfo {
                path: f.path.clone(),
                size: f.size,
                sha256: f.sha256.clone(),
            })
            .collect(),
        id: u.id,
        total_bytes: u.total_bytes,
        created_at: u.created_at,
    }))
}

/// Run a command.
///
/// CS50 Sandbox's `/run`: with `sandbox.homedir` the upload is copied into a fresh sandbox's
/// `$HOME`; with `sandbox.id` the command continues in a sandbox an earlier run returned. The
/// response's `sandbox` is the id to continue in (kept until idle for the server's TTL).
#[utoipa::path(
    post, path = "/run", tag = "sandbox",
    request_body = RunRequest,
    responses(
        (status = 200, description = "The run happened (whatever the program did)", body = RunResponse),
        (status = 400, description = "Malformed JSON", body = ErrorBody),
        (status = 404, description = "No such upload or sandbox of this caller", body = ErrorBody),
        (status = 409, description = "The sandbox is busy with another run", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
        (status = 415, description = "Not JSON", body = ErrorBody),
        (status = 422, description = "Wrong types, unknown fields or impossible limits", body = ErrorBody),
        (status = 429, description = "Rate limited, or all of the caller's sandboxes are busy", body = ErrorBody),
        (status = 503, description = "Overloaded; see Retry-After", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn run(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
    ApiJson(req): ApiJson<RunRequest>,
) -> Result<Json<RunResponse>, ApiError> {
    let input = RunInput {
        cmd: req.cmd,
        sandbox: req.sandbox,
        stdin: req
            .stdin
            .map(|s| Stdin::Bytes(s.into_bytes()))
            .unwrap_or_default(),
        limits: req.limits,
        env: req.env,
    };
    let prepared = prepare(&st, &caller, input).await?;
    let clamped = prepared.clamped.clone();
    let (outcome, sandbox) = execute(&st, prepared, |sb, spec| sb.run(spec, &mut NoSink)).await?;
    tracing::info!(caller = %caller.id, status = outcome.status.as_str(), wall_ms = outcome.usage.wall_time_ms, "run");
    Ok(Json(RunResponse::new(&outcome, sandbox, clamped)))
}

/// Destroy a kept sandbox now.
#[utoipa::path(
    delete, path = "/sandboxes/{id}", tag = "sandbox",
    params(("id" = String, Path, description = "Sandbox id")),
    responses(
        (status = 204, description = "Destroyed"),
        (status = 404, description = "No such sandbox of this caller", body = ErrorBody),
        (status = 409, description = "Busy", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn delete_sandbox(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    st.sandboxes.remove(&id, &caller.id)?.drop_blocking();
    st.metrics.held_sandboxes.set(st.sandboxes.len() as i64);
    Ok(StatusCode::NO_CONTENT)
}

/// Create an API token (admin).
#[utoipa::path(
    post, path = "/tokens", tag = "admin",
    request_body = TokenRequest,
    responses(
        (status = 201, description = "Created; the secret is shown only now", body = TokenResponse),
        (status = 403, description = "Not an admin", body = ErrorBody),
        (status = 422, description = "Unknown role", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn create_token(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
    ApiJson(req): ApiJson<TokenRequest>,
) -> Result<(StatusCode, Json<TokenResponse>), ApiError> {
    caller.require_admin()?;
    let name = req.name.unwrap_or_default();
    if name.len() > 200 {
        return Err(ApiError::unprocessable("name is longer than 200 bytes"));
    }
    let t = st.store.create_token(req.role.into(), &name).await?;
    tracing::info!(by = %caller.id, token = %t.info.id, role = %t.info.role, "token created");
    Ok((
        StatusCode::CREATED,
        Json(TokenResponse {
            token: t.secret,
            id: t.info.id,
            role: t.info.role.into(),
        }),
    ))
}

/// Revoke an API token (admin).
#[utoipa::path(
    delete, path = "/tokens/{id}", tag = "admin",
    params(("id" = String, Path, description = "The token's public id")),
    responses(
        (status = 204, description = "Revoked"),
        (status = 403, description = "Not an admin", body = ErrorBody),
        (status = 404, description = "No such live token", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn revoke_token(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    caller.require_admin()?;
    if st.store.revoke_token(&id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found(format!("no live token {id:?}")))
    }
}

/// Who this token is.
#[utoipa::path(
    get, path = "/whoami", tag = "admin",
    responses(
        (status = 200, description = "The caller", body = WhoAmI),
        (status = 401, description = "No or unknown token", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn whoami(Extension(caller): Extension<Caller>) -> Json<WhoAmI> {
    Json(WhoAmI {
        id: caller.id,
        role: caller.role.into(),
    })
}

/// Liveness and load.
#[utoipa::path(
    get, path = "/health", tag = "meta",
    responses((status = 200, description = "Up", body = Health))
)]
pub async fn health(State(st): State<SharedState>) -> Json<Health> {
    Json(Health {
        status: if st.is_shutting_down() {
            "shutting_down".into()
        } else {
            "ok".into()
        },
        version: env!("CARGO_PKG_VERSION").into(),
        shutting_down: st.is_shutting_down(),
        pool_idle: st.pool.idle() as u64,
        pool_active: st.pool.active() as u64,
        held_sandboxes: st.sandboxes.len() as u64,
        runs_in_flight: st.metrics.in_flight.get(),
        runs_queued: st.metrics.queued.get(),
    })
}

/// Prometheus metrics (text format).
#[utoipa::path(
    get, path = "/metrics", tag = "meta",
    responses((status = 200, description = "Prometheus text exposition", body = String, content_type = "text/plain"))
)]
pub async fn metrics(State(st): State<SharedState>) -> Response {
    st.metrics.pool_idle.set(st.pool.idle() as i64);
    st.metrics.pool_active.set(st.pool.active() as i64);
    st.metrics.held_sandboxes.set(st.sandboxes.len() as i64);
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        st.metrics.render(),
    )
        .into_response()
}

/// Languages this server knows, and whether this host has each toolchain.
#[utoipa::path(
    get, path = "/languages", tag = "meta",
    responses((status = 200, description = "Languages", body = Vec<LanguageInfo>))
)]
pub async fn languages(State(st): State<SharedState>) -> Result<Json<Vec<LanguageInfo>>, ApiError> {
    // Host-side file checks: off the async workers.
    tokio::task::spawn_blocking(move || Json(crate::languages::list(&st)))
        .await
        .map_err(ApiError::internal)
}

/// The OpenAPI 3 document of this API (generated from the code).
#[utoipa::path(
    get, path = "/openapi.json", tag = "meta",
    responses((status = 200, description = "OpenAPI 3.1 document", content_type = "application/json"))
)]
pub async fn openapi() -> Response {
    Json(crate::openapi::document()).into_response()
}

/// JSON 404 for unknown paths.
pub async fn not_found() -> ApiError {
    ApiError::not_found("no such endpoint; see /openapi.json")
}

/// JSON 405 for a known path with the wrong method.
pub async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this endpoint does not accept that method; see /openapi.json",
    )
}
