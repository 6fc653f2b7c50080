//! JSON request bodies whose every rejection is a JSON error.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{header, HeaderMap, StatusCode};
use serde::de::DeserializeOwned;
use serde_json::error::Category;

use crate::error::ApiError;
use crate::http::objects_only::ObjectsOnly;

/// The server's `max_json_bytes`, and what one upload may hold (`upload.max_bytes`), set on
/// every request (a layer of the router) so a body over the cap is told it, its setting, and
/// where larger files go.
#[derive(Debug, Clone, Copy)]
pub struct JsonLimit(pub corral_sandbox::Size, pub corral_sandbox::Size);

/// What a body over the JSON cap is told; with `upload_hint`, that files larger than it go
/// through `POST /upload` (corral's own API; Judge0's has no uploads).
pub fn too_large_message(limit: Option<JsonLimit>, upload_hint: bool) -> String {
    match limit {
        Some(JsonLimit(max, upload)) if upload_hint => format!(
            "the request body is larger than {max}, the most this server takes in a JSON body (the configuration file's max_json_bytes); send larger files with POST /upload (multipart or an archive, up to {upload}) and name the upload by its id"
        ),
        Some(JsonLimit(max, _)) => format!(
            "the request body is larger than {max}, the most this server takes in a JSON body (the configuration file's max_json_bytes)"
        ),
        None => "the request body is larger than this server's max_json_bytes".to_string(),
    }
}

/// A JSON body whose every rejection (bad JSON, wrong types, unknown fields, a struct written as
/// an array, wrong content type, too large) is a JSON error with a 4xx status.
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let JsonBytes(bytes) = JsonBytes::from_request(req, state).await?;
        parse(&bytes).map(ApiJson)
    }
}

/// A JSON body's bytes, not parsed yet: [`ApiJson`]'s checks of the content type and size, for a
/// handler that needs the bytes too (to fingerprint the request) and [`parse`]s them itself.
pub struct JsonBytes(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for JsonBytes {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        if !is_json(req.headers()) {
            return Err(ApiError::rejected(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "Expected request with `Content-Type: application/json`",
            ));
        }
        let limit = req.extensions().get::<JsonLimit>().copied();
        if let Some(JsonLimit(max, _)) = limit {
            super::body::refuse_declared_over(req.headers(), max.bytes(), || {
                too_large_message(limit, true)
            })?;
        }
        let bytes = Bytes::from_request(req, state).await.map_err(|r| {
            let status = r.status();
            match status.as_u16() {
                413 => ApiError::rejected(status, "too_large", too_large_message(limit, true)),
                // A body cut short is the transport's failure, not bad JSON.
                _ => super::body::transport_failure(&r)
                    .unwrap_or_else(|| ApiError::rejected(status, "bad_json", r.body_text())),
            }
        })?;
        Ok(JsonBytes(strip_bom(bytes)))
    }
}

/// The UTF-8 byte order mark, which many Windows tools write before a JSON text.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// `bytes` without a leading byte order mark: RFC 8259 lets a parser ignore one, and serde_json
/// would call it "expected value at line 1 column 1".
pub fn strip_bom(bytes: Bytes) -> Bytes {
    if bytes.starts_with(BOM) {
        bytes.slice(BOM.len()..)
    } else {
        bytes
    }
}

/// `bytes` as a `T`: 400 when it is not JSON, 422 (with the field's path) when it is JSON of
/// another shape, a struct written as an array included.
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let bytes = bytes.strip_prefix(BOM).unwrap_or(bytes);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let read = serde_path_to_error::deserialize(ObjectsOnly(&mut de))
        .map_err(|e| (e.inner().classify(), e.to_string()))
        .and_then(|v| {
            de.end()
                .map(|()| v)
                .map_err(|e| (e.classify(), e.to_string()))
        });
    read.map_err(|(category, text)| match category {
        Category::Data => ApiError::rejected(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid",
            // serde's words with the field's path and the line, without axum's preamble.
            text,
        ),
        Category::Syntax | Category::Eof | Category::Io => ApiError::rejected(
            StatusCode::BAD_REQUEST,
            "bad_json",
            format!("Failed to parse the request body as JSON: {text}"),
        ),
    })
}

/// `application/json`, or any `application/…+json`, parameters aside (as axum's `Json` takes).
fn is_json(headers: &HeaderMap) -> bool {
    let Some(value) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let essence = value
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match essence.split_once('/') {
        Some(("application", sub)) => sub == "json" || sub.ends_with("+json"),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_content_types() {
        let with = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::CONTENT_TYPE, v.parse().unwrap());
            is_json(&h)
        };
        for ok in [
            "application/json",
            "application/json; charset=utf-8",
            "Application/JSON",
            "application/vnd.api+json",
        ] {
            assert!(with(ok), "{ok}");
        }
        for bad in [
            "text/plain",
            "application/jsonx",
            "text/json",
            "multipart/form-data; boundary=x",
            "",
        ] {
            assert!(!with(bad), "{bad}");
        }
        assert!(!is_json(&HeaderMap::new()));
    }

    #[test]
    fn syntax_is_a_400_and_shape_a_422() {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct R {
            n: u32,
        }
        assert_eq!(parse::<R>(b"{\"n\": 1}").unwrap().n, 1);
        for (text, status) in [
            (&b"{\"n\": "[..], 400),
            (b"{\"n\": 1} x", 400),
            (b"not json", 400),
            (b"{\"n\": \"one\"}", 422),
            (b"[1]", 422),
            (b"{}", 422),
        ] {
            let e = parse::<R>(text).unwrap_err();
            assert_eq!(
                e.status().as_u16(),
                status,
                "{}: {}",
                String::from_utf8_lossy(text),
                e.message
            );
        }
    }
}
