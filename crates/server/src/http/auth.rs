//! Authentication (`Authorization: Bearer TOKEN`, or `?token=` on `/ws` where browsers cannot set
//! headers), roles and per-token rate limits, as one middleware in front of the protected routes.

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::Response;
use corral_store::Role;

use crate::error::ApiError;
use crate::service::caller::Caller;
use crate::state::SharedState;

fn query_token(req: &Request) -> Option<String> {
    req.uri().query()?.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == "token").then(|| v.to_string())
    })
}

fn bearer(req: &Request) -> Result<Option<String>, ApiError> {
    let Some(h) = req.headers().get(header::AUTHORIZATION) else {
        return Ok(None);
    };
    let h = h
        .to_str()
        .map_err(|_| ApiError::unauthorized("the Authorization header is not text"))?;
    match h.split_once(' ') {
        Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => {
            Ok(Some(token.trim().to_string()))
        }
        _ => Err(ApiError::unauthorized("use `Authorization: Bearer TOKEN`")),
    }
}

/// Without tokens (`--dev-no-auth`) nothing but the address protects the server, and a browser
/// visits it on the developer's behalf: a page of another site may open a WebSocket to it (no
/// CORS applies) or post a form, and a DNS-rebinding name reaches it as that site. So a request
/// must be addressed to a loopback host, and one a browser sent from a page must come from a page
/// of this server.
fn dev_request_allowed(headers: &axum::http::HeaderMap) -> Result<(), ApiError> {
    let text = |name: axum::http::header::HeaderName| {
        headers
            .get(name)
            .map(|v| v.to_str().unwrap_or("").to_ascii_lowercase())
    };
    let host = text(axum::http::header::HOST).unwrap_or_default();
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.split(':').next().unwrap_or(""),
    };
    let loopback = name == "localhost"
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    if !loopback {
        return Err(ApiError::forbidden(format!(
            "--dev-no-auth answers only requests to a loopback address (this one is for {host:?}): without tokens a DNS name that resolves here would reach it from any web page"
        )));
    }
    if let Some(origin) = text(axum::http::header::ORIGIN) {
        let same = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"))
            == Some(host.as_str());
        if !same {
            return Err(ApiError::forbidden(format!(
                "--dev-no-auth answers a browser only from this server's own pages (the request came from {origin:?})"
            )));
        }
    }
    Ok(())
}

pub async fn authenticate(
    State(state): State<SharedState>,
    mut req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let caller = if state.config.dev_no_auth {
        dev_request_allowed(req.headers())?;
        Caller {
            id: "dev".into(),
            role: Role::Admin,
            name: "dev".into(),
        }
    } else {
        let token = match bearer(&req)? {
            Some(t) => Some(t),
            None if req.uri().path() == "/ws" => query_token(&req),
            // Judge0 clients send `X-Auth-Token`.
            None if req.uri().path().starts_with("/judge0/") => req
                .headers()
                .get("x-auth-token")
                .and_then(|v| v.to_str().ok())
                .map(|t| t.trim().to_string()),
            None => None,
        };
        let Some(token) = token else {
            return Err(ApiError::unauthorized(
                "this needs a token: `Authorization: Bearer TOKEN` (create one with `corral token create`)",
            ));
        };
        Caller::of_token(&state, &token).await?
    };
    // A worker token reaches the worker endpoints and nothing else.
    if caller.role == Role::Worker && !req.uri().path().starts_with("/worker/") {
        return Err(ApiError::forbidden(
            "a worker token may only claim jobs and post results (/worker/...)",
        ));
    }
    caller.admit(&state)?;
    tracing::debug!(caller = %caller.id, role = %caller.role, "authenticated");
    req.extensions_mut().insert(caller);
    Ok(next.run(req).await)
}
