//! JSON request bodies whose every rejection is a JSON error.

use axum::extract::{FromRequest, Request};
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// A JSON body whose every rejection (bad JSON, wrong types, unknown fields, wrong content type,
/// too large) is a JSON error with a 4xx status.
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(ApiJson(v)),
            Err(r) => {
                let status = r.status();
                let code = match status.as_u16() {
                    413 => "too_large",
                    415 => "unsupported_media_type",
                    422 => "invalid",
                    _ => "bad_json",
                };
                Err(ApiError::rejected(status, code, r.body_text()))
            }
        }
    }
}
