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

pub async fn authenticate(
    State(state): State<SharedState>,
    mut req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let caller = if state.config.dev_no_auth {
        Caller {
            id: "dev".into(),
            role: Role::Admin,
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
