//! Grading an upload against a check suite (`/check`), within the server's admission.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use corral_checks::engine::Submitted;
use corral_checks::{GradeError, GradeOptions, GradingKind, Progress, Report, View};
use corral_sandbox::Cancel;

use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::service::caller::Caller;
use crate::service::runner::Turn;
use crate::service::runtime_choice::refuse_lost_hiding;
use crate::service::scratch::Scratch;
use crate::service::suites::{self, is_valid_id};
use crate::state::SharedState;

/// A grading ready to run: everything that can refuse the request has been checked (the suite,
/// the upload, the image, the caller's cap), so a client that watches its progress is only told
/// "accepted" once it is.
pub struct Prepared {
    suite: corral_checks::Suite,
    submission: std::path::PathBuf,
    runtime: corral_sandbox::RuntimePolicy,
    view: View,
    /// Holds the submission and the suite's files until the grading ends.
    work: Scratch,
    /// Counts against the caller's cap until the grading ends.
    grading: crate::service::per_caller::Counted,
}

/// Who watches a grading: told its [`Turn`]s, then each check's result as it is decided.
pub struct Watch {
    pub turn: Box<dyn Fn(Turn) + Send + Sync>,
    pub progress: Progress,
}

impl Prepared {
    /// The suite's check ids, in its order.
    pub fn check_ids(&self) -> Vec<String> {
        self.suite.checks.iter().map(|c| c.id.clone()).collect()
    }

    /// Whose view the report is for (staff see hidden checks' details).
    pub fn view(&self) -> View {
        self.view
    }
}

/// Checks everything about grading the caller's upload `homedir` with suite `suite_id` that
/// can refuse it, before it waits for a slot: in `image` (over the suite's default) when given;
/// `runtime` (or the server's default) is the runtime of checks that name none, and the
/// server's `force_gvisor` puts every check under gVisor; the view is the caller's (staff see
/// hidden checks' details). [`run`] grades it.
pub async fn prepare(
    st: &SharedState,
    caller: &Caller,
    suite_id: &str,
    homedir: &str,
    image: Option<&str>,
    runtime: Option<corral_sandbox::Runtime>,
) -> Result<Prepared, ApiError> {
    let runtime_asked = runtime;
    let runtime = corral_sandbox::RuntimePolicy {
        default: st
            .config
            .runtime
            .resolve(runtime)
            .map_err(|e| ApiError::unprocessable(e.to_string()))?,
        force_gvisor: st.config.runtime.force_gvisor,
    };
    if !is_valid_id(suite_id) {
        return Err(ApiError::not_found(format!("no suite {suite_id:?}")));
    }
    if let Some(image) = image {
        corral_checks::image_root::check_reference(image)
            .map_err(|e| ApiError::unprocessable(format!("image: {e}")))?;
    }
    // Each grading holds a runner slot while its checks run: one caller's many must not fill the
    // server's queue. The same cap as a caller's busy sandboxes (`/run`, WebSocket runs).
    let max = st.config.max_sandboxes_per_caller;
    let grading = st.gradings.take(&caller.id, max).map_err(|has| {
        let m = format!("this token has {has} /check requests in progress (being graded or waiting for a slot), the most it may have at once ({max}); retry when one is done");
        ApiError::too_many("too_many_checks", m, 5)
    })?;
    let upload = crate::service::uploads::owned(st, caller, homedir).await?;
    let work = Scratch::new(st, "check-").map_err(ApiError::io)?;
    let submission = work.path().join("submission");
    std::fs::create_dir(&submission).map_err(ApiError::io)?;
    work.materialize(st, &upload, &submission).await?;
    let dir = work.path().join("suite");
    std::fs::create_dir(&dir).map_err(ApiError::io)?;
    let suite_path = suites::file_of(st, suite_id, &work, &dir).await?;
    let mut suite = suites::load(suite_path, image.map(str::to_string)).await?;
    refuse_lost_hiding(st, &suite, runtime_asked)?;
    if let Some(image) = image {
        suite.image = Some(image.to_string());
    }
    // A check's language or image the server lacks is refused now, not after a wait in the
    // queue (the grading would fail on it at its first check).
    let plan = {
        let (st, suite) = (st.clone(), suite.clone());
        tokio::task::spawn_blocking(move || {
            corral_checks::engine::plan(&suite, &st.languages, Some(&st.images), &runtime)
                .map(|_| ())
        })
    };
    plan.await
        .map_err(ApiError::internal)?
        .map_err(grade_error)?;
    let view = if caller.role.is_staff() {
        View::Staff
    } else {
        View::Student
    };
    Ok(Prepared {
        suite,
        submission,
        runtime,
        view,
        work,
        grading,
    })
}

/// Grades a prepared submission once a runner slot is free, telling `watch` (when given) how
/// it goes.
pub async fn run(
    st: &SharedState,
    caller: &Caller,
    prepared: Prepared,
    watch: Option<Watch>,
) -> Result<Report, ApiError> {
    let Prepared {
        suite,
        submission,
        runtime,
        work,
        grading,
        ..
    } = prepared;
    let (turn, progress) = match watch {
        Some(w) => (w.turn, Some(w.progress)),
        None => (Box::new(|_| {}) as Box<dyn Fn(Turn) + Send + Sync>, None),
    };
    // The client went away (this future dropped): the checks not started yet are not run and
    // the programs of those running are killed, so the slots are given back at once.
    let cancel = Arc::new(Cancel::default());
    // Whoever sets it counts the grading in the metrics: the grading when it starts, else the
    // guard (its client left while it waited for a slot).
    let counted = Arc::new(AtomicBool::new(false));
    let gone = CancelOnDrop(Some((cancel.clone(), counted.clone(), st.metrics.clone())));
    let st2 = st.clone();
    let submitter = caller.name.clone();
    let graded = st
        .runner
        .grade_watched(&caller.id, turn, move || {
            let started = std::time::Instant::now();
            let counts = !counted.swap(true, Ordering::SeqCst);
            let r = corral_checks::grade(
                &st2.pool,
                &st2.languages,
                &suite,
                &submission,
                &GradeOptions {
                    jobs: 2,
                    images: Some(st2.images.clone()),
                    runtime,
                    slots: Some((st2.grading_slots.clone(), GradingKind::Interactive)),
                    progress,
                    cancel: Some(cancel.clone()),
                    // Submitted now, by the caller.
                    submitted: Submitted {
                        at: None,
                        by: Some(submitter),
                    },
                    ..GradeOptions::default()
                },
            );
            drop(work);
            // Counted until it ends, even when its client went away.
            drop(grading);
            let result = match &r {
                _ if cancel.requested() => "cancelled",
                Ok(report) if report.has_errors() => "error",
                Ok(report) if report.passed() => "passed",
                Ok(_) => "failed",
                Err(_) => "error",
            };
            if counts {
                st2.metrics.checked(result, started.elapsed());
            }
            r
        })
        .await;
    gone.disarm();
    graded?.map_err(grade_error)
}

/// Cancels a grading when dropped before it is disarmed, and counts it as cancelled when it had
/// not started.
struct CancelOnDrop(Option<(Arc<Cancel>, Arc<AtomicBool>, Arc<Metrics>)>);

impl CancelOnDrop {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some((cancel, counted, metrics)) = self.0.take() {
            cancel.request();
            if !counted.swap(true, Ordering::SeqCst) {
                metrics.checked("cancelled", std::time::Duration::ZERO);
            }
        }
    }
}

/// A grading's error as the caller is told it.
fn grade_error(e: GradeError) -> ApiError {
    match e {
        GradeError::Io { ref source, .. } if corral_store::is_storage_full_io(source) => {
            ApiError::storage_full(e)
        }
        GradeError::Io { .. } => ApiError::internal(e),
        GradeError::Submission { .. } => ApiError::bad_request(e.to_string()),
        other => ApiError::unprocessable(other.to_string()),
    }
}
