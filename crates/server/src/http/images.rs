//! `/images`: the container images of this server. Staff list them (`GET`); admins pull one
//! from a registry (`POST /images`), import an uploaded archive (`POST /images/import`) or
//! remove one (`DELETE /images/{ref}`). Requests of any role may then name them (`image` in
//! `/run`, `/check`, `/submissions`, WebSocket runs); nothing is ever pulled for a request.

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use futures_util::StreamExt;
use serde::Deserialize;
use tokio::io::AsyncWriteExt;
use utoipa::ToSchema;

use super::json::ApiJson;
use crate::error::{ApiError, ErrorBody};
use crate::service::caller::Caller;
use crate::service::images::{self, ImageInfo, Removed};
use crate::state::SharedState;

pub fn routes() -> Router<SharedState> {
    Router::new()
        .route("/images", get(list).post(pull))
        // The archive streams to a file under its own cap (the image store's), not the JSON limit.
        .route(
            "/images/import",
            post(import).layer(axum::extract::DefaultBodyLimit::disable()),
        )
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
    get, path = "/images", tag = "images",
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
    post, path = "/images", tag = "images",
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
    post, path = "/images/import", tag = "images",
    params(ImportQuery),
    request_body(content = super::binary::BinaryBody, content_type = "application/octet-stream", description = "The archive"),
    responses(
        (status = 201, description = "Imported", body = ImageInfo,
            links(("RemoveImage" = (operation_id = "remove", description = "Remove the imported image",
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
        .map_err(ApiError::internal)?;
    let path = dir.path().join("archive");
    let mut file = tokio::fs::File::create(&path)
        .await
        .map_err(ApiError::internal)?;
    let mut stream = body.into_data_stream();
    let mut total: u64 = 0;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| ApiError::bad_request(format!("reading the body: {e}")))?;
        total += chunk.len() as u64;
        if total > cap {
            return Err(ApiError::too_large(format!(
                "the archive is larger than the image store's cap of {cap} bytes"
            )));
        }
        file.write_all(&chunk).await.map_err(ApiError::internal)?;
    }
    file.flush().await.map_err(ApiError::internal)?;
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

/// Remove an image name, or an image by digest (admin).
///
/// A name goes; the image goes with its last name. A digest removes the image and all its names.
/// Layers stay on disk until `corral env gc`. Submissions already pinned to the image and not yet
/// judged then fail on workers that lack it.
#[utoipa::path(
    delete, path = "/images/{reference}", tag = "images",
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
