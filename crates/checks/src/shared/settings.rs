//! A check's run settings: its language, limits, mounts, environment, timeout, root (host or
//! image) and runtime, resolved once from the language registry, the image store, the suite and the check
//! before anything runs.

use std::collections::BTreeMap;
use std::time::Duration;

use corral_images::Store as ImageStore;
use corral_sandbox::{Limits, Mount, Restrictions, Root, Runtime, RuntimePolicy};

use crate::error::GradeError;
use crate::image_root::{self, UsedImage};
use crate::language_registry::{Language, LanguageRegistry};
use crate::suite::{Check, CheckKind, Command, Step, Suite};

/// What every run of one check uses, resolved once (not the sandbox's per-run `RunSpec`).
#[derive(Debug, Clone)]
pub struct RunSettings {
    pub limits: Limits,
    pub mounts: Vec<Mount>,
    pub env: Vec<(String, String)>,
    pub timeout: Duration,
    /// The check's language, for `{compile}`, `{run}` and `{source}` in commands.
    pub language: Option<Language>,
    /// What `/` is for the check's sandboxes: the check's (or suite's) image, else its language's,
    /// else the host's.
    pub root: Root,
    /// The seccomp profile the check or suite names for all its runs (`None`: the language's
    /// for runs of its program, see [`RunSettings::launch`]).
    pub seccomp: Option<Restrictions>,
    /// The kernel of the check's sandboxes: the check's, else the suite's, else its language's,
    /// else the caller's default; gVisor whatever they say under the caller's `force_gvisor`.
    pub runtime: Runtime,
    /// A grader's own image (its kind resolves it when it runs, not through `root`): a
    /// Gradescope check's environment over its `base`, a PrairieLearn check's `image`. `None`
    /// when it names none, or the store lacks it (the check says why when it runs).
    pub grader_image: Option<UsedImage>,
}

impl RunSettings {
    /// The image the check is graded in, as results record it (`None`: the host's folders).
    pub fn used_image(&self) -> Option<UsedImage> {
        self.grader_image
            .clone()
            .or_else(|| UsedImage::of(&self.root))
    }

    /// What a `run` step of `cmd` (as the suite wrote it) executes, and under which seccomp
    /// profile: the check's or suite's when it names one; otherwise the language's for a run of
    /// the language's program (`{run}`), and the default for anything else (compilers, tools and
    /// shells start other programs). Under `no_spawn` a simple command is exec'd directly (a
    /// shell could not exec it); a language's `no_spawn` is left out when the command needs the
    /// shell, a suite's is kept (the shell's exec is then reported).
    pub fn launch(&self, cmd: &Command) -> (Vec<String>, Restrictions) {
        let expanded = self.expand(cmd);
        let mut seccomp = match (&self.seccomp, &self.language) {
            (Some(s), _) => s.clone(),
            (None, Some(lang)) if cmd.runs_program() => lang.seccomp.clone(),
            _ => Restrictions::default(),
        };
        match expanded.direct_argv() {
            Some(argv) if seccomp.no_spawn => (argv, seccomp),
            _ => {
                if self.seccomp.is_none() {
                    seccomp.no_spawn = false;
                }
                (expanded.argv(), seccomp)
            }
        }
    }

    /// The seccomp profile of a harness that runs the submission's code (pytest, check50): the
    /// check's or suite's, else the language's without `no_spawn` (check50 starts the program as
    /// a child; tests may too).
    pub fn harness_seccomp(&self) -> Restrictions {
        match (&self.seccomp, &self.language) {
            (Some(s), _) => s.clone(),
            (None, Some(lang)) => Restrictions {
                no_spawn: false,
                ..lang.seccomp.clone()
            },
            (None, None) => Restrictions::default(),
        }
    }

    /// A command with the language placeholders replaced.
    pub fn expand(&self, cmd: &Command) -> Command {
        let Some(lang) = &self.language else {
            return cmd.clone();
        };
        match cmd {
            // The language's own commands are already sized (`for_suite`); a step's own
            // command may name the check's memory limit too (`java -XX:MaxRAM={memory_mib}m`).
            Command::Shell(s) => Command::Shell(crate::language_registry::fill_memory(
                &s.replace("{compile}", lang.compile.as_deref().unwrap_or("true"))
                    .replace("{run}", &lang.run)
                    .replace("{source}", &lang.source),
                &self.limits,
            )),
            Command::Argv(a) => Command::Argv(
                a.iter()
                    .map(|x| {
                        if x == "{source}" {
                            lang.source.clone()
                        } else {
                            x.clone()
                        }
                    })
                    .collect(),
            ),
        }
    }
}

/// The kernel a check runs on under `policy`: the check's, else the suite's, else its
/// language's, else the policy's default (gVisor whatever they say under `force_gvisor`). An
/// unknown language counts as naming none ([`for_suite`] refuses it before anything runs).
pub fn runtime_of(
    suite: &Suite,
    check: &Check,
    registry: &LanguageRegistry,
    policy: &RuntimePolicy,
) -> Runtime {
    let language = suite
        .language_of(check)
        .and_then(|id| registry.get(id).ok());
    choose_runtime(suite, check, language, policy)
}

fn choose_runtime(
    suite: &Suite,
    check: &Check,
    language: Option<&Language>,
    policy: &RuntimePolicy,
) -> Runtime {
    policy.choose(suite.runtime_of(check).or(language.and_then(|l| l.runtime)))
}

/// Resolves language, limits, timeout, root and runtime (under `runtime`, the caller's policy) of
/// every check of the suite, in suite order; fails on an unknown or unavailable language or an
/// image `images` lacks before anything runs.
/// Each image reference is resolved once, so every check naming it runs in the same digest; a
/// reference in `pins` resolves to its pinned digest instead (see [`image_root::pinned`]).
pub fn for_suite(
    suite: &Suite,
    registry: &LanguageRegistry,
    images: Option<&ImageStore>,
    pins: &BTreeMap<String, String>,
    runtime: &RuntimePolicy,
) -> Result<Vec<RunSettings>, GradeError> {
    let mut roots: BTreeMap<String, Root> = BTreeMap::new();
    let mut root_of = |reference: &str, check: &Check| -> Result<Root, GradeError> {
        if let Some(root) = roots.get(reference) {
            return Ok(root.clone());
        }
        let pinned = image_root::pinned(reference, pins);
        let root = image_root::root_for(images, Some(&pinned)).map_err(|why| {
            GradeError::ImageUnavailable {
                check: check.id.clone(),
                why,
            }
        })?;
        roots.insert(reference.to_string(), root.clone());
        Ok(root)
    };
    suite
        .checks
        .iter()
        .map(|check| {
            let named_image = suite.image_of(check);
            let mut language = None;
            let (base, mounts, env) = match suite.language_of(check) {
                Some(id) => {
                    let lang = registry.get(id)?;
                    if lang.compile.is_none() && uses(check, "{compile}") {
                        return Err(GradeError::NoCompile {
                            id: id.to_string(),
                            check: check.id.clone(),
                        });
                    }
                    language = Some(lang.clone());
                    // In an image the suite names, the toolchain is the image's.
                    if named_image.is_none() {
                        lang.check_host()
                            .map_err(|why| GradeError::LanguageUnavailable {
                                id: id.to_string(),
                                check: check.id.clone(),
                                why,
                            })?;
                    }
                    (
                        lang.default_limits(),
                        lang.mounts().unwrap_or_default(),
                        lang.env_pairs(),
                    )
                }
                None => (Limits::default(), Vec::new(), Vec::new()),
            };
            let image = named_image.or(language.as_ref().and_then(|l| l.image.as_deref()));
            let root = match image {
                Some(reference) => root_of(reference, check)?,
                None => Root::Host,
            };
            let limits_err = |source| GradeError::Limits {
                check: check.id.clone(),
                source,
            };
            let suite_limits = suite.limits.resolve(&base).map_err(limits_err)?;
            let mut limits = check.limits.resolve(&suite_limits).map_err(limits_err)?;
            let timeout = suite.timeout_of(check);
            let wall_given = check.limits.wall_time.is_some()
                || suite.limits.wall_time.is_some()
                || language
                    .as_ref()
                    .is_some_and(|l| l.limits.wall_time.is_some());
            if !wall_given {
                // Unless someone chose a wall-clock limit, a run may last as long as its check.
                limits.wall_time = corral_sandbox::Millis(timeout);
            }
            let cpu_given = check.limits.cpu_time.is_some()
                || suite.limits.cpu_time.is_some()
                || language
                    .as_ref()
                    .is_some_and(|l| l.limits.cpu_time.is_some());
            let timeout_given = check.timeout.is_some() || suite.timeout.is_some();
            let grader = matches!(
                check.kind,
                CheckKind::Gradescope(_) | CheckKind::PrairieLearn(_)
            );
            if grader && timeout_given && !cpu_given {
                // On PrairieLearn (and Gradescope) the timeout is a grader's only clock: the
                // default CPU limit would stop a grader they let finish.
                limits.cpu_time = corral_sandbox::Millis(timeout);
            }
            let runtime = choose_runtime(suite, check, language.as_ref(), runtime);
            // The language's commands and environment told this check's memory limit.
            let language = language.map(|lang| lang.sized(&limits));
            let env = match &language {
                Some(lang) => lang.env_pairs(),
                None => env,
            };
            Ok(RunSettings {
                limits,
                mounts,
                env,
                timeout,
                language,
                root,
                seccomp: suite.seccomp_of(check).cloned(),
                runtime,
                grader_image: grader_image(check, images, pins),
            })
        })
        .collect()
}

/// The image a grader check's kind will run in, resolved as the kind resolves it (pinned):
/// results record it, and `corral grade` keeps a stored result only when it is unchanged.
fn grader_image(
    check: &Check,
    images: Option<&ImageStore>,
    pins: &BTreeMap<String, String>,
) -> Option<UsedImage> {
    let resolve = |r: &str| image_root::resolve(images?, &image_root::pinned(r, pins)).ok();
    match &check.kind {
        CheckKind::Gradescope(gc) => {
            let base = resolve(gc.base.as_deref()?)?;
            Some(crate::kinds::grader_env::recorded(&gc.bundle, &base))
        }
        CheckKind::PrairieLearn(pc) => UsedImage::of(&Root::Image(resolve(pc.image.as_deref()?)?)),
        _ => None,
    }
}

/// Whether a `run` or `compile` step of the check mentions `placeholder`.
fn uses(check: &Check, placeholder: &str) -> bool {
    let CheckKind::Steps(steps) = &check.kind else {
        return false;
    };
    steps
        .iter()
        .any(|s| matches!(s, Step::Run(Command::Shell(c)) | Step::Compile(Command::Shell(c)) if c.contains(placeholder)))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::image_root::test_image;

    fn suite(text: &str) -> Suite {
        Suite::parse(text, Path::new("/tmp/suite.yaml"), false).unwrap()
    }

    #[test]
    fn a_check_image_overrides_the_suites_and_a_language_image_comes_last() {
        let dir = tempfile::tempdir().unwrap();
        let store = ImageStore::open(&dir.path().join("data")).unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        let suite_digest = test_image(&store, &a, "course/base:1");
        let check_digest = test_image(&store, &b, "course/numpy:1");
        let mut registry = LanguageRegistry::builtin();
        registry
            .merge_str(
                "[languages.py]\nname = \"Py\"\nsource = \"m.py\"\nrun = \"python3 m.py\"\nimage = \"course/numpy:1\"\n",
                "test",
            )
            .unwrap();
        let plan = |s: &Suite, pins: &BTreeMap<String, String>| {
            for_suite(s, &registry, Some(&store), pins, &RuntimePolicy::default())
        };
        let s = suite(
            "name: x\nimage: course/base:1\nchecks:\n  - id: a\n    steps: [{run: ls}]\n  - id: b\n    image: course/numpy:1\n    steps: [{run: ls}]\n",
        );
        let plans = plan(&s, &BTreeMap::new()).unwrap();
        let digest_of = |r: &Root| match r {
            Root::Image(i) => i.digest.clone(),
            Root::Host => "host".into(),
        };
        assert_eq!(digest_of(&plans[0].root), suite_digest);
        assert_eq!(digest_of(&plans[1].root), check_digest);
        // No image anywhere: the host; a language's image when the suite names none.
        let s = suite("name: x\nchecks:\n  - id: a\n    steps: [{run: ls}]\n  - id: b\n    language: py\n    steps: [{run: \"{run}\"}]\n");
        let plans = plan(&s, &BTreeMap::new()).unwrap();
        assert_eq!(plans[0].root, Root::Host);
        assert_eq!(digest_of(&plans[1].root), check_digest);
        // Pinned, a name resolves to the pinned digest.
        let pins = BTreeMap::from([("course/numpy:1".to_string(), suite_digest.clone())]);
        let plans = plan(&s, &pins).unwrap();
        assert_eq!(digest_of(&plans[1].root), suite_digest);
    }

    /// A Gradescope check records its environment (over its base's digest), a PrairieLearn
    /// check its image, so results name them and `corral grade` grades again when the base
    /// name moves to another image.
    #[test]
    fn a_graders_image_is_planned_and_follows_its_bases_digest() {
        let dir = tempfile::tempdir().unwrap();
        let store = ImageStore::open(&dir.path().join("data")).unwrap();
        let ag = dir.path().join("course/autograder");
        std::fs::create_dir_all(&ag).unwrap();
        std::fs::write(ag.join("run_autograder"), "#!/bin/sh\n").unwrap();
        std::fs::create_dir_all(dir.path().join("course/tests")).unwrap();
        let s = Suite::parse(
            "name: x\nchecks:\n  - id: gs\n    gradescope: {autograder: autograder, base: \"course/base:1\"}\n  - id: pl\n    prairielearn: {tests: tests, entrypoint: x, image: \"course/base:1\"}\n  - id: plain\n    steps: [{run: ls}]\n",
            &dir.path().join("course/suite.yaml"),
            false,
        )
        .unwrap();
        let registry = LanguageRegistry::builtin();
        let planned = || {
            let plans = for_suite(
                &s,
                &registry,
                Some(&store),
                &BTreeMap::new(),
                &RuntimePolicy::default(),
            )
            .unwrap();
            plans
                .iter()
                .map(RunSettings::used_image)
                .collect::<Vec<_>>()
        };
        // Not in the store yet: nothing recorded (the check says why when it runs).
        assert_eq!(planned(), vec![None, None, None]);
        let first = test_image(&store, &dir.path().join("a"), "course/base:1");
        let one = planned();
        let gs = one[0].clone().unwrap();
        assert_eq!(gs.name, "course/base:1+autograder");
        assert_ne!(gs.digest, first);
        assert_eq!(one[1].as_ref().map(|i| &i.digest), Some(&first));
        assert_eq!(one[2], None);
        // The base's name moves to another image: another environment.
        let second = test_image(&store, &dir.path().join("b"), "course/base:1");
        let two = planned();
        assert_ne!(two[0], one[0]);
        assert_eq!(two[1].as_ref().map(|i| &i.digest), Some(&second));
    }

    /// A grader's CPU limit follows its timeout when no one chose one (PrairieLearn's `timeout`
    /// is its only clock); a CPU limit someone chose, another kind, or no timeout keep theirs.
    #[test]
    fn a_graders_cpu_limit_follows_its_timeout() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("tests")).unwrap();
        let cpu = |text: &str| -> Vec<u64> {
            let s = Suite::parse(text, &dir.path().join("suite.yaml"), false).unwrap();
            for_suite(
                &s,
                &LanguageRegistry::builtin(),
                None,
                &BTreeMap::new(),
                &RuntimePolicy::default(),
            )
            .unwrap()
            .iter()
            .map(|p| p.limits.cpu_time.0.as_secs())
            .collect()
        };
        let pl = "  - id: pl\n    prairielearn: {tests: tests, entrypoint: x}\n";
        let steps = "  - id: s\n    steps: [{run: ls}]\n";
        assert_eq!(
            cpu(&format!("name: x\ntimeout: 60s\nchecks:\n{pl}{steps}")),
            vec![60, 5]
        );
        assert_eq!(
            cpu(&format!("name: x\nchecks:\n{pl}    timeout: 30s\n")),
            vec![30]
        );
        assert_eq!(
            cpu(&format!(
                "name: x\ntimeout: 60s\nlimits: {{cpu_time: 2s}}\nchecks:\n{pl}"
            )),
            vec![2]
        );
        assert_eq!(cpu(&format!("name: x\nchecks:\n{pl}")), vec![5]);
    }

    #[test]
    fn a_checks_runtime_beats_the_suites_the_languages_and_the_callers_but_not_the_switch() {
        let mut registry = LanguageRegistry::builtin();
        registry
            .merge_str(
                "[languages.shg]\nname = \"sh on gVisor\"\nsource = \"m.sh\"\nrun = \"sh m.sh\"\nruntime = \"gvisor\"\n",
                "test",
            )
            .unwrap();
        let runtimes = |text: &str, policy: RuntimePolicy| -> Vec<Runtime> {
            for_suite(&suite(text), &registry, None, &BTreeMap::new(), &policy)
                .unwrap()
                .iter()
                .map(|s| s.runtime)
                .collect()
        };
        let (native, gvisor) = (Runtime::Native, Runtime::Gvisor);
        let open = RuntimePolicy::default();
        let gvisor_default = RuntimePolicy {
            default: gvisor,
            force_gvisor: false,
        };
        let forced = RuntimePolicy {
            default: native,
            force_gvisor: true,
        };
        // No suite runtime: the caller's default, a language's own, a check's over its language's.
        let plain = "name: x\nchecks:\n  - id: a\n    steps: [{run: ls}]\n  - id: b\n    language: shg\n    steps: [{run: \"{run}\"}]\n  - id: c\n    language: shg\n    runtime: native\n    steps: [{run: \"{run}\"}]\n";
        assert_eq!(runtimes(plain, open), [native, gvisor, native]);
        assert_eq!(runtimes(plain, gvisor_default), [gvisor, gvisor, native]);
        assert_eq!(runtimes(plain, forced), [gvisor, gvisor, gvisor]);
        // A suite runtime: over the caller's and the language's; a check's over the suite's.
        let suite_native = "name: x\nruntime: native\nchecks:\n  - id: a\n    steps: [{run: ls}]\n  - id: b\n    language: shg\n    steps: [{run: \"{run}\"}]\n  - id: c\n    runtime: gvisor\n    steps: [{run: ls}]\n";
        assert_eq!(runtimes(suite_native, open), [native, native, gvisor]);
        assert_eq!(
            runtimes(suite_native, gvisor_default),
            [native, native, gvisor]
        );
        assert_eq!(runtimes(suite_native, forced), [gvisor, gvisor, gvisor]);
    }

    #[test]
    fn an_image_the_store_lacks_is_an_error_before_anything_runs() {
        let dir = tempfile::tempdir().unwrap();
        let store = ImageStore::open(&dir.path().join("data")).unwrap();
        let s = suite(
            "name: x\nchecks:\n  - id: a\n    steps: [{run: ls}]\n  - id: b\n    image: course/missing:1\n    steps: [{run: ls}]\n",
        );
        let registry = LanguageRegistry::builtin();
        for images in [Some(&store), None] {
            let e = for_suite(
                &s,
                &registry,
                images,
                &BTreeMap::new(),
                &RuntimePolicy::default(),
            )
            .unwrap_err();
            assert!(
                matches!(&e, GradeError::ImageUnavailable { check, .. } if check == "b"),
                "{e}"
            );
            assert!(e.to_string().contains("course/missing:1"), "{e}");
        }
        assert!(store.records().unwrap().is_empty());
    }
}
