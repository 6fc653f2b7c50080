//! The REST adapter: routes, request and response bodies, authentication, and how errors are
//! answered over HTTP. Handlers decode a request, call the service, encode its answer.
//!
//! - [`auth`]: bearer tokens (and `?token=` / `X-Auth-Token` where clients need them) into a caller.
//! - [`error`]: status codes, the JSON error body, hiding internal errors behind a request id.
//! - [`body_deadline`]: the whole request body within `http.body_timeout`.
//! - [`forward`]: a request for a sandbox another node keeps, sent on to that node.
//! - [`json`]: JSON bodies whose rejections are JSON errors; [`body`]: bodies cut short or over
//!   their cap by their declared length, for every endpoint; [`binary`]: raw byte bodies as the
//!   OpenAPI document shows them; [`path`]: path parameters whose rejections are JSON errors.
//! - [`check_progress`]: `/check`'s answer streamed as it goes; [`check_answer`]: its report.
//! - [`uploads`], [`runs`], [`checks`], [`tokens`], [`submissions`], [`gradebook`],
//!   [`revisions`], [`images`], [`meta`]: the endpoints; [`web`]: the browser editor's pages.

pub mod auth;
pub mod binary;
pub mod body;
pub mod body_deadline;
pub mod check_answer;
pub mod check_progress;
pub mod checks;
pub mod content_coding;
pub mod draining;
pub mod error;
pub mod forward;
pub mod gradebook;
pub mod images;
pub mod json;
pub mod meta;
pub mod objects_only;
pub mod path;
pub mod revisions;
pub mod runs;
pub mod submissions;
pub mod tokens;
pub mod uploads;
pub mod web;

use axum::extract::DefaultBodyLimit;
use axum::routing::{delete, get, post};
use axum::Router;

use crate::state::SharedState;

/// The REST routes that need a token (authentication is layered on by the caller).
/// `upload_limit` bounds multipart bodies (uploads, suites).
pub fn routes(upload_limit: usize) -> Router<SharedState> {
    Router::new()
        .route(
            "/upload",
            post(uploads::upload).layer(DefaultBodyLimit::max(upload_limit)),
        )
        .route(
            "/suites",
            post(checks::register_suite)
                .layer(DefaultBodyLimit::max(upload_limit))
                .get(checks::list_suites),
        )
        .route("/check", post(checks::check))
        .route("/uploads/{id}", get(uploads::get_upload))
        .route("/run", post(runs::run))
        .route("/sandboxes/{id}", delete(runs::delete_sandbox))
        .route("/tokens", post(tokens::create_token))
        .route("/tokens/{id}", delete(tokens::revoke_token))
        .route("/whoami", get(tokens::whoami))
        .route(
            "/submissions",
            post(submissions::submit).get(submissions::list_submissions),
        )
        .route("/submissions/batch", post(submissions::submit_batch))
        .route("/submissions/{id}", get(submissions::get_submission))
        .route(
            "/submissions/{id}/regrade",
            post(submissions::regrade_submission),
        )
        .route(
            "/submissions/{id}/callback",
            post(submissions::redeliver_callback),
        )
        .route("/suites/{id}/gradebook", get(gradebook::get_gradebook))
        .route("/suites/{id}/regrade", post(gradebook::regrade_suite))
        .merge(revisions::routes())
        .merge(images::routes())
}

/// The REST routes anyone may call: health, metrics, languages, the editor's pages.
pub fn public_routes() -> Router<SharedState> {
    Router::new()
        .route("/health", get(meta::health))
        .route("/metrics", get(meta::metrics))
        .route("/languages", get(meta::languages))
        .merge(web::routes())
}
