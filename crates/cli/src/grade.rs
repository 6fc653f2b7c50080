//! `corral grade ASSIGNMENT_DIR SUBMISSIONS_DIR`: grade every submission of a folder.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use clap::Args;
use corral_checks::batch::{self, BatchOptions, Progress, RowStatus};
use corral_checks::{engine, SafetyConfig, Suite};
use corral_sandbox::{Pool, PoolConfig};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

#[derive(Args, Debug)]
#[command(
    after_help = "ASSIGNMENT_DIR holds the suite (suite.yaml, suite.yml or suite.json) and the files it \
    names; SUBMISSIONS_DIR holds one folder per student, named by the student's id.\n\n\
    Writes OUTPUT/results/STUDENT.json (one per student, staff's view), OUTPUT/feedback/STUDENT.txt \
    (what the student may read: hidden checks pass/fail only), OUTPUT/gradebook.csv and OUTPUT/report.html. \
    A submission already graded (same suite, same files) keeps its stored result unless --force.\n\n\
    Exit status: 0 when every submission was graded, 1 when some could not be judged (status `error` \
    in the gradebook: a sandbox failure, an invalid test run, a submission that is not a folder), \
    2 for a bad suite or usage, 125 when no sandbox can be built."
)]
pub struct GradeArgs {
    /// The assignment folder (its suite file and files).
    #[arg(value_name = "ASSIGNMENT_DIR")]
    assignment: PathBuf,
    /// The folder of submissions, one sub-folder per student.
    #[arg(value_name = "SUBMISSIONS_DIR")]
    submissions: PathBuf,
    /// Where results, the gradebook and the report go.
    #[arg(long, short = 'o', value_name = "DIR", default_value = "grades")]
    output: PathBuf,
    /// Grade again submissions that already have a result (after the host's toolchain
    /// changed, say: what the checks run is not part of a result's fingerprint).
    #[arg(long)]
    force: bool,
    /// Submissions graded at once [default: the number of CPUs].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=4096))]
    jobs: Option<u64>,
    /// Checks of one submission run at once.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=4096))]
    check_jobs: u64,
    /// Run the static safety check of Python files (default rules) when the suite has none.
    #[arg(long)]
    safety_check: bool,
    /// An operator's language registry file (TOML) added to the built-in one.
    #[arg(long, value_name = "FILE")]
    languages: Option<PathBuf>,
    /// No progress bar (it is only drawn on a terminal anyway).
    #[arg(long)]
    no_progress: bool,
    /// Grade in this container image (REF) instead of the suite's `image` (a check's own
    /// `image` still wins). It must be in the data folder's image store.
    #[arg(long, value_name = "REF")]
    image: Option<String>,
    #[command(flatten)]
    data: crate::check::DataFolderArgs,
    #[command(flatten)]
    runtime: crate::check::RuntimeArgs,
}

pub fn main(args: GradeArgs) -> i32 {
    let usage = |msg: String| {
        eprintln!("corral grade: {msg}");
        crate::exit::USAGE
    };
    if !args.assignment.is_dir() {
        return usage(format!("{}: not a folder", args.assignment.display()));
    }
    let suite_path = match batch::find_suite(&args.assignment) {
        Ok(p) => p,
        Err(e) => return usage(e.to_string()),
    };
    let mut suite = match Suite::load_in(&suite_path, args.image.as_deref()) {
        Ok(s) => s,
        Err(e) => return usage(e.to_string()),
    };
    if args.safety_check && suite.safety.is_none() {
        suite.safety = Some(SafetyConfig::default());
    }
    let registry = match crate::check::registry(args.languages.as_deref()) {
        Ok(r) => r,
        Err(e) => return usage(crate::errors::chain(&e)),
    };
    let images = match crate::check::override_image(&mut suite, args.image.as_deref())
        .and_then(|()| args.data.image_store())
    {
        Ok(s) => s,
        Err(e) => return usage(crate::errors::chain(&e)),
    };
    let runtime = match args.runtime.policy() {
        Ok(r) => r,
        Err(e) => return usage(e),
    };
    if let Err(e) = engine::plan(&suite, &registry, images.as_ref(), &runtime) {
        return usage(format!("{}: {e}", suite_path.display()));
    }
    if args.submissions.is_file() {
        return usage(format!(
            "{}: a file, not a folder of submissions: extract it into a folder that holds one \
             folder (or one .zip) per student",
            args.submissions.display()
        ));
    }
    let submissions = match batch::discover(&args.submissions) {
        Ok(s) => s,
        Err(e) => return usage(format!("{}: {e}", args.submissions.display())),
    };
    // Loose files and no folder: one student's submission given where the class's go.
    if !submissions.is_empty() && submissions.iter().all(|s| s.problem.is_some()) {
        return usage(format!(
            "{}: no folder or .zip in it, only files: SUBMISSIONS_DIR holds one folder per \
             student (to grade one submission: corral check {} {})",
            args.submissions.display(),
            suite_path.display(),
            args.submissions.display()
        ));
    }
    if let Err(e) = std::fs::create_dir_all(&args.output) {
        return usage(format!("{}: {e}", args.output.display()));
    }
    let host = match crate::sandboxes::host_or_exit("grade") {
        Ok(h) => h,
        Err(code) => return code,
    };
    let jobs = args
        .jobs
        .map(|n| n as usize)
        .unwrap_or_else(|| BatchOptions::default().jobs)
        .max(1);
    let check_jobs = args.check_jobs as usize;
    let pool = Pool::new(
        host,
        PoolConfig {
            max_idle: jobs * check_jobs * 2,
            max_active: jobs * check_jobs,
            ..Default::default()
        },
    );
    let bar = ProgressBar::with_draw_target(
        Some(submissions.len() as u64),
        if args.no_progress {
            ProgressDrawTarget::hidden()
        } else {
            ProgressDrawTarget::stderr()
        },
    );
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} {elapsed_precise} (eta {eta}) {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let opts = BatchOptions {
        force: args.force,
        jobs,
        check_jobs,
        images,
        runtime,
    };
    let (graded, kept) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let progress = |row: &batch::Row, how: Progress| {
        let what = match how {
            Progress::Graded => {
                graded.fetch_add(1, Ordering::Relaxed);
                "graded"
            }
            Progress::Kept => {
                kept.fetch_add(1, Ordering::Relaxed);
                "kept"
            }
        };
        bar.set_message(format!("{what} {}", row.student));
        bar.inc(1);
    };
    let rows = match batch::grade_all(
        &pool,
        &registry,
        &suite,
        &submissions,
        &args.output,
        &opts,
        &progress,
    ) {
        Ok(r) => r,
        Err(e) => {
            bar.abandon();
            eprintln!("corral grade: {e}");
            return crate::exit::SANDBOX_ERROR;
        }
    };
    bar.finish_and_clear();
    if let Err(e) = batch::write_outputs(&suite, &rows, &args.output) {
        eprintln!("corral grade: writing {}: {e}", args.output.display());
        return crate::exit::USAGE;
    }
    let errors = rows.iter().filter(|r| r.status == RowStatus::Error).count();
    eprintln!(
        "corral grade: {} submissions ({} graded, {} kept), {} with errors; wrote {}, {}, {} and {}",
        rows.len(),
        graded.load(Ordering::Relaxed),
        kept.load(Ordering::Relaxed),
        errors,
        args.output.join("gradebook.csv").display(),
        args.output.join("report.html").display(),
        args.output.join(batch::RESULTS_DIR).display(),
        args.output.join(batch::FEEDBACK_DIR).display(),
    );
    // Results of entries not graded now: another assignment graded into the same folder, or
    // students removed since. Left as they are, but said, as the folder mixes them.
    let current: std::collections::BTreeSet<String> = rows
        .iter()
        .map(|r| batch::result_file(&r.student))
        .collect();
    let stale = std::fs::read_dir(args.output.join(batch::RESULTS_DIR))
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| {
                    let n = e.file_name().to_string_lossy().into_owned();
                    n.ends_with(".json") && !current.contains(&n)
                })
                .count()
        })
        .unwrap_or(0);
    if stale > 0 {
        eprintln!(
            "corral grade: warning: {} holds {stale} result(s) of entries not in {} (another \
             assignment graded into the same folder, or removed submissions): left as they are, \
             with their feedback files; the gradebook and the report list only these submissions \
             (give each assignment its own -o folder)",
            args.output.join(batch::RESULTS_DIR).display(),
            args.submissions.display()
        );
    }
    // A grader check without `points` takes each submission's maximum from its own results:
    // percentages then compare nothing (a crash 0/4 beside 20/20, a stopped grader 0/0).
    let (low, high) = rows.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), r| {
        (lo.min(r.max_score), hi.max(r.max_score))
    });
    if rows.len() > 1 && low < high {
        eprintln!(
            "corral grade: warning: the maximum score differs between submissions ({low} to {high}): \
             give each Gradescope or PrairieLearn check its `points` in the suite, so every \
             submission is scored out of the same total"
        );
    }
    if errors > 0 {
        1
    } else {
        0
    }
}
