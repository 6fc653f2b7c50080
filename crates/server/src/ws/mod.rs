//! `/ws`: interactive runs. The client sends `run`, `stdin`, `signal` and `kill` messages; the
//! server streams `stdout` / `stderr` as produced, says `stdin` when the program blocks reading its
//! standard input (asked of the kernel through `/proc/PID/syscall` once output has gone quiet), and
//! ends with `exit`. Closing the socket kills the run. When the token the socket was opened with
//! is revoked, the run is killed and the socket closed (1008, "token revoked").
//!
//! The program is driven by one blocking thread ([`driver`]) that steps the `Execution` with short
//! deadlines and talks to the socket task over channels.

mod driver;
pub mod messages;
mod relay;

use std::sync::mpsc as std_mpsc;
use std::time::Duration;

use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{close_code, CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use axum::Extension;
use corral_sandbox::{Status, Stdin, Waker};
use futures_util::{SinkExt, StreamExt};
use tokio::sync::mpsc;

use crate::error::{ApiError, ErrorBody, ErrorKind};
use crate::node_link::{self, Keeper};
use crate::service::caller::Caller;
use crate::service::nodes::{self, Owner};
use crate::service::runs::{execute, prepare, RunInput, RunResponse};
use crate::state::SharedState;
use driver::{drive, Ctl, Event, Leftover};
use messages::{WsClientMessage, WsServerMessage};
use relay::Relay;

/// Standard input a client may send to one run.
const MAX_STDIN: usize = 16 << 20;
const MAX_MESSAGE: usize = 1 << 20;

/// Interactive runs over a WebSocket.
///
/// This is a WebSocket endpoint: open it with an `Upgrade: websocket` handshake; a plain HTTP
/// request cannot open it and gets 400.
///
/// Client messages (JSON, `type` field): `{"type": "run", "cmd", "sandbox", "limits", "tty",
/// "language", "image", "seccomp", "queue_notices"}`,
/// `{"type": "resize", "cols", "rows"}`,
/// `{"type": "stdin", "data", "eof"}`, `{"type": "signal", "name": "SIGINT"}`, `{"type": "kill"}`.
/// Server messages: `{"type": "queued"}` (to a run with `queue_notices`: every sandbox is
/// busy, the run waits) then `{"type": "started"}` when it gets one, `{"type": "stdout" | "stderr", "data"}`,
/// `{"type": "stdin"}` (the program waits for input), `{"type": "exit", "code", "status", "stdout", "stderr", "sandbox", …}` and
/// `{"type": "error", "error", "message", "retry_after"}` (`retry_after`, seconds, when trying
/// again later may work). Each `run` counts against the token's rate limit like a request
/// (past it: a `rate_limited` error; the socket stays open), and a token may have
/// `max_websockets_per_caller` sockets open (429 beyond). Browsers may pass the token as
/// `?token=`. When the token is revoked, the run is killed,
/// `{"type": "error", "error": "token_revoked"}` is sent and the socket closed with 1008
/// ("token revoked").
///
/// The messages' schemas are the components `WsClientMessage` (what a client sends) and
/// `WsServerMessage` (what it receives), named by this operation's `x-websocket-messages`: each
/// is `oneOf` one schema per message (`WsClientRun`, …, `WsServerExit`, …) with `type` as the
/// discriminator.
#[utoipa::path(
    get, path = "/ws", tag = "sandbox",
    params(("token" = Option<String>, Query, description = "The API token, for clients that cannot set headers", example = "corral_0123456789abcdef0123456789abcdef")),
    responses(
        (status = 101, description = "Switching to the WebSocket protocol"),
        (status = 400, description = "Not a WebSocket upgrade request", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 429, description = "Rate limited, or this token has its most WebSockets open (`max_websockets_per_caller`); see Retry-After", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn ws(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
    uri: Uri,
    headers: HeaderMap,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    let upgrade = upgrade.map_err(|e| {
        ApiError::new(
            ErrorKind::BadRequest,
            "not_websocket",
            format!("{}: connect with a WebSocket client", e.body_text()),
        )
    })?;
    // The upgrade's rate limit alone let a token keep sockets (each a task and a revocation
    // watch, and a run) open without end.
    let max = st.config.max_websockets_per_caller;
    let open = st.websockets.take(&caller.id, max).map_err(|has| {
        let m = format!("this token has {has} WebSockets open, the most it may have at once ({max}); close one first");
        ApiError::too_many("too_many_websockets", m, 5)
    })?;
    Ok(upgrade
        .max_message_size(MAX_MESSAGE)
        // A frame is read whole before the message's size is checked: without this one frame
        // of up to tungstenite's default (16 MiB) was buffered.
        .max_frame_size(MAX_MESSAGE)
        .on_upgrade(move |socket| async move {
            let opened = Opened { uri, headers };
            session(st, caller, opened, socket).await;
            drop(open);
        }))
}

fn json(msg: &WsServerMessage) -> Message {
    Message::Text(serde_json::to_string(msg).unwrap_or_default().into())
}

fn error(code: &str, message: impl Into<String>) -> WsServerMessage {
    WsServerMessage::Error {
        error: code.into(),
        message: message.into(),
        retry_after: None,
    }
}

/// A request's error as a message (an internal error's detail goes to the log only), with the
/// wait HTTP would send as `Retry-After`.
fn api_error(e: ApiError) -> WsServerMessage {
    e.log_detail();
    WsServerMessage::Error {
        error: e.code.into(),
        message: e.message,
        retry_after: e.retry_after,
    }
}

fn signal_number(name: &str) -> Option<i32> {
    let n = name.trim().to_ascii_uppercase();
    let n = n.strip_prefix("SIG").unwrap_or(&n);
    Some(match n {
        "INT" => libc::SIGINT,
        "TERM" => libc::SIGTERM,
        "KILL" => libc::SIGKILL,
        "QUIT" => libc::SIGQUIT,
        "HUP" => libc::SIGHUP,
        "USR1" => libc::SIGUSR1,
        "USR2" => libc::SIGUSR2,
        _ => return None,
    })
}

/// How the socket was opened: what a run relayed to another node is sent with (credentials,
/// whether another node sent this socket on).
struct Opened {
    uri: Uri,
    headers: HeaderMap,
}

/// The socket's run under way.
struct Running {
    to: RunsOn,
    stdin_sent: usize,
}

enum RunsOn {
    /// This server: its driver thread.
    Here {
        ctl: std_mpsc::Sender<Ctl>,
        /// Wakes the driver thread out of its wait, so a control message is acted on at once.
        waker: Waker,
    },
    /// The node that keeps the sandbox, over a relay.
    There(Relay),
}

impl Running {
    /// Acts on a client's message `text` (parsed as `c`): here, through the driver; there, sent
    /// on as it came.
    fn send(&self, c: Ctl, text: &str) {
        match &self.to {
            RunsOn::Here { ctl, waker } => {
                let _ = ctl.send(c);
                waker.wake();
            }
            RunsOn::There(relay) => relay.send(text),
        }
    }

    /// Kills a run here (its exit event follows); a relayed run is ended by dropping it.
    fn kill_here(&self) {
        if let RunsOn::Here { ctl, waker } = &self.to {
            let _ = ctl.send(Ctl::Kill);
            waker.wake();
        }
    }

    /// Ends the run: here, killed; there, the connection closed (which kills it there).
    fn kill(self) {
        self.kill_here();
    }
}

async fn session(st: SharedState, caller: Caller, opened: Opened, socket: WebSocket) {
    let (mut tx, mut rx) = socket.split();
    let (ev_tx, mut ev_rx) = mpsc::channel::<Event>(64);
    // A relayed run's messages, as the keeping node sent them.
    let (relay_tx, mut relay_rx) = mpsc::channel::<(String, bool)>(64);
    let mut running: Option<Running> = None;
    let mut shutdown = st.shutdown.subscribe();
    // Noticed within the revocation watch's poll, without asking the store per message.
    let revoked = caller.revoked(&st);
    tokio::pin!(revoked);
    loop {
        tokio::select! {
            msg = rx.next() => {
                let text = match msg {
                    Some(Ok(Message::Text(t))) => t.to_string(),
                    Some(Ok(Message::Binary(b))) => String::from_utf8_lossy(&b).into_owned(),
                    Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                    // The client's close: answered with the same code (RFC 6455 §5.5.1; without
                    // it every client saw 1006, an abnormal end). The run (if any) is killed
                    // when `running` drops its sender.
                    Some(Ok(Message::Close(frame))) => {
                        // tungstenite has queued that answer when it read the close (a send of
                        // our own is refused then); a flush puts it on the wire.
                        let reply = frame.map(|f| CloseFrame { code: f.code, reason: "".into() });
                        if !send_within(&mut tx, Message::Close(reply), CLOSE_TIMEOUT).await {
                            let _ = tokio::time::timeout(CLOSE_TIMEOUT, tx.flush()).await;
                        }
                        break;
                    }
                    // Broken: nothing to answer.
                    None => break,
                    Some(Err(e)) => {
                        // Say why before closing (a message over the size limit used to drop
                        // the connection without a word).
                        let text = e.to_string();
                        let (code, reason, detail) = if text.contains("too long") {
                            let d = format!("a message is at most {MAX_MESSAGE} bytes ({text})");
                            (close_code::SIZE, "message too big", d)
                        } else {
                            (close_code::PROTOCOL, "bad frame", format!("bad frame: {text}"))
                        };
                        send_within(&mut tx, json(&error("bad_message", detail)), CLOSE_TIMEOUT).await;
                        let close = Message::Close(Some(CloseFrame { code, reason: reason.into() }));
                        send_within(&mut tx, close, CLOSE_TIMEOUT).await;
                        break;
                    }
                };
                let reply = match WsClientMessage::parse(&text) {
                    Err(e) => Some(error("bad_message", format!("not a valid message: {e}"))),
                    Ok(m) => {
                        let to = Replies { events: &ev_tx, relayed: &relay_tx };
                        handle(&st, &caller, &opened, (m, &text), &mut running, to).await
                    }
                };
                if let Some(r) = reply {
                    match send_or_revoked(&mut tx, json(&r), &mut revoked).await {
                        Sent::Yes => {}
                        Sent::No => break,
                        Sent::Revoked => {
                            close_revoked(&caller, &mut tx, &mut running).await;
                            break;
                        }
                    }
                }
            }
            ev = ev_rx.recv() => {
                let Some((ev, ends)) = ev else { break };
                if ends {
                    running = None;
                }
                match send_or_revoked(&mut tx, json(&ev), &mut revoked).await {
                    Sent::Yes => {}
                    Sent::No => break,
                    Sent::Revoked => {
                        close_revoked(&caller, &mut tx, &mut running).await;
                        break;
                    }
                }
            }
            relayed = relay_rx.recv() => {
                let Some((text, ends)) = relayed else { break };
                if ends {
                    running = None;
                }
                match send_or_revoked(&mut tx, Message::Text(text.into()), &mut revoked).await {
                    Sent::Yes => {}
                    Sent::No => break,
                    Sent::Revoked => {
                        close_revoked(&caller, &mut tx, &mut running).await;
                        break;
                    }
                }
            }
            _ = &mut revoked => {
                close_revoked(&caller, &mut tx, &mut running).await;
                break;
            }
            _ = shutdown.changed() => {
                match running.take() {
                    // Closing the relay ends the run on the node that keeps the sandbox.
                    Some(r @ Running { to: RunsOn::There(_), .. }) => r.kill(),
                    Some(r) => {
                        r.kill_here();
                        running = Some(r);
                    }
                    None => {}
                }
                send_within(&mut tx, json(&error("shutting_down", "the server is shutting down")), CLOSE_TIMEOUT).await;
                // Let the exit event of a killed run through, then close.
                let deadline = tokio::time::sleep(Duration::from_secs(5));
                tokio::pin!(deadline);
                while running.is_some() {
                    tokio::select! {
                        ev = ev_rx.recv() => match ev {
                            Some((ev, ends)) => {
                                if ends { running = None; }
                                let ev = killed_by_shutdown(ev);
                                if !send_within(&mut tx, json(&ev), CLOSE_TIMEOUT).await {
                                    break;
                                }
                            }
                            None => break,
                        },
                        _ = &mut deadline => break,
                    }
                }
                let close = Message::Close(Some(CloseFrame {
                    code: close_code::AWAY,
                    reason: "the server is shutting down".into(),
                }));
                send_within(&mut tx, close, CLOSE_TIMEOUT).await;
                break;
            }
        }
    }
    if let Some(r) = running {
        r.kill();
    }
}

/// How long a message may wait for the client to take it. A client that takes nothing for this
/// long is disconnected and its run killed: it held its socket, the task and the run's backlog
/// (and, before runs stopped waiting for their sockets, one of the server's run slots).
const SEND_TIMEOUT: Duration = Duration::from_secs(30);

/// The exit of a run the server's shutdown killed, said as such: `cancelled` with the reason
/// (as a run whose sandbox was deleted), and no sandbox to continue in (the shutdown destroys
/// every kept one). It read `signaled`, signal 9, with the id of a sandbox being destroyed.
fn killed_by_shutdown(ev: WsServerMessage) -> WsServerMessage {
    match ev {
        WsServerMessage::Exit(mut r) => {
            // A program that ended by itself meanwhile keeps its own status.
            if r.status == Status::Signaled.as_str() {
                r.status = crate::service::runs::CANCELLED.to_string();
                r.reason = Some(
                    "the server is shutting down: the program was killed and its sandbox \
                     destroyed"
                        .to_string(),
                );
            }
            r.sandbox = None;
            WsServerMessage::Exit(r)
        }
        other => other,
    }
}

/// What a parting message (a close, a revocation, a shutdown notice) may wait for.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(1);

type WsSink = futures_util::stream::SplitSink<WebSocket, Message>;

/// Sends `m` unless the client takes longer than `within` (or the socket failed): false then.
async fn send_within(tx: &mut WsSink, m: Message, within: Duration) -> bool {
    matches!(tokio::time::timeout(within, tx.send(m)).await, Ok(Ok(())))
}

enum Sent {
    Yes,
    No,
    Revoked,
}

/// Sends `m` within [`SEND_TIMEOUT`]; a revocation that comes meanwhile wins, so a client that
/// stops reading is still closed within the revocation watch's second.
async fn send_or_revoked<R: std::future::Future<Output = ()>>(
    tx: &mut WsSink,
    m: Message,
    revoked: &mut std::pin::Pin<&mut R>,
) -> Sent {
    tokio::select! {
        sent = send_within(tx, m, SEND_TIMEOUT) => if sent { Sent::Yes } else { Sent::No },
        _ = revoked.as_mut() => Sent::Revoked,
    }
}

/// The token was revoked: the run is killed, the client told (if it still reads), the socket closed.
async fn close_revoked(caller: &Caller, tx: &mut WsSink, running: &mut Option<Running>) {
    if let Some(r) = running.take() {
        r.kill();
    }
    tracing::info!(caller = %caller.id, "token revoked: closing its WebSocket");
    send_within(
        tx,
        json(&error("token_revoked", "this token was revoked")),
        CLOSE_TIMEOUT,
    )
    .await;
    let close = Message::Close(Some(CloseFrame {
        code: close_code::POLICY,
        reason: "token revoked".into(),
    }));
    send_within(tx, close, CLOSE_TIMEOUT).await;
}

/// Where a run's messages go: a run here sends events, a relayed one the keeper's messages.
struct Replies<'a> {
    events: &'a mpsc::Sender<Event>,
    relayed: &'a mpsc::Sender<(String, bool)>,
}

/// Acts on a client's message `msg`, parsed from `text`; returns the reply to send at once.
async fn handle(
    st: &SharedState,
    caller: &Caller,
    opened: &Opened,
    (msg, text): (WsClientMessage, &str),
    running: &mut Option<Running>,
    to: Replies<'_>,
) -> Option<WsServerMessage> {
    let ev_tx = to.events;
    let send = |r: &Running, c: Ctl| r.send(c, text);
    match msg {
        WsClientMessage::Run {
            cmd,
            sandbox,
            limits,
            env,
            tty,
            language,
            image,
            seccomp,
            runtime,
            queue_notices,
        } => {
            // Each run counts against the token's rate limit like a request: the upgrade was
            // the only charge, and one socket ran thousands of programs a minute. Input,
            // signals, resizes and kills start nothing; they act on this socket's one run.
            if let Err(e) = caller.admit(st) {
                return Some(api_error(e));
            }
            if running.is_some() {
                return Some(error(
                    "busy",
                    "a program is already running on this socket; wait for its exit",
                ));
            }
            // A run in a sandbox another node keeps (a load balancer's choice) is that node's.
            if let Some(id) = sandbox.as_ref().and_then(|s| s.id.as_deref()) {
                let forwarded = node_link::was_forwarded(&opened.headers);
                match nodes::owner(st, id, forwarded).await {
                    Err(e) => return Some(api_error(e)),
                    Ok(Owner::Here) => {}
                    Ok(Owner::There { node, url }) => {
                        let keeper = Keeper {
                            sandbox: id,
                            node: &node,
                            url: &url,
                        };
                        let me = st.node.id();
                        let (uri, headers) = (&opened.uri, &opened.headers);
                        let relay = relay::open(me, keeper, uri, headers, text, to.relayed.clone());
                        return match relay.await {
                            Ok(relay) => {
                                *running = Some(Running {
                                    to: RunsOn::There(relay),
                                    stdin_sent: 0,
                                });
                                None
                            }
                            Err(e) => Some(api_error(e)),
                        };
                    }
                }
            }
            let input = RunInput {
                cmd,
                sandbox,
                stdin: Stdin::Pipe,
                limits,
                env,
                image,
                seccomp,
                language,
                runtime,
                preferred_runtime: None,
            };
            let mut prepared = match prepare(st, caller, input).await {
                Ok(p) => p,
                Err(e) => return Some(api_error(e)),
            };
            prepared.spec.tty = tty.map(|t| (t.cols.clamp(1, 1000), t.rows.clamp(1, 1000)));
            let clamped = prepared.clamped.clone();
            let (ctl_tx, ctl_rx) = std_mpsc::channel();
            let waker = match Waker::new() {
                Ok(w) => w,
                Err(e) => return Some(api_error(ApiError::internal(e))),
            };
            *running = Some(Running {
                to: RunsOn::Here {
                    ctl: ctl_tx,
                    waker: waker.clone(),
                },
                stdin_sent: 0,
            });
            // Said before the wait, so a client is not left with silence while the server is
            // busy (the editor says so); `started` ends it.
            let queued = queue_notices && !st.runner.has_free_slot_for_a_program();
            let st = st.clone();
            let ev_tx = ev_tx.clone();
            let caller_id = caller.id.clone();
            tokio::spawn(async move {
                let out_tx = ev_tx.clone();
                let leftover = Leftover::default();
                let left = leftover.clone();
                // The sandbox's deletion kills the run (`execute` has it watch the cancel).
                let result = execute(&st, prepared, move |sb, spec| {
                    drive(sb, spec, ctl_rx, &waker, out_tx, queued, &left)
                })
                .await;
                // Output the socket had no room for while the program ran: sent now, the run's
                // slot already free, before its exit.
                let left: Vec<_> = leftover
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .drain(..)
                    .collect();
                for msg in left {
                    if ev_tx.send((msg, false)).await.is_err() {
                        break;
                    }
                }
                let msg = match result {
                    Ok((outcome, ran)) => {
                        let answer = RunResponse::new(&outcome, ran, clamped);
                        // Logged as `/run` logs its runs.
                        tracing::info!(caller = %caller_id, status = answer.status.as_str(), wall_ms = outcome.usage.wall_time_ms, via = "websocket", "run");
                        WsServerMessage::Exit(Box::new(answer))
                    }
                    // Not run at all (overload, shutdown): the client may try again.
                    Err(e) => api_error(e),
                };
                let _ = ev_tx.send((msg, true)).await;
            });
            // Sent before anything the run sends: the session loop sends this reply first.
            queued.then_some(WsServerMessage::Queued {})
        }
        WsClientMessage::Stdin { data, eof } => {
            let Some(r) = running.as_mut() else {
                return Some(error("not_running", "no program is running"));
            };
            // Only data counts against the cap, and only data a message adds: the end of stdin
            // (or an empty message) is always taken, and a refused chunk uses none of the cap.
            if !data.is_empty() {
                if r.stdin_sent + data.len() > MAX_STDIN {
                    let m = format!(
                        "more than 16M of standard input: this message's {} bytes are refused ({} taken so far); the end of input (eof) is still accepted",
                        data.len(),
                        r.stdin_sent
                    );
                    return Some(error("too_large", m));
                }
                r.stdin_sent += data.len();
            }
            if let RunsOn::There(relay) = &r.to {
                relay.send(text);
                return None;
            }
            if !data.is_empty() {
                send(r, Ctl::Stdin(data.into_bytes()));
            }
            if eof {
                send(r, Ctl::Eof);
            }
            None
        }
        WsClientMessage::Signal { name } => {
            let Some(r) = running.as_ref() else {
                return Some(error("not_running", "no program is running"));
            };
            match signal_number(&name) {
                Some(n) => {
                    send(r, Ctl::Signal(n));
                    None
                }
                None => Some(error(
                    "bad_signal",
                    format!("unknown signal {name:?}: use SIGINT, SIGTERM, SIGKILL, SIGQUIT, SIGHUP, SIGUSR1 or SIGUSR2"),
                )),
            }
        }
        WsClientMessage::Resize { cols, rows } => {
            let Some(r) = running.as_ref() else {
                return Some(error("not_running", "no program is running"));
            };
            send(r, Ctl::Resize(cols.clamp(1, 1000), rows.clamp(1, 1000)));
            None
        }
        WsClientMessage::Kill => {
            let Some(r) = running.as_ref() else {
                return Some(error("not_running", "no program is running"));
            };
            send(r, Ctl::Kill);
            None
        }
    }
}

/// The WebSocket's route (behind authentication; browsers may pass `?token=`).
pub fn routes() -> axum::Router<SharedState> {
    axum::Router::new().route("/ws", axum::routing::get(ws))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_names() {
        assert_eq!(signal_number("SIGINT"), Some(libc::SIGINT));
        assert_eq!(signal_number("term"), Some(libc::SIGTERM));
        assert_eq!(signal_number("SIGSEGV"), None);
    }
}
