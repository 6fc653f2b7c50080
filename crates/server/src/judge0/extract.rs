//! What a Judge0 request carries (its query parameters, its body, a path parameter), read so
//! that a rejection is a Judge0-style error, not axum's plain text.

use axum::extract::{Path, Query};
use axum::response::Response;
use serde::Deserialize;

use super::errors::j0_error;

#[derive(Debug, Clone, Deserialize, Default)]
pub struct Params {
    #[serde(default)]
    pub base64_encoded: Option<String>,
    #[serde(default)]
    pub wait: Option<String>,
    #[serde(default)]
    pub fields: Option<String>,
    #[serde(default)]
    pub tokens: Option<String>,
}

/// A request body whose rejection (too large for `max_json_bytes`, cut short) is a Judge0-style
/// error too, not axum's plain text.
pub struct J0Body(pub(super) axum::body::Bytes);

impl<S: Send + Sync> axum::extract::FromRequest<S> for J0Body {
    type Rejection = Response;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, Response> {
        use crate::http::json::{too_large_message, JsonLimit};
        let limit = req.extensions().get::<JsonLimit>().copied();
        if let Some(JsonLimit(max, _)) = limit {
            crate::http::body::refuse_declared_over(req.headers(), max.bytes(), || {
                too_large_message(limit, false)
            })
            .map_err(|e| j0_error(e.status(), e.message))?;
        }
        axum::body::Bytes::from_request(req, state)
            .await
            .map(|b| J0Body(crate::http::json::strip_bom(b)))
            .map_err(|r| match crate::http::body::transport_failure(&r) {
                Some(e) => j0_error(e.status(), e.message),
                None => j0_error(r.status(), r.body_text()),
            })
    }
}

/// A query string whose rejection (a field twice, a bad value) is a Judge0-style JSON error.
pub struct J0Query<T>(pub(super) T);

impl<S: Send + Sync, T: serde::de::DeserializeOwned> axum::extract::FromRequestParts<S>
    for J0Query<T>
{
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, Response> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(t)| J0Query(t))
            .map_err(|r| j0_error(r.status(), r.body_text()))
    }
}

/// A path parameter whose rejection (`/judge0/languages/abc`) is a Judge0-style JSON error.
pub struct J0Path<T>(pub(super) T);

impl<S: Send + Sync, T: serde::de::DeserializeOwned + Send> axum::extract::FromRequestParts<S>
    for J0Path<T>
{
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, Response> {
        Path::<T>::from_request_parts(parts, state)
            .await
            .map(|Path(t)| J0Path(t))
            .map_err(|r| j0_error(r.status(), r.body_text()))
    }
}

pub(super) fn truthy(v: &Option<String>) -> bool {
    matches!(v.as_deref(), Some("true" | "1"))
}
