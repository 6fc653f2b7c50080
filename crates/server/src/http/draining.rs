//! The grace period of a shutdown, as clients see it: the server keeps listening and answering
//! until the work in flight is done, so that a client gets a clear answer instead of a refused
//! connection. New work (every request but a read: runs, checks, uploads, submissions,
//! WebSocket upgrades, …) is answered 503 `shutting_down` with `Retry-After`; reads (`GET`,
//! `HEAD`, `OPTIONS`) are answered as usual, `/health` with 503 `shutting_down` (its handler);
//! a remote worker's heartbeat and result for a job it holds are still taken (they finish work
//! in hand). Every answer during the grace says `Connection: close`, so keep-alive connections
//! end with it.
//!
//! The requests that do work are counted (`service/work_requests.rs`): the shutdown closes the listener
//! once none is left (and no run or job is in hand), or when `shutdown_grace` ends.

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::error::{ApiError, SHUTTING_DOWN_RETRY};
use crate::state::SharedState;

/// Counts the requests that do work; during a shutdown refuses new ones and closes connections
/// after their answer.
pub async fn refuse_new_work(State(st): State<SharedState>, req: Request, next: Next) -> Response {
    let read = is_read(&req);
    if st.is_shutting_down() && !read && !finishes_work_in_hand(&req) {
        tracing::info!("shutting down: a request for new work refused");
        let mut r = refusal(req.uri().path());
        close_after(&mut r);
        return r;
    }
    let mut r = if read {
        next.run(req).await
    } else {
        let _working = st.work_requests.enter();
        next.run(req).await
    };
    // Checked again: a request that began before the signal ends its connection too.
    if st.is_shutting_down() && r.status() != StatusCode::SWITCHING_PROTOCOLS {
        close_after(&mut r);
    }
    r
}

/// A request that only reads: answered as usual during a shutdown. A WebSocket upgrade is a
/// `GET` but starts an interactive session: not a read.
fn is_read(req: &Request) -> bool {
    let safe = matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    let upgrade = req
        .headers()
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().contains("websocket"));
    safe && !upgrade
}

/// A remote worker's heartbeat or result for a job it already holds: refusing it would lose
/// the work done.
fn finishes_work_in_hand(req: &Request) -> bool {
    let path = req.uri().path();
    *req.method() == Method::POST
        && path.starts_with("/worker/jobs/")
        && (path.ends_with("/heartbeat") || path.ends_with("/result"))
}

/// The 503 in the shape of the API the path belongs to (Judge0's `{"error"}` for `/judge0/`).
fn refusal(path: &str) -> Response {
    if path.starts_with("/judge0/") {
        let mut r = (
            StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(json!({"error": ApiError::shutting_down().message})),
        )
            .into_response();
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(SHUTTING_DOWN_RETRY));
        r
    } else {
        ApiError::shutting_down().into_response()
    }
}

fn close_after(r: &mut Response) {
    r.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
}
