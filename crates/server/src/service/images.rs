//! Container images on this server (`DATA/images`): what requests may name (never pulled on a
//! student's behalf), pinning names to digests for queued jobs, and the staff operations (list,
//! pull, import, remove). Store work is file I/O and runs off the async workers.

use std::collections::BTreeMap;
use std::path::PathBuf;

use corral_checks::image_root;

pub use super::image_info::ImageInfo;
use crate::error::ApiError;
use crate::state::SharedState;

/// Runs blocking image-store work on the blocking pool.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(ApiError::internal)?
}

/// Checks that `reference` is an image reference this server has; 422 naming it otherwise.
/// Nothing is pulled: students choose among the images staff made available.
pub fn check_available(st: &SharedState, reference: &str) -> Result<(), ApiError> {
    image_root::check_reference(reference)
        .map_err(|e| ApiError::unprocessable(format!("image: {e}")))?;
    match image_root::unavailable(reference, Some(&st.images)) {
        None => Ok(()),
        Some(_) => Err(ApiError::unprocessable(format!(
            "image {reference:?} is not on this server (see GET /images); images are added by staff, never pulled for a request"
        ))),
    }
}

/// Pins each reference to the digest it names now (REF → `sha256:…`), each checked with
/// [`check_available`].
pub async fn pin(
    st: &SharedState,
    references: Vec<String>,
) -> Result<BTreeMap<String, String>, ApiError> {
    let st = st.clone();
    blocking(move || {
        for r in &references {
            check_available(&st, r)?;
        }
        image_root::pin_all(&st.images, references.iter().map(String::as_str))
            .map_err(ApiError::unprocessable)
    })
    .await
}

/// Resolves `reference` to a sandbox root (checked with [`check_available`]), off the async
/// workers.
pub async fn root(st: &SharedState, reference: String) -> Result<corral_sandbox::Root, ApiError> {
    let st = st.clone();
    blocking(move || {
        check_available(&st, &reference)?;
        image_root::root_for(Some(&st.images), Some(&reference)).map_err(ApiError::unprocessable)
    })
    .await
}

fn store_error(e: corral_images::Error) -> ApiError {
    use corral_images::Error as E;
    match e {
        E::NotFound(_) => ApiError::not_found(e.to_string()),
        E::BadReference(_) | E::Ambiguous { .. } | E::BadDigest(_) => {
            ApiError::unprocessable(e.to_string())
        }
        E::Io { ref source, .. } if corral_store::is_storage_full_io(source) => {
            ApiError::storage_full(e)
        }
        E::NoRoom { .. } => ApiError::storage_full(e),
        E::Io { .. } | E::Index { .. } => ApiError::internal(e),
        // Everything else is about what was pulled or uploaded: the caller's to fix.
        other => ApiError::unprocessable(other.to_string()),
    }
}

/// Every image of this server, by digest.
pub async fn list(st: &SharedState) -> Result<Vec<ImageInfo>, ApiError> {
    let st = st.clone();
    blocking(move || {
        Ok(st
            .images
            .list()
            .map_err(store_error)?
            .into_iter()
            .map(|l| ImageInfo::of(l.names, l.record))
            .collect())
    })
    .await
}

/// Pulls `reference` from its registry into the store (credentials as `corral env pull`: the
/// server's environment and auth file, never the request; plain HTTP only to the configuration's
/// `[images] insecure_registries` and `CORRAL_INSECURE_REGISTRIES`).
pub async fn pull(st: &SharedState, reference: String) -> Result<ImageInfo, ApiError> {
    let st = st.clone();
    blocking(move || {
        let opts = corral_images::PullOptions {
            insecure_registries: st.config.images.insecure_registries.clone(),
            ..Default::default()
        };
        let rec = corral_images::pull(&st.images, &reference, &opts).map_err(store_error)?;
        let names = st.images.names_of(&rec.digest).map_err(store_error)?;
        Ok(ImageInfo::of(names, rec))
    })
    .await
}

/// What an image imported over HTTP records as its source (not the server's scratch path).
pub const UPLOAD_SOURCE: &str = "import (HTTP upload)";

/// Imports an uploaded archive (OCI layout tar, docker-archive tar, or root-filesystem tar,
/// possibly gzip/zstd) saved at `path`, naming it `name`.
pub async fn import(
    st: &SharedState,
    path: PathBuf,
    name: Option<String>,
) -> Result<ImageInfo, ApiError> {
    let st = st.clone();
    blocking(move || {
        let rec = corral_images::import_as(&st.images, &path, name.as_deref(), UPLOAD_SOURCE)
            .map_err(|e| match e {
                // Reading the uploaded archive itself failed: it is not a well-formed tar.
                corral_images::Error::Io { path: p, source } if p == path => {
                    ApiError::unprocessable(format!("the archive: {source}"))
                }
                // Said without the server's staging paths, which mean nothing to the caller.
                corral_images::Error::UnknownImport { reason, .. } => ApiError::unprocessable(
                    format!("the archive is not an OCI image layout, docker-archive, or root-filesystem tar: {reason}"),
                ),
                other => store_error(other),
            })?;
        let names = st.images.names_of(&rec.digest).map_err(store_error)?;
        Ok(ImageInfo::of(names, rec))
    })
    .await
}

/// What `DELETE /images/{ref}` removed.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct Removed {
    /// Names removed.
    pub names: Vec<String>,
    /// The image's digest when the image itself went (its last name, or removed by digest);
    /// its layers stay until `corral env gc`.
    pub removed: Option<String>,
}

/// Removes a name (the image goes with its last one), or an image by digest with all its names.
pub async fn remove(st: &SharedState, reference: String) -> Result<Removed, ApiError> {
    let st = st.clone();
    blocking(move || {
        let (names, removed) = st.images.remove(&reference).map_err(store_error)?;
        Ok(Removed {
            names,
            removed: removed.map(|d| d.to_string()),
        })
    })
    .await
}
