//! Request bodies are taken as sent: one with a `Content-Encoding` (a client that gzips its JSON or
//! its upload) is refused with a 415 that says so, rather than read as it is — its compressed bytes
//! then failed as malformed JSON ("expected value at line 1 column 1") or as a broken upload.
//! Decoding them instead would put a decompression bomb in front of every body limit.

use axum::extract::Request;
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;

/// Answers 415 to a request whose body has a content coding other than `identity`.
pub async fn refuse_encoded_bodies(req: Request, next: Next) -> Response {
    let coding = req
        .headers()
        .get_all(header::CONTENT_ENCODING)
        .iter()
        .flat_map(|v| v.to_str().unwrap_or("?").split(','))
        .map(str::trim)
        .find(|c| !c.is_empty() && !c.eq_ignore_ascii_case("identity"))
        .map(str::to_string);
    match coding {
        None => next.run(req).await,
        Some(c) => ApiError::rejected(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            format!(
                "Content-Encoding {c:?}: this server takes request bodies as they are; send the body \
                 without compressing it (leave out Content-Encoding)"
            ),
        )
        .into_response(),
    }
}
