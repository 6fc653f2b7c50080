//! What a request sent on to the node that keeps its sandbox carries, and how a failure to reach
//! that node is said: shared by the HTTP API's forwarding (`http/forward.rs`) and the WebSocket's
//! relay (`ws/relay.rs`). The node that answers authenticates the caller again and owns every
//! decision.

use axum::http::{header, HeaderMap, HeaderName};

use crate::error::{ApiError, ErrorKind};
use crate::http::error::REQUEST_ID;
use crate::service::nodes;

/// Marks a request one node sent on to another, which never sends it on again.
pub const FORWARDED_BY: HeaderName = HeaderName::from_static("corral-forwarded-by");

/// The request headers the answering node needs: credentials, the body's type, the request id
/// (the two nodes' logs then name the same request).
pub const PASSED_ON: [HeaderName; 5] = [
    header::AUTHORIZATION,
    HeaderName::from_static("x-auth-token"),
    header::CONTENT_TYPE,
    header::USER_AGENT,
    REQUEST_ID,
];

/// Whether another node sent this request on.
pub fn was_forwarded(headers: &HeaderMap) -> bool {
    headers.contains_key(&FORWARDED_BY)
}

/// The node that keeps a sandbox a request names.
pub struct Keeper<'a> {
    pub sandbox: &'a str,
    pub node: &'a str,
    /// Its base URL.
    pub url: &'a str,
}

impl Keeper<'_> {
    /// The caller's error when the keeper could not be reached at `target` (`e`, logged: the
    /// caller is not told the other node's address, which is the operators' network).
    pub fn unreachable(&self, target: &str, e: &(dyn std::error::Error + 'static)) -> ApiError {
        let node = self.node;
        tracing::warn!(node, url = %target, error = %e, "sending a request on to the node that keeps its sandbox failed");
        if refused(e) {
            // Nothing listens at its address: it was killed or crashed (a stop it could say
            // is in its row), and its sandboxes with it. "Try again" would be said until its
            // heartbeat is old enough (35 s) to say the same.
            return nodes::gone(
                self.sandbox,
                node,
                "refused the connection at its address (it is not running: it stopped \
                 without saying so; or its [http] node_url is wrong)",
            );
        }
        ApiError::new(
            ErrorKind::BadGateway,
            "node_unreachable",
            format!(
                "the server that keeps this sandbox (node {node}) did not answer this one; \
                 try again (this server's log has the detail)"
            ),
        )
    }
}

/// Whether nothing listened where the request was sent (the connection was refused).
fn refused(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = Some(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            return io.kind() == std::io::ErrorKind::ConnectionRefused;
        }
        source = s.source();
    }
    false
}
