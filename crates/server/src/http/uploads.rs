//! `POST /upload` (multipart files and tar archives) and `GET /uploads/{id}`.

use axum::extract::multipart::{Field, MultipartError, MultipartRejection};
use axum::extract::{Multipart, State};
use axum::{Extension, Json};
use corral_store::NewFile;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::config::UploadLimits;
use crate::error::{ApiError, ErrorBody};
use crate::http::path::Path;
use crate::service::caller::Caller;
use crate::service::uploads::{self, UploadFiles};
use crate::state::SharedState;

/// CS50 Sandbox's `/upload` answer.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct UploadResponse {
    /// The stored file names (relative paths), sorted.
    pub files: Vec<String>,
    /// The upload's id, for `{"sandbox": {"homedir": id}}`.
    pub id: String,
}

/// The multipart form of `/upload`: any number of file parts (their file names are the relative
/// paths, folders allowed: `src/main.c`), and optionally tar archives (`.tar`, `.tar.gz`) in parts
/// named `archive`, unpacked (links and special files are refused).
#[derive(Debug, ToSchema)]
#[allow(dead_code)]
pub struct UploadForm {
    #[schema(value_type = Vec<String>, format = Binary)]
    pub files: Vec<Vec<u8>>,
    #[schema(value_type = Option<String>, format = Binary)]
    pub archive: Option<Vec<u8>>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct FileInfo {
    pub path: String,
    pub size: u64,
    pub sha256: String,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct UploadInfo {
    pub id: String,
    pub files: Vec<FileInfo>,
    pub total_bytes: u64,
    /// Unix seconds.
    pub created_at: i64,
}

/// Upload files.
///
/// CS50 Sandbox's `/upload`: the files become an immutable upload owned by the caller, usable as
/// `{"sandbox": {"homedir": id}}`.
#[utoipa::path(
    post, path = "/upload", tag = "sandbox",
    request_body(content = UploadForm, content_type = "multipart/form-data",
        example = json!({"files": ["hello, world\n"]})),
    responses(
        (status = 200, description = "Stored", body = UploadResponse,
            links(
                ("GetUpload" = (operation_id = "get_upload", parameters(("id" = "$response.body#/id")))),
                ("CheckUpload" = (operation_id = "check", description = "Grade the upload with suite `hello` (the `POST /suites` example)",
                    request_body = json!({"checks": "hello", "sandbox": {"homedir": "$response.body#/id"}}))),
                ("RunInUpload" = (operation_id = "run", description = "Run a command with the upload as $HOME",
                    request_body = json!({"cmd": "ls", "sandbox": {"homedir": "$response.body#/id"}}))),
            )),
        (status = 400, description = "A bad name (`..`, absolute, NUL, backslash), a link or special file in an archive, no files (`bad_request`); a malformed form (`bad_multipart`); a body that ended before its Content-Length or was badly chunked (`bad_body`)", body = ErrorBody),
        (status = 413, description = "Too many files or bytes (a Content-Length over the cap is refused before the body is read)", body = ErrorBody),
        (status = 415, description = "Not multipart/form-data", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 429, description = "Rate limited", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn upload(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
    headers: axum::http::HeaderMap,
    form: Result<Multipart, MultipartRejection>,
) -> Result<Json<UploadResponse>, ApiError> {
    let form = form.map_err(|e| rejection(&headers, e))?;
    refuse_declared_over(&headers, &st.config.upload)?;
    let files = collect(form, &st.config.upload).await?;
    let upload = uploads::store(&st, &caller, files).await?;
    Ok(Json(UploadResponse {
        files: upload.files.iter().map(|f| f.path.clone()).collect(),
        id: upload.id,
    }))
}

/// Describe an upload (its owner only).
#[utoipa::path(
    get, path = "/uploads/{id}", tag = "sandbox",
    params(("id" = String, Path, description = "Upload id", example = "0123456789abcdef0123456789abcdef")),
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
    let u = uploads::owned(&st, &caller, &id).await?;
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

/// The most a multipart body (`POST /upload`, `POST /suites`) may be: the files' cap plus a
/// little per part for the form's framing (the content limit itself is checked exactly).
pub fn body_limit(limits: &UploadLimits) -> usize {
    limits.max_bytes.bytes() as usize + 64 * limits.max_files + (1 << 20)
}

/// A form whose `Content-Length` is over [`body_limit`] is refused before any of it is read
/// (an `Expect: 100-continue` client is not invited to send it).
pub fn refuse_declared_over(
    headers: &axum::http::HeaderMap,
    limits: &UploadLimits,
) -> Result<(), ApiError> {
    let cap = body_limit(limits) as u64;
    super::body::refuse_declared_over(headers, cap, || {
        format!(
            "the request body is larger than {cap} bytes, the most this server takes in a form: \
             {} of files (the configuration file's upload.max_bytes) and the form's framing",
            limits.max_bytes
        )
    })
}

/// A form's error: too large (413), a body cut short (400 `bad_body`, as on every endpoint), or
/// a malformed form (400 `bad_multipart`).
pub fn multipart_error(e: MultipartError) -> ApiError {
    let status = e.status();
    if status.as_u16() == 413 {
        return ApiError::too_large(e.body_text());
    }
    // axum calls a failed read of the body a 500 ("failed to read stream"); it is the client's.
    if let Some(cut) = super::body::transport_failure(&e) {
        return cut;
    }
    ApiError::rejected(status, "bad_multipart", e.body_text())
}

/// A form that is not multipart (415, as documented), or multipart without a boundary (400).
pub fn rejection(headers: &axum::http::HeaderMap, e: MultipartRejection) -> ApiError {
    let kind = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let essence = kind.split(';').next().unwrap_or("").trim();
    if !essence.eq_ignore_ascii_case("multipart/form-data") {
        let got = if essence.is_empty() {
            "none".to_string()
        } else {
            format!("{essence:?}")
        };
        return ApiError::new(
            crate::error::ErrorKind::UnsupportedMediaType,
            "unsupported_media_type",
            format!("this endpoint takes multipart/form-data (Content-Type: {got})"),
        );
    }
    ApiError::rejected(e.status(), "bad_multipart", e.body_text())
}

/// Reads one part, stopping as soon as the upload would exceed its size.
async fn read_field(c: &UploadFiles, field: &mut Field<'_>) -> Result<Vec<u8>, ApiError> {
    let mut buf = Vec::new();
    while let Some(chunk) = field.chunk().await.map_err(multipart_error)? {
        if c.would_exceed((buf.len() + chunk.len()) as u64) {
            return Err(c.too_large());
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf)
}

/// Reads every part of the form into checked files.
pub async fn collect(mut form: Multipart, limits: &UploadLimits) -> Result<Vec<NewFile>, ApiError> {
    let mut c = UploadFiles::new(limits);
    while let Some(mut field) = form.next_field().await.map_err(multipart_error)? {
        let part = field.name().unwrap_or("").to_string();
        let file_name = field.file_name().map(str::to_string);
        if part == "archive" {
            let data = read_field(&c, &mut field).await?;
            c = uploads::unpack_archives(c, vec![data]).await?;
            continue;
        }
        let Some(name) = file_name else {
            return Err(ApiError::bad_request(format!(
                "form part {part:?} is not a file: give each file a file name (its relative path)"
            )));
        };
        let data = read_field(&c, &mut field).await?;
        c.add(&name, data, 0o644)?;
    }
    c.finish()
}
