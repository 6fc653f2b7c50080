//! Batch grading (`corral grade ASSIGNMENT_DIR SUBMISSIONS_DIR`): every submission of a folder,
//! in parallel over one shared [`Pool`], resumable, with a gradebook CSV, one JSON file per
//! student and an HTML report.
//!
//! Layout:
//!
//! ```text
//! ASSIGNMENT_DIR/            SUBMISSIONS_DIR/           OUTPUT_DIR/ (default SUBMISSIONS_DIR/../grades)
//!   suite.yaml (or .yml,       alice/   (a folder per     results/alice.json
//!     .json)                     calc.py  student; its    gradebook.csv
//!   test_public.py ...         bob/       name is the     report.html
//!   (the suite's files)          ...      student's id)
//! ```
//!
//! A submission that cannot be graded (not a folder, unreadable, a sandbox failure) gets its row
//! with the reason; nothing one submission does stops the batch.
//!
//! Here: finding the submissions and grading them, resuming from stored rows; [`row`]: a stored
//! result and the report rows a suite's results have; [`exports`]: the gradebook CSV and the
//! HTML report made from the rows.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use corral_images::document::DocumentError;
use corral_images::Store as ImageStore;
use corral_sandbox::{Pool, Runtime, RuntimePolicy};
use serde_json::Value;

mod exports;
mod row;
pub mod zips;

pub use exports::{
    check_cell, csv_field, gradebook_csv, histogram, html_report, num, pass_rates, write_outputs,
};
pub use row::{
    columns, columns_seen, feedback_file, result_file, Row, RowStatus, FEEDBACK_DIR, RESULTS_DIR,
};

use crate::engine::{self, GradeOptions};
use crate::error::{GradeError, SuiteError};
use crate::image_root::UsedImage;
use crate::kinds;
use crate::language_registry::LanguageRegistry;
use crate::report::View;
use crate::suite::{CheckKind, SubmissionFiles, Suite, Take};

/// Suite file names looked for in an assignment folder, in this order.
pub const SUITE_FILES: &[&str] = &["suite.yaml", "suite.yml", "suite.json"];

/// The assignment folder's suite file.
pub fn find_suite(assignment: &Path) -> Result<PathBuf, SuiteError> {
    SUITE_FILES
        .iter()
        .map(|n| assignment.join(n))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            SuiteError::File(DocumentError::Read {
                path: assignment.join(SUITE_FILES[0]),
                source: std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!(
                        "no suite file in the assignment folder (looked for {})",
                        SUITE_FILES.join(", ")
                    ),
                ),
            })
        })
}

/// One entry of the submissions folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Submission {
    /// The entry's name (a zip's without `.zip`): the student's id.
    pub student: String,
    pub path: PathBuf,
    /// Set when the entry cannot be graded as it is (not a folder, …).
    pub problem: Option<String>,
    /// `path` is a student's zip, unpacked when it is graded (see [`zips`]).
    pub zip: bool,
}

/// The submissions folder's entries, sorted by name; hidden entries (`.…`) are ignored. A
/// student's `.zip` is that student's submission, named without `.zip` — unless another entry
/// has that name too (a folder `gina` and `gina.zip`, or `gina.zip` and `gina.ZIP`), when each
/// keeps its whole name.
pub fn discover(dir: &Path) -> std::io::Result<Vec<Submission>> {
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with('.') {
            entries.push((name, entry.file_type()?, entry.path()));
        }
    }
    let id_of = |name: &str, zip: bool| -> String {
        match zips::stem(name).filter(|_| zip) {
            Some(stem) => {
                let taken = entries.iter().any(|(other, ft, _)| {
                    other != name
                        && (other == stem || (ft.is_file() && zips::stem(other) == Some(stem)))
                });
                if taken { name } else { stem }.to_string()
            }
            None => name.to_string(),
        }
    };
    let mut out = Vec::new();
    for (name, ft, path) in &entries {
        let zip = ft.is_file() && zips::stem(name).is_some();
        let problem = if ft.is_dir() || zip {
            None
        } else if ft.is_symlink() {
            Some("a symbolic link, not a folder (not followed)".to_string())
        } else {
            Some(
                "not a folder or a zip (extract other archives into a folder per student)"
                    .to_string(),
            )
        };
        out.push(Submission {
            student: id_of(name, zip),
            path: path.clone(),
            problem,
            zip,
        });
    }
    out.sort_by(|a, b| a.student.cmp(&b.student));
    Ok(out)
}

/// A stable fingerprint of what grading depends on: the suite file, the assignment folder's files
/// it names, and every file of the submission (names and contents).
pub fn fingerprint(suite: &Suite, submission: &Path) -> String {
    use std::hash::{Hash, Hasher};
    // FNV-1a, 64 bits: stable across builds (the standard library's hasher is not).
    struct Fnv(u64);
    impl Hasher for Fnv {
        fn finish(&self) -> u64 {
            self.0
        }
        fn write(&mut self, bytes: &[u8]) {
            for b in bytes {
                self.0 ^= u64::from(*b);
                self.0 = self.0.wrapping_mul(0x100000001b3);
            }
        }
    }
    // Only what is graded: a file the suite's `submission` leaves out changes no grade.
    fn walk(p: &Path, h: &mut Fnv, depth: usize, files: &SubmissionFiles, rel: &Path, taken: Take) {
        let Ok(rd) = std::fs::read_dir(p) else {
            return;
        };
        let mut entries: Vec<_> = rd.filter_map(Result::ok).collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let Ok(ft) = e.file_type() else { continue };
            let rel = rel.join(e.file_name());
            let take = files.take(&rel, ft.is_dir(), taken);
            if take == Take::No {
                continue;
            }
            e.file_name().to_string_lossy().hash(h);
            if ft.is_dir() && depth < 32 {
                1u8.hash(h);
                walk(&e.path(), h, depth + 1, files, &rel, take);
            } else if ft.is_symlink() {
                2u8.hash(h);
                std::fs::read_link(e.path())
                    .map(|t| t.to_string_lossy().into_owned())
                    .unwrap_or_default()
                    .hash(h);
            } else if ft.is_file() {
                3u8.hash(h);
                std::fs::read(e.path()).unwrap_or_default().hash(h);
            }
        }
    }
    let mut h = Fnv(0xcbf29ce484222325);
    std::fs::read(&suite.path).unwrap_or_default().hash(&mut h);
    let mut names: Vec<PathBuf> = suite
        .files
        .iter()
        .map(|f| suite.dir.join(&f.path))
        .collect();
    for c in &suite.checks {
        names.extend(c.kind.assignment_files().iter().map(|f| suite.dir.join(f)));
    }
    for n in names {
        // A folder of the assignment (`files: [{path: tests/}]`) by its files, as a submission.
        if n.is_dir() {
            walk(
                &n,
                &mut h,
                0,
                &SubmissionFiles::default(),
                Path::new(""),
                Take::Yes,
            );
        } else {
            std::fs::read(&n).unwrap_or_default().hash(&mut h);
        }
    }
    if submission.is_file() {
        // A student's zip: its bytes (unpacked only when graded).
        std::fs::read(submission).unwrap_or_default().hash(&mut h);
    } else {
        walk(
            submission,
            &mut h,
            0,
            &suite.submission,
            Path::new(""),
            Take::Yes,
        );
    }
    format!("{:016x}", h.finish())
}

/// How a batch is graded.
#[derive(Debug, Clone)]
pub struct BatchOptions {
    /// Grade again what is already graded.
    pub force: bool,
    /// Submissions graded at once.
    pub jobs: usize,
    /// Checks of one submission run at once.
    pub check_jobs: usize,
    /// Where the suite's images are (see [`GradeOptions::images`]).
    pub images: Option<ImageStore>,
    /// The runtime of checks that name none, and the gVisor switch (see
    /// [`GradeOptions::runtime`]).
    pub runtime: RuntimePolicy,
}

impl Default for BatchOptions {
    fn default() -> Self {
        BatchOptions {
            force: false,
            jobs: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            check_jobs: 1,
            images: None,
            runtime: RuntimePolicy::default(),
        }
    }
}

/// What happened to one submission in this batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    Graded,
    /// Already graded (same suite, same files): its stored result was kept.
    Kept,
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The first line of `s`, at most `max` characters.
fn line(s: &str, max: usize) -> String {
    let first = s.lines().next().unwrap_or("").trim();
    if first.chars().count() > max {
        first.chars().take(max).collect::<String>() + "..."
    } else {
        first.to_string()
    }
}

/// A row for a submission that could not be graded.
fn failed_row(suite: &Suite, sub: &Submission, why: String, fp: String) -> Row {
    Row {
        student: sub.student.clone(),
        status: RowStatus::Error,
        score: 0.0,
        max_score: suite.max_score(),
        reason: Some(why.clone()),
        integrity: Vec::new(),
        safety: None,
        checks: BTreeMap::new(),
        time_ms: 0,
        graded_at: now(),
        fingerprint: fp,
        report: Value::Null,
        images: Vec::new(),
        gvisor: Vec::new(),
        feedback: Some(format!(
            "{}: your submission could not be graded: {why}\n",
            suite.name
        )),
    }
}

/// Grades one submission into a row (never fails: problems become the row's reason).
pub fn grade_one(
    pool: &Arc<Pool>,
    registry: &LanguageRegistry,
    suite: &Suite,
    sub: &Submission,
    opts: &BatchOptions,
) -> Row {
    let started = Instant::now();
    let _span = tracing::debug_span!("submission", student = %sub.student).entered();
    let fp = fingerprint(suite, &sub.path);
    if let Some(p) = &sub.problem {
        tracing::info!(problem = %p, "submission not graded");
        return failed_row(suite, sub, p.clone(), fp);
    }
    let grade_opts = GradeOptions {
        jobs: opts.check_jobs.max(1),
        images: opts.images.clone(),
        pins: BTreeMap::new(),
        runtime: opts.runtime,
        // The pool's `max_active` (jobs × check jobs) bounds the checks at once.
        slots: None,
        progress: None,
        cancel: None,
        // Graded now, the folder named for its student.
        submitted: engine::Submitted {
            at: None,
            by: Some(sub.student.clone()),
        },
    };
    // A zip is unpacked for its grading only; a top folder the suite names is not entered.
    let unpacked = if sub.zip {
        let text = std::fs::read_to_string(&suite.path).unwrap_or_default();
        let named = |folder: &str| text.contains(&format!("{folder}/"));
        match zips::unpack(&sub.path, &named) {
            Ok(u) => Some(u),
            Err(why) => {
                return failed_row(
                    suite,
                    sub,
                    format!("the zip could not be unpacked: {why}"),
                    fp,
                )
            }
        }
    } else {
        None
    };
    let path = unpacked
        .as_ref()
        .map_or(sub.path.as_path(), |u| u.root.as_path());
    let report = match engine::grade(pool, registry, suite, path, &grade_opts) {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "grading the submission failed");
            return failed_row(suite, sub, e.to_string(), fp);
        }
    };
    let status = if report.has_errors() {
        RowStatus::Error
    } else if report.not_gradable() {
        RowStatus::NotGradable
    } else {
        RowStatus::Graded
    };
    let mut reasons = Vec::new();
    let item_ids: Vec<&str> = suite
        .checks
        .iter()
        .flat_map(|c| c.rubric().unwrap_or_default())
        .map(|i| i.id)
        .collect();
    let mut blocked = false;
    if let Some(s) = report.safety.as_ref().filter(|s| s.blocks()) {
        reasons.push(format!(
            "not run: the static safety check found {}",
            s.describe().join("; ")
        ));
        blocked = true;
    }
    if !blocked {
        // Each failed check's own reason (a pytest check's names the run's problem or how many
        // tests passed); skipped checks add nothing (their dependency's reason says it).
        for r in &report.results {
            // A grader's test rows: the check's own row says how many points it lost.
            let grader_row = r.id.split_once('/').is_some_and(|(c, _)| {
                suite.check(c).is_some_and(|c| {
                    matches!(
                        c.kind,
                        CheckKind::Gradescope(_) | CheckKind::PrairieLearn(_)
                    )
                })
            });
            if r.result != Some(false) || item_ids.contains(&r.id.as_str()) || grader_row {
                continue;
            }
            if let Some(m) = r.error.as_ref().or(r.message.as_ref()) {
                reasons.push(format!("{}: {}", r.id, line(m, 200)));
            }
        }
    }
    let integrity: Vec<String> = report
        .integrity
        .flagged
        .iter()
        .map(|f| format!("{} ({})", f.path, f.reason))
        .collect();
    if !integrity.is_empty() {
        reasons.push(format!(
            "replaced protected files: {}",
            integrity.join(", ")
        ));
    }
    Row {
        student: sub.student.clone(),
        status,
        score: report.score(),
        max_score: report.max_score(),
        reason: (!reasons.is_empty()).then(|| reasons.join("; ")),
        integrity,
        safety: report.safety.as_ref().map(|s| s.describe()),
        checks: report
            .results
            .iter()
            .map(|r| (r.id.clone(), (r.result, r.points)))
            .collect(),
        time_ms: started.elapsed().as_millis() as u64,
        graded_at: now(),
        fingerprint: fp,
        report: report.to_json(View::Staff),
        images: report.used_images(),
        gvisor: gvisor_checks(suite, |id| report.runtimes.get(id).copied()),
        feedback: Some(report.render_text(View::Student, false)),
    }
}

/// The ids of the suite's checks whose runtime is gVisor, in suite order.
fn gvisor_checks(suite: &Suite, runtime_of: impl Fn(&str) -> Option<Runtime>) -> Vec<String> {
    suite
        .checks
        .iter()
        .filter(|c| runtime_of(&c.id) == Some(Runtime::Gvisor))
        .map(|c| c.id.clone())
        .collect()
}

/// What a stored row must have been graded in to still stand: the images the suite's names
/// point at now, and the checks that run under gVisor now.
struct Planned {
    images: Vec<UsedImage>,
    gvisor: Vec<String>,
}

/// Whether a stored row still stands for `sub`: same student, same files and suite
/// (`fingerprint`), graded in the planned images and runtimes.
fn still_valid(row: &Row, sub: &Submission, fingerprint: &str, planned: &Planned) -> bool {
    row.student == sub.student
        && row.feedback.is_some()
        && row.fingerprint == fingerprint
        && row.images == planned.images
        && row.gvisor == planned.gvisor
}

fn load_row(path: &Path) -> Option<Row> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

fn store_row(path: &Path, row: &Row) -> std::io::Result<()> {
    let tmp = path.with_extension("json.tmp");
    let text = serde_json::to_string_pretty(row).map_err(std::io::Error::other)? + "\n";
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

/// Grades every submission (in parallel), keeping stored results of unchanged submissions unless
/// `force`; calls `progress` after each. Returns the rows in the submissions' order.
pub fn grade_all(
    pool: &Arc<Pool>,
    registry: &LanguageRegistry,
    suite: &Suite,
    submissions: &[Submission],
    out_dir: &Path,
    opts: &BatchOptions,
    progress: &(dyn Fn(&Row, Progress) + Sync),
) -> Result<Vec<Row>, GradeError> {
    let io = |what: String| move |source| GradeError::Io { what, source };
    let results = out_dir.join(RESULTS_DIR);
    std::fs::create_dir_all(&results).map_err(io(format!("creating {}", results.display())))?;
    let settings = engine::plan(suite, registry, opts.images.as_ref(), &opts.runtime)?;
    // A stored result is kept only if it was graded in the images the suite names now (a name
    // moved to another digest grades again) and on the runtimes its checks get now.
    let planned = Planned {
        images: engine::planned_images(&settings),
        gvisor: gvisor_checks(suite, |id| {
            let i = suite.checks.iter().position(|c| c.id == id)?;
            Some(settings[i].runtime)
        }),
    };
    // Keep the pytest/check50 test folders (and so the pooled sandboxes' shape) for the batch.
    let _held = kinds::keep_folders(suite)
        .map_err(io("preparing the assignment's test files".to_string()))?;
    let rows: Mutex<Vec<Option<Row>>> = Mutex::new(vec![None; submissions.len()]);
    let next = Mutex::new(0usize);
    let write_error: Mutex<Option<GradeError>> = Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..opts.jobs.max(1).min(submissions.len().max(1)) {
            s.spawn(|| loop {
                let i = {
                    let mut n = next.lock().unwrap_or_else(|e| e.into_inner());
                    let i = *n;
                    *n += 1;
                    i
                };
                let Some(sub) = submissions.get(i) else { break };
                let file = results.join(result_file(&sub.student));
                let kept = (!opts.force)
                    .then(|| load_row(&file))
                    .flatten()
                    .filter(|r| still_valid(r, sub, &fingerprint(suite, &sub.path), &planned));
                let (row, how) = match kept {
                    Some(r) => (r, Progress::Kept),
                    None => {
                        let r = grade_one(pool, registry, suite, sub, opts);
                        if let Err(e) = store_row(&file, &r) {
                            tracing::error!(file = %file.display(), error = %e, "writing a result failed");
                            let mut w = write_error.lock().unwrap_or_else(|e| e.into_inner());
                            w.get_or_insert(GradeError::Io {
                                what: format!("writing {}", file.display()),
                                source: e,
                            });
                        }
                        (r, Progress::Graded)
                    }
                };
                progress(&row, how);
                rows.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(row);
            });
        }
    });
    if let Some(e) = write_error.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    Ok(rows
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .map(|r| r.expect("every submission has a row"))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::row::test_rows::graded;
    use super::*;

    /// A file the suite's `submission` leaves out changes no grade, nor the fingerprint; a file
    /// it takes does.
    #[test]
    fn files_a_suite_does_not_grade_leave_the_fingerprint_alone() {
        let a = tempfile::tempdir().unwrap();
        let sub = tempfile::tempdir().unwrap();
        std::fs::write(
            a.path().join("suite.yaml"),
            "name: t\nsubmission: {include: [\"*.c\"]}\nchecks:\n  - id: c\n    steps: [{exists: a.c}]\n",
        )
        .unwrap();
        let suite = Suite::load(&a.path().join("suite.yaml")).unwrap();
        std::fs::write(sub.path().join("a.c"), "int a;").unwrap();
        let before = fingerprint(&suite, sub.path());
        std::fs::write(sub.path().join("notes.txt"), "left out").unwrap();
        assert_eq!(before, fingerprint(&suite, sub.path()));
        std::fs::write(sub.path().join("a.c"), "int b;").unwrap();
        assert_ne!(before, fingerprint(&suite, sub.path()));
    }

    /// What the grade depends on changes the fingerprint: a file a step reads that `files`
    /// does not list (an expected output), and a file inside a folder that `files` lists.
    #[test]
    fn every_assignment_file_a_grade_depends_on_is_in_the_fingerprint() {
        let a = tempfile::tempdir().unwrap();
        let sub = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(a.path().join("data")).unwrap();
        std::fs::write(a.path().join("data/words.txt"), "apple\n").unwrap();
        std::fs::write(a.path().join("hidden_out.txt"), "42\n").unwrap();
        std::fs::write(
            a.path().join("suite.yaml"),
            "name: t\nfiles: [{path: data}]\nchecks:\n  - id: c\n    hidden: true\n    steps:\n      - run: cat\n      - stdout: {file: hidden_out.txt}\n",
        )
        .unwrap();
        let suite = Suite::load(&a.path().join("suite.yaml")).unwrap();
        let before = fingerprint(&suite, sub.path());
        assert_eq!(before, fingerprint(&suite, sub.path()), "stable");
        std::fs::write(a.path().join("hidden_out.txt"), "43\n").unwrap();
        let after_expected = fingerprint(&suite, sub.path());
        assert_ne!(before, after_expected, "a step's expected output changed");
        std::fs::write(a.path().join("data/words.txt"), "apricot\n").unwrap();
        assert_ne!(
            after_expected,
            fingerprint(&suite, sub.path()),
            "a file of a listed folder changed"
        );
    }

    #[test]
    fn a_stored_row_graded_in_another_digest_is_graded_again() {
        let image = |hex: &str| UsedImage {
            name: "course/numpy:1".into(),
            digest: format!("sha256:{}", hex.repeat(32)),
        };
        let row = Row {
            fingerprint: "f".into(),
            images: vec![image("ab")],
            ..graded("ann", 1.0, 1.0)
        };
        let sub = Submission {
            student: "ann".into(),
            path: PathBuf::from("/nonexistent"),
            problem: None,
            zip: false,
        };
        let planned = |images: Vec<UsedImage>, gvisor: &[&str]| Planned {
            images,
            gvisor: gvisor.iter().map(|s| s.to_string()).collect(),
        };
        assert!(still_valid(
            &row,
            &sub,
            "f",
            &planned(vec![image("ab")], &[])
        ));
        // The name now points at another digest: graded again.
        assert!(!still_valid(
            &row,
            &sub,
            "f",
            &planned(vec![image("cd")], &[])
        ));
        // Moved to the host root, or changed files: graded again.
        assert!(!still_valid(&row, &sub, "f", &planned(vec![], &[])));
        assert!(!still_valid(
            &row,
            &sub,
            "g",
            &planned(vec![image("ab")], &[])
        ));
        // A check that now runs under gVisor: graded again; one graded there stands.
        assert!(!still_valid(
            &row,
            &sub,
            "f",
            &planned(vec![image("ab")], &["a"])
        ));
        let on_gvisor = Row {
            gvisor: vec!["a".into()],
            ..row.clone()
        };
        assert!(still_valid(
            &on_gvisor,
            &sub,
            "f",
            &planned(vec![image("ab")], &["a"])
        ));
    }
}
