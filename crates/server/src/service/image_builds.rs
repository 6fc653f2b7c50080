//! Image builds requested over HTTP (`POST /images/build`): the build file of `corral env build`,
//! run as a background job in build sandboxes of this server's host, one build at a time (a
//! build takes minutes and both cores); later ones wait their turn as `queued`. Jobs live in
//! memory: a restart forgets them (a build's steps stay cached in the store, so asking again
//! reruns nothing that finished).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use corral_images::build::{self, BuildFile, Event, Step};
use serde::Serialize;
use utoipa::ToSchema;

use super::image_info::ImageInfo;
use crate::error::ApiError;

/// Builds that wait or run at once by default (`[images] max_pending_builds`); more is a 503
/// (the caller asks again later).
pub const MAX_PENDING: usize = 4;
/// Finished builds remembered for `GET /images/builds/{id}`, newest kept.
const KEEP_FINISHED: usize = 64;
/// The tail of the steps' output a job keeps (the rest is counted in `output_dropped`).
const OUTPUT_TAIL: usize = 64 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum BuildStatus {
    /// Waiting for the build before it.
    Queued,
    Running,
    /// The image is written and named (`image`).
    Succeeded,
    /// A step failed or the build could not run (`error`); nothing was named.
    Failed,
}

/// One step as far as the build got.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct BuildStepInfo {
    pub step: usize,
    /// The step as written (`run: apt-get …`).
    pub text: String,
    /// Not run: its result came from the step cache.
    pub cached: bool,
    pub seconds: f64,
    /// The diff-id of the layer it added (absent: config only, or nothing changed).
    pub layer: Option<String>,
}

/// A build job, as `GET /images/builds/{id}` shows it.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(example = json!({"id": "3f1c9a0b7d2e4f6a8b0c1d2e3f4a5b6c", "status": "succeeded", "from": "debian:bookworm-minbase", "name": "course/python-numpy:latest", "total": 2, "current": null, "steps": [{"step": 1, "text": "run: apt-get install -y python3-numpy", "cached": false, "seconds": 223.7, "layer": "sha256:832a5e8b15e0…"}], "output": "…", "output_dropped": 0, "error": null, "image": {"names": ["course/python-numpy:latest"], "digest": "sha256:f1b60b0b2fec…", "size": 123456789, "created": null, "platform": "linux/amd64", "source": "build POST /images/build"}}))]
pub struct BuildJob {
    /// 128 random bits, hex.
    pub id: String,
    pub status: BuildStatus,
    /// The base image, as the file names it.
    pub from: String,
    /// The name the image gets (`?name=` wins over the file's `name`).
    pub name: Option<String>,
    /// Steps in the file.
    pub total: usize,
    /// The step running now (1-based).
    pub current: Option<usize>,
    /// Finished steps, in order.
    pub steps: Vec<BuildStepInfo>,
    /// The last 64 KiB of the steps' output (stdout and stderr as they came), lossy UTF-8.
    pub output: String,
    /// Bytes of output dropped from the front to keep `output` at its cap.
    pub output_dropped: u64,
    /// Why the build failed (`step 2/3 failed: exit status 100`).
    pub error: Option<String>,
    /// The image built, once `succeeded`.
    pub image: Option<ImageInfo>,
}

impl BuildJob {
    /// A job waiting for its turn, nothing run yet.
    fn queued(id: String, from: String, name: Option<String>, total: usize) -> BuildJob {
        BuildJob {
            id,
            status: BuildStatus::Queued,
            from,
            name,
            total,
            current: None,
            steps: Vec::new(),
            output: String::new(),
            output_dropped: 0,
            error: None,
            image: None,
        }
    }

    fn push_output(&mut self, bytes: &[u8]) {
        self.output.push_str(&String::from_utf8_lossy(bytes));
        if self.output.len() > OUTPUT_TAIL {
            let mut cut = self.output.len() - OUTPUT_TAIL;
            while !self.output.is_char_boundary(cut) {
                cut += 1;
            }
            self.output.drain(..cut);
            self.output_dropped += cut as u64;
        }
    }

    fn finished(&self) -> bool {
        matches!(self.status, BuildStatus::Succeeded | BuildStatus::Failed)
    }
}

type Job = Arc<Mutex<BuildJob>>;

/// The server's build jobs and its one-at-a-time turn.
pub struct ImageBuilds {
    jobs: Mutex<VecDeque<Job>>,
    turn: Arc<tokio::sync::Semaphore>,
    /// Builds that may wait or run at once.
    max_pending: usize,
}

impl Default for ImageBuilds {
    fn default() -> Self {
        ImageBuilds::new(MAX_PENDING)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panicking build thread must not take every later request down with it.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl ImageBuilds {
    /// At most `max_pending` builds waiting or running at once.
    pub fn new(max_pending: usize) -> Self {
        ImageBuilds {
            jobs: Mutex::new(VecDeque::new()),
            turn: Arc::new(tokio::sync::Semaphore::new(1)),
            max_pending,
        }
    }

    /// A copy of job `id`.
    pub fn get(&self, id: &str) -> Option<BuildJob> {
        lock(&self.jobs)
            .iter()
            .map(|j| lock(j).clone())
            .find(|j| j.id == id)
    }

    /// Adds a queued job, unless `max_pending` are already waiting or running; forgets the
    /// oldest finished ones past [`KEEP_FINISHED`].
    fn add(&self, job: BuildJob) -> Result<Job, ApiError> {
        let mut jobs = lock(&self.jobs);
        let pending = jobs.iter().filter(|j| !lock(j).finished()).count();
        if pending >= self.max_pending {
            return Err(ApiError::overloaded(
                format!("{pending} image builds are already waiting or running; ask again when one has finished (GET /images/builds/{{id}})"),
                60,
            ));
        }
        let job = Arc::new(Mutex::new(job));
        jobs.push_back(job.clone());
        while jobs.iter().filter(|j| lock(j).finished()).count() > KEEP_FINISHED {
            let Some(at) = jobs.iter().position(|j| lock(j).finished()) else {
                break;
            };
            jobs.remove(at);
        }
        Ok(job)
    }
}

/// Parses and checks a build file sent over HTTP (everything that can be refused before a job
/// exists is refused here, as a 422 naming the line or the reason), then queues its build.
pub fn start(
    builds: &ImageBuilds,
    images: &corral_images::Store,
    host: &Arc<corral_sandbox::Host>,
    text: &str,
    json: bool,
    name: Option<String>,
) -> Result<BuildJob, ApiError> {
    // Only the file's text is sent: there is no folder for `copy` sources, and errors (and the
    // image's `source`) name the request rather than a path of this server.
    let label = std::path::Path::new("POST /images/build");
    let file =
        BuildFile::parse(text, label, json).map_err(|e| ApiError::unprocessable(e.to_string()))?;
    if let Some(n) = file
        .steps
        .iter()
        .position(|s| matches!(s, Step::Copy { .. }))
    {
        return Err(ApiError::unprocessable(format!(
            "step {}/{} is a copy step: POST /images/build takes only the build file, not files to copy; put the files in an image first (corral env build on the server, or import one)",
            n + 1,
            file.steps.len()
        )));
    }
    let name = name.or_else(|| file.name.clone());
    if let Some(n) = &name {
        if corral_images::store::refs::normalise_name(n).is_none() {
            return Err(ApiError::unprocessable(format!(
                "name {n:?}: expected NAME[:TAG] (lowercase letters, digits, ._-/)"
            )));
        }
    }
    if let Err(e) = images.resolve(&file.from) {
        return Err(ApiError::unprocessable(format!(
            "from {}: {e} (pull or import the base image first: POST /images, POST /images/import)",
            file.from
        )));
    }
    let job = builds.add(BuildJob::queued(
        corral_store::random_hex(16),
        file.from.clone(),
        name.as_deref()
            .and_then(corral_images::store::refs::normalise_name),
        file.steps.len(),
    ))?;
    let shown = lock(&job).clone();
    let (images, host, turn) = (images.clone(), host.clone(), builds.turn.clone());
    tokio::spawn(async move {
        // Closed only if the server drops the semaphore: then nothing runs.
        let Ok(_turn) = turn.acquire_owned().await else {
            return;
        };
        lock(&job).status = BuildStatus::Running;
        let j = job.clone();
        let done =
            tokio::task::spawn_blocking(move || run(&images, host, &file, name.as_deref(), &j))
                .await;
        let mut j = lock(&job);
        match done {
            Ok(Ok(image)) => {
                j.status = BuildStatus::Succeeded;
                j.image = Some(image);
            }
            Ok(Err(message)) => {
                j.status = BuildStatus::Failed;
                j.error = Some(message);
            }
            Err(panic) => {
                j.status = BuildStatus::Failed;
                j.error = Some(format!("the build stopped unexpectedly: {panic}"));
            }
        }
        j.current = None;
        tracing::info!(build = %j.id, status = ?j.status, error = ?j.error, "image build finished");
    });
    Ok(shown)
}

/// Runs the build on this thread, recording progress in `job`; the image, or why not.
fn run(
    images: &corral_images::Store,
    host: Arc<corral_sandbox::Host>,
    file: &BuildFile,
    name: Option<&str>,
    job: &Job,
) -> Result<ImageInfo, String> {
    let mut runner = build::sandboxed::SandboxRunner::new(host);
    let mut on_event = |e: Event<'_>| {
        let mut j = lock(job);
        match e {
            Event::Start { step, .. } => j.current = Some(step),
            Event::Output(bytes) => j.push_output(bytes),
            Event::Done(r) => j.steps.push(BuildStepInfo {
                step: r.step,
                text: r.text.clone(),
                cached: r.cached,
                seconds: r.seconds,
                layer: r.layer.as_ref().map(ToString::to_string),
            }),
        }
    };
    let report =
        build::build(images, file, name, &mut runner, &mut on_event).map_err(|e| e.to_string())?;
    let (_, record) = images
        .resolve(&report.digest.to_string())
        .map_err(|e| format!("the built image: {e}"))?;
    let names = images
        .names_of(&record.digest)
        .map_err(|e| format!("the built image: {e}"))?;
    Ok(ImageInfo::of(names, record))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: &str) -> BuildJob {
        BuildJob::queued(id.into(), "base".into(), None, 1)
    }

    #[test]
    fn builds_past_the_cap_are_refused_until_one_finishes() {
        let builds = ImageBuilds::new(2);
        let first = builds.add(job("a")).unwrap();
        builds.add(job("b")).unwrap();
        let e = builds.add(job("c")).unwrap_err();
        assert_eq!(e.status().as_u16(), 503, "{}", e.message);
        assert!(
            e.message
                .contains("2 image builds are already waiting or running"),
            "{}",
            e.message
        );
        lock(&first).status = BuildStatus::Succeeded;
        builds.add(job("c")).unwrap();
        assert!(builds.get("c").is_some() && builds.get("a").is_some());
    }
}
