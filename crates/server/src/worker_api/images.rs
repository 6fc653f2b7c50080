//! Images for remote workers: a worker that lacks an image a job names fetches it from this node
//! by digest — the manifest, config and layer blobs exactly as stored — and verifies every one
//! itself. Workers need no registry credentials, only their worker token.

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use corral_judge::ImageDoc;
use futures_util::stream;
use tokio::io::{AsyncReadExt, AsyncSeekExt};

use crate::error::{ApiError, ErrorBody};
use crate::http::path::Path;
use crate::service::caller::Caller;
use crate::state::SharedState;

/// Resolve an image reference on this node (worker).
///
/// The image manifest's digest of a name, `name@sha256:…` or digest this node has: what a
/// worker then fetches with `GET /worker/blobs/{digest}`.
#[utoipa::path(
    get, path = "/worker/images/{reference}", tag = "workers", operation_id = "resolve_worker_image",
    params(("reference" = String, Path, description = "NAME[:TAG], NAME@sha256:…, or a digest", example = "course/numpy:1")),
    responses(
        (status = 200, description = "The image", body = ImageDoc),
        (status = 403, description = "Not a worker token", body = ErrorBody),
        (status = 404, description = "No such image on this node", body = ErrorBody),
        (status = 422, description = "Not an image reference", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn resolve(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
    Path(reference): Path<String>,
) -> Result<Json<ImageDoc>, ApiError> {
    caller.require_worker()?;
    let st2 = st.clone();
    let r = reference.clone();
    let found = tokio::task::spawn_blocking(move || st2.images.resolve(&r))
        .await
        .map_err(ApiError::internal)?;
    match found {
        Ok((name, rec)) => Ok(Json(ImageDoc {
            name: name.unwrap_or(reference),
            digest: rec.digest.to_string(),
        })),
        Err(e @ corral_images::Error::NotFound(_)) => Err(ApiError::not_found(e.to_string())),
        Err(e @ (corral_images::Error::BadReference(_) | corral_images::Error::BadDigest(_))) => {
            Err(ApiError::unprocessable(e.to_string()))
        }
        Err(e) => Err(ApiError::internal(e)),
    }
}

/// Fetch a blob of this node's image store by digest (worker).
///
/// The bytes exactly as stored (a manifest, a config, a compressed layer), streamed; the worker
/// checks them against the digest. A download that was cut off continues with
/// `Range: bytes=START-` (or `START-END`): 206 with those bytes, 416 past the end; any other
/// range form gets the whole blob.
#[utoipa::path(
    get, path = "/worker/blobs/{digest}", tag = "workers", operation_id = "get_worker_blob",
    params(("digest" = String, Path, description = "sha256: and 64 hex digits",
        example = "sha256:4c3f0ef8d6e9b1a2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a")),
    responses(
        (status = 200, description = "The blob", content_type = "application/octet-stream", body = crate::http::binary::BinaryBody),
        (status = 206, description = "The part of the blob the Range header asked for", content_type = "application/octet-stream", body = crate::http::binary::BinaryBody),
        (status = 416, description = "The range starts past the blob's end", body = ErrorBody),
        (status = 403, description = "Not a worker token", body = ErrorBody),
        (status = 404, description = "No such blob on this node", body = ErrorBody),
        (status = 422, description = "Not a digest", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn blob(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
    Path(digest): Path<String>,
    headers: axum::http::HeaderMap,
) -> Result<Response, ApiError> {
    caller.require_worker()?;
    let d = corral_images::Digest::parse(&digest)
        .map_err(|e| ApiError::unprocessable(e.to_string()))?;
    let path = st.images.blob_path(&d);
    let file = match tokio::fs::File::open(&path).await {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ApiError::not_found(format!(
                "no blob {digest} on this node"
            )))
        }
        Err(e) => return Err(ApiError::internal(e)),
    };
    let mut file = file;
    let len = file.metadata().await.map_err(ApiError::internal)?.len();
    let range = headers
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok())
        .and_then(byte_range);
    let (status, start, end) =
        match range {
            None => (StatusCode::OK, 0, len),
            Some((start, _)) if start >= len => return Ok((
                StatusCode::RANGE_NOT_SATISFIABLE,
                [(header::CONTENT_RANGE, format!("bytes */{len}"))],
                Json(serde_json::json!({
                    "error": "range_not_satisfiable",
                    "message": format!("the range starts at {start}, past the blob's {len} bytes"),
                })),
            )
                .into_response()),
            Some((start, last)) => (
                StatusCode::PARTIAL_CONTENT,
                start,
                last.map_or(len, |l| l.min(len - 1) + 1),
            ),
        };
    if start > 0 {
        file.seek(std::io::SeekFrom::Start(start))
            .await
            .map_err(ApiError::internal)?;
    }
    // Chunks read as the client takes them: a layer is never held in memory whole.
    let chunks = stream::unfold(
        (file.take(end - start), false),
        |(mut f, done)| async move {
            if done {
                return None;
            }
            let mut buf = vec![0u8; 256 << 10];
            match f.read(&mut buf).await {
                Ok(0) => None,
                Ok(n) => {
                    buf.truncate(n);
                    Some((
                        Ok::<_, std::io::Error>(axum::body::Bytes::from(buf)),
                        (f, false),
                    ))
                }
                Err(e) => Some((Err(e), (f, true))),
            }
        },
    );
    let mut response = (
        status,
        [
            (header::CONTENT_TYPE, "application/octet-stream".to_string()),
            (header::CONTENT_LENGTH, (end - start).to_string()),
            (header::ACCEPT_RANGES, "bytes".to_string()),
        ],
        Body::from_stream(chunks),
    )
        .into_response();
    if status == StatusCode::PARTIAL_CONTENT {
        response.headers_mut().insert(
            header::CONTENT_RANGE,
            format!("bytes {start}-{}/{len}", end - 1)
                .parse()
                .expect("a valid header value"),
        );
    }
    Ok(response)
}

/// `bytes=START-` or `bytes=START-END` (END ≥ START): the first byte and the last, if given.
/// Other forms (suffixes, several ranges) are `None`: the whole blob is sent, as HTTP allows.
fn byte_range(value: &str) -> Option<(u64, Option<u64>)> {
    let (start, end) = value.trim().strip_prefix("bytes=")?.split_once('-')?;
    let start: u64 = start.trim().parse().ok()?;
    match end.trim() {
        "" => Some((start, None)),
        e => {
            let end: u64 = e.parse().ok()?;
            (end >= start).then_some((start, Some(end)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::byte_range;

    #[test]
    fn byte_ranges() {
        assert_eq!(byte_range("bytes=10-"), Some((10, None)));
        assert_eq!(byte_range("bytes=0-99"), Some((0, Some(99))));
        assert_eq!(byte_range("bytes=5-4"), None);
        assert_eq!(byte_range("bytes=-500"), None);
        assert_eq!(byte_range("bytes=0-1,5-6"), None);
        assert_eq!(byte_range("items=0-"), None);
    }
}
