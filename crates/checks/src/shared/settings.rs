//! A check's run settings: its language, limits, mounts, environment and timeout, resolved once
//! from the language registry, the suite and the check before anything runs.

use std::time::Duration;

use corral_sandbox::{Limits, Mount, Restrictions};

use crate::error::GradeError;
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
    /// The seccomp profile the check or suite names for all its runs (`None`: the language's
    /// for runs of its program, see [`RunSettings::launch`]).
    pub seccomp: Option<Restrictions>,
}

impl RunSettings {
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
            Command::Shell(s) => Command::Shell(
                s.replace("{compile}", lang.compile.as_deref().unwrap_or("true"))
                    .replace("{run}", &lang.run)
                    .replace("{source}", &lang.source),
            ),
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

/// Resolves language, limits and timeout of every check of the suite, in suite order; fails on an
/// unknown or unavailable language before anything runs.
pub fn for_suite(
    suite: &Suite,
    registry: &LanguageRegistry,
) -> Result<Vec<RunSettings>, GradeError> {
    suite
        .checks
        .iter()
        .map(|check| {
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
                    lang.check_host()
                        .map_err(|why| GradeError::LanguageUnavailable {
                            id: id.to_string(),
                            check: check.id.clone(),
                            why,
                        })?;
                    (
                        lang.default_limits(),
                        lang.mounts().unwrap_or_default(),
                        lang.env_pairs(),
                    )
                }
                None => (Limits::default(), Vec::new(), Vec::new()),
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
            Ok(RunSettings {
                limits,
                mounts,
                env,
                timeout,
                language,
                seccomp: suite.seccomp_of(check).cloned(),
            })
        })
        .collect()
}

/// Whether a `run` step of the check mentions `placeholder`.
fn uses(check: &Check, placeholder: &str) -> bool {
    let CheckKind::Steps(steps) = &check.kind else {
        return false;
    };
    steps
        .iter()
        .any(|s| matches!(s, Step::Run(Command::Shell(c)) if c.contains(placeholder)))
}
