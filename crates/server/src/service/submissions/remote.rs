//! The queue as remote workers see it: claiming a job with everything needed to judge it (its
//! spec and files), renewing its lease, recording its verdict. Worker tokens only.

use std::path::Path;
use std::time::Duration;

use base64::Engine;
use corral_judge::{
    ClaimRequest, ClaimedJob, JobFile, JobSpec, ResultRequest, ResultResponse, Verdict,
};
use corral_store::Completion;

use super::give_back::{give_back, Unprepared};
use super::verdicts;
use crate::config::UploadLimits;
use crate::error::{ApiError, ErrorKind};
use crate::service::caller::Caller;
use crate::service::folder_suites::{self, ReadError};
use crate::service::scratch::Scratch;
use crate::service::suites::suites_dir;
use crate::state::SharedState;

pub fn lease_lost() -> ApiError {
    ApiError::new(
        ErrorKind::Conflict,
        "lease_lost",
        "this lease is not current any more (it expired, or the job is finished): stop and claim another",
    )
}

fn encode_files(files: Vec<(String, u32, Vec<u8>)>) -> Vec<JobFile> {
    files
        .into_iter()
        .map(|(path, mode, data)| JobFile {
            path,
            mode,
            content_base64: base64::engine::general_purpose::STANDARD.encode(data),
        })
        .collect()
}

async fn upload_files(
    st: &SharedState,
    id: &str,
    whose: &str,
) -> Result<Vec<(String, u32, Vec<u8>)>, Unprepared> {
    let upload = st
        .store
        .get_upload(id)
        .await
        .map_err(|e| Unprepared::host("reading the store", e))?
        .ok_or_else(|| Unprepared::Job(format!("the files of {whose} ({id}) are gone")))?;
    // A worker that went away mid-copy leaves nothing behind (see `Scratch`).
    let dir = Scratch::new(st, "claim-").map_err(|e| Unprepared::host("a temporary folder", e))?;
    let copying = format!("copying the files of {whose}");
    dir.materialize(st, &upload, dir.path())
        .await
        .map_err(|e| Unprepared::copying(&format!("the files of {whose}"), e))?;
    let mut out = Vec::new();
    for f in &upload.files {
        let data =
            std::fs::read(dir.path().join(&f.path)).map_err(|e| Unprepared::host(&copying, e))?;
        out.push((f.path.clone(), f.mode, data));
    }
    Ok(out)
}

/// A suite folder's files (links not followed), for a job accepted before folder suites were
/// pinned.
fn folder_files(
    root: &Path,
    limits: &UploadLimits,
) -> Result<Vec<(String, u32, Vec<u8>)>, Unprepared> {
    match folder_suites::read(root, limits) {
        Ok(files) => Ok(files
            .into_iter()
            .map(|f| (f.path, f.mode, f.content))
            .collect()),
        Err(ReadError::Io(path, e)) => Err(Unprepared::host(
            &format!("reading the suites folder ({})", path.display()),
            e,
        )),
        Err(ReadError::Unfit(why)) => Err(Unprepared::Job(format!("the suite's folder: {why}"))),
    }
}

/// Waits up to the request's `wait` (30 s at most) for a queued job and leases it to this worker;
/// `None` when none came; 401 as soon as the worker's token is revoked.
pub async fn claim(
    st: &SharedState,
    caller: &Caller,
    req: ClaimRequest,
) -> Result<Option<ClaimedJob>, ApiError> {
    caller.require_worker()?;
    let name: String = req
        .worker
        .unwrap_or_default()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
        .take(64)
        .collect();
    // Named after its token: revoking the token gives back what its workers hold.
    let worker = corral_store::remote_worker(&caller.id, &name);
    st.queue.workers_seen.saw(&worker);
    let wait = Duration::from_secs_f64(req.wait.unwrap_or(25.0).clamp(0.0, 30.0));
    let deadline = tokio::time::Instant::now() + wait;
    let lease = st.config.submissions.lease();
    let mut stop = st.shutdown.subscribe();
    let waiting = async {
        loop {
            let work = st.queue.work.notified();
            if let Some(c) = st.store.claim_job(&worker, lease).await? {
                return Ok(Some(c));
            }
            let now = tokio::time::Instant::now();
            if now >= deadline || *stop.borrow() {
                return Ok(None);
            }
            tokio::select! {
                _ = work => {}
                _ = st.store.wait_for_work((deadline - now).min(Duration::from_millis(500))) => {}
                _ = stop.changed() => {}
            }
        }
    };
    // A claim made as the revocation lands is given back by its lease's expiry, unless this node
    // knows of the revocation by the time the claim returns (the revocation's own give-back ran
    // before the claim).
    let Some(claim) = caller.while_live(st, waiting).await? else {
        return Ok(None);
    };
    let id = claim.job.id.clone();
    if st.revocations.is_revoked(&caller.id) {
        if let Err(e) = st
            .store
            .release_job(&id, &claim.lease, "its worker's token was revoked")
            .await
        {
            tracing::warn!(submission = %id, error = %e, "giving a job back failed; its lease will expire");
        }
        st.queue.work.notify_one();
        return Err(crate::service::caller::revoked());
    }
    // From here on the job is leased: what fails gives it back at once (the host's errors: the
    // worker gets a 503 and claims again) or fails it (the job's own), never leaves it to the
    // lease's expiry, which cost a lease and an attempt and then blamed the worker.
    let prepared = async {
        let spec: JobSpec = serde_json::from_str(&claim.job.spec)
            .map_err(|e| Unprepared::Job(format!("the stored job is unreadable: {e}")))?;
        let files = match &claim.job.upload_id {
            Some(u) => encode_files(upload_files(st, u, "the submission").await?),
            None => Vec::new(),
        };
        let suite_files = match &spec.suite {
            None => None,
            Some(s) => Some(encode_files(match &s.upload {
                Some(u) => upload_files(st, u, &format!("suite {:?}", s.id)).await?,
                // Accepted before folder suites were pinned (their upload): the folder as it is.
                None => {
                    let dir = suites_dir(st).join(&s.id);
                    let limits = st.config.upload.clone();
                    tokio::task::spawn_blocking(move || folder_files(&dir, &limits))
                        .await
                        .map_err(|e| Unprepared::Job(format!("reading the suite failed: {e}")))??
                }
            })),
        };
        Ok::<_, Unprepared>((spec, files, suite_files))
    };
    let (spec, files, suite_files) = match prepared.await {
        Ok(p) => p,
        Err(Unprepared::Job(why)) => {
            verdicts::record(st, &id, &claim.lease, &Verdict::internal(why)).await;
            return Ok(None);
        }
        Err(Unprepared::Host(why)) => {
            give_back(st, &id, &claim.lease, &why).await;
            return Err(ApiError::overloaded(
                format!("the server could not prepare a job: {why}"),
                5,
            ));
        }
    };
    tracing::info!(submission = %id, worker = %worker, attempt = claim.job.attempts, "claimed by a remote worker");
    Ok(Some(ClaimedJob {
        id,
        lease: claim.lease,
        lease_ms: lease.as_millis() as u64,
        heartbeat_ms: st.config.submissions.heartbeat_every().as_millis() as u64,
        attempt: claim.job.attempts,
        spec,
        files,
        suite_files,
    }))
}

/// Renews a job's lease (409 `lease_lost` when it is not current any more).
pub async fn heartbeat(
    st: &SharedState,
    caller: &Caller,
    id: &str,
    lease: &str,
) -> Result<(), ApiError> {
    caller.require_worker()?;
    if st
        .store
        .heartbeat_job(id, lease, st.config.submissions.lease())
        .await?
    {
        Ok(())
    } else {
        Err(lease_lost())
    }
}

/// Records a worker's verdict for its lease (once: the same result again is acknowledged).
pub async fn record_result(
    st: &SharedState,
    caller: &Caller,
    id: &str,
    req: ResultRequest,
) -> Result<ResultResponse, ApiError> {
    caller.require_worker()?;
    let v = &req.verdict;
    // The rule the judge applies before any worker posts (so only an older worker meets it);
    // a score above the maximum (extra credit) is a grader's to give, here as in-process.
    if let Some(why) = v.unusable() {
        return Err(ApiError::unprocessable(format!("verdict: {why}")));
    }
    let state = if v.verdict == corral_judge::VerdictKind::InternalError {
        corral_store::JobState::Failed
    } else {
        corral_store::JobState::Done
    };
    if let Some(i) = &v.image {
        if !corral_judge::job::is_digest(&i.digest) || i.name.is_empty() || i.name.len() > 400 {
            return Err(ApiError::unprocessable(
                "image: a name (at most 400 bytes) and a sha256: digest",
            ));
        }
    }
    let text = serde_json::to_string(v).expect("a verdict serialises");
    let image = v.image.as_ref().map(super::verdicts::job_image);
    match st
        .store
        .complete_job(id, &req.lease, state, &text, image.as_ref())
        .await?
    {
        Completion::Recorded => {
            st.queue
                .metrics
                .judged
                .with_label_values(&[v.verdict.as_str()])
                .inc();
            st.metrics.judged(v.verdict);
            tracing::info!(submission = %id, verdict = v.verdict.as_str(), worker = %caller.id, "judged by a remote worker");
            st.queue.finished.finished(id);
            Ok(ResultResponse {
                result: "recorded".into(),
            })
        }
        Completion::AlreadyRecorded => Ok(ResultResponse {
            result: "already_recorded".into(),
        }),
        Completion::LeaseLost => Err(lease_lost()),
    }
}
