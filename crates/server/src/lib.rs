//! corral's HTTP service (`corral serve`): the CS50 Sandbox API — `/upload`, `/run`, `/check`,
//! interactive runs over `/ws` — on the sandbox library, with an embedded store.
//!
//! - [`config`]: TOML + environment configuration (caps, defaults, parallelism, TTL, retention).
//! - [`auth`]: bearer tokens, roles, per-token rate limits.
//! - [`run`]: request → sandboxed run (limits clamped to caps, sandboxes kept between runs).
//! - [`sandboxes`]: the kept sandboxes and their expiry.
//! - [`runner`]: bounded parallelism and queue (503 + `Retry-After` beyond), blocking threads.
//! - [`ws`]: the interactive protocol.
//! - [`openapi`]: the generated OpenAPI document.
//!
//! All sandbox work runs on blocking threads; the async runtime never forks or waits on a sandbox.

pub mod api;
pub mod auth;
pub mod checks;
pub mod config;
pub mod error;
pub mod languages;
pub mod metrics;
pub mod openapi;
pub mod ratelimit;
pub mod revisions;
pub mod run;
pub mod runner;
pub mod sandboxes;
pub mod state;
pub mod submissions;
pub mod types;
pub mod upload;
pub mod web;
pub mod ws;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::DefaultBodyLimit;
use axum::http::{header, HeaderName, HeaderValue, Request};
use axum::routing::{delete, get, post};
use axum::Router;
use corral_store::{Role, Store};
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::trace::TraceLayer;

pub use config::Config;
pub use error::{ApiError, ServerError};
pub use state::{AppState, SharedState};

const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Every route, with authentication in front of the protected ones.
pub fn router(state: SharedState) -> Router {
    let json_limit = state.config.max_json_bytes.bytes() as usize;
    // Multipart framing adds a little per part; the content limit itself is checked exactly.
    let upload_limit = state.config.upload.max_bytes.bytes() as usize
        + 64 * state.config.upload.max_files
        + (1 << 20);
    let protected = Router::new()
        .route(
            "/upload",
            post(api::upload).layer(DefaultBodyLimit::max(upload_limit)),
        )
        .route(
            "/suites",
            post(checks::register_suite)
                .layer(DefaultBodyLimit::max(upload_limit))
                .get(checks::list_suites),
        )
        .route("/check", post(checks::check))
        .route("/uploads/{id}", get(api::get_upload))
        .route("/run", post(api::run))
        .route("/sandboxes/{id}", delete(api::delete_sandbox))
        .route("/ws", get(ws::ws))
        .route("/tokens", post(api::create_token))
        .route("/tokens/{id}", delete(api::revoke_token))
        .route("/whoami", get(api::whoami))
        .merge(submissions::routes())
        .merge(revisions::routes())
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::authenticate,
        ));
    let public = Router::new()
        .route("/health", get(api::health))
        .route("/metrics", get(api::metrics))
        .route("/languages", get(api::languages))
        .merge(web::routes())
        .route("/openapi.json", get(api::openapi));
    Router::new()
        .merge(protected)
        .merge(public)
        .fallback(api::not_found)
        .method_not_allowed_fallback(api::method_not_allowed)
        .layer(DefaultBodyLimit::max(json_limit))
        // A bug in a handler answers 500 (JSON) instead of dropping the connection.
        .layer(CatchPanicLayer::custom(|_: Box<dyn std::any::Any + Send>| {
            axum::response::IntoResponse::into_response(ApiError::internal("a handler panicked"))
        }))
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
        .with_state(state)
}

/// When the store has no admin token yet, creates one and returns its secret (the first start).
pub async fn first_admin_token(store: &dyn Store) -> Result<Option<String>, ServerError> {
    if store.count_tokens(Role::Admin).await? > 0 {
        return Ok(None);
    }
    Ok(Some(
        store.create_token(Role::Admin, "first admin").await?.secret,
    ))
}

/// Background work: dropping idle sandboxes past their TTL, deleting uploads past retention.
fn spawn_housekeeping(state: SharedState) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let every = (state.sandboxes.ttl() / 4)
            .min(state.config.retention.duration() / 4)
            .clamp(Duration::from_millis(100), Duration::from_secs(10));
        let mut tick = tokio::time::interval(every);
        // Retention is enforced at start, then a few times per retention period (10 min at most).
        let retention_every = (state.config.retention.duration() / 4)
            .clamp(Duration::from_millis(500), Duration::from_secs(600));
        let mut last_retention: Option<tokio::time::Instant> = None;
        loop {
            tick.tick().await;
            let evicted = state.sandboxes.expire();
            if !evicted.is_empty() {
                tracing::info!(count = evicted.0.len(), "idle sandboxes expired");
                evicted.drop_blocking();
            }
            state
                .metrics
                .held_sandboxes
                .set(state.sandboxes.len() as i64);
            if last_retention.is_none_or(|t| t.elapsed() >= retention_every) {
                last_retention = Some(tokio::time::Instant::now());
                let cutoff =
                    corral_store::now() - state.config.retention.duration().as_secs() as i64;
                match state.store.delete_uploads_before(cutoff).await {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(count = n, "old uploads deleted"),
                    Err(e) => tracing::warn!(error = %e, "deleting old uploads failed"),
                }
            }
        }
    })
}

/// Binds the listening socket.
pub async fn bind(addr: &str) -> Result<tokio::net::TcpListener, ServerError> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| ServerError::Io {
            what: format!("listening on {addr}"),
            source: e,
        })
}

/// Serves until `stop` resolves, then shuts down gracefully: no new requests or runs, running
/// programs get `shutdown_grace` to finish (WebSocket runs are killed), every kept sandbox is
/// destroyed and the store is closed.
pub async fn serve(
    state: SharedState,
    listener: tokio::net::TcpListener,
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    let addr: Option<SocketAddr> = listener.local_addr().ok();
    let housekeeping = spawn_housekeeping(state.clone());
    let queue_tasks = submissions::worker::spawn(state.clone());
    let app = router(state.clone());
    let st = state.clone();
    let stopping = async move {
        stop.await;
        tracing::info!("shutting down: refusing new work, finishing runs");
        let _ = st.shutdown.send(true);
    };
    let grace = state.config.shutdown_grace.duration();
    let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
    let server =
        axum::serve(listener, app.into_make_service()).with_graceful_shutdown(async move {
            stopping.await;
            let _ = done_tx.send(());
        });
    tracing::info!(addr = ?addr, "serving");
    let server = tokio::spawn(async move { server.await });
    let _ = done_rx.await;
    // In-flight requests finish within the grace period; then everything is torn down.
    match tokio::time::timeout(grace + Duration::from_secs(2), server).await {
        Ok(Ok(Ok(()))) => {}
        Ok(Ok(Err(e))) => tracing::warn!(error = %e, "server error during shutdown"),
        Ok(Err(e)) => tracing::warn!(error = %e, "server task failed"),
        Err(_) => tracing::warn!("requests still running after the grace period; stopping anyway"),
    }
    state.runner.close();
    state.runner.drain(grace).await;
    submissions::drain(&state, grace).await;
    housekeeping.abort();
    queue_tasks.iter().for_each(|t| t.abort());
    let evicted = state.sandboxes.close();
    let _ = tokio::task::spawn_blocking(move || drop(evicted.0)).await;
    state.store.close().await;
    tracing::info!("stopped");
    Ok(())
}

/// Resolves on SIGTERM or SIGINT.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let term = signal(SignalKind::terminate());
    let int = signal(SignalKind::interrupt());
    match (term, int) {
        (Ok(mut t), Ok(mut i)) => {
            tokio::select! {
                _ = t.recv() => {}
                _ = i.recv() => {}
            }
        }
        _ => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// Keeps the `Arc` type in one place for callers building a state by hand.
pub fn shared(store: impl Store + 'static) -> Arc<dyn Store> {
    Arc::new(store)
}
