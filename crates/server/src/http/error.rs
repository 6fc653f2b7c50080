//! Errors over HTTP: each [`ErrorKind`] has its status code, every error is the JSON
//! [`ErrorBody`], and an internal error never shows its detail: [`hide_internal_errors`] logs it
//! with the request id and answers `internal error (request id …)` instead.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderName, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::{ApiError, ErrorBody, ErrorKind};

/// The header carrying each request's id (set when the client sent none, echoed in the answer).
pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

impl ErrorKind {
    pub fn status(self) -> StatusCode {
        match self {
            ErrorKind::BadRequest => StatusCode::BAD_REQUEST,
            ErrorKind::Unauthorized => StatusCode::UNAUTHORIZED,
            ErrorKind::Forbidden => StatusCode::FORBIDDEN,
            ErrorKind::NotFound => StatusCode::NOT_FOUND,
            ErrorKind::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ErrorKind::Conflict => StatusCode::CONFLICT,
            ErrorKind::Gone => StatusCode::GONE,
            ErrorKind::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorKind::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ErrorKind::Invalid => StatusCode::UNPROCESSABLE_ENTITY,
            ErrorKind::TooManyRequests => StatusCode::TOO_MANY_REQUESTS,
            ErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            ErrorKind::TimedOut => StatusCode::REQUEST_TIMEOUT,
            ErrorKind::Misdirected => StatusCode::MISDIRECTED_REQUEST,
            ErrorKind::BadGateway => StatusCode::BAD_GATEWAY,
        }
    }

    /// The kind of an HTTP status a rejection of axum's extractors carries.
    pub fn of_status(status: StatusCode) -> ErrorKind {
        match status.as_u16() {
            401 => ErrorKind::Unauthorized,
            403 => ErrorKind::Forbidden,
            404 => ErrorKind::NotFound,
            405 => ErrorKind::MethodNotAllowed,
            408 => ErrorKind::TimedOut,
            409 => ErrorKind::Conflict,
            410 => ErrorKind::Gone,
            413 => ErrorKind::TooLarge,
            415 => ErrorKind::UnsupportedMediaType,
            422 => ErrorKind::Invalid,
            421 => ErrorKind::Misdirected,
            429 => ErrorKind::TooManyRequests,
            502 => ErrorKind::BadGateway,
            503 => ErrorKind::Unavailable,
            s if s >= 500 => ErrorKind::Internal,
            _ => ErrorKind::BadRequest,
        }
    }
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        self.kind.status()
    }

    /// An error for a rejection of axum's extractors (its status, our code, its text).
    pub fn rejected(status: StatusCode, code: &'static str, text: impl Into<String>) -> ApiError {
        let kind = ErrorKind::of_status(status);
        if kind == ErrorKind::Internal {
            return ApiError::internal(text.into());
        }
        ApiError::new(kind, code, text)
    }
}

/// An internal error's detail, carried from the handler to [`hide_internal_errors`].
#[derive(Clone)]
struct InternalDetail(String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let detail = self.detail().map(str::to_string);
        let body = ErrorBody {
            error: self.code.to_string(),
            message: self.message,
        };
        let mut r = (status, axum::Json(body)).into_response();
        if let Some(s) = self.retry_after {
            if let Ok(v) = HeaderValue::from_str(&s.max(1).to_string()) {
                r.headers_mut().insert(header::RETRY_AFTER, v);
            }
        }
        if let Some(d) = detail {
            r.extensions_mut().insert(InternalDetail(d));
        }
        r
    }
}

/// Logs every internal error's detail with the request id, and answers that id instead of the
/// detail (which may name files, addresses or the store's state).
pub async fn hide_internal_errors(req: Request, next: Next) -> Response {
    let id = req
        .headers()
        .get(&REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("-")
        .to_string();
    let mut r = next.run(req).await;
    let Some(InternalDetail(detail)) = r.extensions_mut().remove::<InternalDetail>() else {
        return r;
    };
    tracing::error!(request_id = %id, error = %detail, "internal error");
    let body = ErrorBody {
        error: "internal".into(),
        message: format!("internal error (request id {id})"),
    };
    let (mut parts, _) = r.into_parts();
    parts.headers.remove(header::CONTENT_LENGTH);
    let json = serde_json::to_vec(&body).expect("an error body serialises");
    Response::from_parts(parts, Body::from(json))
}

#[cfg(test)]
mod tests {
    use axum::routing::get;
    use axum::Router;
    use tower::ServiceExt;
    use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};

    use super::*;

    #[tokio::test]
    async fn an_internal_error_answers_its_request_id_not_its_detail() {
        let app = Router::new()
            .route(
                "/boom",
                get(|| async { ApiError::internal("the secret path /var/lib/x is unreadable") }),
            )
            .layer(axum::middleware::from_fn(hide_internal_errors))
            .layer(PropagateRequestIdLayer::new(REQUEST_ID))
            .layer(SetRequestIdLayer::new(REQUEST_ID, MakeRequestUuid));
        let r = app
            .oneshot(Request::get("/boom").body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let id = r.headers()[&REQUEST_ID].to_str().unwrap().to_string();
        assert!(!id.is_empty());
        let bytes = axum::body::to_bytes(r.into_body(), 1 << 20).await.unwrap();
        let text = String::from_utf8(bytes.to_vec()).unwrap();
        assert!(!text.contains("secret"), "{text}");
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["error"], "internal");
        assert!(v["message"].as_str().unwrap().contains(&id), "{text}");
        assert_eq!(v.as_object().unwrap().len(), 2, "{text}");
    }

    #[test]
    fn kinds_and_statuses_map_both_ways() {
        for s in [
            400u16, 401, 403, 404, 405, 408, 409, 413, 415, 422, 429, 500, 503,
        ] {
            let s = StatusCode::from_u16(s).unwrap();
            assert_eq!(ErrorKind::of_status(s).status(), s);
        }
    }
}
