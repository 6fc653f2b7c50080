//! The `gradescope` kind: a Gradescope autograder run unmodified (see
//! [`crate::suite::graders`] for its model and [`crate::contracts::gradescope`] for the files).
//!
//! Each submission gets the documented layout: `/autograder/source` (the autograder's files),
//! `/autograder/submission` (the student's files), `/autograder/results/` (writable),
//! `/autograder/submission_metadata.json`, and `/autograder/run_autograder`, which runs from
//! `/autograder` with the check's limits and timeout. Its `results/results.json` becomes the
//! rows: one per test with its points, the check's own row for the top-level score.
//!
//! The environment: on Gradescope, `setup.sh` runs once as root on an Ubuntu image. With a
//! `base`, [`crate::kinds::grader_env`] does the same in a build sandbox and caches the result;
//! without one, the autograder runs on the host's system folders and `setup.sh` is **not run**
//! (the check's script says so): whatever it would install must already be there.

use std::path::{Path, PathBuf};
use std::time::Instant;

use corral_sandbox::Root;

use crate::contracts::gradescope::{self as contract, Assignment, Visibility, MAX_RESULTS_BYTES};
use crate::kinds::grader_env;
use crate::kinds::grader_run::{
    ended, name_a_full_disk, output_row, output_tail, run_grader, runs_as_root_here, GraderRoot,
    GraderRun, Layout,
};
use crate::kinds::runner::{CheckContext, CheckRunner};
use crate::report::{CheckResult, GradescopeExtras, Observation, ScriptEntry};
use crate::shared::rows::row;
use crate::shared::stage;
use crate::suite::GradescopeCheck;

/// `/autograder` and what Gradescope's harness puts in it, plus what graders are known to create
/// there (on Gradescope `/autograder` is writable; here it is a read-only folder of links):
/// Otter-Grader's runner creates `/autograder/__init__.py` (a dangling link until then; opening
/// it to write creates the file in the working directory).
pub const LAYOUT: Layout = Layout {
    root: "/autograder",
    names: &[
        "source",
        "submission",
        "results",
        "submission_metadata.json",
        "run_autograder",
        "__init__.py",
    ],
    env: contract::ENV,
};

/// The working directory of one run: the layout's folders and files.
fn stage_layout(cx: &CheckContext<'_>, gc: &GradescopeCheck, dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let source = dir.join("source");
    std::fs::create_dir_all(&source)?;
    gc.bundle.write_to(&source)?;
    stage::copy_tree(cx.stage, &dir.join("submission"))?;
    std::fs::create_dir_all(dir.join("results"))?;
    let metadata = contract::submission_metadata(
        &Assignment {
            title: cx.suite.name.clone(),
            total_points: gc.total,
            dates: gc.dates.clone(),
        },
        cx.submitted.at.unwrap_or_else(jiff::Timestamp::now),
        cx.submitted.by.as_deref(),
    );
    std::fs::write(
        dir.join("submission_metadata.json"),
        serde_json::to_vec_pretty(&metadata).map_err(std::io::Error::other)?,
    )?;
    // The harness copies run_autograder to /autograder (through `dos2unix`) and runs it:
    // executable whatever the zip said.
    let run = dir.join("run_autograder");
    let script = std::fs::read(source.join("run_autograder"))?;
    std::fs::write(&run, contract::unix_line_endings(&script))?;
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o755))?;
    Ok(())
}

/// The base image with the autograder's `setup.sh` run on it (built once, then cached).
fn environment(
    cx: &CheckContext<'_>,
    gc: &GradescopeCheck,
    base: &str,
) -> Result<grader_env::Environment, String> {
    let image = cx
        .resolve_image(base)
        .map_err(|e| format!("base image {base:?}: {e}"))?;
    let store = cx
        .images
        .ok_or_else(|| "no image store was given (corral check --data DIR)".to_string())?;
    let cache = store
        .root()
        .parent()
        .unwrap_or(store.root())
        .join("graders/gradescope");
    grader_env::prepare(cx.pool.host(), &gc.bundle, &image, &cache)
}

fn run_check(cx: &CheckContext<'_>, gc: &GradescopeCheck) -> CheckResult {
    let check = cx.check;
    let started = Instant::now();
    let mut parent = CheckResult {
        max_points: gc.total.unwrap_or(0.0),
        ..row(check)
    };
    let fail = |mut parent: CheckResult, error: Option<String>, message: String| {
        parent.result = Some(false);
        parent.points = 0.0;
        parent.error = error;
        parent.message = Some(message);
        parent
    };
    let (root, setup) = match &gc.base {
        None => (
            Root::Host,
            match gc.bundle.get("setup.sh") {
                None => "no setup.sh".to_string(),
                Some(_) => {
                    "not run: no base image; the host's system folders are the environment".into()
                }
            },
        ),
        Some(base) => match environment(cx, gc, base) {
            Ok(env) => {
                let said = if env.built_now {
                    format!("ran on {base}: environment {}", env.key)
                } else {
                    format!("cached: environment {}", env.key)
                };
                (Root::Image(env.root), said)
            }
            Err(why) => {
                parent.script = vec![ScriptEntry {
                    expected: Observation::new("setup", "setup.sh"),
                    actual: Observation::new("error", why.clone()),
                }];
                return fail(
                    parent,
                    Some(why.clone()),
                    format!("could not be checked: {why}"),
                );
            }
        },
    };
    let mut script = vec![ScriptEntry {
        expected: Observation::new("setup", "setup.sh"),
        actual: Observation::new("setup", setup),
    }];
    let tmp = match crate::shared::private_temp::private_tempdir("corral-gradescope-") {
        Ok(t) => t,
        Err(e) => {
            let why = format!("creating a temporary folder: {e}");
            return fail(
                parent,
                Some(why.clone()),
                format!("could not be checked: {why}"),
            );
        }
    };
    if let Err(e) = stage_layout(cx, gc, tmp.path()) {
        let why = format!("preparing /autograder: {e}");
        return fail(
            parent,
            Some(why.clone()),
            format!("could not be checked: {why}"),
        );
    }
    let as_root = match runs_as_root_here(cx, "gradescope.root", gc.root, gc.base.is_some()) {
        Ok(r) => r,
        Err(why) => {
            return fail(
                parent,
                Some(why.clone()),
                format!("could not be checked: {why}"),
            )
        }
    };
    let run = run_grader(
        cx,
        GraderRoot { root, as_root },
        &LAYOUT,
        tmp.path(),
        "exec /autograder/run_autograder",
        "results/results.json",
        MAX_RESULTS_BYTES,
    );
    let outcome = match &run {
        GraderRun::Results { outcome, .. }
        | GraderRun::NoResults { outcome }
        | GraderRun::Stopped { outcome, .. } => Some(outcome),
        GraderRun::Error(_) => None,
    };
    script.push(ScriptEntry {
        expected: Observation::new("run", "/autograder/run_autograder"),
        actual: match &run {
            GraderRun::Stopped { reason, .. } => Observation::new("limit", reason.clone()),
            GraderRun::Error(e) => Observation::new("error", e.clone()),
            GraderRun::Results { outcome, .. } | GraderRun::NoResults { outcome } => {
                Observation::new("exit", ended(outcome))
            }
        },
    });
    parent.script = script;
    parent.time_ms = started.elapsed().as_millis() as u64;
    let mut out = match &run {
        GraderRun::Error(e) => fail(
            parent,
            Some(e.clone()),
            format!("could not be checked: {e}"),
        ),
        GraderRun::Stopped { reason, outcome } => CheckResult {
            stopped_by: Some(outcome.status),
            ..fail(
                parent,
                None,
                format!("run_autograder was stopped: {reason}"),
            )
        },
        GraderRun::NoResults { outcome } => {
            let why = format!(
                "run_autograder ended ({}) without writing results/results.json (or left a link \
                 or special file there)",
                ended(outcome)
            );
            fail(parent, Some(why.clone()), why)
        }
        GraderRun::Results { bytes, .. } => match contract::Results::parse(bytes) {
            Err(e) => {
                let why = e.to_string();
                fail(parent, Some(why.clone()), why)
            }
            Ok(results) => {
                let m = contract::map(&results, &check.id, gc.total, check.hidden);
                parent.result = Some(m.passed);
                parent.points = m.points;
                parent.max_points = m.max_points;
                parent.hidden = m.hidden;
                parent.message = Some(m.message);
                parent.script.extend(m.script);
                parent.children = m.tests;
                if m.extras != GradescopeExtras::default() {
                    parent.gradescope = Some(Box::new(m.extras));
                }
                let visible = results.stdout_visibility == Some(Visibility::Visible);
                if let Some(o) = outcome {
                    parent.children.push(output_row(check, o, visible, true));
                }
                return parent;
            }
        },
    };
    // Staff see the autograder's output even when it failed, and its end under the check's
    // row when it wrote no results or malformed ones (a Java grader whose javac failed leaves
    // an empty file) or was stopped.
    if let Some(o) = outcome {
        if !matches!(run, GraderRun::Error(_)) {
            out.diagnostics = output_tail(o);
        }
        name_a_full_disk(&mut out, o);
        out.children.push(output_row(check, o, false, false));
    }
    out
}

impl CheckRunner for GradescopeCheck {
    fn run(&self, cx: &CheckContext<'_>) -> (CheckResult, Option<PathBuf>) {
        (run_check(cx, self), None)
    }
}
