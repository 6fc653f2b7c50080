//! `POST /submissions`, `POST /submissions/batch`, `GET /submissions/{id}`.

use std::collections::BTreeMap;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use base64::Engine;
use corral_sandbox::{Limits, LimitsRequest};
use corral_store::{Job, JobState, NewFile, NewJob};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody};
use crate::state::SharedState;
use crate::types::{ApiJson, Cmd, LimitsDoc};
use corral_judge::{suite_file, JobSpec, SuiteRef, Verdict, VerdictKind};

/// One file of a submission.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmissionFile {
    /// Relative path (`src/main.c`).
    pub path: String,
    /// The contents: text, or base64 with `"encoding": "base64"`.
    pub content: String,
    /// `utf8` (default) or `base64`.
    #[serde(default)]
    pub encoding: Option<String>,
    /// Make it executable.
    #[serde(default)]
    pub executable: bool,
}

/// A submission: what to run (a `language`, a `cmd` or a `suite`), on which files (`files`,
/// `source_code` or an `upload`), with what input and limits; and where to call back.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmissionRequest {
    /// The files, inline.
    #[serde(default)]
    pub files: Option<Vec<SubmissionFile>>,
    /// One source file's text, stored under the language's conventional name (`main.c`, …).
    #[serde(default)]
    pub source_code: Option<String>,
    /// An upload id from `/upload` (the caller's own).
    #[serde(default)]
    pub upload: Option<String>,
    /// A language id (`GET /languages`): compile (when it compiles), then run.
    #[serde(default)]
    pub language: Option<String>,
    /// Or a command: a string runs under `/bin/sh -c`, an array is the argv.
    #[serde(default)]
    pub cmd: Option<Cmd>,
    /// Or a check suite id (`GET /suites`): the files are graded by its checks.
    #[serde(default)]
    pub suite: Option<String>,
    /// Standard input, all of it.
    #[serde(default)]
    pub stdin: Option<String>,
    /// The expected standard output (compared ignoring `\r`, trailing spaces and trailing blank
    /// lines); without it a clean exit is accepted.
    #[serde(default)]
    pub expected_output: Option<String>,
    /// Limits of the run (the keys of `corral run`), within the server's caps.
    #[serde(default)]
    #[schema(value_type = Option<LimitsDoc>)]
    pub limits: Option<LimitsRequest>,
    /// Extra environment variables.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// An `http(s)` URL that receives the result (signed; see the README).
    #[serde(default)]
    pub callback_url: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SubmissionCreated {
    pub id: String,
    /// `queued`.
    pub status: String,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchRequest {
    pub submissions: Vec<Value>,
}

/// One item of a batch answer: an id, or why that item was refused.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct BatchItem {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct BatchResponse {
    /// In the order of the request.
    pub submissions: Vec<BatchItem>,
}

/// Callback delivery of a submission.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CallbackInfo {
    pub url: String,
    /// `waiting` (not finished), `pending`, `delivering`, `delivered`, `failed`.
    pub state: String,
    pub attempts: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A submission and, once judged, its verdict.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SubmissionView {
    pub id: String,
    /// `queued`, `running`, `done` or `failed` (could not be judged: `internal_error`).
    pub status: String,
    /// accepted, wrong_answer, compile_error, runtime_error, time_limit, memory_limit,
    /// output_limit, internal_error; null until finished.
    pub verdict: Option<VerdictKind>,
    pub score: Option<f64>,
    pub max_score: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The run's result (the object of `corral run --json`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub run: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub compile: Option<Value>,
    /// The check report, for suites.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub checks: Option<Value>,
    /// Claims so far (more than 1: a worker stopped answering and another took over).
    pub attempts: u32,
    /// The worker holding (or that held) the last claim.
    pub worker: Option<String>,
    /// Unix milliseconds.
    pub created_at: i64,
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
    /// From submission to the first claim.
    pub queue_wait_ms: Option<i64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub limits_clamped: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub callback: Option<CallbackInfo>,
}

impl SubmissionView {
    pub fn of(job: &Job) -> SubmissionView {
        let spec: Option<JobSpec> = serde_json::from_str(&job.spec).ok();
        let verdict: Option<Verdict> = match (&job.result, job.state) {
            (Some(r), _) => Some(serde_json::from_str(r).unwrap_or_else(|e| {
                Verdict::internal(format!("the stored result is unreadable: {e}"))
            })),
            (None, JobState::Failed) => Some(Verdict::internal(
                job.error.clone().unwrap_or_else(|| "failed".into()),
            )),
            _ => None,
        };
        let (v, score, max, message, run, compile, checks) = match verdict {
            Some(v) => (
                Some(v.verdict),
                Some(v.score),
                Some(v.max_score),
                v.message,
                v.run,
                v.compile,
                v.checks,
            ),
            None => (None, None, None, None, None, None, None),
        };
        SubmissionView {
            id: job.id.clone(),
            status: job.state.as_str().into(),
            verdict: v,
            score,
            max_score: max,
            message,
            run,
            compile,
            checks,
            attempts: job.attempts,
            worker: job.worker.clone(),
            created_at: job.created_ms,
            started_at: job.started_ms,
            finished_at: job.finished_ms,
            queue_wait_ms: job.started_ms.map(|s| s - job.created_ms),
            limits_clamped: spec.map(|s| s.limits_clamped).unwrap_or_default(),
            callback: job.callback_url.as_ref().map(|u| CallbackInfo {
                url: u.clone(),
                state: job.callback_state.clone(),
                attempts: job.callback_attempts,
                error: job.callback_error.clone(),
            }),
        }
    }
}

#[derive(Debug, Clone, Deserialize, Default)]
pub struct WaitQuery {
    #[serde(default)]
    pub wait: Option<String>,
    /// Seconds to wait at most (capped by the server's `submissions.wait_max`).
    #[serde(default)]
    pub timeout: Option<f64>,
}

fn is_true(v: &Option<String>) -> bool {
    matches!(v.as_deref(), Some("true" | "1" | "yes" | ""))
}

/// Checks a callback URL's form (where it points is checked when it is called).
pub fn check_callback_url(u: &str) -> Result<(), ApiError> {
    if u.len() > 2048 {
        return Err(ApiError::unprocessable(
            "callback_url is longer than 2048 bytes",
        ));
    }
    let parsed =
        url::Url::parse(u).map_err(|e| ApiError::unprocessable(format!("callback_url: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(ApiError::unprocessable(
            "callback_url must be http:// or https://",
        ));
    }
    if parsed.host().is_none() {
        return Err(ApiError::unprocessable("callback_url has no host"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(ApiError::unprocessable(
            "callback_url may not carry credentials; the signature authenticates corral",
        ));
    }
    Ok(())
}

fn valid_suite_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 100
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
        && corral_store::validate_path(id, 4).is_ok()
}

/// Checks a request and turns it into a job (its inline files stored as an upload).
pub async fn accept(
    st: &SharedState,
    caller: &Caller,
    req: SubmissionRequest,
) -> Result<NewJob, ApiError> {
    let modes = [
        req.language.is_some(),
        req.cmd.is_some(),
        req.suite.is_some(),
    ];
    if modes.iter().filter(|m| **m).count() != 1 {
        return Err(ApiError::unprocessable(
            "give exactly one of language, cmd or suite",
        ));
    }
    let sources = [
        req.files.is_some(),
        req.upload.is_some(),
        req.source_code.is_some(),
    ];
    if sources.iter().filter(|m| **m).count() > 1 {
        return Err(ApiError::unprocessable(
            "give the files one way: files, source_code or upload",
        ));
    }
    if let Some(u) = &req.callback_url {
        check_callback_url(u)?;
    }
    let lang = match &req.language {
        Some(id) => {
            let l = st
                .languages
                .get(id)
                .map_err(|e| ApiError::unprocessable(e.to_string()))?;
            if st
                .config
                .submissions
                .workers
                .unwrap_or(st.config.parallelism)
                > 0
            {
                // In-process workers judge it here: refuse what they cannot run now.
                l.check_host().map_err(|why| {
                    ApiError::unprocessable(format!("language {id:?} is unavailable: {why}"))
                })?;
            }
            Some(l.clone())
        }
        None => None,
    };
    if let Some(Cmd::Line(s)) = &req.cmd {
        if s.trim().is_empty() {
            return Err(ApiError::unprocessable("cmd is empty"));
        }
    }
    if let Some(Cmd::Argv(v)) = &req.cmd {
        if v.first().is_none_or(|a| a.is_empty()) {
            return Err(ApiError::unprocessable("cmd is empty"));
        }
    }
    if req.source_code.is_some() && lang.is_none() {
        return Err(ApiError::unprocessable(
            "source_code needs a language (its file name comes from the language)",
        ));
    }
    // Limits: the server's defaults, the language's, the request's; then the caps.
    let base: Limits = match &lang {
        Some(l) => l
            .limits
            .resolve(&st.defaults)
            .map_err(|e| ApiError::unprocessable(e.to_string()))?,
        None => st.defaults.clone(),
    };
    let lreq = req.limits.clone().unwrap_or_default();
    let asked = lreq
        .resolve(&base)
        .map_err(|e| ApiError::unprocessable(e.to_string()))?;
    let limits = asked.clamp_to(&st.caps);
    let limits_clamped = crate::run::clamped_keys(&lreq, &asked, &limits);
    limits
        .validate()
        .map_err(|e| ApiError::unprocessable(e.to_string()))?;
    let compile_limits = lang
        .as_ref()
        .filter(|l| l.compile.is_some())
        .map(|_| base.clamp_to(&st.caps));
    // The suite, resolved now: a registered one (its files), or one of the suites folder.
    let suite = match &req.suite {
        None => None,
        Some(id) => {
            let missing = || ApiError::not_found(format!("no suite {id:?}"));
            if !valid_suite_id(id) {
                return Err(missing());
            }
            match st.store.get_suite(id).await? {
                Some(s) => Some(SuiteRef {
                    id: id.clone(),
                    upload: Some(s.upload_id),
                }),
                None => {
                    let dir = super::worker::suites_dir(st).join(id);
                    suite_file(&dir).ok_or_else(missing)?;
                    Some(SuiteRef {
                        id: id.clone(),
                        upload: None,
                    })
                }
            }
        }
    };
    // The files: an upload of the caller's, or inline files stored as one now.
    let max_depth = st.config.upload.max_depth;
    let mut new_files: Vec<NewFile> = Vec::new();
    if let Some(files) = &req.files {
        for f in files {
            let path = corral_store::validate_path(&f.path, max_depth)
                .map_err(|e| ApiError::unprocessable(e.to_string()))?;
            let content = match f.encoding.as_deref() {
                None | Some("utf8") | Some("utf-8") => f.content.clone().into_bytes(),
                Some("base64") => base64::engine::general_purpose::STANDARD
                    .decode(f.content.as_bytes())
                    .map_err(|e| ApiError::unprocessable(format!("{}: base64: {e}", f.path)))?,
                Some(other) => {
                    return Err(ApiError::unprocessable(format!(
                        "{}: unknown encoding {other:?} (utf8 or base64)",
                        f.path
                    )))
                }
            };
            new_files.push(NewFile {
                path,
                content,
                mode: if f.executable { 0o755 } else { 0o644 },
            });
        }
    }
    if let (Some(src), Some(l)) = (&req.source_code, &lang) {
        new_files.push(NewFile {
            path: l.source.clone(),
            content: src.clone().into_bytes(),
            mode: 0o644,
        });
    }
    let upload_id = if let Some(u) = &req.upload {
        st.store
            .get_upload(u)
            .await?
            .filter(|x| x.owner == caller.id)
            .ok_or_else(|| ApiError::not_found(format!("no upload {u:?}")))?;
        Some(u.clone())
    } else if !new_files.is_empty() {
        if new_files.len() > st.config.upload.max_files {
            return Err(ApiError::too_large("too many files"));
        }
        let total: u64 = new_files.iter().map(|f| f.content.len() as u64).sum();
        if total > st.config.upload.max_bytes.bytes() {
            return Err(ApiError::too_large("the files are too large"));
        }
        let paths: Vec<&str> = new_files.iter().map(|f| f.path.as_str()).collect();
        corral_store::check_tree(&paths).map_err(|e| ApiError::unprocessable(e.to_string()))?;
        Some(st.store.create_upload(&caller.id, new_files).await?.id)
    } else {
        None
    };
    if suite.is_some() && upload_id.is_none() {
        return Err(ApiError::unprocessable(
            "a suite grades files: give files or an upload",
        ));
    }
    let spec = JobSpec {
        language: lang.map(|l| l.id),
        cmd: req.cmd,
        suite,
        stdin: req.stdin.unwrap_or_default(),
        expected_output: req.expected_output,
        limits,
        compile_limits,
        env: req.env,
        run_args: None,
        compile_args: None,
        limits_clamped,
        staff: caller.role.is_staff(),
    };
    Ok(NewJob {
        owner: caller.id.clone(),
        spec: serde_json::to_string(&spec).expect("a job spec serialises"),
        upload_id,
        callback_url: req.callback_url,
        max_attempts: st.config.submissions.max_attempts,
    })
}

async fn check_pending(st: &SharedState, caller: &Caller, adding: u64) -> Result<(), ApiError> {
    let pending = st.store.pending_jobs_of(&caller.id).await?;
    if pending + adding > st.config.submissions.max_pending_per_owner {
        return Err(ApiError {
            retry_after: Some(5),
            ..ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "queue_full",
                format!(
                    "this token has {pending} submissions waiting (at most {}); retry when some are done",
                    st.config.submissions.max_pending_per_owner
                ),
            )
        });
    }
    Ok(())
}

/// Submit code to be judged.
///
/// Answers 202 at once with the submission's id; a worker judges it later. The submission is
/// stored durably before the answer: it survives a restart or crash of the server and of its
/// workers. `GET /submissions/{id}` tells the verdict; with `callback_url` the verdict is also
/// POSTed there, signed.
#[utoipa::path(
    post, path = "/submissions", tag = "submissions",
    request_body = SubmissionRequest,
    responses(
        (status = 202, description = "Queued", body = SubmissionCreated),
        (status = 404, description = "No such suite, or no such upload of this caller", body = ErrorBody),
        (status = 413, description = "Too many files or bytes", body = ErrorBody),
        (status = 422, description = "Invalid: modes, language, limits, callback URL", body = ErrorBody),
        (status = 429, description = "Rate limited, or too many of this token's submissions are waiting", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn submit(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
    ApiJson(req): ApiJson<SubmissionRequest>,
) -> Result<(StatusCode, Json<SubmissionCreated>), ApiError> {
    if st.is_shutting_down() {
        return Err(ApiError::overloaded("the server is shutting down", 5));
    }
    check_pending(&st, &caller, 1).await?;
    let job = accept(&st, &caller, req).await?;
    let ids = st.store.enqueue(vec![job]).await?;
    wake(&st).await;
    tracing::info!(caller = %caller.id, submission = %ids[0], "submission queued");
    Ok((
        StatusCode::ACCEPTED,
        Json(SubmissionCreated {
            id: ids[0].clone(),
            status: "queued".into(),
        }),
    ))
}

async fn wake(st: &SharedState) {
    st.queue.work.notify_waiters();
    st.store.notify_work().await;
}

/// Submit many at once.
///
/// Each item is a `POST /submissions` body; each gets an id or its own error (the others are
/// queued regardless). At most `submissions.batch_max` items.
#[utoipa::path(
    post, path = "/submissions/batch", tag = "submissions",
    request_body = BatchRequest,
    responses(
        (status = 202, description = "Queued (items may carry their own error)", body = BatchResponse),
        (status = 413, description = "Too many items", body = ErrorBody),
        (status = 422, description = "Not a list of submissions", body = ErrorBody),
        (status = 429, description = "Too many of this token's submissions are waiting", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn submit_batch(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
    ApiJson(req): ApiJson<BatchRequest>,
) -> Result<(StatusCode, Json<BatchResponse>), ApiError> {
    if st.is_shutting_down() {
        return Err(ApiError::overloaded("the server is shutting down", 5));
    }
    if req.submissions.len() > st.config.submissions.batch_max {
        return Err(ApiError::too_large(format!(
            "{} submissions in one batch; at most {}",
            req.submissions.len(),
            st.config.submissions.batch_max
        )));
    }
    if req.submissions.is_empty() {
        return Err(ApiError::unprocessable("submissions is empty"));
    }
    check_pending(&st, &caller, req.submissions.len() as u64).await?;
    let mut items: Vec<BatchItem> = Vec::with_capacity(req.submissions.len());
    let mut jobs = Vec::new();
    let mut slots = Vec::new();
    for v in req.submissions {
        let r = match serde_json::from_value::<SubmissionRequest>(v) {
            Ok(r) => accept(&st, &caller, r).await,
            Err(e) => Err(ApiError::unprocessable(e.to_string())),
        };
        match r {
            Ok(job) => {
                slots.push(items.len());
                jobs.push(job);
                items.push(BatchItem {
                    id: None,
                    status: Some("queued".into()),
                    error: None,
                    message: None,
                });
            }
            Err(e) => items.push(BatchItem {
                id: None,
                status: None,
                error: Some(e.code.to_string()),
                message: Some(e.message),
            }),
        }
    }
    if !jobs.is_empty() {
        let ids = st.store.enqueue(jobs).await?;
        for (slot, id) in slots.into_iter().zip(ids) {
            items[slot].id = Some(id);
        }
        wake(&st).await;
    }
    tracing::info!(caller = %caller.id, items = items.len(), "batch queued");
    Ok((
        StatusCode::ACCEPTED,
        Json(BatchResponse { submissions: items }),
    ))
}

/// A submission's status and verdict.
///
/// `?wait=true` waits until it is finished, at most `timeout` seconds (capped by the server's
/// `submissions.wait_max`, default 30 s), then answers whatever the status is.
#[utoipa::path(
    get, path = "/submissions/{id}", tag = "submissions",
    params(
        ("id" = String, Path, description = "Submission id"),
        ("wait" = Option<bool>, Query, description = "Wait for the verdict (bounded)"),
        ("timeout" = Option<f64>, Query, description = "Seconds to wait at most"),
    ),
    responses(
        (status = 200, description = "The submission", body = SubmissionView),
        (status = 404, description = "No such submission of this caller", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn get_submission(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    q: Result<Query<WaitQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<SubmissionView>, ApiError> {
    let Query(q) = q.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let max = st.config.submissions.wait_max.duration();
    let wait = if is_true(&q.wait) {
        q.timeout
            .filter(|t| t.is_finite() && *t >= 0.0)
            .map(|t| Duration::from_secs_f64(t.min(3600.0)))
            .unwrap_or(max)
            .min(max)
    } else {
        Duration::ZERO
    };
    let job = wait_for(&st, &caller, &id, wait).await?;
    Ok(Json(SubmissionView::of(&job)))
}

/// The caller's job, waiting up to `wait` for it to finish.
pub async fn wait_for(
    st: &SharedState,
    caller: &Caller,
    id: &str,
    wait: Duration,
) -> Result<Job, ApiError> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        // Register interest before looking, so a finish in between is not missed.
        let finished = st.queue.finished.notified();
        let job = st
            .store
            .get_job(id)
            .await?
            .filter(|j| j.owner == caller.id || caller.role == corral_store::Role::Admin)
            .ok_or_else(|| ApiError::not_found(format!("no submission {id:?}")))?;
        let now = tokio::time::Instant::now();
        if job.state.is_finished() || now >= deadline {
            return Ok(job);
        }
        // Another node may finish it: look again at least every 200 ms.
        let nap = (deadline - now).min(Duration::from_millis(200));
        tokio::select! {
            _ = finished => {}
            _ = tokio::time::sleep(nap) => {}
        }
    }
}
