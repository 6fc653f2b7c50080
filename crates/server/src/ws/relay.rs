//! A WebSocket run in a sandbox another node keeps (a load balancer sent the socket here): the
//! `run` message is sent on to that node's `/ws` with the caller's credentials, and the two
//! sockets are joined until the run ends — the client's input, signals, resizes and kill go there
//! as they came, and that node's messages come back as they were. The keeper authenticates the
//! caller again and owns every decision; it kills the run when its socket closes, so closing the
//! client's (or this server's end) ends the run there too. Each run opens its own connection.

use axum::http::{HeaderMap, HeaderValue, Uri};
use futures_util::{SinkExt, StreamExt};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;

use crate::error::ApiError;
use crate::node_link::{Keeper, FORWARDED_BY, PASSED_ON};

/// A relayed run, held by the client's session: what the client sends on goes through it;
/// dropping it closes the connection to the keeper (which kills the run there).
pub struct Relay {
    to_keeper: mpsc::UnboundedSender<String>,
}

impl Relay {
    /// Sends a client's message on, as it came.
    pub fn send(&self, text: &str) {
        let _ = self.to_keeper.send(text.to_string());
    }
}

/// How long the keeper may take to accept the connection and answer its handshake (the client's
/// session waits meanwhile): a node that does not answer within it is not answering.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The error codes the keeper answers to input, a signal or a message it could not read: the
/// run goes on. Any other `error` ends the relayed run (its `run` was refused, or it was cut).
const ERRORS_DURING_A_RUN: [&str; 3] = ["too_large", "bad_signal", "bad_message"];

/// Whether the keeper's message `text` ends the run: its `exit`, or an error that is not about
/// one message of the client's.
fn ends_the_run(text: &str) -> bool {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(text) else {
        return false;
    };
    match v["type"].as_str() {
        Some("exit") => true,
        Some("error") => !v["error"]
            .as_str()
            .is_some_and(|e| ERRORS_DURING_A_RUN.contains(&e)),
        _ => false,
    }
}

/// The keeper's `/ws` address from its base URL (`http://…` → `ws://…`, `https://…` →
/// `wss://…`), with the query the client connected with (a browser's `?token=`).
fn ws_url(base: &str, query: Option<&str>) -> String {
    let base = base.trim_end_matches('/');
    let base = match base.split_once("://") {
        Some(("https", rest)) => format!("wss://{rest}"),
        Some((_, rest)) => format!("ws://{rest}"),
        None => format!("ws://{base}"),
    };
    match query {
        Some(q) => format!("{base}/ws?{q}"),
        None => format!("{base}/ws"),
    }
}

/// Opens a connection to the keeper as node `me`, with the client's credentials (`headers`,
/// `uri`'s query), sends it the client's `run` message, and relays the keeper's messages to
/// `to_client` (each with whether it ends the run) until the run ends or the relay is dropped.
pub async fn open(
    me: &str,
    keeper: Keeper<'_>,
    uri: &Uri,
    headers: &HeaderMap,
    run: &str,
    to_client: mpsc::Sender<(String, bool)>,
) -> Result<Relay, ApiError> {
    let target = ws_url(keeper.url, uri.query());
    let mut request = target
        .as_str()
        .into_client_request()
        .map_err(|e| keeper.unreachable(&target, &e))?;
    for name in &PASSED_ON {
        for v in headers.get_all(name) {
            request.headers_mut().append(name, v.clone());
        }
    }
    request.headers_mut().insert(
        &FORWARDED_BY,
        HeaderValue::from_str(me).map_err(ApiError::internal)?,
    );
    // The keeper is a server of this deployment (its address is in the shared database): its
    // messages are bounded by its own output caps, and an `exit` carries the run's whole output,
    // JSON-escaped (a byte of control output is six), well past what a client may send.
    let config = WebSocketConfig::default()
        .max_message_size(None)
        .max_frame_size(None);
    let connect = tokio_tungstenite::connect_async_with_config(request, Some(config), true);
    let (mut socket, _) = match tokio::time::timeout(CONNECT_TIMEOUT, connect).await {
        Ok(connected) => connected.map_err(|e| keeper.unreachable(&target, &e))?,
        Err(_) => {
            let e = std::io::Error::new(std::io::ErrorKind::TimedOut, "no WebSocket within 10 s");
            return Err(keeper.unreachable(&target, &e));
        }
    };
    socket
        .send(Message::text(run))
        .await
        .map_err(|e| keeper.unreachable(&target, &e))?;
    tracing::debug!(
        node = keeper.node,
        "a WebSocket run relayed to the node that keeps its sandbox"
    );
    let (to_keeper, mut from_client) = mpsc::unbounded_channel::<String>();
    let node = keeper.node.to_string();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                m = from_client.recv() => match m {
                    Some(text) => {
                        if socket.send(Message::text(text)).await.is_err() {
                            let _ = to_client.send((cut(&node), true)).await;
                            break;
                        }
                    }
                    // The client's session ended (or moved on): closing kills the run there.
                    None => {
                        let _ = socket.close(None).await;
                        break;
                    }
                },
                m = socket.next() => match m {
                    Some(Ok(Message::Text(t))) => {
                        let ends = ends_the_run(&t);
                        if to_client.send((t.to_string(), ends)).await.is_err() || ends {
                            let _ = socket.close(None).await;
                            break;
                        }
                    }
                    Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {}
                    Some(Ok(Message::Binary(_))) => {}
                    Some(Ok(Message::Close(_))) | Some(Err(_)) | None => {
                        let _ = to_client.send((cut(&node), true)).await;
                        break;
                    }
                },
            }
        }
    });
    Ok(Relay { to_keeper })
}

/// The message that ends a relayed run whose connection to the keeper broke.
fn cut(node: &str) -> String {
    serde_json::json!({
        "type": "error",
        "error": "node_unreachable",
        "message": format!(
            "the connection to the server that keeps this sandbox (node {node}) broke during \
             the run; its end is unknown (the sandbox may still be there: try a run in it)"
        ),
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_keepers_address() {
        assert_eq!(
            ws_url("http://10.0.0.2:8080/", None),
            "ws://10.0.0.2:8080/ws"
        );
        assert_eq!(
            ws_url("https://b.example", Some("token=x")),
            "wss://b.example/ws?token=x"
        );
    }

    #[test]
    fn what_ends_a_relayed_run() {
        assert!(ends_the_run(r#"{"type": "exit", "code": 0}"#));
        assert!(ends_the_run(r#"{"type": "error", "error": "not_found"}"#));
        assert!(!ends_the_run(r#"{"type": "error", "error": "too_large"}"#));
        assert!(!ends_the_run(
            r#"{"type": "stdout", "data": "{\"type\": \"exit\"}"}"#
        ));
        assert!(!ends_the_run("not json"));
    }
}
