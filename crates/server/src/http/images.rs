//! `/images`: the container images of this server. Staff list them (`GET`); admins pull one
//! from a registry (`POST /images`), import an uploaded archive (`POST /images/import`) or
//! remove one (`DELETE /images/{ref}`). Requests of any role may then name them (`image` in
//! `/run`, `/check`, `/submissions`, WebSocket runs); nothing is ever pulled for a request.

use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use futures_util::StreamExt;
use serde::Deserialize;
use tokio::io::AsyncWriteExt;
use utoipa::ToSchema;

use super::json::ApiJson;
use crate::error::{ApiError, ErrorBody};
use crate::http::path::Path;
use crate::service::caller::Caller;
use crate::service::image_builds::{self, BuildJob};
use crate::service::images::{self, ImageInfo, Removed};
use crate::state::SharedState;

/// Where image archives are imported (exempt from the body deadline: see `body_deadline`).
pub const IMPORT_PATH: &str = "/images/import";

pub fn routes() -> Router<SharedState> {
    Router::new()
        .route("/images", get(list).post(pull))
        // The archive streams to a file under its own cap (the image store's), not the JSON limit.
        .route(
            IMPORT_PATH,
            post(import).layer(axum::extract::DefaultBodyLimit::disable()),
        )
        .route("/images/build", post(build))
        .route("/images/builds/{id}", get(build_status))
        .route("/images/{*reference}", axum::routing::delete(remove))
}

/// `POST /images`: what to pull.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PullRequest {
    /// `host[:port]/repo[:tag]` or `host[:port]/repo@sha256:…`. Credentials and plain-HTTP
    /// registries come from the server's environment (as for `corral env pull`), never the request.
    #[schema(
        example = "registry.example.edu/course/python:3.12",
        min_length = 1,
        max_length = 400
    )]
    pub pull: String,
}

/// `POST /images/import?name=`.
#[derive(Debug, Clone, Default, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ImportQuery {
    /// The image's name (`NAME[:TAG]`) [default: the name recorded in the archive, if any].
    #[param(example = "course/numpy:1", max_length = 255)]
    pub name: Option<String>,
}

/// List the images of this server (staff).
#[utoipa::path(
    get, path = "/images", tag = "images", operation_id = "list_images",
    responses(
        (status = 200, description = "Every image, by digest", body = Vec<ImageInfo>),
        (status = 403, description = "Not staff", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn list(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
) -> Result<Json<Vec<ImageInfo>>, ApiError> {
    caller.require_staff()?;
    Ok(Json(images::list(&st).await?))
}

/// Pull an image from a registry (admin).
///
/// Every blob is verified against its digest; a pull that was cut off continues where it stopped
/// when asked again. Takes as long as the download: the request waits for it.
#[utoipa::path(
    post, path = "/images", tag = "images", operation_id = "pull_image",
    request_body(content = PullRequest, example = json!({"pull": "registry.example.edu/course/python:3.12"})),
    responses(
        (status = 201, description = "Pulled (or already here)", body = ImageInfo),
        (status = 403, description = "Not an admin", body = ErrorBody),
        (status = 422, description = "Not a reference, or the registry refused or sent something invalid", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn pull(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
    ApiJson(req): ApiJson<PullRequest>,
) -> Result<(StatusCode, Json<ImageInfo>), ApiError> {
    caller.require_admin()?;
    let info = images::pull(&st, req.pull.clone()).await?;
    tracing::info!(caller = %caller.id, reference = %req.pull, digest = %info.digest, "image pulled");
    Ok((StatusCode::CREATED, Json(info)))
}

/// Import an image archive (admin).
///
/// The body is an OCI image layout tar (what `docker save` writes since Docker 25, skopeo's
/// `oci-archive:`), a docker-archive tar, or a root-filesystem tar (plain, gzip or zstd; what
/// `mmdebstrap` writes). Layers are unpacked as hostile input (see `corral env import`).
#[utoipa::path(
    post, path = "/images/import", tag = "images", operation_id = "import_image",
    params(ImportQuery),
    request_body(content = super::binary::BinaryBody, content_type = "application/octet-stream", description = "The archive"),
    responses(
        (status = 201, description = "Imported", body = ImageInfo,
            links(("RemoveImage" = (operation_id = "remove_image", description = "Remove the imported image",
                parameters(("reference" = "$response.body#/digest")))))),
        (status = 403, description = "Not an admin", body = ErrorBody),
        (status = 413, description = "Larger than the image store's cap", body = ErrorBody),
        (status = 422, description = "Not an image archive or root filesystem, or a layer broke a rule", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn import(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
    query: Result<Query<ImportQuery>, axum::extract::rejection::QueryRejection>,
    body: Body,
) -> Result<(StatusCode, Json<ImageInfo>), ApiError> {
    caller.require_admin()?;
    let Query(query) = query.map_err(|e| ApiError::unprocessable(e.body_text()))?;
    if let Some(n) = &query.name {
        if corral_images::store::refs::normalise_name(n).is_none() {
            return Err(ApiError::unprocessable(format!(
                "name {n:?}: expected NAME[:TAG] (lowercase letters, digits, ._-/)"
            )));
        }
    }
    let cap = st.images.limits().max_bytes;
    let dir = tempfile::Builder::new()
        .prefix("image-import-")
        .tempdir_in(&st.tmp_dir)
        .map_err(ApiError::io)?;
    let path = dir.path().join("archive");
    let mut file = tokio::fs::File::create(&path).await.map_err(ApiError::io)?;
    let mut stream = body.into_data_stream();
    let mut total: u64 = 0;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| {
            super::body::transport_failure(&e)
                .unwrap_or_else(|| ApiError::bad_request(format!("reading the body: {e}")))
        })?;
        total += chunk.len() as u64;
        if total > cap {
            return Err(ApiError::too_large(format!(
                "the archive is larger than the image store's cap of {cap} bytes"
            )));
        }
        file.write_all(&chunk).await.map_err(ApiError::io)?;
    }
    file.flush().await.map_err(ApiError::io)?;
    drop(file);
    if total == 0 {
        return Err(ApiError::unprocessable(
            "the body is empty: send the archive",
        ));
    }
    let info = images::import(&st, path, query.name).await?;
    drop(dir);
    tracing::info!(caller = %caller.id, digest = %info.digest, bytes = total, "image imported");
    Ok((StatusCode::CREATED, Json(info)))
}

/// The largest build file `POST /images/build` reads (a build file is a few lines).
pub const MAX_BUILD_FILE: usize = 256 * 1024;

/// `POST /images/build?name=`.
#[derive(Debug, Clone, Default, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct BuildQuery {
    /// The image's name (`NAME[:TAG]`) [default: the file's `name`, else none: its digest names it].
    #[param(example = "course/python-numpy:1", max_length = 255)]
    pub name: Option<String>,
}

/// Build an image from a build file (admin).
///
/// The body is the build file of `corral env build` (`schemas/build.schema.json`): YAML
/// (`application/yaml`, `text/yaml`, `text/plain`) or JSON (`application/json`), at most 256 KiB,
/// without `copy` steps (no files are sent). It is checked at once (a 422 names the line, a
/// missing base, a bad name); the build then runs in the background, in build sandboxes (root of
/// their own user namespace, with network), one build at a time. Poll
/// `GET /images/builds/{id}` for its progress; the image is named only when every step succeeded,
/// and unchanged steps come from the step cache.
#[utoipa::path(
    post, path = "/images/build", tag = "images", operation_id = "build_image",
    params(BuildQuery),
    request_body(description = "The build file: YAML (also sent as `application/x-yaml`, `text/yaml` or \
            `text/plain`), or the same fields as JSON",
        content(
            (String = "application/yaml",
                example = "from: debian:bookworm-minbase\nsteps:\n  - run: apt-get update && apt-get install -y python3-numpy\n"),
            (Object = "application/json",
                example = json!({"from": "debian:bookworm-minbase", "steps": [{"run": "apt-get update && apt-get install -y python3-numpy"}]})),
        )),
    responses(
        (status = 202, description = "Queued: poll GET /images/builds/{id}", body = BuildJob,
            links(("BuildStatus" = (operation_id = "get_image_build", description = "The build's progress",
                parameters(("id" = "$response.body#/id")))))),
        (status = 403, description = "Not an admin", body = ErrorBody),
        (status = 413, description = "Larger than 256 KiB", body = ErrorBody),
        (status = 415, description = "Neither YAML nor JSON", body = ErrorBody),
        (status = 422, description = "The file does not parse or names a missing base, a bad name or a copy step", body = ErrorBody),
        (status = 503, description = "Too many builds waiting or running", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn build(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
    query: Result<Query<BuildQuery>, axum::extract::rejection::QueryRejection>,
    headers: axum::http::HeaderMap,
    body: Body,
) -> Result<(StatusCode, Json<BuildJob>), ApiError> {
    caller.require_admin()?;
    let Query(query) = query.map_err(|e| ApiError::unprocessable(e.body_text()))?;
    let content_type = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase())
        .unwrap_or_default();
    let json = match content_type.as_str() {
        "application/json" => true,
        "application/yaml" | "application/x-yaml" | "text/yaml" | "text/x-yaml" | "text/plain" => {
            false
        }
        other => {
            return Err(ApiError::new(
                crate::error::ErrorKind::UnsupportedMediaType,
                "unsupported_media_type",
                format!("content type {other:?}: send the build file as application/yaml or application/json"),
            ))
        }
    };
    let bytes = axum::body::to_bytes(body, MAX_BUILD_FILE)
        .await
        .map_err(|_| {
            ApiError::too_large(format!(
                "the build file is larger than {MAX_BUILD_FILE} bytes"
            ))
        })?;
    let text = std::str::from_utf8(&bytes)
        .map_err(|e| ApiError::unprocessable(format!("the build file is not UTF-8: {e}")))?;
    let job = image_builds::start(
        &st.image_builds,
        &st.images,
        st.pool.host(),
        text,
        json,
        query.name,
    )?;
    tracing::info!(caller = %caller.id, build = %job.id, from = %job.from, "image build queued");
    Ok((StatusCode::ACCEPTED, Json(job)))
}

/// An image build's progress and result (admin).
#[utoipa::path(
    get, path = "/images/builds/{id}", tag = "images", operation_id = "get_image_build",
    params(("id" = String, Path, description = "The id `POST /images/build` returned", example = "3f1c9a0b7d2e4f6a8b0c1d2e3f4a5b6c")),
    responses(
        (status = 200, description = "The build: queued, running (current step, output so far), succeeded (image) or failed (error)", body = BuildJob),
        (status = 403, description = "Not an admin", body = ErrorBody),
        (status = 404, description = "No such build (unknown, or forgotten: the server restarted)", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn build_status(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Json<BuildJob>, ApiError> {
    caller.require_admin()?;
    st.image_builds
        .get(&id)
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("no image build {id:?}")))
}

/// Remove an image name, or an image by digest (admin).
///
/// A name goes; the image goes with its last name. A digest removes the image and all its names.
/// Layers stay on disk until `corral env gc` (and through it while a live sandbox uses them).
/// Submissions already pinned to the image and not yet judged then fail on workers that lack it.
#[utoipa::path(
    delete, path = "/images/{reference}", tag = "images", operation_id = "remove_image",
    params(("reference" = String, Path, description = "NAME[:TAG], NAME@sha256:…, or a digest", example = "course/numpy:1")),
    responses(
        (status = 200, description = "Removed", body = Removed),
        (status = 403, description = "Not an admin", body = ErrorBody),
        (status = 404, description = "No such image", body = ErrorBody),
        (status = 422, description = "Not a reference", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn remove(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
    Path(reference): Path<String>,
) -> Result<Json<Removed>, ApiError> {
    caller.require_admin()?;
    let removed = images::remove(&st, reference.clone()).await?;
    tracing::info!(caller = %caller.id, %reference, "image removed");
    Ok(Json(removed))
}
