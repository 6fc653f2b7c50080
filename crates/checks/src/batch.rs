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

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use corral_images::document::DocumentError;
use corral_images::Store as ImageStore;
use corral_sandbox::{Pool, Runtime, RuntimePolicy};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::engine::{self, GradeOptions};
use crate::error::{GradeError, SuiteError};
use crate::image_root::UsedImage;
use crate::kinds;
use crate::language_registry::LanguageRegistry;
use crate::report::View;
use crate::suite::{CheckKind, Suite};

/// Suite file names looked for in an assignment folder, in this order.
pub const SUITE_FILES: &[&str] = &["suite.yaml", "suite.yml", "suite.json"];
/// Where per-student results go, under the output folder.
pub const RESULTS_DIR: &str = "results";

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
    /// The entry's name: the student's id.
    pub student: String,
    pub path: PathBuf,
    /// Set when the entry cannot be graded as it is (not a folder, …).
    pub problem: Option<String>,
}

/// The submissions folder's entries, sorted by name; hidden entries (`.…`) are ignored.
pub fn discover(dir: &Path) -> std::io::Result<Vec<Submission>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let ft = entry.file_type()?;
        let problem = if ft.is_dir() {
            None
        } else if ft.is_symlink() {
            Some("a symbolic link, not a folder (not followed)".to_string())
        } else {
            Some("not a folder (extract archives into a folder per student)".to_string())
        };
        out.push(Submission {
            student: name,
            path: entry.path(),
            problem,
        });
    }
    out.sort_by(|a, b| a.student.cmp(&b.student));
    Ok(out)
}

/// How a submission's grading went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RowStatus {
    /// Every check was judged (passed or failed).
    Graded,
    /// Some check could not be judged (sandbox failure, an invalid pytest/check50 run), or the
    /// submission could not be graded at all: look at `reason`.
    Error,
}

impl RowStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RowStatus::Graded => "graded",
            RowStatus::Error => "error",
        }
    }
}

/// One student's stored result (`results/STUDENT.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub student: String,
    pub status: RowStatus,
    pub score: f64,
    pub max_score: f64,
    /// Why points were lost or the submission could not be graded, in one line per cause.
    pub reason: Option<String>,
    /// Protected files the submission replaced (`path (reason)`).
    pub integrity: Vec<String>,
    /// The static safety check's findings, when it ran.
    pub safety: Option<Vec<String>>,
    /// Per report row: (result, points).
    pub checks: BTreeMap<String, (Option<bool>, f64)>,
    pub time_ms: u64,
    /// Seconds since the epoch.
    pub graded_at: u64,
    /// What was graded (suite and submission contents); a changed submission is graded again.
    pub fingerprint: String,
    /// corral's staff JSON report (`null` when the submission could not be graded).
    pub report: Value,
    /// The container images the submission was graded in (empty: the host root).
    #[serde(default)]
    pub images: Vec<UsedImage>,
    /// The checks graded under gVisor, in suite order (empty: every check ran natively).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gvisor: Vec<String>,
}

/// The rows every report of this suite has, in order: (id, description, max points).
pub fn columns(suite: &Suite) -> Vec<(String, String, f64)> {
    let mut out = Vec::new();
    for c in &suite.checks {
        match c.rubric() {
            Some(items) => {
                out.push((c.id.clone(), c.description.clone(), 0.0));
                for i in items {
                    out.push((i.id.to_string(), i.description.to_string(), i.points));
                }
            }
            None => out.push((c.id.clone(), c.description.clone(), c.points)),
        }
    }
    out
}

/// [`columns`] with the rows only known once graders ran (the tests of `gradescope` and
/// `prairielearn` checks) after their check, in natural order of their ids, with the largest
/// maximum any student's report gave them.
pub fn columns_seen(suite: &Suite, rows: &[Row]) -> Vec<(String, String, f64)> {
    let mut out = Vec::new();
    for col in columns(suite) {
        let prefix = format!("{}/", col.0);
        let dynamic = suite.check(&col.0).is_some_and(|c| {
            matches!(
                c.kind,
                CheckKind::Gradescope(_) | CheckKind::PrairieLearn(_)
            )
        });
        out.push(col);
        if !dynamic {
            continue;
        }
        let mut seen: Vec<(String, String, f64)> = Vec::new();
        for r in rows {
            for id in r.checks.keys().filter(|k| k.starts_with(&prefix)) {
                let row = &r.report["results"][id];
                let max = row["max_points"].as_f64().unwrap_or(0.0);
                match seen.iter_mut().find(|(s, _, _)| s == id) {
                    Some(s) => s.2 = s.2.max(max),
                    None => seen.push((
                        id.clone(),
                        row["description"].as_str().unwrap_or(id).to_string(),
                        max,
                    )),
                }
            }
        }
        seen.sort_by_key(|c| natural(&c.0));
        out.extend(seen);
    }
    out
}

/// A sort key comparing runs of digits as numbers (`t/2` before `t/10`).
fn natural(s: &str) -> Vec<(u8, u128, String)> {
    let mut out = Vec::new();
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits > 0 {
            out.push((
                0,
                rest[..digits].parse().unwrap_or(u128::MAX),
                String::new(),
            ));
            rest = &rest[digits..];
        } else {
            let text = rest
                .find(|c: char| c.is_ascii_digit())
                .unwrap_or(rest.len());
            out.push((1, 0, rest[..text].to_string()));
            rest = &rest[text..];
        }
    }
    out
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
    fn walk(p: &Path, h: &mut Fnv, depth: usize) {
        let Ok(rd) = std::fs::read_dir(p) else {
            return;
        };
        let mut entries: Vec<_> = rd.filter_map(Result::ok).collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let Ok(ft) = e.file_type() else { continue };
            e.file_name().to_string_lossy().hash(h);
            if ft.is_dir() && depth < 32 {
                1u8.hash(h);
                walk(&e.path(), h, depth + 1);
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
        std::fs::read(&n).unwrap_or_default().hash(&mut h);
    }
    walk(submission, &mut h, 0);
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
        reason: Some(why),
        integrity: Vec::new(),
        safety: None,
        checks: BTreeMap::new(),
        time_ms: 0,
        graded_at: now(),
        fingerprint: fp,
        report: Value::Null,
        images: Vec::new(),
        gvisor: Vec::new(),
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
    };
    let report = match engine::grade(pool, registry, suite, &sub.path, &grade_opts) {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "grading the submission failed");
            return failed_row(suite, sub, e.to_string(), fp);
        }
    };
    let status = if report.has_errors() {
        RowStatus::Error
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

/// A file name for a student's result (the id, with anything unusual replaced).
pub fn result_file(student: &str) -> String {
    let safe: String = student
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || "-_.@+".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{safe}.json")
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

fn num(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x:.2}")
    }
}

fn csv_field(s: &str) -> String {
    // A leading =, +, - or @ would be a formula in a spreadsheet: quote it behind a '.
    let s = if s.starts_with(['=', '+', '-', '@']) && s.parse::<f64>().is_err() {
        format!("'{s}")
    } else {
        s.to_string()
    };
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}

/// The gradebook: one line per student; per report row, the points (rows worth points) or
/// `pass` / `fail` / `skip`.
pub fn gradebook_csv(suite: &Suite, rows: &[Row]) -> String {
    let cols = columns_seen(suite, rows);
    let mut out = String::new();
    let mut head = vec![
        "student".to_string(),
        "score".into(),
        "max_score".into(),
        "percent".into(),
        "status".into(),
        "reason".into(),
        "integrity".into(),
        "safety".into(),
        "image".into(),
        "runtime".into(),
    ];
    head.extend(cols.iter().map(|(id, _, _)| id.clone()));
    out.push_str(
        &head
            .iter()
            .map(|h| csv_field(h))
            .collect::<Vec<_>>()
            .join(","),
    );
    out.push('\n');
    for r in rows {
        let pct = if r.max_score > 0.0 {
            format!("{:.1}", 100.0 * r.score / r.max_score)
        } else {
            String::new()
        };
        let mut f = vec![
            r.student.clone(),
            num(r.score),
            num(r.max_score),
            pct,
            r.status.as_str().to_string(),
            r.reason.clone().unwrap_or_default(),
            if r.integrity.is_empty() {
                "ok".into()
            } else {
                r.integrity.join("; ")
            },
            match &r.safety {
                None => String::new(),
                Some(s) if s.is_empty() => "ok".into(),
                Some(s) => s.join("; "),
            },
            images_cell(&r.images),
            runtime_cell(suite, r),
        ];
        for (id, _, max) in &cols {
            f.push(match r.checks.get(id) {
                None => String::new(),
                Some((_, p)) if *max > 0.0 => num(*p),
                Some((Some(true), _)) => "pass".into(),
                Some((Some(false), _)) => "fail".into(),
                Some((None, _)) => "skip".into(),
            });
        }
        out.push_str(&f.iter().map(|x| csv_field(x)).collect::<Vec<_>>().join(","));
        out.push('\n');
    }
    out
}

/// A row's runtime for a gradebook cell: `native`, `gvisor`, or `gvisor: A; B` when only those
/// checks ran under gVisor (empty: not graded).
fn runtime_cell(suite: &Suite, r: &Row) -> String {
    if r.report.is_null() {
        String::new()
    } else if r.gvisor.is_empty() {
        "native".into()
    } else if r.gvisor.len() == suite.checks.len() {
        "gvisor".into()
    } else {
        format!("gvisor: {}", r.gvisor.join("; "))
    }
}

/// A row's images for a gradebook cell: `NAME@DIGEST`, `; `-separated (empty: the host root).
fn images_cell(images: &[UsedImage]) -> String {
    images
        .iter()
        .map(|i| {
            format!(
                "{}@{}",
                i.name.split('@').next().unwrap_or(&i.name),
                i.digest
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// Score counts in `bins` equal ranges of `[0, max]` (the last range includes `max`).
pub fn histogram(rows: &[Row], max: f64, bins: usize) -> Vec<usize> {
    let mut h = vec![0; bins.max(1)];
    for r in rows {
        let f = if max > 0.0 { r.score / max } else { 0.0 };
        let i = ((f * h.len() as f64).floor() as usize).min(h.len() - 1);
        h[i] += 1;
    }
    h
}

/// Per report row: (id, description, passed, judged).
pub fn pass_rates(suite: &Suite, rows: &[Row]) -> Vec<(String, String, usize, usize)> {
    columns_seen(suite, rows)
        .into_iter()
        .map(|(id, desc, _)| {
            let (mut passed, mut judged) = (0, 0);
            for r in rows {
                if let Some((res, _)) = r.checks.get(&id) {
                    judged += 1;
                    if *res == Some(true) {
                        passed += 1;
                    }
                }
            }
            (id, desc, passed, judged)
        })
        .collect()
}

/// A self-contained HTML report: summary, a score histogram (inline SVG), per-check pass rates
/// and the students' rows. No scripts, styles inline, no external assets.
pub fn html_report(suite: &Suite, rows: &[Row]) -> String {
    let max = suite.max_score();
    let mut scores: Vec<f64> = rows.iter().map(|r| r.score).collect();
    scores.sort_by(|a, b| a.total_cmp(b));
    let mean = if scores.is_empty() {
        0.0
    } else {
        scores.iter().sum::<f64>() / scores.len() as f64
    };
    let median = if scores.is_empty() {
        0.0
    } else if scores.len() % 2 == 1 {
        scores[scores.len() / 2]
    } else {
        (scores[scores.len() / 2 - 1] + scores[scores.len() / 2]) / 2.0
    };
    let errors = rows.iter().filter(|r| r.status == RowStatus::Error).count();
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{} — grades</title>\n\
         <style>body{{font-family:system-ui,sans-serif;margin:2em;color:#222}}table{{border-collapse:collapse}}\
         td,th{{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top}}\
         th{{background:#f4f4f4}}.num{{text-align:right}}.error{{color:#b00020}}.bar{{background:#4a7;height:.8em}}</style>\n\
         </head><body>\n<h1>{}</h1>\n",
        esc(&suite.name),
        esc(&suite.name)
    );
    if let Some(d) = &suite.description {
        let _ = writeln!(h, "<p>{}</p>", esc(d));
    }
    let _ = writeln!(
        h,
        "<p>{} submissions · mean {} · median {} · maximum score {} · {} with errors</p>",
        rows.len(),
        num((mean * 100.0).round() / 100.0),
        num(median),
        num(max),
        errors
    );
    // Histogram.
    let bins = 10;
    let counts = histogram(rows, max, bins);
    let top = counts.iter().copied().max().unwrap_or(0).max(1);
    let (w, bh, pad) = (48, 160, 30);
    let width = bins * w + 2 * pad;
    let height = bh + 2 * pad + 20;
    let _ = writeln!(
        h,
        "<h2>Scores</h2>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" role=\"img\" aria-label=\"score histogram\">"
    );
    for (i, c) in counts.iter().enumerate() {
        let bar = (bh * c) / top;
        let x = pad + i * w;
        let y = pad + bh - bar;
        let lo = max * i as f64 / bins as f64;
        let hi = max * (i + 1) as f64 / bins as f64;
        let _ = writeln!(
            h,
            "<rect class=\"bin\" x=\"{}\" y=\"{y}\" width=\"{}\" height=\"{bar}\" fill=\"#4a7\"><title>{}–{}: {c}</title></rect>\
             <text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\">{c}</text>\
             <text x=\"{}\" y=\"{}\" font-size=\"10\" text-anchor=\"middle\">{}</text>",
            x + 2,
            w - 4,
            num((lo * 100.0).round() / 100.0),
            num((hi * 100.0).round() / 100.0),
            x + w / 2,
            y.saturating_sub(3).max(10),
            x + w / 2,
            pad + bh + 14,
            num((lo * 10.0).round() / 10.0),
        );
    }
    let _ = writeln!(
        h,
        "<line x1=\"{pad}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#222\"/>\
         <text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\">score (each bar: from its label up to the next; the last includes {})</text></svg>",
        pad + bh,
        pad + bins * w,
        pad + bh,
        pad + bins * w / 2,
        pad + bh + 32,
        num(max)
    );
    // Pass rates.
    let _ = writeln!(
        h,
        "<h2>Checks</h2>\n<table><tr><th>check</th><th>description</th><th class=\"num\">passed</th><th>rate</th></tr>"
    );
    for (id, desc, passed, judged) in pass_rates(suite, rows) {
        let pct = if judged > 0 {
            100.0 * passed as f64 / judged as f64
        } else {
            0.0
        };
        let _ = writeln!(
            h,
            "<tr><td><code>{}</code></td><td>{}</td><td class=\"num\">{passed}/{judged}</td>\
             <td><div style=\"width:10em;background:#eee\"><div class=\"bar\" style=\"width:{pct:.0}%\"></div></div> {pct:.0}%</td></tr>",
            esc(&id),
            esc(&desc)
        );
    }
    let _ = writeln!(h, "</table>");
    // Students.
    let _ = writeln!(
        h,
        "<h2>Submissions</h2>\n<table><tr><th>student</th><th class=\"num\">score</th><th>status</th><th>reason</th><th>image</th><th>runtime</th></tr>"
    );
    for r in rows {
        let _ = writeln!(
            h,
            "<tr><td><a href=\"{}/{}\">{}</a></td><td class=\"num\">{}/{}</td><td class=\"{}\">{}</td><td>{}</td><td><code>{}</code></td><td>{}</td></tr>",
            RESULTS_DIR,
            esc(&result_file(&r.student)),
            esc(&r.student),
            num(r.score),
            num(r.max_score),
            r.status.as_str(),
            r.status.as_str(),
            esc(r.reason.as_deref().unwrap_or("")),
            esc(&images_cell(&r.images)),
            esc(&runtime_cell(suite, r))
        );
    }
    let _ = writeln!(h, "</table>\n</body></html>");
    h
}

/// Writes `gradebook.csv` and `report.html` into `out_dir`.
pub fn write_outputs(suite: &Suite, rows: &[Row], out_dir: &Path) -> std::io::Result<()> {
    std::fs::write(out_dir.join("gradebook.csv"), gradebook_csv(suite, rows))?;
    std::fs::write(out_dir.join("report.html"), html_report(suite, rows))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_quotes_and_defuses_formulas() {
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("=cmd()"), "'=cmd()");
        assert_eq!(csv_field("-3"), "-3");
        assert_eq!(csv_field("plain"), "plain");
    }

    /// A graded row of `student` with nothing else recorded.
    fn graded(student: &str, score: f64, max_score: f64) -> Row {
        Row {
            student: student.into(),
            status: RowStatus::Graded,
            score,
            max_score,
            reason: None,
            integrity: vec![],
            safety: None,
            checks: BTreeMap::new(),
            time_ms: 0,
            graded_at: 0,
            fingerprint: String::new(),
            report: Value::Null,
            images: vec![],
            gvisor: vec![],
        }
    }

    #[test]
    fn histogram_bins_include_the_maximum() {
        let row = |s: f64| graded("x", s, 10.0);
        let rows: Vec<Row> = [0.0, 0.5, 5.0, 9.99, 10.0].into_iter().map(row).collect();
        let h = histogram(&rows, 10.0, 10);
        assert_eq!(h, vec![2, 0, 0, 0, 0, 1, 0, 0, 0, 2]);
        assert_eq!(esc("<a href='x'>&"), "&lt;a href=&#39;x&#39;&gt;&amp;");
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

    #[test]
    fn gradebook_rows_record_their_images() {
        let suite = crate::suite::Suite::parse(
            "name: x\nchecks:\n  - id: a\n    steps: [{run: ls}]\n",
            Path::new("/tmp/suite.yaml"),
            false,
        )
        .unwrap();
        let digest = format!("sha256:{}", "cd".repeat(32));
        let row = |student: &str, images: Vec<UsedImage>| Row {
            student: student.into(),
            status: RowStatus::Graded,
            score: 1.0,
            max_score: 1.0,
            reason: None,
            integrity: vec![],
            safety: None,
            checks: BTreeMap::from([("a".to_string(), (Some(true), 1.0))]),
            time_ms: 0,
            graded_at: 0,
            fingerprint: String::new(),
            report: serde_json::json!({}),
            images,
            gvisor: vec![],
        };
        let used = UsedImage {
            name: "course/numpy:1".into(),
            digest: digest.clone(),
        };
        let rows = vec![row("ann", vec![used.clone()]), row("bob", vec![])];
        let csv = gradebook_csv(&suite, &rows);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(
            lines[0],
            "student,score,max_score,percent,status,reason,integrity,safety,image,runtime,a"
        );
        assert_eq!(
            lines[1],
            format!("ann,1,1,100.0,graded,,ok,,course/numpy:1@{digest},native,1")
        );
        assert_eq!(lines[2], "bob,1,1,100.0,graded,,ok,,,native,1");
        let on_gvisor = Row {
            gvisor: vec!["a".into()],
            ..row("cy", vec![])
        };
        let csv = gradebook_csv(&suite, &[on_gvisor]);
        assert_eq!(
            csv.lines().nth(1),
            Some("cy,1,1,100.0,graded,,ok,,,gvisor,1")
        );
        let html = html_report(&suite, &rows);
        assert!(
            html.contains(&format!("<code>course/numpy:1@{digest}</code>")),
            "{html}"
        );
        // Results stored before images were recorded still load (no image: the host root).
        let mut old = serde_json::to_value(&rows[1]).unwrap();
        old.as_object_mut().unwrap().remove("images");
        let back: Row = serde_json::from_value(old).unwrap();
        assert!(back.images.is_empty());
        let back: Row = serde_json::from_value(serde_json::to_value(&rows[0]).unwrap()).unwrap();
        assert_eq!(back.images, vec![used]);
    }
}
