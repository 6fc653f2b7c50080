//! `/check` and `/suites`: CS50 Check over HTTP. Suites are registered by staff (`POST /suites`,
//! a `suite` part plus the assignment's files) or live in the suites folder
//! (`SUITES/ID/suite.yaml` + files); `/check` grades an upload against one and answers exactly the
//! seed's `{"results": {...}}`. Hidden checks' details never reach a student.

use std::collections::BTreeMap;

use axum::extract::multipart::MultipartRejection;
use axum::extract::{Multipart, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use corral_store::NewFile;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::check_answer::Answer;
use super::json::ApiJson;
use crate::error::{ApiError, ErrorBody};
use crate::service::caller::Caller;
use crate::service::runs::SandboxRef;
use crate::service::suites::{self, SuiteInfo};
use crate::service::{checks, revisions};
use crate::state::SharedState;

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckRequest {
    /// The suite's id (`GET /suites`).
    #[schema(
        example = "hello",
        max_length = 100,
        pattern = r"^[A-Za-z0-9_-][A-Za-z0-9._-]*(/[A-Za-z0-9_-][A-Za-z0-9._-]*){0,3}$"
    )]
    pub checks: String,
    /// `{"homedir": UPLOAD_ID}`: the submission (required here; `id` is refused).
    pub sandbox: SandboxRef,
    /// A container image this server has (`GET /images`: a name, `name@sha256:…` or a digest)
    /// to grade in instead of the suite's `image` (a check's own `image` still wins). Never
    /// pulled: an image the server lacks is a 422. `?format=json` reports record its digest.
    #[serde(default)]
    #[schema(example = "python:3.12-slim", max_length = 400)]
    pub image: Option<String>,
    /// `"native"` or `"gvisor"`: the kernel of the checks that name none (nor does their suite
    /// or language: a suite's or check's `runtime` wins); absent: the server's default. On a
    /// server that runs everything under gVisor (`[runtime] force_gvisor`), `"native"` is
    /// refused (422) and every check runs under gVisor, whatever its suite names. `"gvisor"` is
    /// refused (422) when it would move a check50 problem with hidden checks off the host's
    /// kernel (Landlock, which hides them, is not in gVisor). Each result says its `runtime`.
    #[serde(default)]
    #[schema(value_type = Option<String>, example = "gvisor")]
    pub runtime: Option<corral_sandbox::Runtime>,
    /// Keep this check in the caller's history (`GET /revisions`, the browser editor's): the
    /// upload's files (text) with the report's status, score and summary, recorded by the
    /// server. Only with `?format=json`, whose answer then carries the revision as `revision`.
    #[serde(default)]
    pub revision: Option<CheckRevision>,
}

/// What a check's revision records besides what the server knows.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckRevision {
    /// The editor's language id (`c`, `python`, …); at most 200 bytes, no control characters.
    #[schema(example = "python", max_length = 50)]
    pub language: String,
}

/// `?format=`: `cs50` (default) answers exactly CS50 Check's shape; `json` answers corral's report
/// (`corral check --format json`: adds `points`, `max_points`, `message`, `image`, `runtime`
/// (`native` or `gvisor`: the kernel the check ran on), … per check and
/// `score`, `max_score`, `passed`, `images`) and `order`, the check ids in the suite's order; the browser editor
/// shows it.
#[derive(Debug, Clone, Default, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct CheckQuery {
    /// `cs50` (default) or `json`.
    #[param(pattern = "^(cs50|json)$", example = "json")]
    pub format: Option<String>,
}

/// One side of a script entry: what kind of thing (`stdout`, `exit`, `file`, …) and its value.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[allow(dead_code)]
pub struct Observation {
    #[serde(rename = "type")]
    pub kind: String,
    /// Any JSON: a command line, an exit code, a text, …
    #[schema(value_type = Value)]
    pub value: Value,
    /// For output matchers: `contains`, `regex`, `exact` or `file`; for a `diff` step
    /// `diff ACTUAL EXPECTED` (the working directory's file and the assignment's it compared).
    #[serde(rename = "match")]
    #[schema(pattern = "^(contains|regex|exact|file|diff .+)$")]
    pub matcher: Option<String>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
#[allow(dead_code)]
pub struct ScriptEntry {
    pub expected: Option<Observation>,
    pub actual: Option<Observation>,
}

/// One check's result: CS50 Check's four fields; with `?format=json`, corral's beside them.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[allow(dead_code)]
pub struct CheckResultDoc {
    pub dependencies: Vec<String>,
    pub description: String,
    /// true: passed; false: failed; null: not run because a dependency failed.
    pub result: Option<bool>,
    pub script: Vec<ScriptEntry>,
    /// `?format=json`: the points this check earned.
    pub points: Option<f64>,
    /// `?format=json`: the points it was worth.
    pub max_points: Option<f64>,
    /// `?format=json`: how long it took.
    pub time_ms: Option<u64>,
    /// `?format=json`: a hidden check (students see its result, not its details).
    pub hidden: Option<bool>,
    /// `?format=json`: why it failed, in words (absent when it passed, or hidden from a student).
    pub message: Option<String>,
    /// `?format=json`: corral could not judge it (a sandbox or host failure, not the
    /// submission's).
    pub error: Option<String>,
    /// `?format=json`, staff only: what the check's tools said (a compiler's, a grader's).
    pub diagnostics: Option<String>,
    /// `?format=json`: the container image it ran in (absent on the host root).
    pub image: Option<UsedImageDoc>,
    /// `?format=json`: `native` or `gvisor`, the kernel it ran on.
    #[schema(pattern = "^(native|gvisor)$")]
    pub runtime: Option<String>,
}

/// A container image a check ran in.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[allow(dead_code)]
pub struct UsedImageDoc {
    #[schema(example = "python:3.12-slim")]
    pub name: String,
    #[schema(example = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")]
    pub digest: String,
}

/// A protected assignment file the submission replaced.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[allow(dead_code)]
pub struct IntegrityFlagDoc {
    pub path: String,
    /// `modified`, `link` or `not_a_file`.
    pub reason: String,
}

/// Whether the submission left the assignment's protected files alone.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[allow(dead_code)]
pub struct IntegrityDoc {
    pub ok: bool,
    pub flagged: Vec<IntegrityFlagDoc>,
}

/// The answer of `/check`: CS50 Check's `{"results": …}`; with `?format=json`, corral's report
/// (`corral check --format json`) with the fields marked so.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[allow(dead_code)]
pub struct CheckResponse {
    /// By check id.
    pub results: BTreeMap<String, CheckResultDoc>,
    /// `?format=json`: the suite's id.
    pub suite: Option<String>,
    /// `?format=json`: the check ids in the suite's order (a JSON object's keys have none).
    pub order: Option<Vec<String>>,
    /// `?format=json`: the points earned in all.
    pub score: Option<f64>,
    /// `?format=json`: the points there were.
    pub max_score: Option<f64>,
    /// `?format=json`: every check passed.
    pub passed: Option<bool>,
    /// `?format=json`: protected files the submission replaced.
    pub integrity: Option<IntegrityDoc>,
    /// `?format=json`, when the suite has a static safety check (Python): what it found.
    #[schema(value_type = Option<Object>)]
    pub safety: Option<Value>,
    /// `?format=json`: each image a check ran in, once (absent when all ran on the host root).
    pub images: Option<Vec<UsedImageDoc>>,
    /// `?format=json` with `revision` in the request: the editor's revision recorded.
    pub revision: Option<crate::http::revisions::RevisionMetaDoc>,
}

/// One line of `POST /check`'s progress stream (`Accept: application/x-ndjson`): `event` says
/// which; the other fields are that event's.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[allow(dead_code)]
pub struct CheckEvent {
    /// `queued` (every runner slot is busy: it waits its turn, `ahead` says how far off),
    /// `started` (it has a slot),
    /// `check` (one check decided), `heartbeat` (every 15 s), then last either
    /// `report` (the answer) or `error` (it failed after streaming began).
    #[schema(pattern = "^(queued|started|check|heartbeat|report|error)$")]
    pub event: String,
    /// `queued`: how many waiting requests get a slot before this one if no one else comes
    /// (the waiting tokens take turns); sent again each time it changes.
    pub ahead: Option<u64>,
    /// `started`: the suite's check ids, in order.
    pub checks: Option<Vec<String>>,
    /// `check`: how many of the suite's checks are decided.
    pub done: Option<u64>,
    /// `check`: how many checks the suite has.
    pub of: Option<u64>,
    /// `check`: the check decided (absent for a row the caller's view leaves out: then only
    /// `done` and `of` are said).
    pub id: Option<String>,
    /// `check`: true passed, false failed, null skipped or not judged.
    pub result: Option<bool>,
    /// `heartbeat`: since the request was accepted.
    pub elapsed_ms: Option<u64>,
    /// `report`: what `POST /check` answers without streaming (`?format=` applies).
    pub report: Option<CheckResponse>,
    /// `error`: a stable code, as in an error body.
    pub error: Option<String>,
    /// `error`: what went wrong.
    pub message: Option<String>,
}

/// The multipart form of `POST /suites`.
#[derive(Debug, ToSchema)]
#[allow(dead_code)]
pub struct SuiteForm {
    /// The suite file (YAML; JSON when its file name ends in `.json`).
    #[schema(value_type = String, format = Binary)]
    pub suite: Vec<u8>,
    /// The id to register it under (letters, digits, `-`, `_`, `.`, `/`); default: its name.
    #[schema(
        max_length = 100,
        pattern = r"^[A-Za-z0-9_-][A-Za-z0-9._-]*(/[A-Za-z0-9_-][A-Za-z0-9._-]*){0,3}$"
    )]
    pub id: Option<String>,
    /// The assignment's files (file names are relative paths); none for a suite that needs no
    /// file of its own.
    #[schema(value_type = Option<Vec<String>>, format = Binary)]
    pub files: Option<Vec<Vec<u8>>>,
    /// A tar archive of assignment files.
    #[schema(value_type = Option<String>, format = Binary)]
    pub archive: Option<Vec<u8>>,
}

/// Register (or replace) a check suite (staff).
#[utoipa::path(
    post, path = "/suites", tag = "checks",
    request_body(content = SuiteForm, content_type = "multipart/form-data", example = json!({
        "id": "hello",
        "suite": "name: hello\nchecks:\n  - id: greets\n    description: Does greet.sh print hello?\n    steps:\n      - run: sh greet.sh\n      - stdout: hello\n      - exit: 0\n",
        "files": ["echo hello\n"]
    })),
    responses(
        (status = 201, description = "Registered", body = SuiteInfo,
            links(
                ("ListSuites" = (operation_id = "list_suites")),
                ("SubmitToSuite" = (operation_id = "submit", description = "Grade inline files with the suite",
                    request_body = json!({"suite": "$response.body#/id", "files": [{"path": "greet.sh", "content": "echo hello\n"}]}))),
            )),
        (status = 400, description = "Bad form (`bad_multipart`) or file names, or a body that ended before its Content-Length or was badly chunked (`bad_body`)", body = ErrorBody),
        (status = 403, description = "Not staff", body = ErrorBody),
        (status = 409, description = "Another caller registered this id", body = ErrorBody),
        (status = 422, description = "The suite is invalid (the message says where)", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn register_suite(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
    headers: axum::http::HeaderMap,
    form: Result<Multipart, MultipartRejection>,
) -> Result<(StatusCode, Json<SuiteInfo>), ApiError> {
    let mut form = form.map_err(|e| super::uploads::rejection(&headers, e))?;
    super::uploads::refuse_declared_over(&headers, &st.config.upload)?;
    // Split the form: `suite` and `id` parts here, the rest are assignment files.
    let mut parts = suites::SuiteParts::default();
    let limits = &st.config.upload;
    let mut total = 0u64;
    while let Some(field) = form
        .next_field()
        .await
        .map_err(super::uploads::multipart_error)?
    {
        let name = field.name().unwrap_or("").to_string();
        let file_name = field.file_name().map(str::to_string);
        let data = field
            .bytes()
            .await
            .map_err(super::uploads::multipart_error)?;
        total += data.len() as u64;
        if total > limits.max_bytes.bytes() {
            return Err(ApiError::too_large("the suite and its files are too large"));
        }
        match name.as_str() {
            "suite" => {
                let is_json = file_name.as_deref().is_some_and(|f| f.ends_with(".json"));
                let n = if is_json { "suite.json" } else { "suite.yaml" };
                parts.suite = Some((n.to_string(), data.to_vec()));
            }
            "id" => {
                parts.id = Some(String::from_utf8_lossy(&data).trim().to_string());
            }
            "archive" => parts.archives.push(data.to_vec()),
            _ => {
                let Some(fname) = file_name else {
                    return Err(ApiError::bad_request(format!(
                        "form part {name:?} is not a file: give each assignment file a file name"
                    )));
                };
                let path = corral_store::validate_path(&fname, limits.max_depth)
                    .map_err(|e| ApiError::bad_request(e.to_string()))?;
                parts.files.push(NewFile {
                    path,
                    content: data.to_vec(),
                    mode: 0o644,
                });
            }
        }
    }
    let info = suites::register(&st, &caller, parts).await?;
    Ok((StatusCode::CREATED, Json(info)))
}

/// List the suites.
#[utoipa::path(
    get, path = "/suites", tag = "checks",
    responses(
        (status = 200, description = "Registered suites and those of the suites folder", body = Vec<SuiteInfo>),
        (status = 401, description = "No or unknown token", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn list_suites(
    State(st): State<SharedState>,
    Extension(_caller): Extension<Caller>,
) -> Result<Json<Vec<SuiteInfo>>, ApiError> {
    Ok(Json(suites::list(&st).await?))
}

/// Run a check suite against an upload.
///
/// CS50 Check's `/check`: `{"results": {id: {dependencies, description, result, script}}}`, where
/// `result` is true (passed), false (failed) or null (not run: a dependency failed). Staff see
/// hidden checks' expected and actual values; students do not.
///
/// With `Accept: application/x-ndjson` the answer is the grading's progress as it goes, one
/// `CheckEvent` per line: `queued` with how many go before it (only when it waits for a slot;
/// again when that changes), `started`, one `check` per
/// check decided, a `heartbeat` every 15 s, and last `report` (the answer above) or
/// `error`. A request refused before it is accepted gets its status and error body as without
/// streaming.
#[utoipa::path(
    post, path = "/check", tag = "checks",
    request_body(content = CheckRequest, example = json!({"checks": "hello", "sandbox": {"homedir": "UPLOAD_ID"}})),
    params(CheckQuery),
    responses(
        (status = 200, description = "Graded (with `Accept: application/x-ndjson`: its progress, one `CheckEvent` per line, the report last)",
            content((CheckResponse = "application/json"), (CheckEvent = "application/x-ndjson"))),
        (status = 404, description = "No such suite, or no such upload of this caller", body = ErrorBody),
        (status = 422, description = "Bad request or suite", body = ErrorBody),
        (status = 429, description = "Rate limited, or this token has its most `/check` requests being graded at once (`max_sandboxes_per_caller`); see Retry-After", body = ErrorBody),
        (status = 503, description = "Overloaded; see Retry-After", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn check(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
    headers: axum::http::HeaderMap,
    query: Result<Query<CheckQuery>, axum::extract::rejection::QueryRejection>,
    ApiJson(req): ApiJson<CheckRequest>,
) -> Result<Response, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::unprocessable(e.body_text()))?;
    let corral_format = match query.format.as_deref() {
        None | Some("cs50") => false,
        Some("json") => true,
        Some(other) => {
            return Err(ApiError::unprocessable(format!(
                "format {other:?}: use cs50 or json"
            )))
        }
    };
    if req.sandbox.keep.is_some() {
        return Err(ApiError::unprocessable(
            "sandbox.keep is for /run and WebSocket runs: /check keeps no sandbox",
        ));
    }
    let Some(homedir) = req.sandbox.homedir.filter(|_| req.sandbox.id.is_none()) else {
        return Err(ApiError::unprocessable(
            "give sandbox.homedir: the upload to check",
        ));
    };
    let revision = match req.revision {
        Some(_) if !corral_format => {
            return Err(ApiError::unprocessable(
                "revision needs ?format=json (CS50's answer has no place for it)",
            ))
        }
        // The files first: a revision that cannot be kept is refused before the grading.
        Some(r) => Some((
            r.language,
            revisions::files_of_upload(&st, &caller, &homedir).await?,
        )),
        None => None,
    };
    let prepared = checks::prepare(
        &st,
        &caller,
        &req.checks,
        &homedir,
        req.image.as_deref(),
        req.runtime,
    )
    .await?;
    let answer = Answer {
        suite: req.checks,
        corral_format,
        revision,
    };
    if super::check_progress::wanted(&headers) {
        return super::check_progress::stream(st, caller, prepared, answer, &headers).await;
    }
    let view = prepared.view();
    let report = checks::run(&st, &caller, prepared, None).await?;
    Ok(Json(answer.of(&st, &caller, &report, view).await?).into_response())
}
