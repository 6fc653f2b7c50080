//! `/health`, `/metrics`, `/languages`, and the JSON answers for unknown paths and methods.

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use crate::error::{ApiError, ErrorKind};
use crate::service::store_health::StoreState;
use crate::state::SharedState;

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Health {
    /// `ok`, `shutting_down`, `store_unreachable` or `store_unwritable` (all but `ok` answered
    /// with 503: a load balancer stops sending work to a node that is stopping or cannot write
    /// its database).
    #[schema(example = "ok")]
    pub status: String,
    pub version: String,
    /// This server's node id (new at every start): the first part of the ids of the sandboxes it
    /// keeps between runs, and what `corral-forwarded-by` names.
    #[schema(example = "8a1e34f0")]
    pub node: String,
    /// Whether the store committed a one-row write within 2 s (probed at most once a second).
    pub store_ok: bool,
    /// Why the store cannot be written, when it cannot (details are in the server's log).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(example = "the database refused a write: database or disk is full")]
    pub store_error: Option<String>,
    pub shutting_down: bool,
    pub pool_idle: u64,
    pub pool_active: u64,
    pub held_sandboxes: u64,
    pub runs_in_flight: i64,
    pub runs_queued: i64,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct LanguageInfo {
    pub id: String,
    pub name: String,
    /// The conventional source file name.
    pub source: String,
    /// Builds `source` (a command run with `/bin/sh -c`).
    pub compile: Option<String>,
    pub run: String,
    /// The seccomp profile of the program's runs in submissions and checks (`default`, or
    /// stricter layers joined by `+`, e.g. `no_spawn+no_sockets`).
    #[schema(example = "no_spawn+no_sockets")]
    pub seccomp: String,
    /// Whether this host has the toolchain.
    pub available: bool,
    /// Why it is unavailable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The container image the language runs in, when it names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<LanguageImageInfo>,
}

/// A language's image: the reference it names and, when this server has it, its digest.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(example = json!({"name": "python:3.12-slim", "digest": "sha256:4c3f0ef8d6e9b1a2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a"}))]
pub struct LanguageImageInfo {
    pub name: String,
    /// `null` when this server's image store lacks the image (the language is then unavailable).
    pub digest: Option<String>,
}

/// Liveness and load.
#[utoipa::path(
    get, path = "/health", tag = "meta",
    responses(
        (status = 200, description = "Up", body = Health),
        (status = 503, description = "Up, but shutting down (finishing its work, taking no new work), or its store (the database) does not answer or cannot be written", body = Health)
    )
)]
pub async fn health(State(st): State<SharedState>) -> Response {
    let store = st.store_health.check(st.store.as_ref()).await;
    // Shutting down: a load balancer takes the node out while it finishes its work.
    let code = if store.is_ok() && !st.is_shutting_down() {
        axum::http::StatusCode::OK
    } else {
        axum::http::StatusCode::SERVICE_UNAVAILABLE
    };
    let health = Health {
        status: match &store {
            _ if st.is_shutting_down() => "shutting_down",
            StoreState::Ok => "ok",
            StoreState::Unreachable(_) => "store_unreachable",
            StoreState::Unwritable(_) => "store_unwritable",
        }
        .into(),
        version: env!("CARGO_PKG_VERSION").into(),
        node: st.node.id().to_string(),
        store_ok: store.is_ok(),
        store_error: store.reason().map(str::to_string),
        shutting_down: st.is_shutting_down(),
        pool_idle: st.pool.idle() as u64,
        pool_active: st.pool.active() as u64,
        held_sandboxes: st.sandboxes.len() as u64,
        runs_in_flight: st.metrics.in_flight.get(),
        runs_queued: st.metrics.queued.get(),
    };
    (code, Json(health)).into_response()
}

/// Prometheus metrics (text format).
#[utoipa::path(
    get, path = "/metrics", tag = "meta",
    responses((status = 200, description = "Prometheus text exposition", body = String, content_type = "text/plain"))
)]
pub async fn metrics(State(st): State<SharedState>) -> Response {
    st.metrics.pool_idle.set(st.pool.idle() as i64);
    st.metrics.pool_active.set(st.pool.active() as i64);
    st.metrics.held_sandboxes.set(st.sandboxes.len() as i64);
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        st.metrics.render(),
    )
        .into_response()
}

/// Languages this server knows, and whether this host has each toolchain.
#[utoipa::path(
    get, path = "/languages", tag = "meta",
    responses((status = 200, description = "Languages", body = Vec<LanguageInfo>))
)]
pub async fn languages(State(st): State<SharedState>) -> Result<Json<Vec<LanguageInfo>>, ApiError> {
    // Host-side file checks: off the async workers.
    tokio::task::spawn_blocking(move || Json(language_list(&st)))
        .await
        .map_err(ApiError::internal)
}

/// JSON 404 for unknown paths.
pub async fn not_found() -> ApiError {
    ApiError::not_found("no such endpoint; see /openapi.json")
}

/// JSON 405 for a known path with the wrong method.
pub async fn method_not_allowed() -> ApiError {
    ApiError::new(
        ErrorKind::MethodNotAllowed,
        "method_not_allowed",
        "this endpoint does not accept that method; see /openapi.json",
    )
}

/// The check engine's language registry (built-in plus the operator's file), probed on the host.
fn language_list(st: &SharedState) -> Vec<LanguageInfo> {
    st.languages
        .probe(None, Some(&st.images))
        .into_iter()
        .map(|l| {
            // The commands as a run naming the language gets them here by default: its memory
            // limit in place of `{memory_mib}` (the editor runs these commands as they are).
            let sized = st
                .languages
                .get(&l.id)
                .ok()
                .and_then(|lang| crate::service::runs::sized_by_default(st, lang));
            let (compile, run) = match sized {
                Some(lang) => (lang.compile, lang.run),
                None => (l.compile.clone(), l.run.clone()),
            };
            LanguageInfo {
                id: l.id,
                name: l.name,
                source: l.source,
                compile,
                run,
                seccomp: l.seccomp,
                available: l.available,
                reason: l.reason,
                image: l.image.map(|i| LanguageImageInfo {
                    name: i.name,
                    digest: i.digest,
                }),
            }
        })
        .collect()
}
