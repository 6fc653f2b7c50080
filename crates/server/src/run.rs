//! Turning a run request into a sandboxed run: the command, limits (defaults, then caps), the
//! sandbox (a fresh one with an upload copied in, or a kept one), admission, and giving the
//! sandbox back afterwards. Shared by `/run` and the WebSocket.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use corral_sandbox::{LimitsRequest, Outcome, RunSpec, Sandbox, SandboxConfig, Size, Stdin};

use crate::auth::Caller;
use crate::error::ApiError;
use crate::sandboxes::Held;
use crate::state::SharedState;
use crate::types::{Cmd, SandboxRef};

pub struct Prepared {
    pub spec: RunSpec,
    pub held: Arc<Held>,
    /// The upload's files, to be copied into a new sandbox.
    pub upload_dir: Option<tempfile::TempDir>,
    pub clamped: Vec<String>,
}

pub struct RunInput {
    pub cmd: Cmd,
    pub sandbox: Option<SandboxRef>,
    pub stdin: Stdin,
    pub limits: Option<LimitsRequest>,
    pub env: BTreeMap<String, String>,
}

fn argv(cmd: Cmd) -> Result<Vec<String>, ApiError> {
    match cmd {
        Cmd::Line(s) if s.trim().is_empty() => Err(ApiError::unprocessable("cmd is empty")),
        // Run by the sandbox's own shell; nothing is interpolated on the host.
        Cmd::Line(s) => Ok(vec!["/bin/sh".into(), "-c".into(), s]),
        Cmd::Argv(v) if v.first().is_none_or(|a| a.is_empty()) => {
            Err(ApiError::unprocessable("cmd is empty"))
        }
        Cmd::Argv(v) => Ok(v),
    }
}

/// Names of the limits the request gave above the caps.
pub(crate) fn clamped_keys(
    req: &LimitsRequest,
    asked: &corral_sandbox::Limits,
    got: &corral_sandbox::Limits,
) -> Vec<String> {
    let mut out = Vec::new();
    let mut check = |given: bool, name: &str, differs: bool| {
        if given && differs {
            out.push(name.to_string());
        }
    };
    check(
        req.cpu_time.is_some(),
        "cpu_time",
        asked.cpu_time != got.cpu_time,
    );
    check(
        req.wall_time.is_some(),
        "wall_time",
        asked.wall_time != got.wall_time,
    );
    check(req.memory.is_some(), "memory", asked.memory != got.memory);
    check(req.pids.is_some(), "pids", asked.pids != got.pids);
    check(req.output.is_some(), "output", asked.output != got.output);
    check(req.disk.is_some(), "disk", asked.disk != got.disk);
    check(
        req.open_files.is_some(),
        "open_files",
        asked.open_files != got.open_files,
    );
    check(
        req.file_size.is_some(),
        "file_size",
        asked.file_size != got.file_size,
    );
    out
}

/// Checks the request and reserves its sandbox (nothing runs yet).
pub async fn prepare(
    st: &SharedState,
    caller: &Caller,
    input: RunInput,
) -> Result<Prepared, ApiError> {
    let mut spec = RunSpec::new(argv(input.cmd)?);
    spec.env = input.env.into_iter().collect();
    spec.stdin = input.stdin;
    let req = input.limits.unwrap_or_default();
    let asked = req
        .resolve(&st.defaults)
        .map_err(|e| ApiError::unprocessable(e.to_string()))?;
    spec.limits = asked.clamp_to(&st.caps);
    let clamped = clamped_keys(&req, &asked, &spec.limits);
    spec.validate()
        .map_err(|e| ApiError::unprocessable(e.to_string()))?;

    let sandbox = input.sandbox.unwrap_or_default();
    let (held, upload_dir) = match (sandbox.homedir, sandbox.id) {
        (Some(_), Some(_)) => {
            return Err(ApiError::unprocessable(
                "give sandbox.homedir (a new sandbox with an upload) or sandbox.id (a kept sandbox), not both",
            ))
        }
        (None, Some(id)) => (st.sandboxes.acquire(&id, &caller.id)?, None),
        (homedir, None) => {
            let dir = match homedir {
                Some(h) => {
                    let upload = st
                        .store
                        .get_upload(&h)
                        .await?
                        .filter(|u| u.owner == caller.id)
                        .ok_or_else(|| ApiError::not_found(format!("no upload {h:?}")))?;
                    let dir = tempfile::Builder::new()
                        .prefix("home-")
                        .tempdir_in(&st.tmp_dir)
                        .map_err(ApiError::internal)?;
                    st.store.materialize(&upload, dir.path()).await?;
                    Some(dir)
                }
                None => None,
            };
            let (held, evicted) = st.sandboxes.reserve(&caller.id)?;
            evicted.drop_blocking();
            (held, dir)
        }
    };
    st.metrics.held_sandboxes.set(st.sandboxes.len() as i64);
    Ok(Prepared {
        spec,
        held,
        upload_dir,
        clamped,
    })
}

/// Runs a prepared request on a blocking thread (admission first): takes or builds the sandbox,
/// copies the upload in, calls `drive`, and keeps the sandbox for follow-up runs. Returns the
/// outcome and the id of the kept sandbox.
pub async fn execute<F>(
    st: &SharedState,
    p: Prepared,
    drive: F,
) -> Result<(Outcome, Option<String>), ApiError>
where
    F: FnOnce(&mut Sandbox, &RunSpec) -> Outcome + Send + 'static,
{
    let Prepared {
        mut spec,
        held,
        upload_dir,
        clamped: _,
    } = p;
    let st2 = st.clone();
    let held2 = held.clone();
    // Undoes the reservation when the closure is dropped without running (the client went away
    // while the run was queued).
    let guard = Unreserve(Some((st.clone(), held.clone())));
    let result = st
        .runner
        .run(move || {
            guard.disarm();
            let started = Instant::now();
            let lease = match held2.take_lease() {
                Some(l) => Ok(l),
                None => st2.pool.lease(&SandboxConfig::for_spec(&spec)),
            };
            let (outcome, lease) = match lease {
                Err(e) => (
                    Outcome::sandbox_error(spec.limits.clone(), e.to_string()),
                    None,
                ),
                Ok(mut l) => {
                    let sb = l.sandbox();
                    // The working directory's size was fixed when the sandbox was built.
                    spec.limits.disk = Size(sb.config().disk_bytes);
                    let copied = match &upload_dir {
                        Some(d) => sb.copy_in(d.path()),
                        None => Ok(()),
                    };
                    let o = match copied {
                        Ok(()) => drive(sb, &spec),
                        Err(e) => Outcome::sandbox_error(spec.limits.clone(), e.to_string()),
                    };
                    (o, Some(l))
                }
            };
            drop(upload_dir);
            st2.metrics.observe(&outcome, started.elapsed());
            let (kept, evicted) = st2.sandboxes.finish(&held2, lease);
            drop(evicted.0);
            st2.metrics.held_sandboxes.set(st2.sandboxes.len() as i64);
            (outcome, kept)
        })
        .await;
    match result {
        Ok((o, kept)) => Ok((o, kept.then(|| held.id.clone()))),
        Err(e) => {
            st.sandboxes.abort(&held);
            Err(e)
        }
    }
}

struct Unreserve(Option<(SharedState, Arc<Held>)>);

impl Unreserve {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for Unreserve {
    fn drop(&mut self) {
        if let Some((st, held)) = self.0.take() {
            st.sandboxes.abort(&held);
        }
    }
}
