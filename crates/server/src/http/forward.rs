//! A request for a sandbox another node keeps, sent on to that node (`crate::service::nodes`
//! finds it): the same method, path, query, credentials and body, and its answer passed back as
//! it came. The node that answers authenticates the caller again and owns every decision.

use std::sync::OnceLock;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method, Uri};
use axum::response::Response;

use crate::error::ApiError;
use crate::node_link::{Keeper, FORWARDED_BY, PASSED_ON};

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
    let (node, url) = (keeper.node, keeper.url);
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
        .map_err(|e| keeper.unreachable(&target, &e))?;
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
