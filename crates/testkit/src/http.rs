//! One request to a corral server under test (on loopback): its status and its answer.

use reqwest::{Client, StatusCode};
use serde_json::Value;

/// GET `url` as `token`: the status and the JSON answer (panics when it is not JSON).
pub async fn get(client: &Client, url: &str, token: &str) -> (StatusCode, Value) {
    let (st, text) = send(client.get(url).bearer_auth(token)).await;
    (st, json(st, &text))
}

/// POST a multipart `form` to `url` as `token`: the status and the answer as it came.
pub async fn post_form(
    client: &Client,
    url: &str,
    token: &str,
    form: reqwest::multipart::Form,
) -> (StatusCode, String) {
    send(client.post(url).bearer_auth(token).multipart(form)).await
}

/// POST `body` as JSON to `url` as `token`: the status and the answer as it came.
pub async fn post(client: &Client, url: &str, token: &str, body: &Value) -> (StatusCode, String) {
    send(client.post(url).bearer_auth(token).json(body)).await
}

/// An answer's text as JSON; the test fails, showing the status and the text, when it is not.
fn json(st: StatusCode, text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{st}: not JSON ({e}): {text}"))
}

/// Sends `request`: the status and the answer as it came.
async fn send(request: reqwest::RequestBuilder) -> (StatusCode, String) {
    let r = request.send().await.unwrap();
    let st = r.status();
    (st, r.text().await.unwrap())
}

/// POST `body` as JSON to `url` as `token`: the status and the JSON answer (panics when it is
/// not JSON).
pub async fn post_json(
    client: &Client,
    url: &str,
    token: &str,
    body: &Value,
) -> (StatusCode, Value) {
    let (st, text) = post(client, url, token, body).await;
    (st, json(st, &text))
}

/// The whole seconds of an answer's `Retry-After` header (panics when it is missing or not a
/// number).
pub fn retry_after(r: &reqwest::Response) -> u64 {
    r.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// GET `url` without a token (`/metrics`, pages): the answer's text.
pub async fn get_text(url: &str) -> String {
    reqwest::get(url).await.unwrap().text().await.unwrap()
}
