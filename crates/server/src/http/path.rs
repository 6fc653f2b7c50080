//! Path parameters whose every rejection is the JSON error body: axum's own `Path` answers
//! `text/plain` "Invalid URL: …" (`GET /submissions/%FF`), which clients that parse every error
//! as JSON (generated OpenAPI clients) cannot read. The native API's handlers take this `Path`;
//! Judge0's routes answer in Judge0's shape (`judge0::extract::J0Path`).

use axum::extract::path::ErrorKind as PathErrorKind;
use axum::extract::rejection::PathRejection;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// axum's `Path`, rejected with a 400 `bad_request` JSON error.
pub struct Path<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for Path<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Path(t)| Path(t))
            .map_err(rejection)
    }
}

fn rejection(r: PathRejection) -> ApiError {
    if let PathRejection::FailedToDeserializePathParams(e) = &r {
        if let PathErrorKind::InvalidUtf8InPathParam { key } = e.kind() {
            return ApiError::bad_request(format!(
                "the path's `{key}` is not UTF-8 once percent-decoded: give it as it was given to \
                 you (ids and names are ASCII)"
            ));
        }
    }
    // A route and its handler that disagree on their parameters is a bug (axum's 500).
    ApiError::rejected(r.status(), "bad_request", r.body_text())
}
