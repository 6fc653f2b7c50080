//! `POST /run` and `DELETE /sandboxes/{id}`: CS50 Sandbox's runs, continued in kept sandboxes.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use corral_judge::Cmd;
use corral_sandbox::{LimitsRequest, Stdin};
use serde::Deserialize;
use utoipa::ToSchema;

use super::forward;
use super::json::{self, JsonBytes};
use crate::error::{ApiError, ErrorBody};
use crate::http::path::Path;
use crate::node_link;
use crate::service::caller::Caller;
use crate::service::nodes::{self, Owner};
use crate::service::runs::{self, LimitsDoc, RunResponse, SandboxRef};
use crate::state::SharedState;

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RunRequest {
    pub cmd: Cmd,
    #[serde(default)]
    pub sandbox: Option<SandboxRef>,
    /// Standard input, all of it (the program sees end-of-file after it).
    #[serde(default)]
    pub stdin: Option<String>,
    #[serde(default)]
    #[schema(value_type = Option<LimitsDoc>)]
    pub limits: Option<LimitsRequest>,
    /// Extra environment variables.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// A container image this server has (`GET /images`: a name, `name@sha256:…` or a digest)
    /// as a new sandbox's root; the result's `image` records its digest. Never pulled: an image
    /// the server lacks is a 422. Not with `sandbox.id` (a kept sandbox keeps its own).
    #[serde(default)]
    #[schema(example = "python:3.12-slim", max_length = 400)]
    pub image: Option<String>,
    /// A stricter seccomp profile on top of the default one: `no_spawn` (no new process or
    /// program once the command runs; a simple `cmd` string is then exec'd without a shell),
    /// `no_sockets`, `allow:NAME,NAME` (only these syscalls), joined by `+`. A call it denies ends
    /// the run as `blocked_syscall`. An unknown profile is a 422.
    #[serde(default)]
    #[schema(example = "no_spawn+no_sockets", max_length = 4000)]
    pub seccomp: Option<String>,
    /// A language of `GET /languages` (`"rust"`): its extra read-only paths and environment
    /// apply, its image for a new sandbox (unless `image` names one), and its limits when
    /// `limits` is not given (capped as usual). `cmd` still says what runs (the language's
    /// `compile` and `run` commands are in `GET /languages`); as it may be the compile, the
    /// language's seccomp profile (for its `run`) is not applied: name it in `seccomp`.
    #[serde(default)]
    #[schema(example = "c", max_length = 100)]
    pub language: Option<String>,
    /// `"native"` or `"gvisor"` for a new sandbox; absent: the server's default. Refused (422)
    /// with `sandbox.id` (a kept sandbox keeps its own) and, on a server that runs everything
    /// under gVisor (`[runtime] force_gvisor`), when `"native"`. The answer's `runtime` says
    /// which ran it.
    #[serde(default)]
    #[schema(value_type = Option<String>, example = "gvisor")]
    pub runtime: Option<corral_sandbox::Runtime>,
}

/// Run a command.
///
/// CS50 Sandbox's `/run`: with `sandbox.homedir` the upload is copied into a fresh sandbox's
/// `$HOME`; with `sandbox.id` the command continues in a sandbox an earlier run returned. The
/// response's `sandbox` is the id to continue in (kept until idle for the server's TTL). Servers
/// sharing a database each keep their own sandboxes: one that gets a follow-up in another's
/// sandbox sends it on to that server and passes its answer back.
#[utoipa::path(
    post, path = "/run", tag = "sandbox",
    request_body(content = RunRequest, example = json!({"cmd": "echo hi", "stdin": "", "env": {"GREETING": "hi"}})),
    responses(
        (status = 200, description = "The run happened (whatever the program did)", body = RunResponse,
            links(
                ("ContinueRun" = (operation_id = "run", description = "Run another command in the kept sandbox",
                    request_body = json!({"cmd": "ls -a", "sandbox": {"id": "$response.body#/sandbox"}}))),
                ("DeleteSandbox" = (operation_id = "delete_sandbox", description = "Destroy the kept sandbox",
                    parameters(("id" = "$response.body#/sandbox")))),
            )),
        (status = 400, description = "Malformed JSON (`bad_json`), or a body that ended before its Content-Length or was badly chunked (`bad_body`)", body = ErrorBody),
        (status = 404, description = "No such upload or sandbox of this caller", body = ErrorBody),
        (status = 409, description = "The sandbox is busy with another run", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
        (status = 415, description = "Not JSON", body = ErrorBody),
        (status = 422, description = "Wrong types, unknown fields or impossible limits; an upload whose files do not fit `limits.disk`; an `image`, `runtime`, or a `language` it was not built with, for a kept sandbox", body = ErrorBody),
        (status = 421, description = "`sandbox.id` is kept by another server sharing this one's database, which did not say where it is reached (`http.node_url`)", body = ErrorBody),
        (status = 429, description = "Rate limited, or all of the caller's sandboxes are busy", body = ErrorBody),
        (status = 502, description = "`sandbox.id` is kept by another server sharing this one's database, which did not answer when the request was sent on to it", body = ErrorBody),
        (status = 503, description = "Overloaded; see Retry-After", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn run(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
    uri: Uri,
    headers: HeaderMap,
    JsonBytes(body): JsonBytes,
) -> Result<Response, ApiError> {
    let req: RunRequest = json::parse(&body)?;
    // A follow-up in a sandbox another node keeps (a load balancer's choice) is that node's.
    if let Some(id) = req.sandbox.as_ref().and_then(|s| s.id.as_deref()) {
        let forwarded = node_link::was_forwarded(&headers);
        if let Owner::There { node, url } = nodes::owner(&st, id, forwarded).await? {
            let keeper = node_link::Keeper {
                sandbox: id,
                node: &node,
                url: &url,
            };
            let me = st.node.id();
            return forward::send_on(me, keeper, Method::POST, &uri, &headers, body).await;
        }
    }
    let input = runs::RunInput {
        cmd: req.cmd,
        sandbox: req.sandbox,
        stdin: req
            .stdin
            .map(|s| Stdin::Bytes(s.into_bytes()))
            .unwrap_or_default(),
        limits: req.limits,
        env: req.env,
        image: req.image,
        seccomp: req.seccomp,
        language: req.language,
        runtime: req.runtime,
        preferred_runtime: None,
    };
    let prepared = runs::prepare(&st, &caller, input).await?;
    let clamped = prepared.clamped.clone();
    // Cancelled by deleting its kept sandbox, or by the client going away.
    let (outcome, ran) = runs::execute(&st, prepared, runs::run_to_end).await?;
    let answer = RunResponse::new(&outcome, ran, clamped);
    tracing::info!(caller = %caller.id, status = answer.status.as_str(), wall_ms = outcome.usage.wall_time_ms, "run");
    Ok(Json(answer).into_response())
}

/// Destroy a kept sandbox now.
#[utoipa::path(
    delete, path = "/sandboxes/{id}", tag = "sandbox",
    params(("id" = String, Path, description = "Sandbox id (the `sandbox` of a `POST /run` answer)", example = "0badcafe-0123456789abcdef0123456789abcdef")),
    responses(
        (status = 204, description = "Destroyed; a run in progress in it is cancelled (its program killed, the run answering status `cancelled`) and the sandbox destroyed when that run ends"),
        (status = 404, description = "No such sandbox of this caller", body = ErrorBody),
        (status = 421, description = "Kept by another server sharing this one's database, which did not say where it is reached (`http.node_url`)", body = ErrorBody),
        (status = 502, description = "Kept by another server sharing this one's database, which did not answer when the request was sent on to it", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn delete_sandbox(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    uri: Uri,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let forwarded = node_link::was_forwarded(&headers);
    if let Owner::There { node, url } = nodes::owner(&st, &id, forwarded).await? {
        let keeper = node_link::Keeper {
            sandbox: &id,
            node: &node,
            url: &url,
        };
        let me = st.node.id();
        let empty = Default::default();
        return forward::send_on(me, keeper, Method::DELETE, &uri, &headers, empty).await;
    }
    runs::destroy(&st, &caller, &id)?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
