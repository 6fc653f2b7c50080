//! `corral worker --server URL --token T`: a remote worker. It long-polls the server for a job
//! (`POST /worker/claim`), judges it in its own warm sandboxes, renews the lease while it runs,
//! and posts the verdict back signed with its token. It needs no database, no blob store and no
//! other secret than its `worker` token; images a job names that its data folder's image store
//! lacks it fetches from the server by digest (`worker_images`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use base64::Engine;
use clap::Args;
use corral_judge::{execute, ClaimedJob, Heartbeat, JobFile, JobFiles, ResultRequest, Verdict};
use corral_sandbox::Pool;
use reqwest::StatusCode;
use serde_json::json;

use crate::errors::OrUsage;

#[derive(Args, Debug)]
pub struct WorkerArgs {
    /// The corral server's base URL (`http://10.0.0.5:8080`) [env: CORRAL_SERVER].
    #[arg(long, value_name = "URL")]
    server: Option<String>,
    /// A token with the `worker` role (`corral token create --role worker`). Prefer the
    /// CORRAL_WORKER_TOKEN variable or --token-file: command lines are visible to other users.
    #[arg(long, value_name = "TOKEN")]
    token: Option<String>,
    /// A file holding the token.
    #[arg(long, value_name = "FILE", conflicts_with = "token")]
    token_file: Option<PathBuf>,
    /// This worker's name in the submissions' audit trail [default: the host name].
    #[arg(long)]
    name: Option<String>,
    /// Jobs judged at once.
    #[arg(long, default_value_t = 1, value_name = "N")]
    jobs: usize,
    /// Checks (and programs of language jobs) graded at once across those jobs [default: the
    /// number of CPUs]: more CPU-bound programs than CPUs stretch each one's wall clock, so a
    /// busy worker would fail a correct program's timeout.
    #[arg(long, value_name = "N")]
    grading_slots: Option<usize>,
    /// An operator's language registry added to the built-in one (also $CORRAL_LANGUAGES).
    #[arg(long, value_name = "FILE")]
    languages: Option<PathBuf>,
    /// Print logs as JSON lines.
    #[arg(long)]
    log_json: bool,
    /// The worker's data folder: its image store (DATA/images), where images it lacks are
    /// fetched from the server by digest.
    #[command(flatten)]
    data: crate::check::DataFolderArgs,
}

pub fn main(args: WorkerArgs) -> i32 {
    crate::logs::init(crate::logs::Kind::Service, args.log_json);
    crate::errors::report("worker", run(args))
}

/// A `--server` (or `CORRAL_SERVER`) that is no http(s) URL: refused at start, where it used
/// to make every claim fail ("builder error") in a loop that never ended.
#[derive(Debug)]
struct BadServerUrl {
    from: &'static str,
    value: String,
    why: String,
}

impl std::fmt::Display for BadServerUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {:?} is not a server URL ({}): give its base URL, e.g. http://10.0.0.5:8080",
            self.from, self.value, self.why
        )
    }
}

impl std::error::Error for BadServerUrl {}

/// The server's base URL, without a trailing `/`, from `--server` or `CORRAL_SERVER` (`from`).
fn server_url(value: &str, from: &'static str) -> Result<String, BadServerUrl> {
    let bad = |why: String| BadServerUrl {
        from,
        value: value.to_string(),
        why,
    };
    let url = reqwest::Url::parse(value).map_err(|e| bad(e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad(format!(
            "the scheme is {:?}, not http or https",
            url.scheme()
        )));
    }
    if url.host().is_none() {
        return Err(bad("no host".into()));
    }
    Ok(value.trim_end_matches('/').to_string())
}

struct Ctx {
    server: String,
    token: String,
    /// The key results are signed with: sha256 of the token, in hex (the server stores the same).
    key: Vec<u8>,
    name: String,
    http: reqwest::Client,
    pool: Arc<Pool>,
    /// Checks graded at once across this worker's jobs.
    slots: Arc<corral_checks::GradingSlots>,
    registry: corral_checks::LanguageRegistry,
    /// This worker's own image store.
    images: corral_images::Store,
    tmp: PathBuf,
    /// Why the server refused the token (revoked or unknown, or not a worker's): every claim
    /// loop stops, and the worker exits saying this.
    refused: std::sync::Mutex<Option<String>>,
    /// The server refused a signed result (401): claiming more would only lose them too.
    results_refused: std::sync::Mutex<Option<String>>,
    /// The server's clock minus ours (ms), from its `Date` header: results are signed in the
    /// server's time, so a worker whose clock is off still has them accepted (the server takes a
    /// signature within 5 minutes of its own clock).
    clock_offset_ms: std::sync::atomic::AtomicI64,
}

impl Ctx {
    /// The server refused the token: every claim loop stops, and the worker exits with `why`
    /// (the first reason given).
    fn refuse(&self, why: String) {
        self.refused
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert(why);
    }

    fn note_server_clock(&self, resp: &reqwest::Response) {
        let date = resp
            .headers()
            .get(reqwest::header::DATE)
            .and_then(|v| v.to_str().ok());
        if let Some(offset) = date.and_then(|d| clock_offset(d, corral_store::now_ms())) {
            self.clock_offset_ms
                .store(offset, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Now on the server's clock, in seconds since the epoch (the signature's unit).
    fn server_now(&self) -> i64 {
        let offset = self
            .clock_offset_ms
            .load(std::sync::atomic::Ordering::Relaxed);
        (corral_store::now_ms() + offset).div_euclid(1000)
    }
}

/// The server's clock minus ours (ms) from an HTTP `Date` (second resolution); small offsets
/// (under 2 s, the header's own rounding) count as none.
fn clock_offset(date: &str, local_now_ms: i64) -> Option<i64> {
    let server = httpdate::parse_http_date(date).ok()?;
    let server_ms = server
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_millis() as i64;
    let offset = server_ms - local_now_ms;
    Some(if offset.abs() < 2_000 { 0 } else { offset })
}

fn run(args: WorkerArgs) -> anyhow::Result<()> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let server = match (&args.server, env("CORRAL_SERVER")) {
        (Some(s), _) => server_url(s, "--server").usage()?,
        (None, Some(s)) => server_url(&s, "CORRAL_SERVER").usage()?,
        (None, None) => {
            return Err(crate::errors::usage(
                "give the server's URL: --server or CORRAL_SERVER",
            ))
        }
    };
    let token = match (
        args.token.clone().or_else(|| env("CORRAL_WORKER_TOKEN")),
        &args.token_file,
    ) {
        (Some(t), _) => t.trim().to_string(),
        (None, Some(f)) => std::fs::read_to_string(f)
            .with_context(|| format!("reading {}", f.display()))
            .usage()?
            .trim()
            .to_string(),
        (None, None) => {
            return Err(crate::errors::usage(
                "give the worker token: --token, CORRAL_WORKER_TOKEN or --token-file",
            ))
        }
    };
    if args.jobs == 0 {
        return Err(crate::errors::usage("--jobs must be at least 1"));
    }
    if args.grading_slots == Some(0) {
        return Err(crate::errors::usage("--grading-slots must be at least 1"));
    }
    let registry = crate::check::registry(args.languages.as_deref()).usage()?;
    let images = args.data.open_image_store()?;
    // Said, not only done: without --data it is ./corral-data, where the worker was started.
    let image_dir = args.data.folder()?.join("images");
    let pool = crate::sandboxes::service_pool(args.jobs)?;
    let name = args.name.clone().unwrap_or_else(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "worker".into())
    });
    // Private: the jobs' files (submissions, suites with hidden tests) are written here.
    let tmp = corral_checks::shared::private_temp::private_tempdir("corral-worker-")
        .context("a temporary folder")?;
    let ctx = Arc::new(Ctx {
        key: corral_store::sha256_hex(token.as_bytes()).into_bytes(),
        server,
        token,
        name,
        http: reqwest::Client::builder()
            .timeout(Duration::from_secs(120))
            .connect_timeout(Duration::from_secs(10))
            .user_agent(concat!("corral-worker/", env!("CARGO_PKG_VERSION")))
            .build()?,
        pool,
        slots: corral_checks::GradingSlots::new(
            args.grading_slots
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get())),
        ),
        registry,
        images,
        tmp: tmp.path().to_path_buf(),
        refused: std::sync::Mutex::new(None),
        results_refused: std::sync::Mutex::new(None),
        clock_offset_ms: std::sync::atomic::AtomicI64::new(0),
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let ctx2 = ctx.clone();
    rt.block_on(async move {
        let (stop_tx, stop) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            corral_server::shutdown_signal().await;
            tracing::info!("stopping: finishing the jobs in hand, claiming no more");
            let _ = stop_tx.send(true);
        });
        eprintln!(
            "corral worker: {} job(s) at once for {} as {:?}; images it fetches are kept in {}",
            args.jobs,
            ctx.server,
            ctx.name,
            image_dir.display()
        );
        let loops: Vec<_> = (0..args.jobs)
            .map(|i| tokio::spawn(claim_loop(ctx.clone(), i, stop.clone())))
            .collect();
        for l in loops {
            let _ = l.await;
        }
    });
    drop(tmp);
    if let Some(why) = ctx2
        .refused
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
    {
        anyhow::bail!(why);
    }
    if let Some(why) = ctx2
        .results_refused
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
    {
        anyhow::bail!(
            "the server refused this worker's results (401: {why}); stopped claiming jobs"
        );
    }
    Ok(())
}

async fn claim_loop(ctx: Arc<Ctx>, i: usize, mut stop: tokio::sync::watch::Receiver<bool>) {
    let mut backoff = Duration::from_millis(500);
    let name = format!("{}/{i}", ctx.name);
    loop {
        if *stop.borrow()
            || ctx.results_refused.lock().map_or(true, |r| r.is_some())
            || ctx.refused.lock().map_or(true, |r| r.is_some())
        {
            return;
        }
        let req = ctx
            .http
            .post(format!("{}/worker/claim", ctx.server))
            .bearer_auth(&ctx.token)
            .json(&json!({"worker": name, "wait": 25}))
            .send();
        let r = tokio::select! {
            r = req => r,
            _ = stop.changed() => return,
        };
        if let Ok(resp) = &r {
            ctx.note_server_clock(resp);
        }
        let wait = match r {
            Ok(resp) if resp.status() == StatusCode::OK => match resp.json::<ClaimedJob>().await {
                Ok(job) => {
                    backoff = Duration::from_millis(500);
                    judge(&ctx, job).await;
                    continue;
                }
                Err(e) => {
                    tracing::warn!(error = %crate::errors::chain_of(&e), "an unreadable job; its lease will expire");
                    backoff
                }
            },
            Ok(resp) if resp.status() == StatusCode::NO_CONTENT => {
                backoff = Duration::from_millis(500);
                continue;
            }
            Ok(resp) if resp.status() == StatusCode::UNAUTHORIZED => {
                tracing::error!(
                    "the server refused the worker token (revoked or unknown); stopping"
                );
                ctx.refuse(
                    "the server refused the worker token (revoked or unknown): create a new one \
                     with `corral token create --role worker`"
                        .into(),
                );
                return;
            }
            // Another role's token (a student's): no claim will ever succeed, so asking again
            // every few seconds for ever only fills the log.
            Ok(resp) if resp.status() == StatusCode::FORBIDDEN => {
                let text = resp.text().await.unwrap_or_default();
                tracing::error!(body = %text, "the server refused the claim (403): not a worker token; stopping");
                ctx.refuse(
                    "the server refused the claim (403): this token is not a worker token (it \
                     is a student's, staff's or admin's); make one on the server with `corral \
                     token create --role worker` and give it as CORRAL_WORKER_TOKEN or \
                     --token-file"
                        .into(),
                );
                return;
            }
            Ok(resp) => {
                let st = resp.status();
                let text = resp.text().await.unwrap_or_default();
                tracing::warn!(status = %st, body = %text, "the server refused the claim");
                backoff
            }
            Err(e) => {
                // reqwest's own message names the URL only; its causes say why (connection refused).
                tracing::warn!(error = %crate::errors::chain_of(&e), "the server is unreachable");
                backoff
            }
        };
        backoff = (backoff * 2).min(Duration::from_secs(30));
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = stop.changed() => return,
        }
    }
}

fn write_files(dir: &Path, files: &[JobFile]) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir)?;
    for f in files {
        let rel = corral_store::validate_path(&f.path, 64)?;
        let p = dir.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let data = base64::engine::general_purpose::STANDARD.decode(&f.content_base64)?;
        std::fs::write(&p, data)?;
        let mode = if f.mode & 0o111 != 0 { 0o755 } else { 0o644 };
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode))?;
    }
    Ok(())
}

async fn judge(ctx: &Arc<Ctx>, job: ClaimedJob) {
    tracing::info!(submission = %job.id, attempt = job.attempt, "judging");
    let hb = {
        let ctx = ctx.clone();
        let (id, lease) = (job.id.clone(), job.lease.clone());
        Heartbeat::start(Duration::from_millis(job.heartbeat_ms.max(50)), move || {
            let ctx = ctx.clone();
            let (id, lease) = (id.clone(), lease.clone());
            async move {
                let r = ctx
                    .http
                    .post(format!("{}/worker/jobs/{id}/heartbeat", ctx.server))
                    .bearer_auth(&ctx.token)
                    .json(&json!({"lease": lease}))
                    .send()
                    .await
                    .ok()?;
                match r.status() {
                    StatusCode::NO_CONTENT => Some(true),
                    // The lease is gone, or the token was revoked: the job will run elsewhere.
                    StatusCode::CONFLICT | StatusCode::UNAUTHORIZED => Some(false),
                    _ => None,
                }
            }
        })
    };
    let work = ctx.tmp.join(&job.id);
    let _ = std::fs::remove_dir_all(&work);
    let files = work.join("files");
    let suite = work.join("suite");
    let prepared = write_files(&files, &job.files).and_then(|()| match &job.suite_files {
        Some(s) => write_files(&suite, s),
        None => Ok(()),
    });
    let has_suite = job.suite_files.is_some();
    let mut spec = job.spec.clone();
    // The images the job names, fetched from the server when this worker lacks them.
    let prepared = match prepared {
        Ok(()) => {
            let needed =
                corral_judge::images_needed(&spec, &ctx.registry, has_suite.then_some(&*suite));
            let remote = crate::worker_images::Remote {
                http: &ctx.http,
                server: &ctx.server,
                token: &ctx.token,
            };
            crate::worker_images::ensure_images(&remote, &ctx.images, &mut spec, needed)
                .await
                .map_err(|e| {
                    format!(
                        "the worker could not get the job's images: {}",
                        crate::errors::chain(&e)
                    )
                })
        }
        Err(e) => Err(format!("the worker could not write the job's files: {e}")),
    };
    let verdict = match prepared {
        Err(e) => Verdict::internal(e),
        Ok(()) => {
            let ctx2 = ctx.clone();
            let (files2, suite2) = (files.clone(), suite.clone());
            tokio::task::spawn_blocking(move || {
                execute(
                    &ctx2.pool,
                    &ctx2.registry,
                    Some(&ctx2.images),
                    Some(&ctx2.slots),
                    &spec,
                    &JobFiles {
                        files: &files2,
                        suite_dir: has_suite.then_some(suite2.as_path()),
                    },
                )
            })
            .await
            .unwrap_or_else(|e| Verdict::internal(format!("the worker's thread failed: {e}")))
        }
    };
    let _ = std::fs::remove_dir_all(&work);
    if hb.lost.load(std::sync::atomic::Ordering::SeqCst) {
        tracing::warn!(submission = %job.id, "the lease was lost while judging; the result is offered anyway");
    }
    drop(hb);
    post_result(ctx, &job, verdict).await;
}

/// Posts the verdict, signed, retrying while the server is unreachable (for one lease at most).
async fn post_result(ctx: &Ctx, job: &ClaimedJob, verdict: Verdict) {
    let mut body = serde_json::to_vec(&ResultRequest {
        lease: job.lease.clone(),
        verdict,
    })
    .expect("a result serialises");
    let mut refused_already = false;
    let deadline = tokio::time::Instant::now() + Duration::from_millis(job.lease_ms);
    let mut wait = Duration::from_millis(200);
    loop {
        let sig = corral_judge::signature_header(&ctx.key, ctx.server_now(), &body);
        let r = ctx
            .http
            .post(format!("{}/worker/jobs/{}/result", ctx.server, job.id))
            .bearer_auth(&ctx.token)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header("Corral-Signature", sig)
            .body(body.clone())
            .send()
            .await;
        match r {
            Ok(resp) if resp.status().is_success() => {
                tracing::info!(submission = %job.id, "result recorded");
                return;
            }
            Ok(resp) if resp.status() == StatusCode::CONFLICT => {
                tracing::warn!(submission = %job.id, "result refused: the lease was lost");
                return;
            }
            Ok(resp) if resp.status() == StatusCode::UNAUTHORIZED => {
                // The token or the signature: no later result would fare better, and the jobs
                // this worker claimed would each run out their lease for nothing.
                let text = resp.text().await.unwrap_or_default();
                tracing::error!(submission = %job.id, body = %text, "result refused (401); claiming no more jobs");
                *ctx.results_refused
                    .lock()
                    .unwrap_or_else(|e| e.into_inner()) = Some(text);
                return;
            }
            Ok(resp) if resp.status().is_client_error() => {
                let st = resp.status();
                let text = resp.text().await.unwrap_or_default();
                tracing::error!(submission = %job.id, status = %st, body = %text, "result refused");
                // The job ends now with the reason, rather than after its lease ran out as many
                // times as it may be claimed (each claim judging it again to the same refusal).
                if !refused_already {
                    refused_already = true;
                    let why = format!("the server refused this worker's verdict ({st}): {text}");
                    body = serde_json::to_vec(&ResultRequest {
                        lease: job.lease.clone(),
                        verdict: Verdict::internal(why),
                    })
                    .expect("a result serialises");
                    continue;
                }
                return;
            }
            Ok(resp) => {
                tracing::warn!(submission = %job.id, status = %resp.status(), "posting the result failed; retrying")
            }
            Err(e) => {
                tracing::warn!(submission = %job.id, error = %crate::errors::chain_of(&e), "posting the result failed; retrying")
            }
        }
        if tokio::time::Instant::now() + wait > deadline {
            tracing::error!(submission = %job.id, "giving up on the result: the lease is over, the job will run again");
            return;
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(Duration::from_secs(5));
    }
}

#[cfg(test)]
mod tests {
    use super::{clock_offset, server_url};

    #[test]
    fn the_server_url_is_checked_at_start() {
        assert_eq!(
            server_url("http://10.0.0.5:8080/", "--server").unwrap(),
            "http://10.0.0.5:8080"
        );
        server_url("https://corral.internal", "CORRAL_SERVER").unwrap();
        for bad in ["notaurl", "10.0.0.5:8080", "ftp://host", "http://", ""] {
            let e = server_url(bad, "--server").unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("--server {bad:?} is not a server URL"))
                    && e.contains("http://10.0.0.5:8080"),
                "{e}"
            );
        }
    }

    #[test]
    fn results_are_signed_in_the_servers_time() {
        // 2026-11-29 18:00:00 UTC, the server's Date, against local clocks ten minutes off.
        let date = "Sun, 29 Nov 2026 18:00:00 GMT";
        let server_ms = 1_795_975_200_000;
        assert_eq!(clock_offset(date, server_ms - 600_000), Some(600_000));
        assert_eq!(clock_offset(date, server_ms + 600_000), Some(-600_000));
        // Within the header's rounding: none.
        assert_eq!(clock_offset(date, server_ms + 900), Some(0));
        assert_eq!(clock_offset("yesterday", server_ms), None);
    }
}
