//! The container images a job names, so a worker can make sure it has each before judging.

use std::path::Path;

use corral_checks::{CheckKind, LanguageRegistry, Suite};

use crate::job::{suite_file, JobSpec};

/// Every image reference the job runs in: the request's image, else its language's (runs); for
/// suites, each check's image (its own, the request's over the suite's default, else its
/// language's), and the images its graders name (a Gradescope autograder's `base`, a
/// PrairieLearn grader's `image`). Each once, in order. A suite that cannot be read names none here (judging it
/// reports why).
pub fn images_needed(
    spec: &JobSpec,
    registry: &LanguageRegistry,
    suite_dir: Option<&Path>,
) -> Vec<String> {
    if spec.suite.is_none() {
        let language_image = || {
            spec.language
                .as_deref()
                .and_then(|id| registry.get(id).ok())
                .and_then(|l| l.image.clone())
        };
        return spec
            .image
            .clone()
            .or_else(language_image)
            .into_iter()
            .collect();
    }
    let Some(mut suite) = suite_dir
        .and_then(suite_file)
        .and_then(|f| Suite::load_in(&f, spec.image.as_deref()).ok())
    else {
        return Vec::new();
    };
    if spec.image.is_some() {
        suite.image = spec.image.clone();
    }
    suite_images(&suite, registry)
}

/// The images a loaded suite's checks run in (for a request's `image`, load the suite with it:
/// [`Suite::load_in`]): each check's own, the suite's default, else its language's; and the
/// images its graders name (a Gradescope autograder's `base`, a PrairieLearn grader's `image`).
/// Each once, in order.
pub fn suite_images(suite: &Suite, registry: &LanguageRegistry) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut add = |r: Option<&str>| {
        if let Some(r) = r {
            if !out.iter().any(|o| o == r) {
                out.push(r.to_string());
            }
        }
    };
    for check in &suite.checks {
        let image = suite.image_of(check).map(str::to_string).or_else(|| {
            suite
                .language_of(check)
                .and_then(|id| registry.get(id).ok())
                .and_then(|l| l.image.clone())
        });
        add(image.as_deref());
        // A grader's own image: a Gradescope autograder's base, a PrairieLearn grader's image.
        match &check.kind {
            CheckKind::Gradescope(g) => add(g.base.as_deref()),
            CheckKind::PrairieLearn(p) => add(p.image.as_deref()),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::SuiteRef;

    fn spec(json: serde_json::Value) -> JobSpec {
        serde_json::from_value(json).unwrap()
    }

    /// A job grading with the suite `x` (written by the test into its suite folder).
    fn suite_job() -> JobSpec {
        let limits = serde_json::to_value(corral_sandbox::Limits::default()).unwrap();
        let mut s = spec(serde_json::json!({"limits": limits}));
        s.suite = Some(SuiteRef {
            id: "x".into(),
            upload: None,
        });
        s
    }

    #[test]
    fn runs_need_the_requests_image_else_the_languages() {
        let mut r = LanguageRegistry::builtin();
        r.merge_str(
            "[languages.py]\nname = \"Py\"\nsource = \"m.py\"\nrun = \"python3 m.py\"\nimage = \"python:3.12-slim\"\n",
            "test",
        )
        .unwrap();
        let limits = serde_json::to_value(corral_sandbox::Limits::default()).unwrap();
        let s = spec(serde_json::json!({"language": "py", "limits": limits}));
        assert_eq!(images_needed(&s, &r, None), ["python:3.12-slim"]);
        let s =
            spec(serde_json::json!({"language": "py", "image": "course/py:2", "limits": limits}));
        assert_eq!(images_needed(&s, &r, None), ["course/py:2"]);
        let s = spec(serde_json::json!({"cmd": "true", "limits": limits}));
        assert!(images_needed(&s, &r, None).is_empty());
    }

    #[test]
    fn suites_need_each_checks_image() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("suite.yaml"),
            "name: x\nimage: course/base:1\nchecks:\n  - id: a\n    steps: [{run: ls}]\n  - id: b\n    image: course/numpy:1\n    steps: [{run: ls}]\n  - id: c\n    image: course/numpy:1\n    steps: [{run: ls}]\n",
        )
        .unwrap();
        let r = LanguageRegistry::builtin();
        let mut s = suite_job();
        assert_eq!(
            images_needed(&s, &r, Some(dir.path())),
            ["course/base:1", "course/numpy:1"]
        );
        s.image = Some("course/other:1".into());
        assert_eq!(
            images_needed(&s, &r, Some(dir.path())),
            ["course/other:1", "course/numpy:1"]
        );
    }

    #[test]
    fn suites_need_their_graders_images() {
        let dir = tempfile::tempdir().unwrap();
        for f in ["autograder/run_autograder", "tests/grade.py"] {
            let p = dir.path().join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "#!/bin/sh\n").unwrap();
        }
        std::fs::write(
            dir.path().join("suite.yaml"),
            "name: x\nchecks:\n  - id: gs\n    gradescope: {autograder: autograder, base: course/ubuntu:22.04}\n  - id: pl\n    prairielearn: {tests: tests, entrypoint: python3 /grade/tests/grade.py, image: course/pl-python:1}\n",
        )
        .unwrap();
        let r = LanguageRegistry::builtin();
        let s = suite_job();
        assert_eq!(
            images_needed(&s, &r, Some(dir.path())),
            ["course/ubuntu:22.04", "course/pl-python:1"]
        );
    }
}
