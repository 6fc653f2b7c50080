//! Accepting and serving HTTP connections so that slow or idle clients cannot hold the server:
//! at most `max_connections` are open at once (more wait in the kernel's listen backlog, holding
//! no descriptor here), and a request's head must arrive within `header_timeout` of the
//! connection's start or of the previous response (hyper's HTTP/1 header timeout, which so also
//! closes idle keep-alive connections). A graceful shutdown stops accepting, closes idle
//! connections and lets requests in flight finish.
//!
//! HTTP/1.1 only: hyper has no header or idle timeout for HTTP/2 (and its version sniffing waits
//! for the first bytes without one), and no client of corral speaks cleartext HTTP/2: browsers
//! use HTTP/2 over TLS only, which a proxy in front terminates.

use std::future::Future;
use std::io;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use prometheus::IntGauge;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

/// What one client may hold.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_connections: usize,
    pub header_timeout: Duration,
}

/// Serves `app` on `listener` until `stop` resolves, then waits for the requests in flight
/// (WebSockets already upgraded are not waited for: they end with the server's shutdown signal).
/// `open` counts the connections open now.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    open: IntGauge,
    stop: impl Future<Output = ()>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let (stopping_tx, stopping) = watch::channel(false);
    // Each connection's task holds a clone; `closed()` resolves when the last one ends.
    let (alive_tx, alive) = watch::channel(());
    let mut stop = pin!(stop);
    loop {
        // A slot before the accept: beyond the cap, connections wait in the listen backlog.
        let slot = tokio::select! {
            s = slots.clone().acquire_owned() => s.expect("the semaphore is never closed"),
            _ = &mut stop => break,
        };
        let tcp = tokio::select! {
            r = listener.accept() => match r {
                Ok((tcp, _)) => tcp,
                Err(e) if is_per_connection(&e) => continue,
                Err(e) => {
                    // Out of descriptors (EMFILE, ENFILE) or memory: pause, as axum does,
                    // instead of spinning on the same error.
                    tracing::error!(error = %e, "accepting a connection failed; retrying in 1 s");
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_secs(1)) => continue,
                        _ = &mut stop => break,
                    }
                }
            },
            _ = &mut stop => break,
        };
        // Every response and WebSocket message goes out at once: with Nagle's algorithm a small
        // write waits for the previous one's ACK, which a client delays up to 40 ms (an
        // interactive run's echo that followed the server's `stdin` notice took ~43 ms).
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "TCP_NODELAY on an accepted connection");
        }
        let io = TokioIo::new(Held::new(tcp, slot, open.clone()));
        let conn = http
            .serve_connection(io, TowerToHyperService::new(app.clone()))
            .with_upgrades();
        let mut stopping = stopping.clone();
        let alive = alive.clone();
        tokio::spawn(async move {
            let mut conn = pin!(conn);
            let stopped = async move {
                let _ = stopping.wait_for(|s| *s).await;
            };
            let result = tokio::select! {
                r = conn.as_mut() => r,
                () = stopped => {
                    // Idle connections close now; a request in flight finishes first.
                    conn.as_mut().graceful_shutdown();
                    conn.await
                }
            };
            if let Err(e) = result {
                // A header timeout, a client gone mid-request, a malformed request.
                tracing::debug!(error = %e, "connection ended");
            }
            drop(alive);
        });
    }
    drop(listener);
    let _ = stopping_tx.send(true);
    drop(alive);
    alive_tx.closed().await;
}

/// Errors of one connection that came and went before it was accepted: the next one is fine.
fn is_per_connection(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// An accepted socket with its slot: the slot is given back when the socket is dropped, so a
/// connection upgraded to a WebSocket (whose socket outlives hyper's connection) keeps its slot
/// for its whole life.
struct Held {
    tcp: TcpStream,
    _slot: OwnedSemaphorePermit,
    open: IntGauge,
}

impl Held {
    fn new(tcp: TcpStream, slot: OwnedSemaphorePermit, open: IntGauge) -> Held {
        open.inc();
        Held {
            tcp,
            _slot: slot,
            open,
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.open.dec();
    }
}

impl AsyncRead for Held {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_read(cx, buf)
    }
}

impl AsyncWrite for Held {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().tcp).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().tcp).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_shutdown(cx)
    }
}
