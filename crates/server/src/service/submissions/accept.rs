//! Accepting a submission: checking a request (modes, language, limits, files, suite, callback
//! URL) and turning it into a queued job, its inline files stored as an upload; enqueueing one or
//! many at once; one under a client's idempotency key ([`super::idempotency`]).

use std::collections::BTreeMap;

use base64::Engine;
use corral_judge::{Cmd, JobSpec};
use corral_sandbox::{Limits, LimitsRequest};
use corral_store::{Enqueued, IdempotencyKey, JobState, NewFile, NewJob};
use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::callback_targets::TargetPolicy;
use super::idempotency::{self, Replay};
use crate::error::{ApiError, ErrorKind};
use crate::service::caller::Caller;
use crate::service::runs::{clamped_keys, seccomp_profile, LimitsDoc};
use crate::service::runtime_choice::refuse_lost_hiding;
use crate::service::{folder_suites, suites, uploads};
use crate::state::SharedState;

/// One file of a submission.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmissionFile {
    /// Relative path (`src/main.c`; the rules of `/upload`).
    #[schema(
        example = "main.c",
        min_length = 1,
        pattern = r"^[^/\\\u0000-\u001f\u007f-\u009f]+(/[^/\\\u0000-\u001f\u007f-\u009f]+)*$"
    )]
    pub path: String,
    /// The contents: text, or base64 with `"encoding": "base64"`.
    pub content: String,
    /// `utf8` (default) or `base64`.
    #[serde(default)]
    #[schema(pattern = "^(utf8|utf-8|base64)$")]
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
    /// Standard input, all of it. Not with `suite` (its checks give their own).
    #[serde(default)]
    pub stdin: Option<String>,
    /// The expected standard output (compared ignoring `\r`, trailing spaces and trailing blank
    /// lines); without it a clean exit is accepted. Not with `suite`.
    #[serde(default)]
    pub expected_output: Option<String>,
    /// Limits of the run (the keys of `corral run`), within the server's caps. Not with `suite`
    /// (its checks have their own).
    #[serde(default)]
    #[schema(value_type = Option<LimitsDoc>)]
    pub limits: Option<LimitsRequest>,
    /// Extra environment variables. Not with `suite`.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// An `http(s)` URL that receives the result (signed; see the README).
    #[serde(default)]
    pub callback_url: Option<String>,
    /// A container image this server has (`GET /images`: a name, `name@sha256:…` or a digest):
    /// the run's root (over the language's image), or the suite's default image. Pinned to its
    /// digest now; the verdict and the submission record it. Never pulled: 422 when missing.
    #[serde(default)]
    #[schema(example = "python:3.12-slim", max_length = 400)]
    pub image: Option<String>,
    /// A stricter seccomp profile for the program's run (never the compile), on top of the
    /// default one, as in `POST /run`: `no_spawn`, `no_sockets`, `allow:NAME,…`, joined by `+`.
    /// It adds to the language's own profile (`GET /languages`): a request can only make it
    /// stricter. A call it denies is a `runtime_error` verdict whose run says `blocked_syscall`.
    /// Not with `suite` (its checks name their own).
    #[serde(default)]
    #[schema(example = "no_spawn+no_sockets", max_length = 4000)]
    pub seccomp: Option<String>,
    /// `"native"` or `"gvisor"`: the kernel every run of the job gets (with `suite`: every
    /// check that names none, nor does its suite or language); absent: the language's, else the
    /// server's default. On a server that runs everything under gVisor (`[runtime]
    /// force_gvisor`), `"native"` is refused (422) and every run and check is gVisor's, whatever
    /// a suite names; `"gvisor"` is refused (422) when it would move a check50 problem with
    /// hidden checks off the host's kernel (Landlock, which hides them, is not in gVisor).
    /// Resolved now and stored with the job (remote workers too obey it); the verdict's runs and
    /// checks say which ran them.
    #[serde(default)]
    #[schema(value_type = Option<String>, example = "gvisor")]
    pub runtime: Option<corral_sandbox::Runtime>,
}

/// Checks a callback URL's form, and a literal address in it as its delivery would (a host name
/// is resolved and checked when it is called: what it resolves to may change by then).
pub fn check_callback_url(u: &str, policy: &TargetPolicy) -> Result<(), ApiError> {
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
    // Accepted, it would be judged and only then fail, unseen by the client that sent it.
    policy
        .check_literal(&parsed)
        .map_err(|why| ApiError::unprocessable(format!("callback_url: {why}")))
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
    let gives_files = req.upload.is_some()
        || req.source_code.is_some()
        || req.files.as_ref().is_some_and(|f| !f.is_empty());
    // Without its program a language's run fails as the student's runtime error ("can't open
    // file main.py"): a missing field is the integrator's error, said now.
    if req.language.is_some() && !gives_files {
        return Err(ApiError::unprocessable(
            "a language submission needs the program: give source_code, files or upload",
        ));
    }
    if let Some(u) = &req.callback_url {
        check_callback_url(u, &st.queue.callback_policy)?;
    }
    if req.suite.is_some() && req.seccomp.is_some() {
        return Err(ApiError::unprocessable(
            "seccomp is for a language's or a command's run: a suite's checks name their own",
        ));
    }
    // What only a language's or a command's run reads: a suite's checks give their own input,
    // expected output, limits and environment, so these were silently ignored.
    if req.suite.is_some() {
        let ignored: Vec<&str> = [
            ("stdin", req.stdin.as_ref().is_some_and(|s| !s.is_empty())),
            ("expected_output", req.expected_output.is_some()),
            ("limits", req.limits.is_some()),
            ("env", !req.env.is_empty()),
        ]
        .into_iter()
        .filter_map(|(name, given)| given.then_some(name))
        .collect();
        if !ignored.is_empty() {
            return Err(ApiError::unprocessable(format!(
                "{} {} for a language's or a command's run: a suite's checks give their own",
                ignored.join(", "),
                if ignored.len() == 1 { "is" } else { "are" }
            )));
        }
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
                && req.image.is_none()
                && l.image.is_none()
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
    let limits_clamped = clamped_keys(&lreq, &asked, &limits);
    limits
        .validate()
        .map_err(|e| ApiError::unprocessable(e.to_string()))?;
    let compile_limits = lang
        .as_ref()
        .filter(|l| l.compile.is_some())
        .map(|_| base.clamp_to(&st.caps));
    // The suite, resolved now: a registered one (its files), or one of the suites folder (its
    // files pinned once the request is valid).
    let suite = match &req.suite {
        None => None,
        Some(id) => Some(suites::resolve(st, id).await?),
    };
    let mut spec = JobSpec {
        image: req.image.clone(),
        image_digests: BTreeMap::new(),
        language: lang.as_ref().map(|l| l.id.clone()),
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
        runs: 1,
        stderr_to_stdout: false,
        network: false,
        seccomp: match &req.seccomp {
            Some(name) => Some(seccomp_profile(Some(name))?),
            None => None,
        },
        // The operator's default and the public-instance switch, resolved once for every run.
        runtime: Some(
            st.config
                .runtime
                .resolve_preferring(req.runtime, lang.as_ref().and_then(|l| l.runtime))
                .map_err(|e| ApiError::unprocessable(e.to_string()))?,
        ),
        force_gvisor: st.config.runtime.force_gvisor,
        judge0_language_id: None,
        submitted_ms: Some(corral_store::now_ms()),
        submitter: Some(caller.name.clone()),
    };
    // The rules every run request meets (`/run` and the WebSocket check the same), before
    // anything is stored.
    spec.validate()
        .map_err(|e| ApiError::unprocessable(e.to_string()))?;
    if spec.suite.is_some() && !gives_files {
        return Err(ApiError::unprocessable(
            "a suite grades files: give files or an upload",
        ));
    }
    // The suite as it is now is the one that grades the job: a folder suite's files are stored
    // (a registered suite's upload already is), and read below from there.
    if let Some(suite) = spec.suite.take() {
        spec.suite = Some(folder_suites::pin(st, suite).await?);
    }
    // The suite, loaded (once per content: `suites::loaded`) for the request's runtime and to pin
    // the images it names. One that cannot be loaded names no image; judging reports why.
    let loaded = match &spec.suite {
        Some(suite) => match suites::loaded(st, suite, spec.image.as_deref()).await? {
            Ok(loaded) => Some(loaded),
            // Read only to see whether the request's runtime would undo what the suite hides.
            Err(e) if req.runtime.is_some() => return Err(e),
            Err(_) => None,
        },
        None => None,
    };
    if let Some(suite) = &loaded {
        refuse_lost_hiding(st, suite, req.runtime)?;
    }
    // Every image the job names (the request's, the language's, the suite's and its checks'),
    // pinned to the digest this server has now: every worker judges exactly those.
    let needed = match (&spec.suite, &loaded) {
        (None, _) => corral_judge::images_needed(&spec, &st.languages, None),
        (Some(_), Some(suite)) => corral_judge::suite_images(suite, &st.languages),
        (Some(_), None) => Vec::new(),
    };
    if !needed.is_empty() {
        spec.image_digests = crate::service::images::pin(st, needed).await?;
    }
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
        uploads::owned(st, caller, u).await?;
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
    Ok(NewJob {
        owner: caller.id.clone(),
        spec: serde_json::to_string(&spec).expect("a job spec serialises"),
        upload_id,
        suite_upload_id: spec.suite.as_ref().and_then(|s| s.upload.clone()),
        suite: spec.suite.as_ref().map(|s| s.id.clone()),
        regrade_of: None,
        callback_url: req.callback_url,
        max_attempts: st.config.submissions.max_attempts,
        idempotency: None,
    })
}

/// Refuses (429) when the caller would have more submissions waiting than allowed: a quick
/// look before the work of accepting them. The cap itself is enforced when they are stored
/// ([`enqueue_capped`]): concurrent requests may all pass this look.
pub async fn check_pending(st: &SharedState, caller: &Caller, adding: u64) -> Result<(), ApiError> {
    let pending = st.store.pending_jobs_of(&caller.id).await?;
    if pending + adding > st.config.submissions.max_pending_per_owner {
        return Err(queue_full(st, pending, adding));
    }
    Ok(())
}

/// The 429 of a token whose `pending` waiting submissions and `adding` more would pass the cap.
fn queue_full(st: &SharedState, pending: u64, adding: u64) -> ApiError {
    let max = st.config.submissions.max_pending_per_owner;
    let message = if adding > 1 {
        format!(
            "this token has {pending} submissions waiting and this batch adds {adding} (at most \
             {max} may wait); the batch was refused whole: retry when some are done, or send fewer"
        )
    } else {
        format!(
            "this token has {pending} submissions waiting (at most {max}); retry when some are done"
        )
    };
    let mut e = ApiError::new(ErrorKind::TooManyRequests, "queue_full", message);
    e.retry_after = Some(5);
    e
}

/// Stores the caller's accepted jobs in the queue unless the token would then have more than
/// `submissions.max_pending_per_owner` waiting (429, nothing stored: the count and the insert are
/// one step in the store), and wakes the workers: the jobs' ids in order, or the job a key
/// already names (nothing stored).
async fn store_capped(
    st: &SharedState,
    jobs: Vec<NewJob>,
) -> Result<Result<Vec<String>, corral_store::KeyedJob>, ApiError> {
    let cap = st.config.submissions.max_pending_per_owner;
    match st.store.enqueue_within(jobs, Some(cap)).await? {
        Enqueued::Queued(ids) => {
            wake(st).await;
            Ok(Ok(ids))
        }
        Enqueued::Full {
            pending, adding, ..
        } => Err(queue_full(st, pending, adding)),
        Enqueued::Existing(found) => Ok(Err(found)),
    }
}

/// [`store_capped`] for jobs without an idempotency key: the jobs' ids in order.
pub async fn enqueue_capped(st: &SharedState, jobs: Vec<NewJob>) -> Result<Vec<String>, ApiError> {
    store_capped(st, jobs).await?.map_err(|found| {
        ApiError::internal(format!(
            "an enqueue without keys found submission {} by its key",
            found.id
        ))
    })
}

/// A submission taken: its id, and for a retry under an idempotency key, the state of the
/// submission the first request made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Submitted {
    pub id: String,
    /// `Some` when nothing new was stored: the key named this submission, now in this state.
    pub replayed: Option<JobState>,
}

impl From<Replay> for Submitted {
    fn from(r: Replay) -> Self {
        Submitted {
            id: r.id,
            replayed: Some(r.state),
        }
    }
}

/// The submission `key` already names for this caller, when there is one: the answer to a retry
/// (422 when the key was used for another request). A quick look before the work of accepting;
/// [`enqueue_keyed`] is what holds against racing requests.
pub async fn already_keyed(
    st: &SharedState,
    caller: &Caller,
    key: &IdempotencyKey,
) -> Result<Option<Submitted>, ApiError> {
    match st.store.job_by_key(&caller.id, &key.key).await? {
        Some(found) => Ok(Some(
            idempotency::replay(&key.key, found, &key.fingerprint)?.into(),
        )),
        None => Ok(None),
    }
}

/// Stores one accepted job as [`enqueue_capped`] does, under the client's idempotency key when
/// it has one: a key that already names a submission of the caller (a request racing this one
/// stored it first) answers that submission and stores nothing.
pub async fn enqueue_keyed(
    st: &SharedState,
    mut job: NewJob,
    key: Option<IdempotencyKey>,
) -> Result<Submitted, ApiError> {
    job.idempotency = key.clone();
    match store_capped(st, vec![job]).await? {
        Ok(ids) => Ok(Submitted {
            id: ids[0].clone(),
            replayed: None,
        }),
        Err(found) => {
            let key = key.expect("only a job with a key finds one");
            Ok(idempotency::replay(&key.key, found, &key.fingerprint)?.into())
        }
    }
}

/// Stores accepted jobs in the queue (durably, before any answer) and wakes the workers; the
/// jobs' ids in order.
pub async fn enqueue(st: &SharedState, jobs: Vec<NewJob>) -> Result<Vec<String>, ApiError> {
    let ids = st.store.enqueue(jobs).await?;
    wake(st).await;
    Ok(ids)
}

/// Wakes the workers: this node's at once, other nodes through the store.
async fn wake(st: &SharedState) {
    st.queue.work.notify_waiters();
    st.store.notify_work().await;
}

/// Queues one submission, under the client's idempotency key when it sent one (a retry is
/// answered the submission its first request made).
pub async fn submit(
    st: &SharedState,
    caller: &Caller,
    req: SubmissionRequest,
    key: Option<IdempotencyKey>,
) -> Result<Submitted, ApiError> {
    if st.is_shutting_down() {
        return Err(ApiError::overloaded("the server is shutting down", 5));
    }
    if let Some(k) = &key {
        if let Some(done) = already_keyed(st, caller, k).await? {
            tracing::info!(caller = %caller.id, submission = %done.id, "a retry: its submission answered again");
            return Ok(done);
        }
    }
    check_pending(st, caller, 1).await?;
    let job = accept(st, caller, req).await?;
    let done = enqueue_keyed(st, job, key).await?;
    match done.replayed {
        None => tracing::info!(caller = %caller.id, submission = %done.id, "submission queued"),
        Some(_) => {
            tracing::info!(caller = %caller.id, submission = %done.id, "a retry: its submission answered again")
        }
    }
    Ok(done)
}

/// Queues many submissions (each a `SubmissionRequest` as JSON): per item, its id or why it was
/// refused (the others are queued regardless).
pub async fn submit_batch(
    st: &SharedState,
    caller: &Caller,
    items: Vec<Value>,
) -> Result<Vec<Result<String, ApiError>>, ApiError> {
    if st.is_shutting_down() {
        return Err(ApiError::overloaded("the server is shutting down", 5));
    }
    if items.len() > st.config.submissions.batch_max {
        return Err(ApiError::too_large(format!(
            "{} submissions in one batch; at most {}",
            items.len(),
            st.config.submissions.batch_max
        )));
    }
    if items.is_empty() {
        return Err(ApiError::unprocessable("submissions is empty"));
    }
    check_pending(st, caller, items.len() as u64).await?;
    let mut out: Vec<Result<String, ApiError>> = Vec::with_capacity(items.len());
    let mut jobs = Vec::new();
    let mut slots = Vec::new();
    for v in items {
        let r = match crate::http::objects_only::from_value::<SubmissionRequest>(v) {
            Ok(r) => accept(st, caller, r).await,
            Err(e) => Err(ApiError::unprocessable(e.to_string())),
        };
        match r {
            Ok(job) => {
                slots.push(out.len());
                jobs.push(job);
                out.push(Ok(String::new()));
            }
            Err(e) => out.push(Err(e)),
        }
    }
    if !jobs.is_empty() {
        let ids = enqueue_capped(st, jobs).await?;
        for (slot, id) in slots.into_iter().zip(ids) {
            out[slot] = Ok(id);
        }
    }
    tracing::info!(caller = %caller.id, items = out.len(), "batch queued");
    Ok(out)
}
