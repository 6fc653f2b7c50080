//! What a queued submission is: the job's spec as the server stored it (everything resolved and
//! capped), and where its files are on the host that judges it.

use std::collections::BTreeMap;
use std::path::Path;

use corral_sandbox::{validate_command, validate_env, Limits, Restrictions, SpecError};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A command: a string runs under `/bin/sh -c` inside the sandbox; an array is the argv itself.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(untagged)]
pub enum Cmd {
    #[schema(example = "cc -o hello hello.c")]
    Line(String),
    Argv(Vec<String>),
}

/// What a value that is neither form is told (serde's untagged enum said only that the data
/// "did not match any variant of untagged enum Cmd").
pub const CMD_EXPECTED: &str =
    "expected a string (run by /bin/sh -c) or an array of strings (argv)";

impl<'de> Deserialize<'de> for Cmd {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Read whole first, as serde's untagged enum did: a syntax error (or JSON nested past
        // the parser's limit) stays the parser's own error, a 400; only the value's shape is
        // judged here.
        let bad = || serde::de::Error::custom(CMD_EXPECTED);
        match serde_json::Value::deserialize(d)? {
            serde_json::Value::String(s) => Ok(Cmd::Line(s)),
            serde_json::Value::Array(items) => items
                .into_iter()
                .map(|v| match v {
                    serde_json::Value::String(s) => Ok(s),
                    _ => Err(bad()),
                })
                .collect::<Result<_, _>>()
                .map(Cmd::Argv),
            _ => Err(bad()),
        }
    }
}

impl Cmd {
    /// The argv it runs: a string under the sandbox's `/bin/sh -c`; none for a blank string.
    pub fn argv(&self) -> Vec<String> {
        match self {
            Cmd::Line(s) if s.trim().is_empty() => Vec::new(),
            Cmd::Line(s) => vec!["/bin/sh".into(), "-c".into(), s.clone()],
            Cmd::Argv(v) => v.clone(),
        }
    }

    /// The argv it runs under the seccomp profile `seccomp`: under `no_spawn` the shell could not
    /// exec the command, so a simple string (plain words, no shell syntax) runs without a shell;
    /// anything else runs as [`Cmd::argv`] (its shell's forks and execs are then blocked).
    pub fn argv_under(&self, seccomp: &Restrictions) -> Vec<String> {
        match self {
            Cmd::Line(s) if seccomp.no_spawn => corral_checks::suite::Command::Shell(s.clone())
                .direct_argv()
                .unwrap_or_else(|| self.argv()),
            _ => self.argv(),
        }
    }
}

/// What a submission runs, as stored in the queue (the server resolved and capped everything).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    /// A language of the registry: its compile command (if any), then its run command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
    /// A command (a string runs under `/bin/sh -c`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cmd: Option<Cmd>,
    /// A check suite: its id, and the upload holding its files (registered suites); `None` for
    /// a suite of the server's suites folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suite: Option<SuiteRef>,
    /// Standard input of the run (language and command modes).
    #[serde(default)]
    pub stdin: String,
    /// Compared with the program's standard output (line ends, trailing spaces and trailing
    /// blank lines ignored); none: any output is accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_output: Option<String>,
    /// The run's limits, already within the server's caps.
    pub limits: Limits,
    /// The compile step's limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compile_limits: Option<Limits>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Appended to the language's run command (Judge0's `command_line_arguments`; the command
    /// runs under the sandbox's `/bin/sh -c`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_args: Option<String>,
    /// Appended to the language's compile command (Judge0's `compiler_options`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compile_args: Option<String>,
    /// Limits the request asked for above the caps (lowered).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub limits_clamped: Vec<String>,
    /// The submitter is staff: hidden checks' details are shown.
    #[serde(default)]
    pub staff: bool,
    /// The container image the request chose (REF): the run's root, or the suite's default
    /// image; none: the language's image, else the host root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Every image reference the job names (request, language, suite, checks), pinned by the
    /// server at submission: REF → the image manifest's digest then. Workers run exactly these
    /// digests (and fetch those they lack from the API node).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub image_digests: BTreeMap<String, String>,
    /// Times the program runs (Judge0's `number_of_runs`): it stops at the first run that is not
    /// accepted; the reported CPU time and memory are the runs' means.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub runs: u32,
    /// The program's standard error goes to its standard output (Judge0's
    /// `redirect_stderr_to_stdout`): the output judged and reported is both, in arrival order.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stderr_to_stdout: bool,
    /// The run shares the host's network (Judge0's `enable_network`, when the operator allows it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub network: bool,
    /// The seccomp profile the request chose for the program's run (never the compile), on top
    /// of the default one and added to the language's own (only ever stricter). None: the
    /// language's, else the default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seccomp: Option<Restrictions>,
    /// The kernel every run of the job gets (resolved by the server's policy when submitted);
    /// none: native (jobs queued before runtimes existed). For a suite, the runtime of a check
    /// that names none (nor does its suite or language).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<corral_sandbox::Runtime>,
    /// The server runs everything under gVisor (`[runtime] force_gvisor` when it was
    /// submitted): every run of the job does, whatever a suite or check names. It travels with
    /// the job, so a remote worker enforces it too (and a worker that predates it refuses the
    /// job as an unknown field rather than judging it natively).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub force_gvisor: bool,
    /// The Judge0 `language_id` the request named, kept where it is not the first id of its
    /// language (54, C++ like 52): the submission reads back with the id it was given. Absent
    /// otherwise, so a job a worker that predates it receives is one it knows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge0_language_id: Option<u32>,
    /// When the submission was made (Unix ms; a regrade keeps its original's) and the name of
    /// the token that made it: a Gradescope autograder reads both in its metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submitted_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submitter: Option<String>,
}

fn one() -> u32 {
    1
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

impl JobSpec {
    /// The runtime policy the job was submitted under: its stored runtime as the default, and
    /// the server's gVisor switch.
    pub fn runtime_policy(&self) -> corral_sandbox::RuntimePolicy {
        corral_sandbox::RuntimePolicy {
            default: self.runtime.unwrap_or_default(),
            force_gvisor: self.force_gvisor,
        }
    }

    /// Checks what a request gave (its command, extra environment, extra arguments and limits)
    /// by the sandbox's rules for every run, so a job that could never run is refused when it
    /// is submitted rather than failing when judged.
    pub fn validate(&self) -> Result<(), SpecError> {
        let env: Vec<(String, String)> = self
            .env
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        match &self.cmd {
            Some(c) => validate_command(&c.argv(), &env)?,
            None => validate_env(&env)?,
        }
        for extra in [&self.run_args, &self.compile_args].into_iter().flatten() {
            validate_extra_args(extra)?;
        }
        self.limits.validate()?;
        if let Some(l) = &self.compile_limits {
            l.validate()?;
        }
        Ok(())
    }
}

/// `sha256:` and 64 lowercase hex digits (what a pinned image and a fetched blob are named by).
pub fn is_digest(s: &str) -> bool {
    s.strip_prefix("sha256:").is_some_and(|h| {
        h.len() == 64
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// Checks words appended to a language's command line (Judge0's `command_line_arguments` and
/// `compiler_options`) by the same rules as any argument.
pub fn validate_extra_args(extra: &str) -> Result<(), SpecError> {
    validate_command(&["/bin/sh".into(), "-c".into(), extra.to_string()], &[])
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SuiteRef {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upload: Option<String>,
}

/// Where the job's files are on this host.
pub struct JobFiles<'a> {
    /// The submission's files (an empty folder when it has none).
    pub files: &'a Path,
    /// The suite's folder (with its suite file), for suite jobs.
    pub suite_dir: Option<&'a Path>,
}

/// The suite file in a folder.
pub fn suite_file(dir: &Path) -> Option<std::path::PathBuf> {
    ["suite.yaml", "suite.yml", "suite.json"]
        .iter()
        .map(|n| dir.join(n))
        .find(|p| p.is_file())
}
