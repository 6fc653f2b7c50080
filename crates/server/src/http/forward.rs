//! A request for a sandbox another node keeps, sent on to that node (`crate::service::nodes`
//! finds it): the same method, path, query, credentials and body, and its answer passed back as
//! it came. The node that answers authenticates the caller again and owns every decision.

use std::sync::OnceLock;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method, Uri};
use axum::response::Response;

use crate::error::{ApiError, ErrorKind};
use crate::http::error::REQUEST_ID;
use crate::service::nodes;

/// Marks a request one node sent on to another, which never sends it on again.
pub const FORWARDED_BY: HeaderName = HeaderName::from_static("corral-forwarded-by");

/// The request headers the answering node needs: credentials, the body's type, the request id
/// (the two nodes' logs then name the same request).
const PASSED_ON: [HeaderName; 5] = [
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

fn client() -> &'static reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT.get_or_init(|| {
        // No overall timeout: the answer comes when the run ends, within the limits the other
        // node enforces. A node that does not accept within seconds is not answering.
        reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(3))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("an HTTP client with rustls builds")
    })
}

/// The node that keeps a sandbox a request names.
pub struct Keeper<'a> {
    pub sandbox: &'a str,
    pub node: &'a str,
    /// Its base URL.
    pub url: &'a str,
}

/// Sends the request on from node `me` to the node that keeps the sandbox, and passes its
/// answer back.
pub async fn send_on(
    me: &str,
    keeper: Keeper<'_>,
    method: Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let Keeper { sandbox, node, url } = keeper;
    let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let target = format!("{}{path}", url.trim_end_matches('/'));
    let mut request = client().request(method, &target).body(body);
    for name in &PASSED_ON {
        for v in headers.get_all(name) {
            request = request.header(name, v);
        }
    }
    let answer = request
        .header(&FORWARDED_BY, me)
        .send()
        .await
        .map_err(|e| {
            // The caller is not told the other node's address (it is the operators' network).
            tracing::warn!(node, url = %target, error = %e, "sending a request on to the node that keeps its sandbox failed");
            if refused(&e) {
                // Nothing listens at its address: it was killed or crashed (a stop it could say
                // is in its row), and its sandboxes with it. "Try again" would be said until its
                // heartbeat is old enough (35 s) to say the same.
                return nodes::gone(
                    sandbox,
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
        })?;
    tracing::debug!(
        node,
        status = answer.status().as_u16(),
        "sent on to the node that keeps the sandbox"
    );
    let mut response = Response::builder().status(answer.status());
    for (name, value) in answer.headers() {
        if !is_hop_by_hop(name) {
            response = response.header(name, value.clone());
        }
    }
    response
        .header(
            &FORWARDED_BY,
            HeaderValue::from_str(node).map_err(ApiError::internal)?,
        )
        .body(Body::from_stream(answer.bytes_stream()))
        .map_err(ApiError::internal)
}

/// Whether nothing listened where the request was sent (the connection was refused).
fn refused(e: &reqwest::Error) -> bool {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            return io.kind() == std::io::ErrorKind::ConnectionRefused;
        }
        source = s.source();
    }
    false
}

/// Headers of one connection, not of the answer (RFC 9110 §7.6.1), and the length, which the
/// streamed body carries again.
fn is_hop_by_hop(name: &HeaderName) -> bool {
    [
        header::CONNECTION,
        header::TRANSFER_ENCODING,
        header::TE,
        header::TRAILER,
        header::UPGRADE,
        header::PROXY_AUTHENTICATE,
        header::CONTENT_LENGTH,
    ]
    .contains(name)
        || name.as_str() == "keep-alive"
}
