//! Turning a run request into a sandboxed run: the command, limits (defaults, then caps), the
//! sandbox (a fresh one with an upload copied in, or a kept one), admission, and giving the
//! sandbox back afterwards; the result object both return. Shared by `/run` and the WebSocket.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use corral_sandbox::{
    Limits, LimitsRequest, Outcome, Restrictions, RunSpec, Sandbox, SandboxConfig, Size, Stdin,
};

use corral_checks::UsedImage;
use corral_judge::{Cmd, ImageDoc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::{ApiError, ErrorKind};
use crate::service::caller::Caller;
use crate::service::kept_sandboxes::{Evicted, Held};
use crate::service::nodes::{self, Owner};
use crate::service::scratch::Scratch;
use crate::state::SharedState;

/// Where to run: a fresh sandbox with an upload's files as `$HOME` (`homedir`), or the sandbox a
/// previous run returned (`id`). Neither: a fresh, empty sandbox.
#[derive(Debug, Clone, Default, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SandboxRef {
    /// An upload id from `/upload`.
    #[serde(default)]
    pub homedir: Option<String>,
    /// A sandbox id from an earlier `/run` (or WebSocket `exit` event).
    #[serde(default)]
    pub id: Option<String>,
    /// `false`: do not keep the sandbox after this run (the answer's `sandbox` is null). A new
    /// sandbox then counts against neither `max_sandboxes_per_caller` nor `max_sandboxes` and
    /// pushes no kept sandbox out; with `id`, the kept sandbox is dropped after this run (the
    /// last step of a session). Default `true`. Not for `/check`, which keeps none.
    #[serde(default)]
    #[schema(example = false)]
    pub keep: Option<bool>,
}

/// One limit: a duration (`"100ms"`, `"2s"`, or a number of seconds) or a size (`"64M"`, or a
/// number of bytes), or a count.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub enum LimitValue {
    Text(String),
    Number(u64),
}

/// Resource limits, the same keys and units as `corral run` (missing keys take the server's
/// defaults; values above the server's caps are lowered to the caps).
#[derive(Debug, Clone, Serialize, ToSchema)]
#[allow(dead_code)]
pub struct LimitsDoc {
    /// CPU time of the whole process tree (`"5s"`).
    pub cpu_time: Option<LimitValue>,
    /// Wall-clock time (`"10s"`).
    pub wall_time: Option<LimitValue>,
    /// Memory of the whole process tree (`"256M"`).
    pub memory: Option<LimitValue>,
    /// Processes and threads at once.
    pub pids: Option<LimitValue>,
    /// Captured stdout + stderr (`"1M"`).
    pub output: Option<LimitValue>,
    /// Size of the working directory, `/tmp` and `/dev/shm` (`"64M"`).
    pub disk: Option<LimitValue>,
    /// Open files per process.
    pub open_files: Option<LimitValue>,
    /// Largest file a process may write (`"64M"`).
    pub file_size: Option<LimitValue>,
}

/// What a run did. `code`, `sandbox`, `script`, `stderr` and `stdout` are CS50 Sandbox's; the rest
/// is corral's result object (`corral run --json`).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RunResponse {
    /// The exit code (128 + N when killed by signal N; null when the sandbox failed).
    pub code: Option<i32>,
    /// The sandbox to continue in (`{"sandbox": {"id": …}}`), null when it was not kept.
    pub sandbox: Option<String>,
    /// stdout and stderr interleaved in arrival order (each stream's own order is exact; writes
    /// to the two closer together than the server's wake-up may come out reordered between them).
    pub script: String,
    pub stderr: String,
    pub stdout: String,
    /// ok, nonzero_exit, signaled, time_limit, wall_time_limit, memory_limit, output_limit,
    /// blocked_syscall, sandbox_error; and cancelled: the kept sandbox was deleted
    /// (`DELETE /sandboxes/{id}`) while the run was in progress, and its program killed.
    #[schema(example = "ok")]
    pub status: String,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub cpu_time_ms: u64,
    pub wall_time_ms: u64,
    pub memory_peak_bytes: u64,
    pub pids_peak: Option<u64>,
    pub pids_limit_hit: bool,
    /// The OOM killer killed a process of the run (the program: status `memory_limit`; a child
    /// while the program went on: possibly `ok`).
    pub oom_killed: bool,
    pub disk_used_bytes: u64,
    /// What the program wrote to stdout and stderr: may be more than is returned (the output
    /// limit caps what is kept).
    pub output_bytes: u64,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    /// The exact bytes, when stdout was not valid UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdout_base64: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr_base64: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blocked_syscall: Option<String>,
    /// What failed, for sandbox_error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Why a limit ended the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The limits in force.
    #[schema(value_type = LimitsDoc)]
    pub limits: Limits,
    /// Limits the request asked for above the server's caps, lowered to the caps; and `disk`
    /// when a kept sandbox (`sandbox.id`) was asked for another disk limit than the one it was
    /// built with, which it keeps.
    pub limits_clamped: Vec<String>,
    /// The container image the run's sandbox has as its root (`{"name", "digest"}`); absent on
    /// the host root.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageDoc>,
    /// The kernel the program ran on: `native` or `gvisor`.
    #[schema(example = "gvisor")]
    pub runtime: String,
}

impl RunResponse {
    pub fn new(o: &Outcome, ran: Ran, mut limits_clamped: Vec<String>) -> Self {
        let Ran {
            sandbox,
            image,
            disk_fixed,
            cancelled,
        } = ran;
        if disk_fixed && !limits_clamped.iter().any(|k| k == "disk") {
            limits_clamped.push("disk".to_string());
        }
        RunResponse {
            code: (o.status != corral_sandbox::Status::SandboxError).then(|| o.shell_code()),
            sandbox,
            script: o.script.text(),
            stderr: o.stderr.text(),
            stdout: o.stdout.text(),
            status: if cancelled {
                CANCELLED.to_string()
            } else {
                o.status.as_str().to_string()
            },
            exit_code: o.exit_code,
            signal: o.signal,
            cpu_time_ms: o.usage.cpu_time_ms,
            wall_time_ms: o.usage.wall_time_ms,
            memory_peak_bytes: o.usage.memory_peak_bytes,
            pids_peak: o.usage.pids_peak,
            pids_limit_hit: o.usage.pids_limit_hit,
            oom_killed: o.usage.oom_killed,
            disk_used_bytes: o.usage.disk_used_bytes,
            output_bytes: o.usage.output_bytes,
            stdout_truncated: o.stdout.truncated,
            stderr_truncated: o.stderr.truncated,
            stdout_base64: o.stdout.base64_if_binary(),
            stderr_base64: o.stderr.base64_if_binary(),
            blocked_syscall: o.blocked_syscall.clone(),
            error: o.error.clone(),
            reason: if cancelled {
                Some("the sandbox was deleted (DELETE /sandboxes/{id}) while the run was in progress: the program was killed".to_string())
            } else {
                o.reason()
            },
            limits: o.limits.clone(),
            limits_clamped,
            image,
            runtime: o.runtime.as_str().to_string(),
        }
    }
}

/// The status of a run whose kept sandbox was deleted while it ran.
pub use crate::metrics::CANCELLED;

/// Where a run happened: the kept sandbox to continue in, and its image.
#[derive(Debug, Clone, Default)]
pub struct Ran {
    pub sandbox: Option<String>,
    pub image: Option<ImageDoc>,
    /// The request named a disk limit other than the one the kept sandbox was built with, which
    /// stays (reported as clamped).
    pub disk_fixed: bool,
    /// The sandbox was deleted while the run was in progress: the program was killed.
    pub cancelled: bool,
}

pub struct Prepared {
    pub spec: RunSpec,
    pub held: Arc<Held>,
    /// The upload's files, to be copied into a new sandbox.
    pub upload_dir: Option<Scratch>,
    pub clamped: Vec<String>,
    /// The disk limit the request named (after the caps), if it named one: a kept sandbox keeps
    /// the one it was built with.
    pub asked_disk: Option<Size>,
    /// Kept sandboxes the reservation pushed out: dropped after the run answers.
    pub evicted: Evicted,
}

pub struct RunInput {
    pub cmd: Cmd,
    pub sandbox: Option<SandboxRef>,
    pub stdin: Stdin,
    pub limits: Option<LimitsRequest>,
    pub env: BTreeMap<String, String>,
    /// A container image of this server for a new sandbox's root (never pulled).
    pub image: Option<String>,
    /// A stricter seccomp profile on top of the default one, by name (see [`seccomp_profile`]).
    pub seccomp: Option<String>,
    /// A language of the registry: its extra read-only paths, environment, image (for a new
    /// sandbox) and limits (when none are given) apply.
    pub language: Option<String>,
    /// The runtime asked for a new sandbox (resolved by the server's policy).
    pub runtime: Option<corral_sandbox::Runtime>,
    /// The runtime of the run's language, when the request names none (a default, which the
    /// server's `force_gvisor` overrides).
    pub preferred_runtime: Option<corral_sandbox::Runtime>,
}

/// Names of the limits the request gave above the caps.
pub fn clamped_keys(
    req: &LimitsRequest,
    asked: &corral_sandbox::Limits,
    got: &corral_sandbox::Limits,
) -> Vec<String> {
    let mut out = Vec::new();
    macro_rules! clamped {
        ($($key:ident),*) => {$(
            if req.$key.is_some() && asked.$key != got.$key {
                out.push(stringify!($key).to_string());
            }
        )*};
    }
    clamped!(cpu_time, wall_time, memory, pids, output, disk, open_files, file_size);
    out
}

/// A request's seccomp profile (`no_spawn`, `no_sockets`, `allow:NAME,…`, joined by `+`; none:
/// nothing beyond the default profile). Every entry point reads it here, so a bad name gets the
/// same 422 everywhere.
pub fn seccomp_profile(name: Option<&str>) -> Result<Restrictions, ApiError> {
    match name {
        None => Ok(Restrictions::default()),
        Some(n) => n
            .parse()
            .map_err(|e: corral_sandbox::RestrictionsError| ApiError::unprocessable(e.to_string())),
    }
}

/// Checks the request and reserves its sandbox (nothing runs yet).
pub async fn prepare(
    st: &SharedState,
    caller: &Caller,
    input: RunInput,
) -> Result<Prepared, ApiError> {
    // A string runs under the sandbox's own shell: nothing is interpolated on the host.
    let RunInput {
        cmd,
        sandbox,
        stdin,
        mut limits,
        mut env,
        mut image,
        seccomp,
        language,
        runtime,
        mut preferred_runtime,
    } = input;
    let sandbox = sandbox.unwrap_or_default();
    // The language's paths, environment and limits, before anything is reserved.
    let mut mounts = Vec::new();
    // The language's environment is added once the run's limits are known (it may name them).
    let mut language_env = None;
    if let Some(id) = &language {
        let unknown =
            |m: String| ApiError::new(crate::error::ErrorKind::Invalid, "unknown_language", m);
        let lang = st.languages.get(id).map_err(|e| unknown(e.to_string()))?;
        mounts = lang.mounts().map_err(unknown)?;
        language_env = Some(lang.clone());
        limits = limits.or_else(|| Some(lang.limits.clone()));
        // A new sandbox runs in the language's image unless the request names one.
        // A new sandbox runs in the language's image unless the request names one, and on the
        // language's runtime unless the request or the server decides.
        if sandbox.id.is_none() {
            image = image.or_else(|| lang.image.clone());
            preferred_runtime = preferred_runtime.or(lang.runtime);
        }
    }
    let seccomp = seccomp_profile(seccomp.as_deref())?;
    // Under no_spawn a simple command runs without the shell, which could not exec it.
    let mut spec = RunSpec::new(cmd.argv_under(&seccomp));
    spec.seccomp = seccomp;
    spec.stdin = stdin;
    spec.mounts = mounts;
    let req = limits.unwrap_or_default();
    let asked = req
        .resolve(&st.defaults)
        .map_err(|e| ApiError::unprocessable(e.to_string()))?;
    spec.limits = asked.clamp_to(&st.caps);
    if let Some(lang) = language_env {
        for (k, v) in lang.sized(&spec.limits).env_pairs() {
            env.entry(k).or_insert(v);
        }
    }
    spec.env = env.into_iter().collect();
    let clamped = clamped_keys(&req, &asked, &spec.limits);
    let asked_disk = req.disk.map(|_| spec.limits.disk);
    // The rules every run request meets (submissions and Judge0 check the same).
    spec.validate()
        .map_err(|e| ApiError::unprocessable(e.to_string()))?;

    if runtime.is_some() && sandbox.id.is_some() {
        return Err(ApiError::unprocessable(
            "runtime chooses a new sandbox's runtime: a kept sandbox (sandbox.id) keeps its own",
        ));
    }
    // The operator's default and the public-instance switch (every run gVisor's).
    spec.runtime = st
        .config
        .runtime
        .resolve_preferring(runtime, preferred_runtime)
        .map_err(|e| ApiError::unprocessable(e.to_string()))?;
    if let Some(image) = image {
        if sandbox.id.is_some() {
            return Err(ApiError::unprocessable(
                "image chooses a new sandbox's root: a kept sandbox (sandbox.id) keeps its own",
            ));
        }
        spec.root = crate::service::images::root(st, image).await?;
    }
    let keep = sandbox.keep.unwrap_or(true);
    let (held, upload_dir, evicted) = match (sandbox.homedir, sandbox.id) {
        (Some(_), Some(_)) => {
            return Err(ApiError::unprocessable(
                "give sandbox.homedir (a new sandbox with an upload) or sandbox.id (a kept sandbox), not both",
            ))
        }
        (None, Some(id)) => {
            // The adapters send a follow-up on to the node that keeps its sandbox before they
            // get here; what still names another node's sandbox is told where it is.
            if let Owner::There { node, .. } = nodes::owner(st, &id, false).await? {
                return Err(ApiError::new(
                    ErrorKind::Misdirected,
                    "sandbox_elsewhere",
                    format!("sandbox {id} is kept by another server (node {node})"),
                ));
            }
            let held = st.sandboxes.acquire(&id, &caller.id)?;
            // A language's toolchain is mounted when a sandbox is built: naming one the kept
            // sandbox was not built with would run without it (as `image` and `runtime`).
            if language.is_some() && held.language != language {
                st.sandboxes.abort(&held);
                let built = match &held.language {
                    Some(l) => format!("with language {l:?}"),
                    None => "without a language".to_string(),
                };
                return Err(ApiError::unprocessable(format!(
                    "language {:?} needs a new sandbox (its toolchain is mounted when a sandbox is built): the kept sandbox (sandbox.id) was built {built}; leave out sandbox.id to start one",
                    language.as_deref().unwrap_or_default()
                )));
            }
            if !keep {
                held.drop_after_run();
            }
            (held, None, Evicted(Vec::new()))
        }
        (homedir, None) => {
            let dir = match homedir {
                Some(h) => {
                    let upload = crate::service::uploads::owned(st, caller, &h).await?;
                    upload_fits(&upload, spec.limits.disk, st.caps.disk)?;
                    let dir = Scratch::new(st, "home-").map_err(ApiError::internal)?;
                    dir.materialize(st, &upload, dir.path()).await?;
                    Some(dir)
                }
                None => None,
            };
            let (held, evicted) = if keep {
                st.sandboxes.reserve(&caller.id, language.clone())?
            } else {
                let held = st.sandboxes.one_off(&caller.id, language.clone())?;
                (held, Evicted(Vec::new()))
            };
            (held, dir, evicted)
        }
    };
    st.metrics.held_sandboxes.set(st.sandboxes.len() as i64);
    Ok(Prepared {
        spec,
        held,
        upload_dir,
        clamped,
        asked_disk,
        evicted,
    })
}

/// Bytes a file takes on the sandbox's tmpfs: whole pages.
fn on_tmpfs(bytes: u64) -> u64 {
    bytes.div_ceil(4096).saturating_mul(4096)
}

/// Refuses an upload whose files cannot fit the disk limit of the run's new sandbox (its working
/// directory is a tmpfs of that size): said before anything is built, by the limit asked and the
/// upload's relative names, never a host path.
fn upload_fits(upload: &corral_store::Upload, disk: Size, cap: Size) -> Result<(), ApiError> {
    let total: u64 = upload.files.iter().map(|f| on_tmpfs(f.size)).sum();
    if total <= disk.bytes() {
        return Ok(());
    }
    let largest = upload.files.iter().max_by_key(|f| f.size);
    Err(ApiError::unprocessable(no_room_message(
        total,
        largest.map(|f| (f.path.as_str(), f.size)),
        disk,
        cap,
    )))
}

/// What a caller is told when an upload's files do not fit the disk limit.
fn no_room_message(total: u64, largest: Option<(&str, u64)>, disk: Size, cap: Size) -> String {
    let largest = match largest {
        Some((name, size)) => format!(" ({name:?} alone {size} bytes)"),
        None => String::new(),
    };
    format!(
        "the upload's files take {total} bytes{largest}, more than the run's disk limit ({disk}, limits.disk): \
         ask a larger limits.disk (this server allows up to {cap}) or upload less"
    )
}

/// Runs a prepared request on a blocking thread (admission first): takes or builds the sandbox,
/// copies the upload in, calls `drive`, and keeps the sandbox for follow-up runs. Returns the
/// outcome, and the id of the kept sandbox with the image it runs in. The run `drive` starts is
/// killed when it is cancelled (its sandbox deleted, its caller gone).
pub async fn execute<F>(st: &SharedState, p: Prepared, drive: F) -> Result<(Outcome, Ran), ApiError>
where
    F: FnOnce(&mut Sandbox, &RunSpec) -> Outcome + Send + 'static,
{
    let Prepared {
        mut spec,
        held,
        upload_dir,
        clamped: _,
        asked_disk,
        evicted: pushed_out,
    } = p;
    let st2 = st.clone();
    let held2 = held.clone();
    // Undoes the reservation when the closure is dropped without running (the client went away
    // while the run was queued).
    let guard = Unreserve(Some((st.clone(), held.clone(), pushed_out)));
    // Kills the run when this future is dropped before its answer (the caller went away).
    let abandon = Abandon(Some((held.clone(), !held.has_sandbox())));
    let result = st
        .runner
        .run_then(&held.owner, move || {
            let pushed_out = guard.disarm();
            let started = Instant::now();
            let lease = match held2.take_lease() {
                Some(l) => Ok(l),
                None => st2.pool.lease(&SandboxConfig::for_spec(&spec)),
            };
            let cap = st2.caps.disk;
            let mut disk_fixed = false;
            let (outcome, lease) = match lease {
                // The runtime asked for, as `corral run` reports a failed gVisor start.
                Err(e) => (
                    Outcome::sandbox_error(spec.limits.clone(), e.to_string())
                        .in_runtime(spec.runtime),
                    None,
                ),
                Ok(mut l) => {
                    let sb = l.sandbox();
                    // The working directory's size and the root were fixed when the sandbox was
                    // built (a kept sandbox keeps its image).
                    spec.limits.disk = Size(sb.config().disk_bytes);
                    disk_fixed = asked_disk.is_some_and(|d| d != spec.limits.disk);
                    spec.root = sb.config().root.clone();
                    spec.runtime = sb.config().runtime;
                    let copied = match &upload_dir {
                        Some(d) => sb
                            .copy_in(d.path())
                            .map_err(|e| copy_error(e, d.path(), &spec, cap)),
                        None => Ok(()),
                    };
                    match copied {
                        Ok(()) => {
                            // Cancelled by deleting its sandbox (a kept one's id is the caller's
                            // before the run) or by the caller going away.
                            sb.cancel_runs_on(Some(held2.cancel.clone()));
                            let outcome = drive(sb, &spec);
                            sb.cancel_runs_on(None);
                            (outcome, Some(l))
                        }
                        Err(CopyFailed::Server) => (
                            Outcome::sandbox_error(
                                spec.limits.clone(),
                                "copying the upload's files into the sandbox failed (the server's log says why)".into(),
                            )
                            .in_runtime(spec.runtime),
                            Some(l),
                        ),
                        // Not kept: a sandbox the files did not fit is given back (and reset),
                        // never handed to the caller half full.
                        Err(CopyFailed::Caller(e)) => {
                            drop(upload_dir);
                            let (_, mut evicted) = st2.sandboxes.finish(&held2, None);
                            evicted.0.push(l);
                            st2.metrics.held_sandboxes.set(st2.sandboxes.len() as i64);
                            return (Err(e), (pushed_out, evicted));
                        }
                    }
                }
            };
            drop(upload_dir);
            // Said only when the kill ended the program (one that ended first reports its own end).
            let cancelled = held2.cancel.requested()
                && outcome.status == corral_sandbox::Status::Signaled;
            st2.metrics.observe(&outcome, cancelled, started.elapsed());
            let image = UsedImage::of(&spec.root).map(ImageDoc::from);
            let (kept, evicted) = st2.sandboxes.finish(&held2, lease);
            st2.metrics.held_sandboxes.set(st2.sandboxes.len() as i64);
            // Given back (or torn down, when the pool is full) after the caller has its answer.
            let ran = Ran {
                sandbox: kept.then(|| held2.id.clone()),
                image,
                disk_fixed,
                cancelled,
            };
            (Ok((outcome, ran)), (pushed_out, evicted))
        })
        .await
        .and_then(|r| r);
    abandon.disarm();
    if result.is_err() {
        st.sandboxes.abort(&held);
    }
    result
}

/// A run whose caller went away before its answer — the request's future dropped: an HTTP
/// client that disconnected or timed out — is killed rather than left to its wall limit on a
/// run slot, and a sandbox built for it is not kept (its id was only in the answer nobody read;
/// it would count against its token's kept sandboxes until the TTL). `bool`: built for this run.
struct Abandon(Option<(Arc<Held>, bool)>);

impl Abandon {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for Abandon {
    fn drop(&mut self) {
        if let Some((held, built_for_it)) = self.0.take() {
            if built_for_it {
                held.drop_after_run();
            }
            held.cancel.request();
        }
    }
}

enum CopyFailed {
    /// The request's fault: answered as this error.
    Caller(ApiError),
    /// The server's: logged, and the run's answer a sandbox_error without the detail.
    Server,
}

/// Runs `spec` to its end, or its limit, or its cancel (the `drive` of a plain `/run`).
pub fn run_to_end(sb: &mut Sandbox, spec: &RunSpec) -> Outcome {
    sb.run(spec, &mut corral_sandbox::NoSink)
}

/// A failed copy of the upload's files into the new sandbox: not fitting the disk limit is the
/// request's fault (422, by the file's name in the upload); anything else is the server's (its
/// detail, with host paths, goes to the log only).
fn copy_error(
    e: corral_sandbox::SandboxError,
    upload_dir: &std::path::Path,
    spec: &RunSpec,
    cap: Size,
) -> CopyFailed {
    match e {
        corral_sandbox::SandboxError::NoSpace { path } => {
            // Never a host path: the name inside the upload (or the file's name alone).
            let name = match path.strip_prefix(upload_dir) {
                Ok(rel) => rel.to_string_lossy().into_owned(),
                Err(_) => path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            };
            CopyFailed::Caller(ApiError::unprocessable(format!(
                "the upload's files do not fit the run's disk limit ({}, limits.disk): {name:?} did not fit; \
                 ask a larger limits.disk (this server allows up to {cap}) or upload less",
                spec.limits.disk
            )))
        }
        other => {
            tracing::warn!(error = %other, "copying an upload into a sandbox failed");
            CopyFailed::Server
        }
    }
}

/// Also carries the kept sandboxes the reservation pushed out: dropped after the run, or on a
/// blocking thread when the run never starts.
struct Unreserve(Option<(SharedState, Arc<Held>, Evicted)>);

impl Unreserve {
    fn disarm(mut self) -> Evicted {
        match self.0.take() {
            Some((_, _, evicted)) => evicted,
            None => Evicted(Vec::new()),
        }
    }
}

impl Drop for Unreserve {
    fn drop(&mut self) {
        if let Some((st, held, evicted)) = self.0.take() {
            st.sandboxes.abort(&held);
            evicted.drop_blocking();
        }
    }
}

/// Destroys a kept sandbox of the caller now (404 when not theirs or missing); a run in progress
/// in it is cancelled, and the sandbox destroyed when that run ends.
pub fn destroy(st: &SharedState, caller: &Caller, id: &str) -> Result<(), ApiError> {
    st.sandboxes.remove(id, &caller.id)?.drop_blocking();
    st.metrics.held_sandboxes.set(st.sandboxes.len() as i64);
    Ok(())
}

/// A language as a run naming it gets it on this server by default (its limits over the
/// server's defaults, within the caps): `{memory_mib}` filled in its commands, as listed to
/// clients (`GET /languages`, Judge0's `/languages/{id}`). `None` when its limits do not resolve.
pub fn sized_by_default(
    st: &SharedState,
    lang: &corral_checks::Language,
) -> Option<corral_checks::Language> {
    let limits = lang.limits.resolve(&st.defaults).ok()?;
    Some(lang.sized(&limits.clamp_to(&st.caps)))
}
