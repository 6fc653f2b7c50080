//! corral's HTTP service (`corral serve`): the CS50 Sandbox API — `/upload`, `/run`, `/check`,
//! interactive runs over `/ws` — plus a submission queue (with a Judge0-compatible surface and
//! remote workers), on the sandbox library, with an embedded store.
//!
//! - [`service`]: what the server does, with no HTTP types (runs, checks, uploads, tokens,
//!   suites, submissions); [`state`] is what it shares, [`config`] how it is configured,
//!   [`error`] how it fails; [`data_lock`] keeps a data folder to one server.
//! - Adapters, each with its routes and bodies: [`http`] (the REST API), [`judge0`] (Judge0's
//!   API), [`ws`] (interactive runs), [`worker_api`] (remote workers' endpoints).
//! - [`router`]: the adapters' routes behind authentication and the common layers;
//!   [`openapi`]: the generated OpenAPI document.
//! - [`metrics`], [`ratelimit`]: Prometheus metrics, per-token rate limits.
//!
//! All sandbox work runs on blocking threads; the async runtime never forks or waits on a sandbox.

pub mod config;
pub mod connections;
pub mod data_lock;
pub mod error;
pub mod http;
pub mod judge0;
pub mod metrics;
pub mod node_link;
pub mod openapi;
pub mod ratelimit;
pub mod router;
pub mod service;
pub mod state;
pub mod worker_api;
pub mod ws;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use corral_store::Store;

pub use config::Config;
pub use data_lock::DataLock;
pub use error::{ApiError, ServerError};
pub use router::router;
pub use service::tokens::first_admin_token;
pub use state::{AppState, SharedState};

/// Binds the listening socket.
pub async fn bind(addr: &str) -> Result<tokio::net::TcpListener, ServerError> {
    tokio::net::TcpListener::bind(addr).await.map_err(|e| {
        // "nonsense" or a missing port: say what shape the address takes.
        let hint = if e.kind() == std::io::ErrorKind::InvalidInput {
            " (give HOST:PORT, e.g. 127.0.0.1:8080)"
        } else {
            ""
        };
        ServerError::Io {
            what: format!("listening on {addr}{hint}"),
            source: e,
        }
    })
}

/// Serves until `stop` resolves, then shuts down gracefully: through `shutdown_grace` it still
/// answers, refusing new work with 503 `shutting_down`, while the requests, runs and gradings in
/// flight finish (WebSocket runs are killed); then it stops listening, every kept sandbox is
/// destroyed and the store is closed.
pub async fn serve(
    state: SharedState,
    listener: tokio::net::TcpListener,
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    let addr: Option<SocketAddr> = listener.local_addr().ok();
    state.node.set_url(node_url(&state.config, addr));
    service::nodes::announce(&state).await;
    tracing::info!(
        node = state.node.id(),
        url = state.node.url().unwrap_or("-"),
        "this server's node"
    );
    let shared = state.config.database_url().starts_with("postgres");
    if shared {
        service::shared_blobs::check(&state).await;
    }
    if shared && state.node.url().is_none() {
        tracing::warn!(
            node = state.node.id(),
            "this server shares its database with others, which cannot reach it: it listens on \
             every address and [http] node_url is not set, so a follow-up another server gets \
             for one of this server's sandboxes is answered 421 instead of sent on; set \
             [http] node_url to the URL the other servers reach this one at"
        );
    }
    let housekeeping = service::housekeeping::spawn(state.clone());
    let revocation_watch =
        service::revocations::spawn(state.store.clone(), state.revocations.clone());
    let queue_tasks = service::submissions::workers::spawn(state.clone());
    let app = router(state.clone());
    let grace = state.config.shutdown_grace.duration();
    // The grace period's end, counted from the signal.
    let (deadline_tx, deadline_rx) = tokio::sync::oneshot::channel::<tokio::time::Instant>();
    let st = state.clone();
    // The listener stays open through the grace period: new work is answered 503
    // `shutting_down` (`http::draining`), `/health` 503 and reads as usual, until the work in
    // flight is done or the grace period ends.
    let stopping = async move {
        stop.await;
        let deadline = tokio::time::Instant::now() + grace;
        tracing::info!("shutting down: refusing new work, finishing runs");
        let _ = st.shutdown.send(true);
        let _ = deadline_tx.send(deadline);
        if work_done(&st, deadline).await {
            tracing::info!("shutting down: the work in flight is done; closing the listener");
        }
    };
    let http = &state.config.http;
    let limits = connections::Limits {
        max_connections: http.max_connections(open_files_limit()),
        header_timeout: http.header_timeout.duration(),
    };
    let server = connections::serve(
        listener,
        app,
        limits,
        state.metrics.http_connections.clone(),
        stopping,
    );
    tracing::info!(addr = ?addr, max_connections = limits.max_connections, "serving");
    let mut server = tokio::spawn(server);
    // One grace period for everything in flight (requests, their runs, the queue's gradings),
    // counted from the signal; then everything is torn down.
    let deadline = match deadline_rx.await {
        Ok(d) => d,
        // The server task ended before any signal (it failed).
        Err(_) => tokio::time::Instant::now(),
    };
    let left = || deadline.saturating_duration_since(tokio::time::Instant::now());
    match tokio::time::timeout_at(deadline, &mut server).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "server task failed"),
        Err(_) => {
            tracing::warn!("requests still running after the grace period; stopping anyway");
            // Closes the listener if it is still open; the connections' own tasks go with the
            // runtime.
            server.abort();
        }
    }
    state.runner.close();
    state.runner.drain(left()).await;
    service::submissions::workers::drain(&state, left()).await;
    // The jobs still being judged: stopped with the workers below, then given back to the queue.
    let abandoned = state.queue.in_hand();
    housekeeping.abort();
    revocation_watch.abort();
    queue_tasks.iter().for_each(|t| t.abort());
    for t in queue_tasks {
        let _ = t.await;
    }
    service::submissions::workers::release_abandoned(&state, abandoned).await;
    let evicted = state.sandboxes.close();
    let _ = tokio::task::spawn_blocking(move || drop(evicted.0)).await;
    service::nodes::stopped(&state).await;
    if shared {
        service::shared_blobs::unmark(&state);
    }
    state.store.close().await;
    tracing::info!("stopped");
    Ok(())
}

/// Waits until no request doing work, no run and no job of the in-process workers is in flight,
/// or `deadline` passes. True when all finished.
async fn work_done(st: &SharedState, deadline: tokio::time::Instant) -> bool {
    loop {
        let busy = st.work_requests.get() > 0
            || st.metrics.in_flight.get() > 0
            || st.queue.in_flight() > 0;
        if !busy {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Where the other servers sharing the database reach this one: `http.node_url`, else the
/// listening address when it is a specific one (`0.0.0.0` says nothing of where to call).
fn node_url(config: &Config, addr: Option<SocketAddr>) -> Option<String> {
    config.http.node_url.clone().or_else(|| {
        addr.filter(|a| !a.ip().is_unspecified())
            .map(|a| format!("http://{a}"))
    })
}

/// The soft limit on open files (the sandbox host raised it to the hard one at its start).
fn open_files_limit() -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit(2) only writes the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } == 0 {
        r.rlim_cur
    } else {
        1024
    }
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
