//! Judge0's submissions over the queue: create one or a batch (multi-file programs through
//! `additional_files`), read one or a batch back in Judge0's shape; deleting is refused, as Judge0
//! refuses it by default.

use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{json, Value};

use super::doc::{
    Judge0BatchItem, Judge0BatchRequest, Judge0Error, Judge0Refusal, Judge0Submission,
    Judge0SubmissionRequest, Judge0Submissions,
};
use super::translate::{convert, id_of, parse_request, render, token_of, Converted, Invalid};
use crate::error::ErrorKind;
use crate::http::submissions::{idempotency_key, mark_replayed, refuse_idempotency_key};
use crate::service::caller::Caller;
use crate::service::submissions::accept::{accept, already_keyed, enqueue_capped, enqueue_keyed};
use crate::service::submissions::idempotency;
use crate::service::submissions::view::wait_for;
use crate::state::SharedState;
use corral_judge::JobSpec;

use super::errors::{j0_error, j0_refusal, Refusal};
use super::extract::{truthy, J0Body, J0Path, J0Query, Params};

/// Checks one Judge0 request and turns it into a job (not enqueued yet).
async fn prepare_one(
    st: &SharedState,
    caller: &Caller,
    body: Value,
    b64: bool,
) -> Result<corral_store::NewJob, Refusal> {
    if !body.is_object() {
        return Err(Refusal::Other(
            StatusCode::BAD_REQUEST,
            "a submission is a JSON object ({\"source_code\": …, \"language_id\": …})".into(),
        ));
    }
    let Converted {
        mut req,
        judge0_language_id,
        run_args,
        compile_args,
        additional_files,
        runs,
        stderr_to_stdout,
        network,
    } = convert(parse_request(body)?, b64)?;
    for (field, extra) in [
        ("command_line_arguments", &run_args),
        ("compiler_options", &compile_args),
    ] {
        if let Some(extra) = extra {
            corral_judge::validate_extra_args(extra)
                .map_err(|e| Invalid::new(field, e.to_string()))?;
        }
    }
    let j0 = &st.config.judge0;
    if network && !j0.allow_network {
        return Err(Invalid::new(
            "enable_network",
            "is not allowed on this server: sandboxes have no network (the operator can allow it with [judge0] allow_network = true)",
        )
        .into());
    }
    if runs > j0.max_number_of_runs {
        return Err(Invalid::new(
            "number_of_runs",
            format!("must be at most {}", j0.max_number_of_runs),
        )
        .into());
    }
    if let Some(zip) = additional_files {
        req.files = Some(with_additional_files(st, &mut req, zip).await?);
    }
    let mut job = accept(st, caller, req).await.map_err(|e| {
        e.log_detail();
        match (e.status(), e.retry_after) {
            (StatusCode::UNPROCESSABLE_ENTITY, _) => {
                Refusal::Invalid(Invalid::from_message(&e.message))
            }
            (code, Some(s)) => Refusal::Later(code, e.message, s),
            (code, None) => Refusal::Other(code, e.message),
        }
    })?;
    let mut spec: JobSpec = serde_json::from_str(&job.spec).expect("our own spec");
    spec.run_args = run_args;
    spec.compile_args = compile_args;
    spec.runs = runs;
    spec.stderr_to_stdout = stderr_to_stdout;
    spec.network = network;
    spec.judge0_language_id = judge0_language_id;
    job.spec = serde_json::to_string(&spec).expect("serialisable");
    Ok(job)
}

/// The source file and the files of Judge0's `additional_files` zip beside it, read on a
/// blocking thread with the upload path's limits (the submission's checks then apply to them
/// all: paths, count, total size).
async fn with_additional_files(
    st: &SharedState,
    req: &mut crate::service::submissions::accept::SubmissionRequest,
    zip: Vec<u8>,
) -> Result<Vec<crate::service::submissions::accept::SubmissionFile>, Refusal> {
    use crate::service::submissions::accept::SubmissionFile;
    use base64::Engine;
    let limits = &st.config.upload;
    let zip_limits = corral_archive::zip_files::ZipLimits {
        max_entries: (limits.max_files as u64).saturating_mul(limits.max_depth as u64 + 1),
        max_total: limits.max_bytes.bytes(),
        max_name: corral_store::MAX_PATH,
        max_ratio: crate::service::uploads::MAX_RATIO,
    };
    let unpacked = tokio::task::spawn_blocking(move || {
        corral_archive::zip_files::read(&zip, &zip_limits)
    })
    .await
    .map_err(|e| {
        // A panic's words are the server's business: logged, not answered.
        tracing::error!(error = %e, "unpacking a Judge0 submission's additional_files failed");
        Refusal::Other(StatusCode::INTERNAL_SERVER_ERROR, "internal error".into())
    })?
    .map_err(|e| Invalid::new("additional_files", e.to_string()))?;
    let language = req.language.as_deref().unwrap_or_default();
    let source_name = st
        .languages
        .get(language)
        .map_err(|e| Invalid::new("language_id", e.to_string()))?
        .source
        .clone();
    let mut files = vec![SubmissionFile {
        path: source_name.clone(),
        content: req.source_code.take().unwrap_or_default(),
        encoding: None,
        executable: false,
    }];
    for f in unpacked {
        if f.path == source_name {
            return Err(Invalid::new(
                "additional_files",
                format!("{source_name} is the source file's own name"),
            )
            .into());
        }
        files.push(SubmissionFile {
            path: f.path,
            content: base64::engine::general_purpose::STANDARD.encode(&f.data),
            encoding: Some("base64".into()),
            executable: f.executable,
        });
    }
    Ok(files)
}

/// `POST /judge0/submissions`: 201 `{"token"}`; with `wait=true`, the finished submission. An
/// `Idempotency-Key` works as on `POST /submissions` (a retry is answered the first request's
/// submission, with `Idempotent-Replayed: true`); `base64_encoded` is part of the request.
#[utoipa::path(
    post, path = "/judge0/submissions", tag = "judge0", operation_id = "judge0_create_submission",
    params(
        ("base64_encoded" = Option<bool>, Query, description = "`source_code`, `stdin` and `expected_output` are base64, and so are the answer's text fields", example = false),
        ("wait" = Option<bool>, Query, description = "Answer the finished submission instead of its token (waiting at most `submissions.wait_max`, 30 s; a submission still queued or running then is answered as it is)", example = false),
        ("fields" = Option<String>, Query, description = "With `wait=true`: the fields to answer, comma-separated, or `*` for all", example = "stdout,stderr,status,time,memory"),
        ("Idempotency-Key" = Option<String>, Header,
            description = "Not Judge0's: a key of 1 to 255 visible ASCII characters naming this request, as on `POST /submissions`: its retries with the same key and body make no second submission",
            example = "8e03978e-40d5-43e8-bc93-6894a57f9324"),
    ),
    request_body(content(
        (Judge0SubmissionRequest = "application/json"),
        (Judge0SubmissionRequest = "application/x-www-form-urlencoded"),
    ), description = "A JSON object, or the same fields form-encoded (every value as text), as Judge0 takes them"),
    responses(
        (status = 201, description = "Queued: `{\"token\"}`; with `wait=true`, the submission (by default Judge0's default fields). For a retry under an `Idempotency-Key`, the first request's submission", body = Judge0Submission,
            headers(("Idempotent-Replayed" = String, description = "`true` when the answer is an earlier request's submission (a retry under the same `Idempotency-Key`)")),
            links(("GetJudge0Submission" = (operation_id = "judge0_get_submission", parameters(("token" = "$response.body#/token")))))),
        (status = 400, description = "A body that is neither a JSON object nor form fields, or was cut short (it ended before its Content-Length, or its chunked encoding was malformed), a `fields` name Judge0 does not have (`invalid fields: [NAME]`), a query parameter twice, or a malformed `Idempotency-Key`", body = Judge0Error),
        (status = 413, description = "A body over `max_json_bytes`, or `additional_files` past the upload limits", body = Judge0Error),
        (status = 422, description = "A field Judge0's validations would refuse, with its messages (`{\"source_code\": [\"can't be blank\"]}`); or an `Idempotency-Key` this token sent before with another body (`idempotency_key_reused`)", body = Judge0Refusal),
        (status = 503, description = "This token's queue is full (`{\"error\": \"queue is full\"}`, `config_info`'s `max_queue_size`), the server is shutting down, the database does not answer, or its storage is full: retry after `Retry-After`", body = Judge0Error),
    ),
    security(("bearer" = []), ("judge0" = []))
)]
pub async fn create(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
    headers: axum::http::HeaderMap,
    J0Query(p): J0Query<Params>,
    J0Body(body): J0Body,
) -> Response {
    if let Some(r) = refuse_unknown_fields(&p) {
        return r;
    }
    let b64 = truthy(&p.base64_encoded);
    let key = match idempotency_key(&headers) {
        Ok(k) => k,
        Err(e) => return e.into_response(),
    };
    let Some(body) = body_fields(&headers, &body) else {
        return j0_error(
            StatusCode::BAD_REQUEST,
            "the body is not JSON: send a JSON object (Content-Type: application/json), or \
             form fields (application/x-www-form-urlencoded)",
        );
    };
    let key = key.map(|key| corral_store::IdempotencyKey {
        fingerprint: idempotency::fingerprint(
            &format!("POST /judge0/submissions base64_encoded={b64}"),
            &body,
        ),
        key,
    });
    if st.is_shutting_down() {
        return j0_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the server is shutting down",
        );
    }
    let earlier = match &key {
        Some(k) => match already_keyed(&st, &caller, k).await {
            Ok(found) => found,
            Err(e) => return j0_refusal(e),
        },
        None => None,
    };
    let done = match earlier {
        Some(done) => done,
        None => {
            let job = match prepare_one(&st, &caller, body, b64).await {
                Ok(j) => j,
                Err(r) => return r.into_response(),
            };
            match enqueue_keyed(&st, job, key).await {
                Ok(done) => done,
                Err(e) => return j0_refusal(e),
            }
        }
    };
    let replayed = done.replayed.is_some();
    if truthy(&p.wait) {
        let wait = st.config.submissions.wait_max.duration();
        return match wait_for(&st, &caller, &done.id, wait).await {
            Ok(job) => mark_replayed(
                (
                    StatusCode::CREATED,
                    Json(answer(&st, &job, &p.fields, b64).await),
                )
                    .into_response(),
                replayed,
            ),
            Err(e) => e.into_response(),
        };
    }
    mark_replayed(
        (
            StatusCode::CREATED,
            Json(json!({"token": token_of(&done.id)})),
        )
            .into_response(),
        replayed,
    )
}

/// A submission's fields: its JSON, or, as Judge0 (Rails) takes them, form fields
/// (`curl -d language_id=71 --data-urlencode source_code@main.py`): every value is text, which
/// the request's numbers and booleans are read from too (`"71"`, `"2.5"`, `"true"`). JSON comes
/// first whatever the `Content-Type` (`curl -d '{…}'` labels JSON as a form).
fn body_fields(headers: &axum::http::HeaderMap, body: &[u8]) -> Option<Value> {
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        return Some(v);
    }
    let form = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|e| {
            e.trim()
                .eq_ignore_ascii_case("application/x-www-form-urlencoded")
        });
    if !form {
        return None;
    }
    let fields: serde_json::Map<String, Value> = url::form_urlencoded::parse(body)
        .map(|(k, v)| (k.into_owned(), Value::String(v.into_owned())))
        .collect();
    Some(Value::Object(fields))
}

#[derive(Debug, Deserialize)]
pub struct J0Batch {
    pub submissions: Vec<Value>,
}

/// A batch's size, checked as Judge0 checks it (400 with its words).
fn batch_size(n: usize, max: usize) -> Result<(), String> {
    if n == 0 {
        Err("there should be at least one submission in a batch".into())
    } else if n > max {
        Err(format!(
            "number of submissions in a batch should be less than or equal to {max}"
        ))
    } else {
        Ok(())
    }
}

/// `POST /judge0/submissions/batch`: 201 `[{"token"} | errors]`, 422 when no item was valid; an
/// item's errors as a single submission's would be (`{"FIELD": [...]}` or `{"error"}`).
#[utoipa::path(
    post, path = "/judge0/submissions/batch", tag = "judge0", operation_id = "judge0_create_batch",
    params(
        ("base64_encoded" = Option<bool>, Query, description = "Every item's `source_code`, `stdin` and `expected_output` are base64", example = false),
    ),
    request_body(content = Judge0BatchRequest, example = json!({"submissions": [
        {"source_code": "print(input()[::-1])", "language_id": 71, "stdin": "corral"},
        {"source_code": "echo hello", "language_id": 46}
    ]})),
    responses(
        (status = 201, description = "In the order of the request: each item's token, or why that item was refused (the others are queued)", body = Vec<Judge0BatchItem>),
        (status = 400, description = "Not `{\"submissions\": [...]}` (or a body cut short), an empty batch or one over `config_info`'s `max_submission_batch_size`, or an `Idempotency-Key` (not supported on batches)", body = Judge0Error),
        (status = 413, description = "A body over `max_json_bytes`", body = Judge0Error),
        (status = 422, description = "No item was valid: each item's refusal, in order", body = Vec<Judge0BatchItem>),
        (status = 503, description = "The batch would take this token past its queue (`queue is full`: refused whole), the server is shutting down, or the database does not answer: retry after `Retry-After`", body = Judge0Error),
    ),
    security(("bearer" = []), ("judge0" = []))
)]
pub async fn create_batch(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
    headers: axum::http::HeaderMap,
    J0Query(p): J0Query<Params>,
    J0Body(body): J0Body,
) -> Response {
    if let Err(e) = refuse_idempotency_key(&headers, "POST /judge0/submissions/batch") {
        return j0_error(StatusCode::BAD_REQUEST, e.message);
    }
    let b64 = truthy(&p.base64_encoded);
    let Ok(batch) = crate::http::objects_only::from_slice::<J0Batch>(&body) else {
        return j0_error(StatusCode::BAD_REQUEST, "expected {\"submissions\": [...]}");
    };
    if let Err(m) = batch_size(batch.submissions.len(), st.config.submissions.batch_max) {
        return j0_error(StatusCode::BAD_REQUEST, m);
    }
    let mut out: Vec<Value> = Vec::new();
    let mut jobs = Vec::new();
    let mut slots = Vec::new();
    for item in batch.submissions {
        match prepare_one(&st, &caller, item, b64).await {
            Ok(j) => {
                slots.push(out.len());
                jobs.push(j);
                out.push(Value::Null);
            }
            Err(r) => out.push(r.body()),
        }
    }
    // As Judge0: 201 when any item was accepted, 422 when none was (the items say why).
    if jobs.is_empty() {
        return (StatusCode::UNPROCESSABLE_ENTITY, Json(Value::Array(out))).into_response();
    }
    match enqueue_capped(&st, jobs).await {
        Ok(ids) => {
            for (slot, id) in slots.into_iter().zip(ids) {
                out[slot] = json!({"token": token_of(&id)});
            }
        }
        Err(e) => return j0_refusal(e),
    }
    (StatusCode::CREATED, Json(Value::Array(out))).into_response()
}

/// A submission in Judge0's shape ([`render`]), with its `source_code` when asked for: the
/// language's source file of the job's upload (where the source went when it was submitted).
async fn answer(
    st: &SharedState,
    job: &corral_store::Job,
    fields: &Option<String>,
    b64: bool,
) -> Value {
    let mut v = render(job, fields, b64);
    if super::translate::wants(fields, "language") {
        let lang = v_language(st, job);
        if let Some(o) = v.as_object_mut() {
            o.insert("language".into(), lang);
        }
    }
    if let Some(slot) = v.get_mut("source_code") {
        if let Some(src) = source_of(st, job).await {
            *slot = Value::String(if b64 {
                base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &src)
            } else {
                String::from_utf8_lossy(&src).into_owned()
            });
        }
    }
    v
}

async fn source_of(st: &SharedState, job: &corral_store::Job) -> Option<Vec<u8>> {
    let spec: JobSpec = serde_json::from_str(&job.spec).ok()?;
    let file = st
        .languages
        .get(spec.language.as_deref()?)
        .ok()?
        .source
        .clone();
    let upload = st
        .store
        .get_upload(job.upload_id.as_deref()?)
        .await
        .ok()??;
    st.store.read_upload_file(&upload, &file).await.ok()?
}

/// `GET /judge0/submissions/{token}`.
#[utoipa::path(
    get, path = "/judge0/submissions/{token}", tag = "judge0", operation_id = "judge0_get_submission",
    params(
        ("token" = String, Path, description = "A submission's token (its id as a UUID)", example = "5f0c9e4f-0b8f-4a55-a3a8-a1c64b3b8d2e"),
        ("base64_encoded" = Option<bool>, Query, description = "The text fields in base64 (a program's output that is not UTF-8 comes back byte for byte)", example = false),
        ("fields" = Option<String>, Query, description = "The fields to answer, comma-separated, or `*` for all (default: `stdout,time,memory,stderr,token,compile_output,message,status`)", example = "stdout,stderr,status,time,memory"),
    ),
    responses(
        (status = 200, description = "The submission, with the fields asked for", body = Judge0Submission),
        (status = 400, description = "A `fields` name Judge0 does not have (`invalid fields: [NAME]`), or a query parameter twice", body = Judge0Error),
        (status = 404, description = "No such submission of this caller (`{\"error\": \"Not found\"}`)", body = Judge0Error),
    ),
    security(("bearer" = []), ("judge0" = []))
)]
pub async fn get_one(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
    J0Path(token): J0Path<String>,
    J0Query(p): J0Query<Params>,
) -> Response {
    if let Some(r) = refuse_unknown_fields(&p) {
        return r;
    }
    let b64 = truthy(&p.base64_encoded);
    match wait_for(&st, &caller, &id_of(&token), Duration::ZERO).await {
        Ok(job) => Json(answer(&st, &job, &p.fields, b64).await).into_response(),
        Err(e) if e.kind == ErrorKind::NotFound => j0_error(StatusCode::NOT_FOUND, "Not found"),
        Err(e) => e.into_response(),
    }
}

/// `DELETE /judge0/submissions/{token}`: refused as Judge0 refuses it without
/// `ENABLE_SUBMISSION_DELETE` — corral keeps every submission (the owner's record).
#[utoipa::path(
    delete, path = "/judge0/submissions/{token}", tag = "judge0", operation_id = "judge0_delete_submission",
    params(
        ("token" = String, Path, description = "A submission's token", example = "5f0c9e4f-0b8f-4a55-a3a8-a1c64b3b8d2e"),
    ),
    responses(
        (status = 400, description = "Always `{\"error\": \"delete not allowed\"}`, as a Judge0 without `ENABLE_SUBMISSION_DELETE` answers (`config_info`'s `enable_submission_delete` is false): corral keeps every submission", body = Judge0Error),
    ),
    security(("bearer" = []), ("judge0" = []))
)]
pub async fn delete_one() -> Response {
    j0_error(StatusCode::BAD_REQUEST, "delete not allowed")
}

/// `GET /judge0/submissions/batch?tokens=a,b,c`: `{"submissions": [...]}` (null for unknown).
#[utoipa::path(
    get, path = "/judge0/submissions/batch", tag = "judge0", operation_id = "judge0_get_batch",
    params(
        ("tokens" = String, Query, description = "Tokens, comma-separated (at least one, at most `config_info`'s `max_submission_batch_size`)", example = "5f0c9e4f-0b8f-4a55-a3a8-a1c64b3b8d2e,0c1d2e3f-4a5b-4c6d-8e7f-8091a2b3c4d5"),
        ("base64_encoded" = Option<bool>, Query, description = "The text fields in base64", example = false),
        ("fields" = Option<String>, Query, description = "The fields to answer, comma-separated, or `*` for all", example = "stdout,status"),
    ),
    responses(
        (status = 200, description = "The submissions in the order of `tokens` (null for a token that names none of this caller's)", body = Judge0Submissions),
        (status = 400, description = "No tokens or too many, a `fields` name Judge0 does not have, or a query parameter twice", body = Judge0Error),
    ),
    security(("bearer" = []), ("judge0" = []))
)]
pub async fn get_batch(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
    J0Query(p): J0Query<Params>,
) -> Response {
    if let Some(r) = refuse_unknown_fields(&p) {
        return r;
    }
    let b64 = truthy(&p.base64_encoded);
    let tokens: Vec<&str> = p
        .tokens
        .as_deref()
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect();
    if let Err(m) = batch_size(tokens.len(), st.config.submissions.batch_max) {
        return j0_error(StatusCode::BAD_REQUEST, m);
    }
    let mut out = Vec::new();
    for t in tokens {
        match wait_for(&st, &caller, &id_of(t), Duration::ZERO).await {
            Ok(job) => out.push(answer(&st, &job, &p.fields, b64).await),
            Err(e) if e.kind == ErrorKind::NotFound => out.push(Value::Null),
            Err(e) => return e.into_response(),
        }
    }
    Json(json!({"submissions": out})).into_response()
}

/// A submission's `language` field: `{id, name}` as `/judge0/languages` names it (null when the
/// job names no registry language, e.g. a command).
fn v_language(st: &SharedState, job: &corral_store::Job) -> Value {
    let Ok(spec) = serde_json::from_str::<JobSpec>(&job.spec) else {
        return Value::Null;
    };
    let (Some(reg), Some(id)) = (
        spec.language.clone(),
        super::translate::spec_language_id(&spec),
    ) else {
        return Value::Null;
    };
    match st.languages.get(&reg) {
        Ok(l) => json!({"id": id, "name": l.name}),
        Err(_) => json!({"id": id, "name": reg}),
    }
}

/// `fields=` naming what Judge0 does not have: 400 `invalid fields: [...]`, as Judge0 answers.
fn refuse_unknown_fields(p: &Params) -> Option<Response> {
    let unknown = super::translate::unknown_fields(&p.fields);
    (!unknown.is_empty()).then(|| {
        j0_error(
            StatusCode::BAD_REQUEST,
            format!("invalid fields: [{}]", unknown.join(", ")),
        )
    })
}
