//! The `prairielearn` kind: a PrairieLearn external grader run unmodified (see
//! [`crate::suite::graders`] for its model and [`crate::contracts::prairielearn`] for the files).
//!
//! Each submission gets the documented layout: `/grade/student` (the student's files),
//! `/grade/tests` (the question's tests folder), `/grade/serverFilesCourse` (the course's
//! shared files, when given), `/grade/data/data.json` (the submission's data), `/grade/results/`
//! (writable). The entrypoint runs from `/grade` with the check's limits and timeout;
//! `/grade/results/results.json` becomes the rows.
//!
//! PrairieLearn runs graders in the question's Docker image: a check naming an `image` runs in
//! it (from the data folder's image store, never pulled); without one, on the host's system
//! folders.

use std::path::{Path, PathBuf};
use std::time::Instant;

use corral_sandbox::Root;

use crate::contracts::prairielearn::{self as contract, Mapped, MAX_RESULTS_BYTES};
use crate::kinds::grader_run::{
    ended, name_a_full_disk, output_row, output_tail, run_grader, runs_as_root_here, GraderRoot,
    GraderRun, Layout,
};
use crate::kinds::runner::{CheckContext, CheckRunner};
use crate::report::{CheckResult, Observation, ScriptEntry};
use crate::shared::rows::row;
use crate::shared::stage;
use crate::suite::PrairieLearnCheck;

/// `/grade` and what PrairieLearn puts in it.
pub const LAYOUT: Layout = Layout {
    root: "/grade",
    names: &["student", "tests", "serverFilesCourse", "data", "results"],
    env: &[],
};

/// The submission's regular files (relative paths), for `data.json`, at most 64 MiB in all.
fn student_files(dir: &Path) -> std::io::Result<Vec<(String, Vec<u8>)>> {
    let mut out = Vec::new();
    let mut total = 0u64;
    let mut stack = vec![(dir.to_path_buf(), String::new(), 0)];
    while let Some((at, rel, depth)) = stack.pop() {
        for e in std::fs::read_dir(&at)? {
            let e = e?;
            let name = e.file_name().to_string_lossy().into_owned();
            let r = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let ft = e.file_type()?; // links are not followed, nor listed
            if ft.is_dir() && depth < 16 {
                stack.push((e.path(), r, depth + 1));
            } else if ft.is_file() {
                let bytes = std::fs::read(e.path())?;
                total += bytes.len() as u64;
                if total > 64 << 20 {
                    return Err(std::io::Error::other("the submission is over 64 MiB"));
                }
                out.push((r, bytes));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The grader's own file the entrypoint runs, relative to `/grade`, when its command is one
/// (`/grade/tests/run.sh`, `tests/run.sh` from `/grade`): `None` for `python3 …` and the like.
fn entry_script(entrypoint: &str) -> Option<&str> {
    let first = entrypoint.split_whitespace().next()?;
    let rel = match first.strip_prefix("/grade/") {
        Some(rel) => rel,
        None if first.starts_with('/') => return None,
        None => first,
    };
    let rel = rel.trim_start_matches("./");
    let own = rel.starts_with("tests/") || rel.starts_with("serverFilesCourse/");
    (own && !rel.split('/').any(|c| c == ".." || c == ".")).then_some(rel)
}

/// `/grade`'s contents in `dir`. As root the grader makes `/grade/results` itself, as
/// PrairieLearn documents ("not automatically created"); as the sandbox's user, `/grade` is
/// read-only, so corral makes it.
fn stage_layout(
    cx: &CheckContext<'_>,
    pc: &PrairieLearnCheck,
    dir: &Path,
    as_root: bool,
) -> std::io::Result<()> {
    stage::copy_tree(cx.stage, &dir.join("student"))?;
    let tests = dir.join("tests");
    std::fs::create_dir_all(&tests)?;
    pc.tests_bundle.write_to(&tests)?;
    let course = dir.join("serverFilesCourse");
    std::fs::create_dir_all(&course)?;
    if let Some(b) = &pc.course_bundle {
        b.write_to(&course)?;
    }
    // PrairieLearn runs the entrypoint as its files' modes allow; a suite registered over HTTP
    // multipart has no modes to keep (a tar archive has), so the script it names is made
    // runnable whatever its mode said.
    if let Some(rel) = entry_script(&pc.entrypoint) {
        use std::os::unix::fs::PermissionsExt;
        let script = dir.join(rel);
        if std::fs::symlink_metadata(&script).is_ok_and(|m| m.is_file()) {
            std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))?;
        }
    }
    if !as_root {
        std::fs::create_dir_all(dir.join("results"))?;
    }
    std::fs::create_dir_all(dir.join("data"))?;
    let data = contract::data_json(&pc.params, &pc.correct_answers, &student_files(cx.stage)?);
    std::fs::write(
        dir.join("data/data.json"),
        serde_json::to_vec(&data).map_err(std::io::Error::other)?,
    )
}

fn run_check(cx: &CheckContext<'_>, pc: &PrairieLearnCheck) -> CheckResult {
    let check = cx.check;
    let started = Instant::now();
    let mut parent = CheckResult {
        max_points: pc.points,
        ..row(check)
    };
    let errored = |mut parent: CheckResult, why: String| {
        parent.result = Some(false);
        parent.points = 0.0;
        parent.message = Some(format!("could not be checked: {why}"));
        parent.error = Some(why);
        parent
    };
    // The question's grader image, from the data folder's store (never pulled).
    let root = match &pc.image {
        None => Root::Host,
        Some(image) => {
            let resolved = cx
                .resolve_image(image)
                .map_err(|e| format!("image {image:?}: {e}"));
            match resolved {
                Ok(r) => Root::Image(r),
                Err(why) => return errored(parent, why),
            }
        }
    };
    let as_root = match runs_as_root_here(cx, "prairielearn.root", pc.root, pc.image.is_some()) {
        Ok(r) => r,
        Err(why) => return errored(parent, why),
    };
    let tmp = match crate::shared::private_temp::private_tempdir("corral-prairielearn-") {
        Ok(t) => t,
        Err(e) => return errored(parent, format!("creating a temporary folder: {e}")),
    };
    if let Err(e) = stage_layout(cx, pc, tmp.path(), as_root) {
        return errored(parent, format!("preparing /grade: {e}"));
    }
    let run = run_grader(
        cx,
        GraderRoot { root, as_root },
        &LAYOUT,
        tmp.path(),
        &pc.entrypoint,
        "results/results.json",
        MAX_RESULTS_BYTES,
    );
    parent.time_ms = started.elapsed().as_millis() as u64;
    parent.script = vec![ScriptEntry {
        expected: Observation::new("run", pc.entrypoint.clone()),
        actual: match &run {
            GraderRun::Stopped { reason, .. } => Observation::new("limit", reason.clone()),
            GraderRun::Error(e) => Observation::new("error", e.clone()),
            GraderRun::Results { outcome, .. } | GraderRun::NoResults { outcome } => {
                Observation::new("exit", ended(outcome))
            }
        },
    }];
    let mut out = match &run {
        GraderRun::Error(e) => errored(parent, e.clone()),
        GraderRun::Stopped { reason, outcome } => {
            parent.message = Some(format!("the grader was stopped: {reason}"));
            parent.stopped_by = Some(outcome.status);
            parent
        }
        GraderRun::NoResults { outcome } => errored(
            parent,
            format!(
                "the grader ended ({}) without writing /grade/results/results.json (or left a \
                 link or special file there)",
                ended(outcome)
            ),
        ),
        GraderRun::Results { bytes, .. } => match contract::Results::parse(bytes) {
            Err(e) => errored(parent, e.to_string()),
            Ok(results) => match contract::map(&results, &check.id, pc.points, check.hidden) {
                Mapped::Failed(why) => errored(parent, why),
                // The student's to fix: a failed row with the grader's message, no error.
                Mapped::NotGradable(why) => {
                    parent.result = Some(false);
                    parent.points = 0.0;
                    parent.not_gradable = true;
                    parent.script.push(ScriptEntry {
                        expected: Observation::new("gradable", true),
                        actual: Observation::new("not_gradable", why.clone()),
                    });
                    parent.message = Some(why);
                    parent
                }
                Mapped::Graded {
                    points,
                    tests,
                    message,
                    passed,
                } => {
                    parent.result = Some(passed);
                    parent.points = points;
                    parent.message = Some(message);
                    parent.children = tests;
                    parent
                }
            },
        },
    };
    if let GraderRun::Results { outcome, .. }
    | GraderRun::NoResults { outcome }
    | GraderRun::Stopped { outcome, .. } = &run
    {
        // Staff see the end of the grader's output under the check's row when it wrote no
        // results or malformed ones, or was stopped.
        if matches!(run, GraderRun::NoResults { .. } | GraderRun::Stopped { .. })
            || out.error.is_some()
        {
            out.diagnostics = output_tail(outcome);
        }
        name_a_full_disk(&mut out, outcome);
        let ok = out.error.is_none() && out.stopped_by.is_none();
        out.children.push(output_row(check, outcome, false, ok));
    }
    out
}

impl CheckRunner for PrairieLearnCheck {
    fn run(&self, cx: &CheckContext<'_>) -> (CheckResult, Option<PathBuf>) {
        (run_check(cx, self), None)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_entrypoints_script_is_found_among_the_graders_files() {
        use super::entry_script;
        assert_eq!(entry_script("/grade/tests/run.sh"), Some("tests/run.sh"));
        assert_eq!(entry_script("tests/run.sh --x"), Some("tests/run.sh"));
        assert_eq!(entry_script("./tests/run.sh"), Some("tests/run.sh"));
        assert_eq!(
            entry_script("/grade/serverFilesCourse/grade"),
            Some("serverFilesCourse/grade")
        );
        assert_eq!(entry_script("python3 /grade/tests/grade.py"), None);
        assert_eq!(entry_script("/python_autograder/run.sh"), None);
        assert_eq!(entry_script("/grade/student/x.sh"), None);
        assert_eq!(entry_script("/grade/tests/../student/x.sh"), None);
    }
}
