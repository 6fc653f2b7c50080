//! The models of the kinds that run a course's existing grader unmodified (see
//! [`crate::kinds::gradescope`] and [`crate::kinds::prairielearn`] for how they run):
//!
//! ```yaml
//! - id: autograder
//!   points: 10                        # the assignment's total (default: the tests' maximum)
//!   gradescope:
//!     autograder: autograder.zip      # a Gradescope autograder: a zip or a folder
//!     base: debian:bookworm           # optional: the image its setup.sh runs on, once
//!     setup: setup-pypi.sh            # optional: used instead of the autograder's setup.sh
//!     root: false                     # optional: run_autograder as the sandbox's user, not root
//! - id: fib
//!   points: 5                         # PrairieLearn's score (0-1) times this (default 1)
//!   prairielearn:
//!     tests: tests                    # the question's tests folder, /grade/tests
//!     entrypoint: python3 /grade/tests/grade.py
//!     image: my-course/grader-python  # optional: the grader's image
//!     server_files_course: serverFilesCourse   # optional: /grade/serverFilesCourse
//!     params: {n: 10}                 # optional: data.json's params and correct_answers
//!     root: false                     # optional: the entrypoint as the sandbox's user, not root
//! ```
//!
//! `root` (default: yes with an image, natively): the grader runs as root of its sandbox's own
//! user namespace over a writable, throwaway copy of its image, as both platforms run graders
//! (see `ImageRoot::as_root`); without an image it runs as the sandbox's unprivileged user.

use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

use super::paths::assignment_path;
use crate::contracts::bundle::Bundle;
use crate::contracts::gradescope::{parse_date, AssignmentDates};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawGradescope {
    autograder: String,
    #[serde(default)]
    base: Option<String>,
    #[serde(default)]
    setup: Option<String>,
    #[serde(default, deserialize_with = "super::values::opt_flag")]
    root: Option<bool>,
    #[serde(default)]
    release_date: Option<String>,
    #[serde(default)]
    due_date: Option<String>,
    #[serde(default)]
    late_due_date: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPrairieLearn {
    tests: String,
    entrypoint: String,
    #[serde(default)]
    image: Option<String>,
    #[serde(default)]
    server_files_course: Option<String>,
    #[serde(default)]
    params: Option<Value>,
    #[serde(default)]
    correct_answers: Option<Value>,
    #[serde(default, deserialize_with = "super::values::opt_flag")]
    root: Option<bool>,
}

/// A Gradescope autograder, read and checked when the suite is loaded.
#[derive(Debug, Clone)]
pub struct GradescopeCheck {
    /// The zip or folder (assignment path).
    pub autograder: String,
    /// The base image `setup.sh` runs on.
    pub base: Option<String>,
    /// The assignment's total points (the check's `points`), when given.
    pub total: Option<f64>,
    /// The autograder's files and digest.
    pub bundle: Arc<Bundle>,
    /// The assignment files it was read from (the zip, or every file of the folder).
    pub files: Vec<String>,
    /// `root:` as written (the default is decided where it runs: see [`runs_as_root`]).
    pub root: Option<bool>,
    /// The assignment's dates its `submission_metadata.json` gives.
    pub dates: AssignmentDates,
}

/// A PrairieLearn external grader.
#[derive(Debug, Clone)]
pub struct PrairieLearnCheck {
    pub tests: String,
    pub entrypoint: String,
    pub image: Option<String>,
    pub server_files_course: Option<String>,
    pub params: Value,
    pub correct_answers: Value,
    /// The question's points: the grader's score (0-1) times these.
    pub points: f64,
    pub tests_bundle: Arc<Bundle>,
    pub course_bundle: Option<Arc<Bundle>>,
    /// Every assignment file they were read from.
    pub files: Vec<String>,
    /// `root:` as written (see [`runs_as_root`]).
    pub root: Option<bool>,
}

/// Whether a grader runs as root of its sandbox: as written, else whenever it has an image, runs
/// on the host's kernel, and root mode can work on this host (`root_mode`: corral runs as root
/// on Linux 5.19+; see `ImageRoot::as_root`). `Err` for `root: true` where it cannot be.
pub fn runs_as_root(
    key: &str,
    written: Option<bool>,
    has_image: bool,
    gvisor: bool,
    root_mode: Result<(), &str>,
) -> Result<bool, String> {
    let why_not = if !has_image {
        Some("it has no image")
    } else if gvisor {
        Some("this check runs under gVisor")
    } else {
        root_mode.err()
    };
    match (written, why_not) {
        (None, why_not) => Ok(why_not.is_none()),
        (Some(false), _) => Ok(false),
        (Some(true), None) => Ok(true),
        (Some(true), Some(why)) => Err(format!(
            "{key}: a grader runs as root only in its image, natively, with corral running as root on Linux 5.19+ ({why}); set `root: false` to run it as the sandbox's user"
        )),
    }
}

/// The assignment paths of a bundle read from `rel`: the zip itself, or the folder's files.
fn files_of(rel: &str, full: &Path, bundle: &Bundle) -> Vec<String> {
    if full.is_dir() {
        bundle
            .files
            .iter()
            .map(|f| format!("{}/{}", rel.trim_end_matches('/'), f.path))
            .collect()
    } else {
        vec![rel.to_string()]
    }
}

fn read_bundle(dir: &Path, key: &str, rel: &str) -> Result<(Arc<Bundle>, Vec<String>), String> {
    assignment_path(dir, key, rel)?;
    let full = dir.join(rel);
    let bundle = Bundle::load(&full).map_err(|e| format!("{key}: {e}"))?;
    let files = files_of(rel, &full, &bundle);
    Ok((Arc::new(bundle), files))
}

/// The largest `gradescope.setup` script read.
const MAX_SETUP: u64 = 1 << 20;

/// A regular file's bytes, at most `max` (never following a link at the end).
fn read_capped(path: &Path, max: u64) -> Result<Vec<u8>, String> {
    let md = std::fs::symlink_metadata(path).map_err(|e| e.to_string())?;
    if !md.is_file() {
        return Err("not a regular file".into());
    }
    if md.len() > max {
        return Err(format!("larger than {max} bytes"));
    }
    std::fs::read(path).map_err(|e| e.to_string())
}

fn image_name(key: &str, name: &Option<String>) -> Result<(), String> {
    match name {
        Some(n) if n.trim().is_empty() || n.chars().any(char::is_whitespace) => {
            Err(format!("{key}: {n:?} is not an image name"))
        }
        _ => Ok(()),
    }
}

impl GradescopeCheck {
    pub(crate) fn resolve(
        raw: RawGradescope,
        points: Option<f64>,
        dir: &Path,
    ) -> Result<GradescopeCheck, String> {
        let (bundle, files) = read_bundle(dir, "gradescope.autograder", &raw.autograder)?;
        if bundle.get("run_autograder").is_none() {
            let nested = bundle
                .files
                .iter()
                .find(|f| f.path.ends_with("/run_autograder"))
                .map(|f| format!(" (found {}: zip the files, not their folder)", f.path))
                .unwrap_or_default();
            return Err(format!(
                "gradescope.autograder: {:?} has no run_autograder at its root{nested}",
                raw.autograder
            ));
        }
        image_name("gradescope.base", &raw.base)?;
        let date = |key: &str, text: &Option<String>| {
            text.as_deref()
                .map(|t| parse_date(&format!("gradescope.{key}"), t))
                .transpose()
        };
        let dates = AssignmentDates {
            release: date("release_date", &raw.release_date)?,
            due: date("due_date", &raw.due_date)?,
            late_due: date("late_due_date", &raw.late_due_date)?,
        };
        if raw.root == Some(true) && raw.base.is_none() {
            return Err(
                "gradescope.root: run_autograder runs as root only on a `base` image: name one"
                    .into(),
            );
        }
        let (bundle, files) = match &raw.setup {
            None => (bundle, files),
            Some(_) if raw.base.is_none() => return Err(
                "gradescope.setup: replaces setup.sh, which runs only on a `base` image: name one"
                    .into(),
            ),
            Some(rel) => {
                assignment_path(dir, "gradescope.setup", rel)?;
                let path = dir.join(rel);
                let bytes = read_capped(&path, MAX_SETUP)
                    .map_err(|e| format!("gradescope.setup: {rel}: {e}"))?;
                let bundle = bundle
                    .with_file("setup.sh", bytes)
                    .map_err(|e| format!("gradescope.setup: {e}"))?;
                let mut files = files;
                files.push(rel.clone());
                (Arc::new(bundle), files)
            }
        };
        Ok(GradescopeCheck {
            autograder: raw.autograder,
            base: raw.base,
            total: points,
            bundle,
            files,
            root: raw.root,
            dates,
        })
    }
}

impl PrairieLearnCheck {
    pub(crate) fn resolve(
        raw: RawPrairieLearn,
        points: f64,
        dir: &Path,
    ) -> Result<PrairieLearnCheck, String> {
        if !dir.join(&raw.tests).is_dir() {
            assignment_path(dir, "prairielearn.tests", &raw.tests)?;
            return Err(format!(
                "prairielearn.tests: {:?} is not a folder",
                raw.tests
            ));
        }
        let (tests_bundle, mut files) = read_bundle(dir, "prairielearn.tests", &raw.tests)?;
        let course_bundle = match &raw.server_files_course {
            Some(p) => {
                if !dir.join(p).is_dir() {
                    assignment_path(dir, "prairielearn.server_files_course", p)?;
                    return Err(format!(
                        "prairielearn.server_files_course: {p:?} is not a folder"
                    ));
                }
                let (b, f) = read_bundle(dir, "prairielearn.server_files_course", p)?;
                files.extend(f);
                Some(b)
            }
            None => None,
        };
        if raw.entrypoint.trim().is_empty() {
            return Err("prairielearn.entrypoint: must not be empty".into());
        }
        image_name("prairielearn.image", &raw.image)?;
        if raw.root == Some(true) && raw.image.is_none() {
            return Err(
                "prairielearn.root: the entrypoint runs as root only in the grader's `image`: name one"
                    .into(),
            );
        }
        for (key, v) in [
            ("params", &raw.params),
            ("correct_answers", &raw.correct_answers),
        ] {
            if v.as_ref().is_some_and(|v| !v.is_object()) {
                return Err(format!("prairielearn.{key}: must be a mapping"));
            }
        }
        Ok(PrairieLearnCheck {
            tests: raw.tests,
            entrypoint: raw.entrypoint,
            image: raw.image,
            server_files_course: raw.server_files_course,
            params: raw
                .params
                .unwrap_or_else(|| Value::Object(Default::default())),
            correct_answers: raw
                .correct_answers
                .unwrap_or_else(|| Value::Object(Default::default())),
            points,
            tests_bundle,
            course_bundle,
            files,
            root: raw.root,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::runs_as_root;

    #[test]
    fn a_grader_is_root_by_default_wherever_root_mode_can_be() {
        let k = "prairielearn.root";
        let ok = Ok(());
        let rootless = Err("corral runs rootless");
        // (written, has_image, gvisor, root mode here) -> runs as root
        assert_eq!(runs_as_root(k, None, true, false, ok), Ok(true));
        assert_eq!(runs_as_root(k, None, false, false, ok), Ok(false));
        assert_eq!(runs_as_root(k, None, true, true, ok), Ok(false));
        assert_eq!(runs_as_root(k, None, true, false, rootless), Ok(false));
        assert_eq!(runs_as_root(k, Some(false), true, false, ok), Ok(false));
        assert_eq!(runs_as_root(k, Some(true), true, false, ok), Ok(true));
        for (image, gvisor, here, why) in [
            (false, false, ok, "no image"),
            (true, true, ok, "gVisor"),
            (true, false, rootless, "rootless"),
        ] {
            let e = runs_as_root(k, Some(true), image, gvisor, here).unwrap_err();
            assert!(
                e.starts_with(k) && e.contains(why) && e.contains("root: false"),
                "{e}"
            );
        }
    }
}
