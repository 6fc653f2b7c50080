//! The check engine: runs a suite's checks against one submission, each in a pooled sandbox.
//!
//! - A check runs only when all its dependencies passed, in a copy of the working directories they
//!   left (merged in dependency order), with the protected assignment files put back on top.
//!   Otherwise its result is `null` (skipped).
//! - Independent checks run in parallel, up to `jobs` at once, over the shared [`Pool`].
//! - What a check runs is its kind's ([`crate::kinds`]); the engine stages, schedules and
//!   collects the rows.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};

use corral_images::Store as ImageStore;
use corral_sandbox::{Cancel, Pool, Runtime, RuntimePolicy};

use crate::error::GradeError;
use crate::grading_slots::{GradingKind, GradingSlots};
use crate::image_root::UsedImage;
use crate::kinds::{runner_of, CheckContext};
use crate::language_registry::LanguageRegistry;
use crate::report::{CheckResult, IntegrityFlag, Report};
use crate::safety_scan;
use crate::shared::rows::{errored, items_not_run, row, skipped};
use crate::shared::settings::{self, RunSettings};
use crate::shared::stage;
pub use crate::shared::submitted::Submitted;
use crate::suite::{Check, Suite};

// Kept here for the server, which compares and names program outcomes the same way.
pub use crate::shared::text::{normalize, signal_name, MAX_VALUE};

/// How a suite is graded.
#[derive(Debug, Clone)]
pub struct GradeOptions {
    /// Checks running at once (default: the number of CPUs).
    pub jobs: usize,
    /// The image store the suite's, checks' and languages' images are found in (the data
    /// folder's); `None`: a suite naming an image cannot be graded.
    pub images: Option<ImageStore>,
    /// Image references pinned to digests (REF → `sha256:…`): a queued submission grades in the
    /// digests the server resolved when it was submitted, whatever the names point to now.
    pub pins: BTreeMap<String, String>,
    /// The caller's runtime policy: its `default` is the runtime of a check that names none
    /// (nor does its suite or language): a server's default or a request's choice, a
    /// submission's stored runtime, `corral check --runtime`; under `force_gvisor` every check
    /// runs under gVisor, whatever its suite says (the server's public-instance switch).
    pub runtime: RuntimePolicy,
    /// The process's cap on checks running at once across its gradings, and this grading's
    /// kind (`None`: only `jobs` bounds this grading).
    pub slots: Option<(Arc<GradingSlots>, GradingKind)>,
    /// Told each check's result as soon as it is decided (`None`: nobody is watching).
    pub progress: Option<Progress>,
    /// Requested when nobody wants the report any more (the client went away): checks not
    /// started yet are not run, and the programs of those running are killed (their rows say
    /// the grading was cancelled, never a verdict on the submission).
    pub cancel: Option<Arc<Cancel>>,
    /// When and by whom the submission was made (a Gradescope autograder reads both in its
    /// `submission_metadata.json`); unknown: now, and nobody's name.
    pub submitted: Submitted,
}

/// A watcher of a grading's progress: called, on the grading's thread, with each check's result
/// as it is decided (a check that ran, or one skipped because a dependency failed) and how many
/// of the suite's checks are decided by then. The server streams these to a client that waits
/// (`POST /check` with `Accept: application/x-ndjson`). The check's own result: rubric items
/// (pytest tests, check50 checks) come with the report.
#[derive(Clone)]
pub struct Progress(pub Arc<OnDecided>);

/// What a [`Progress`] calls: a check's result and how many checks are decided.
pub type OnDecided = dyn Fn(&CheckResult, usize) + Send + Sync;

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Progress(..)")
    }
}

impl Default for GradeOptions {
    fn default() -> Self {
        GradeOptions {
            jobs: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            images: None,
            pins: BTreeMap::new(),
            runtime: Default::default(),
            slots: None,
            progress: None,
            cancel: None,
            submitted: Submitted::default(),
        }
    }
}

/// Resolves the run settings of every check (see [`settings::for_suite`]) under the caller's
/// `runtime` policy; fails on an unknown or unavailable language, or an image `images` lacks,
/// before anything runs.
pub fn plan(
    suite: &Suite,
    registry: &LanguageRegistry,
    images: Option<&ImageStore>,
    runtime: &RuntimePolicy,
) -> Result<Vec<RunSettings>, GradeError> {
    settings::for_suite(suite, registry, images, &BTreeMap::new(), runtime)
}

/// The images a plan runs in, each once, in suite order.
pub fn planned_images(settings: &[RunSettings]) -> Vec<UsedImage> {
    let mut out: Vec<UsedImage> = Vec::new();
    for i in settings.iter().filter_map(RunSettings::used_image) {
        if !out.contains(&i) {
            out.push(i);
        }
    }
    out
}

/// Grades the submission in `submission` (a host folder) against `suite`.
pub fn grade(
    pool: &Arc<Pool>,
    registry: &LanguageRegistry,
    suite: &Suite,
    submission: &Path,
    opts: &GradeOptions,
) -> Result<Report, GradeError> {
    let meta = std::fs::metadata(submission).map_err(|e| GradeError::Submission {
        path: submission.to_path_buf(),
        why: e.to_string(),
    })?;
    if !meta.is_dir() {
        return Err(GradeError::Submission {
            path: submission.to_path_buf(),
            why: "not a folder".into(),
        });
    }
    let _span = tracing::debug_span!("grade", suite = %suite.name).entered();
    let settings = settings::for_suite(
        suite,
        registry,
        opts.images.as_ref(),
        &opts.pins,
        &opts.runtime,
    )?;
    // Every row of a check (its rubric items too) records the image the check is graded in.
    let images: BTreeMap<String, UsedImage> = suite
        .checks
        .iter()
        .zip(&settings)
        .filter_map(|(c, s)| Some((c, s.used_image()?)))
        .flat_map(|(c, image)| {
            let items = c.rubric().unwrap_or_default();
            std::iter::once(c.id.clone())
                .chain(items.into_iter().map(|i| i.id.to_string()))
                .map(move |id| (id, image.clone()))
        })
        .collect();

    let io = |what: &str| {
        let what = what.to_string();
        move |source| GradeError::Io { what, source }
    };
    // Private: it holds the submission and the suite's hidden files.
    let tmp = crate::shared::private_temp::private_tempdir("corral-check-")
        .map_err(io("creating a temporary folder"))?;
    let base = tmp.path().join("base");
    stage::copy_submission(submission, &base, &suite.submission)
        .map_err(io("copying the submission"))?;
    stage::place_assignment_files(suite, &base, false, false)
        .map_err(io("copying the assignment files"))?;
    let has_hidden_files = suite.files.iter().any(|f| f.hidden);
    let mut integrity = stage::integrity(suite, submission);
    integrity
        .flagged
        .extend(kind_integrity_flags(suite, submission));
    integrity.ok = integrity.flagged.is_empty();

    // The optional static safety check: a submission it blocks is not run at all.
    let safety = suite
        .safety
        .as_ref()
        .map(|cfg| safety_scan::scan(pool, cfg, submission, opts.runtime.choose(suite.runtime)));
    if let Some(report) = safety.as_ref().filter(|r| r.blocks()) {
        let why = format!(
            "not run: the static safety check found {}",
            report.describe().join("; ")
        );
        tracing::info!(suite = %suite.name, %why, "submission blocked");
        let blocked = suite
            .checks
            .iter()
            .map(|c| CheckResult {
                message: Some(why.clone()),
                ..row(c)
            })
            .collect();
        let (results, runtimes) = rows(suite, &settings, blocked);
        return Ok(Report {
            suite: suite.name.clone(),
            results,
            integrity,
            safety,
            images,
            runtimes,
        });
    }

    let n = suite.checks.len();
    let index = |id: &str| suite.checks.iter().position(|c| c.id == id);
    let deps: Vec<Vec<usize>> = suite
        .checks
        .iter()
        .map(|c| c.depends.iter().filter_map(|d| index(d)).collect())
        .collect();
    let mut dependents = vec![Vec::new(); n];
    for (i, ds) in deps.iter().enumerate() {
        for &d in ds {
            dependents[d].push(i);
        }
    }

    #[derive(Clone, Copy, PartialEq)]
    enum State {
        Waiting,
        Queued,
        Done(bool),
        Skipped,
    }
    let mut state = vec![State::Waiting; n];
    let mut decided = 0usize;
    let mut tell = |r: &CheckResult| {
        decided += 1;
        if let Some(Progress(f)) = &opts.progress {
            f(r, decided);
        }
    };
    let mut results: Vec<Option<CheckResult>> = vec![None; n];
    let mut outputs: Vec<Option<PathBuf>> = vec![None; n];

    struct Job {
        index: usize,
        sources: Vec<PathBuf>,
        output: Option<PathBuf>,
    }
    let workers = opts.jobs.max(1).min(n);
    std::thread::scope(|s| {
        let (job_tx, job_rx) = mpsc::channel::<Job>();
        let job_rx = Arc::new(Mutex::new(job_rx));
        let (done_tx, done_rx) = mpsc::channel::<(usize, CheckResult, Option<PathBuf>)>();
        for _ in 0..workers {
            let (job_rx, done_tx) = (job_rx.clone(), done_tx.clone());
            let (settings, base, tmp) = (&settings, &base, tmp.path());
            let parent = tracing::Span::current();
            s.spawn(move || loop {
                let job = job_rx.lock().ok().and_then(|rx| rx.recv().ok());
                let Some(job) = job else { break };
                let check = &suite.checks[job.index];
                let _span =
                    tracing::debug_span!(parent: &parent, "check", id = %check.id).entered();
                let cancelled = || opts.cancel.as_ref().is_some_and(|c| c.requested());
                let not_run = || errored(check, "not run: the grading was cancelled".to_string());
                if cancelled() {
                    if done_tx.send((job.index, not_run(), None)).is_err() {
                        break;
                    }
                    continue;
                }
                let run = |stage: &Path| {
                    // The check's clock starts once it has a slot (its timeout starts when its
                    // runner leases a sandbox).
                    let _slot = match &opts.slots {
                        Some((s, p)) => match s.take_unless(*p, &cancelled) {
                            Some(slot) => Some(slot),
                            None => return (not_run(), None),
                        },
                        None => None,
                    };
                    if cancelled() {
                        return (not_run(), None);
                    }
                    let (result, out) = runner_of(&check.kind).run(&CheckContext {
                        images: opts.images.as_ref(),
                        pins: &opts.pins,
                        pool,
                        suite,
                        check,
                        settings: &settings[job.index],
                        stage,
                        output: job.output.as_deref(),
                        cancel: opts.cancel.as_ref(),
                        submitted: &opts.submitted,
                    });
                    if cancelled() {
                        // Its programs were killed (or it ended as the request came): no verdict.
                        let why = "stopped: the grading was cancelled while this check ran";
                        return (errored(check, why.to_string()), None);
                    }
                    (result, out)
                };
                // A check without dependencies runs in the base folder itself, unless it is a
                // hidden one that gets the hidden files too.
                let in_base = job.sources.len() == 1
                    && &job.sources[0] == base
                    && !(check.hidden && has_hidden_files);
                let (result, out) = if in_base {
                    run(base)
                } else {
                    let dir = tmp.join(format!("stage-{}", job.index));
                    match stage_from(suite, &job.sources, &dir, check.hidden) {
                        Ok(()) => run(&dir),
                        Err(e) => (
                            errored(check, format!("preparing the working directory: {e}")),
                            None,
                        ),
                    }
                };
                if cancelled() {
                    // Nobody's concern: the client that wanted it went away.
                    tracing::debug!(check = %check.id, "check cancelled");
                } else {
                    log_result(&result);
                }
                if done_tx.send((job.index, result, out)).is_err() {
                    break;
                }
            });
        }
        drop(done_tx);

        let output_of = |i: usize| -> Option<PathBuf> {
            (!dependents[i].is_empty()).then(|| tmp.path().join(format!("out-{i}")))
        };
        let mut in_flight = 0usize;
        for i in 0..n {
            if deps[i].is_empty() {
                state[i] = State::Queued;
                in_flight += 1;
                let _ = job_tx.send(Job {
                    index: i,
                    sources: vec![base.clone()],
                    output: output_of(i),
                });
            }
        }
        while in_flight > 0 {
            let Ok((i, result, out)) = done_rx.recv() else {
                break;
            };
            in_flight -= 1;
            state[i] = State::Done(result.result == Some(true));
            tell(&result);
            results[i] = Some(result);
            outputs[i] = out;
            // Resolve dependents whose dependencies are now all decided, transitively for skips.
            let mut todo: Vec<usize> = dependents[i].clone();
            while let Some(j) = todo.pop() {
                if state[j] != State::Waiting {
                    continue;
                }
                let decided = deps[j]
                    .iter()
                    .all(|&d| matches!(state[d], State::Done(_) | State::Skipped));
                if !decided {
                    continue;
                }
                let all_passed = deps[j].iter().all(|&d| state[d] == State::Done(true));
                let sources: Option<Vec<PathBuf>> =
                    deps[j].iter().map(|&d| outputs[d].clone()).collect();
                match (all_passed, sources) {
                    (true, Some(sources)) => {
                        state[j] = State::Queued;
                        in_flight += 1;
                        let _ = job_tx.send(Job {
                            index: j,
                            sources,
                            output: output_of(j),
                        });
                    }
                    _ => {
                        state[j] = State::Skipped;
                        let r = skipped(&suite.checks[j]);
                        tell(&r);
                        results[j] = Some(r);
                        todo.extend(dependents[j].iter().copied());
                    }
                }
            }
        }
        drop(job_tx);
    });

    let results = results
        .into_iter()
        .zip(&suite.checks)
        .map(|(r, c)| r.unwrap_or_else(|| skipped(c)))
        .collect();
    let (results, runtimes) = rows(suite, &settings, results);
    Ok(Report {
        suite: suite.name.clone(),
        results,
        integrity,
        safety,
        images,
        runtimes,
    })
}

/// The report's rows from each check's result (suite order): every check's rows (see
/// [`expand`]), and the runtime each row's check is graded under, by row id (a grader's rows
/// are known only now).
fn rows(
    suite: &Suite,
    settings: &[RunSettings],
    results: Vec<CheckResult>,
) -> (Vec<CheckResult>, BTreeMap<String, Runtime>) {
    let mut runtimes = BTreeMap::new();
    let mut out = Vec::new();
    for ((r, c), s) in results.into_iter().zip(&suite.checks).zip(settings) {
        for row in expand(c, r) {
            runtimes.insert(row.id.clone(), s.runtime);
            out.push(row);
        }
    }
    (out, runtimes)
}

/// A check corral could not judge is an operator's concern (a sandbox error, an invalid test
/// report); a pass or fail is routine.
fn log_result(r: &CheckResult) {
    match &r.error {
        Some(error) => tracing::warn!(check = %r.id, %error, "check errored"),
        None => tracing::debug!(
            check = %r.id,
            result = ?r.result,
            points = r.points,
            ms = r.time_ms,
            "check finished"
        ),
    }
}

/// A check's working directory when it is not the base folder: its dependencies' directories
/// (or the base folder) in order, then the protected assignment files on top, and a hidden
/// check's hidden files.
fn stage_from(suite: &Suite, sources: &[PathBuf], dir: &Path, hidden: bool) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    for s in sources {
        stage::copy_tree(s, dir)?;
    }
    stage::place_assignment_files(suite, dir, true, hidden)
}

/// A check's rows in the report: its own, then (pytest and check50 checks) one per rubric item.
/// A check that did not run still lists its items, so every report has the same rows and the
/// same maximum score.
fn expand(check: &Check, mut r: CheckResult) -> Vec<CheckResult> {
    let mut children = std::mem::take(&mut r.children);
    if let Some(items) = check.rubric() {
        if children.is_empty() {
            children = items_not_run(check, &items, &r);
        }
        // The points are the items'.
        r.points = 0.0;
        r.max_points = 0.0;
    }
    let mut out = vec![r];
    out.extend(children);
    out
}

/// Files of the checks' kinds (pytest's test files) the submission has in another version, each
/// path once.
fn kind_integrity_flags(suite: &Suite, submission: &Path) -> Vec<IntegrityFlag> {
    let mut flags: Vec<IntegrityFlag> = Vec::new();
    for c in &suite.checks {
        for f in runner_of(&c.kind).integrity_flags(suite, submission) {
            if !flags.iter().any(|seen| seen.path == f.path) {
                flags.push(f);
            }
        }
    }
    flags
}
