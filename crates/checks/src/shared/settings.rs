//! A check's run settings: its language, limits, mounts, environment and timeout, resolved once
//! from the language registry, the suite and the check before anything runs.

use std::time::Duration;

use corral_sandbox::{Limits, Mount};

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
}

impl RunSettings {
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
