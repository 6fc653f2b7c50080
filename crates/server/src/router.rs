//! The whole service over HTTP: every adapter's routes, authentication in front of the protected
//! ones, and the layers every answer goes through (body limits and deadlines, panics as JSON 500s, internal
//! errors behind a request id, security headers, request ids and tracing).

use axum::extract::DefaultBodyLimit;
use axum::http::{header, HeaderName, HeaderValue, Method, Request};
use axum::Router;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::cors::{AllowHeaders, AllowOrigin, CorsLayer};
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::trace::TraceLayer;

use crate::error::ApiError;
use crate::http::error::REQUEST_ID;
use crate::state::SharedState;
use crate::{http, judge0, openapi, worker_api, ws};

/// The routes that need a token (`router` puts authentication in front of them); `upload_limit`
/// is the body limit of the multipart routes. Every one of them is in the OpenAPI document
/// (`crates/server/tests/openapi.rs` walks these).
pub fn protected_routes(upload_limit: usize) -> Router<SharedState> {
    http::routes(upload_limit)
        .merge(ws::routes())
        .merge(worker_api::routes())
        .merge(judge0::routes())
}

/// The routes anyone may call: the public API operations and the editor's pages.
pub fn public_routes() -> Router<SharedState> {
    http::public_routes().merge(openapi::routes())
}

/// Every route, with authentication in front of the protected ones.
pub fn router(state: SharedState) -> Router {
    let json_limit = state.config.max_json_bytes.bytes() as usize;
    let upload_limit = http::uploads::body_limit(&state.config.upload);
    let protected = protected_routes(upload_limit).route_layer(
        axum::middleware::from_fn_with_state(state.clone(), http::auth::authenticate),
    );
    Router::new()
        .merge(protected)
        .merge(public_routes())
        .fallback(http::meta::not_found)
        .method_not_allowed_fallback(http::meta::method_not_allowed)
        .layer(DefaultBodyLimit::max(json_limit))
        .layer(axum::Extension(http::json::JsonLimit(
            state.config.max_json_bytes,
            state.config.upload.max_bytes,
        )))
        .layer(axum::middleware::from_fn_with_state(
            state.config.http.body_timeout.duration(),
            http::body_deadline::limit,
        ))
        .layer(axum::middleware::from_fn(
            http::content_coding::refuse_encoded_bodies,
        ))
        // A bug in a handler answers 500 (JSON) instead of dropping the connection.
        .layer(CatchPanicLayer::custom(|_: Box<dyn std::any::Any + Send>| {
            axum::response::IntoResponse::into_response(ApiError::internal("a handler panicked"))
        }))
        // During a shutdown's grace period: new work refused (503), every connection closed
        // after its answer; the requests doing work counted for the shutdown to wait for.
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            http::draining::refuse_new_work,
        ))
        // Internal errors: logged with the request id, answered with the id only.
        .layer(axum::middleware::from_fn(http::error::hide_internal_errors))
        .layer(SetResponseHeaderLayer::overriding(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
        // The editor's pages (`web`) set their own policy; everything else gets this one.
        .layer(SetResponseHeaderLayer::if_not_present(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static("default-src 'none'; frame-ancestors 'none'"),
        ))
        .layer(SetResponseHeaderLayer::if_not_present(
            header::CACHE_CONTROL,
            HeaderValue::from_static("no-store"),
        ))
        .layer(PropagateRequestIdLayer::new(REQUEST_ID))
        .layer(
            TraceLayer::new_for_http().make_span_with(|req: &Request<_>| {
                let id = req
                    .headers()
                    .get(&REQUEST_ID)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("-");
                // The path only: a `?token=` must never reach the logs.
                tracing::info_span!("request", method = %req.method(), path = %req.uri().path(), request_id = %id)
            }),
        )
        .layer(SetRequestIdLayer::new(REQUEST_ID, MakeRequestUuid))
        // Outermost: a browser's preflight is answered before authentication.
        .layer(tower::util::option_layer(cors(&state.config.http.cors_origins)))
        .with_state(state)
}

/// Cross-origin access for the pages `http.cors_origins` names (none: no CORS headers at all,
/// and a preflight is an ordinary 405). Requests authenticate with a bearer token, never a
/// cookie, so credentials are not allowed; the headers a client reads are exposed.
fn cors(origins: &[String]) -> Option<CorsLayer> {
    if origins.is_empty() {
        return None;
    }
    let allow = if origins.iter().any(|o| o == "*") {
        AllowOrigin::any()
    } else {
        // Checked by `Config::validate`; an origin that is no header value cannot match anyway.
        AllowOrigin::list(origins.iter().filter_map(|o| HeaderValue::from_str(o).ok()))
    };
    Some(
        CorsLayer::new()
            .allow_origin(allow)
            .allow_methods([Method::GET, Method::POST, Method::DELETE])
            .allow_headers(AllowHeaders::mirror_request())
            .expose_headers([
                header::RETRY_AFTER,
                header::LOCATION,
                REQUEST_ID.clone(),
                HeaderName::from_static("idempotent-replayed"),
            ])
            .max_age(std::time::Duration::from_secs(600)),
    )
}
