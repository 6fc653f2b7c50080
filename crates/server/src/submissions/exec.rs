//! Judging one submission, the same way in an in-process worker and in `corral worker` on another
//! host: the job's spec (what the server accepted and stored) plus its files on disk become a
//! [`Verdict`]. Blocking: call it on a blocking thread.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use corral_checks::{GradeOptions, LanguageRegistry, Suite, View};
use corral_sandbox::{Limits, NoSink, Outcome, Pool, RunSpec, SandboxConfig, Size, Status, Stdin};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::types::Cmd;

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
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SuiteRef {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upload: Option<String>,
}

/// The verdict of a submission.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum VerdictKind {
    Accepted,
    WrongAnswer,
    CompileError,
    RuntimeError,
    TimeLimit,
    MemoryLimit,
    OutputLimit,
    InternalError,
}

impl VerdictKind {
    pub fn as_str(self) -> &'static str {
        match self {
            VerdictKind::Accepted => "accepted",
            VerdictKind::WrongAnswer => "wrong_answer",
            VerdictKind::CompileError => "compile_error",
            VerdictKind::RuntimeError => "runtime_error",
            VerdictKind::TimeLimit => "time_limit",
            VerdictKind::MemoryLimit => "memory_limit",
            VerdictKind::OutputLimit => "output_limit",
            VerdictKind::InternalError => "internal_error",
        }
    }
}

/// What a worker reports for a submission. Checked field by field when a remote worker posts it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Verdict {
    pub verdict: VerdictKind,
    /// Points earned: 1 or 0 for a run, the suite's score for checks.
    pub score: f64,
    pub max_score: f64,
    /// The run's result (the object of `corral run --json`), for language and command modes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub run: Option<Value>,
    /// The compile step's result, when the language compiles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub compile: Option<Value>,
    /// The check report (corral's JSON report), for suites.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub checks: Option<Value>,
    /// Why, in a sentence (wrong answer, which limit, what failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl Verdict {
    pub fn internal(message: impl Into<String>) -> Verdict {
        Verdict {
            verdict: VerdictKind::InternalError,
            score: 0.0,
            max_score: 1.0,
            run: None,
            compile: None,
            checks: None,
            message: Some(message.into()),
        }
    }
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

/// Judges the job. Never panics on bad input: anything that keeps it from being judged is an
/// `internal_error` verdict that says why.
pub fn execute(
    pool: &Arc<Pool>,
    registry: &LanguageRegistry,
    spec: &JobSpec,
    at: &JobFiles,
) -> Verdict {
    if let Some(s) = &spec.suite {
        return grade_suite(pool, registry, spec, s, at);
    }
    let mut compile: Option<Value> = None;
    let mut mounts = Vec::new();
    let mut env: Vec<(String, String)> = Vec::new();
    let run_argv: Vec<String>;
    let mut compile_argv: Option<Vec<String>> = None;
    if let Some(id) = &spec.language {
        let lang = match registry.get(id) {
            Ok(l) => l,
            Err(e) => return Verdict::internal(format!("this worker cannot run {id:?}: {e}")),
        };
        if let Err(why) = lang.check_host() {
            return Verdict::internal(format!("language {id:?} is unavailable here: {why}"));
        }
        mounts = lang.mounts().unwrap_or_default();
        env = lang.env_pairs();
        let with = |cmd: &str, extra: &Option<String>| match extra {
            Some(a) if !a.trim().is_empty() => format!("{cmd} {a}"),
            _ => cmd.to_string(),
        };
        compile_argv = lang
            .compile
            .as_ref()
            .map(|c| vec!["/bin/sh".into(), "-c".into(), with(c, &spec.compile_args)]);
        run_argv = vec![
            "/bin/sh".into(),
            "-c".into(),
            format!("exec {}", with(&lang.run, &spec.run_args)),
        ];
    } else {
        run_argv = match &spec.cmd {
            Some(Cmd::Line(s)) => vec!["/bin/sh".into(), "-c".into(), s.clone()],
            Some(Cmd::Argv(v)) if !v.is_empty() => v.clone(),
            _ => return Verdict::internal("the job has no language, command or suite"),
        };
    }
    env.extend(spec.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    let disk = spec
        .limits
        .disk
        .max(spec.compile_limits.as_ref().map_or(Size(0), |l| l.disk));
    let shape = SandboxConfig::offline(mounts.clone(), disk.bytes());
    let mut lease = match pool.lease(&shape) {
        Ok(l) => l,
        Err(e) => return Verdict::internal(format!("no sandbox: {e}")),
    };
    let sb = lease.sandbox();
    if let Err(e) = sb.copy_in(at.files) {
        return Verdict::internal(format!("copying the files into the sandbox: {e}"));
    }
    let make = |argv: Vec<String>, limits: &Limits, stdin: Stdin| {
        let mut r = RunSpec::new(argv);
        r.env = env.clone();
        r.mounts = mounts.clone();
        r.stdin = stdin;
        r.limits = limits.clone();
        r.limits.disk = Size(shape.disk_bytes);
        r
    };
    if let Some(argv) = compile_argv {
        let limits = spec.compile_limits.clone().unwrap_or(spec.limits.clone());
        let o = sb.run(&make(argv, &limits, Stdin::Empty), &mut NoSink);
        compile = Some(o.to_json());
        if o.status == Status::SandboxError {
            return Verdict {
                compile,
                ..Verdict::internal(o.reason().unwrap_or_default())
            };
        }
        if o.status != Status::Ok {
            let why = match o.reason() {
                Some(r) => format!("compilation failed: {r}"),
                None => format!("compilation failed (exit code {})", o.shell_code()),
            };
            return Verdict {
                verdict: VerdictKind::CompileError,
                score: 0.0,
                max_score: 1.0,
                run: None,
                compile,
                checks: None,
                message: Some(why),
            };
        }
    }
    let stdin = Stdin::Bytes(spec.stdin.clone().into_bytes());
    let o = sb.run(&make(run_argv, &spec.limits, stdin), &mut NoSink);
    drop(lease);
    let (verdict, message) = judge_run(&o, spec.expected_output.as_deref());
    Verdict {
        verdict,
        score: if verdict == VerdictKind::Accepted {
            1.0
        } else {
            0.0
        },
        max_score: 1.0,
        run: Some(o.to_json()),
        compile,
        checks: None,
        message,
    }
}

/// A run's verdict: how it ended, then its output against the expected output.
pub fn judge_run(o: &Outcome, expected: Option<&str>) -> (VerdictKind, Option<String>) {
    let k = match o.status {
        Status::Ok => {
            return match expected {
                Some(e)
                    if corral_checks::engine::normalize(&o.stdout.bytes)
                        != corral_checks::engine::normalize(e.as_bytes()) =>
                {
                    (
                        VerdictKind::WrongAnswer,
                        Some("the output differs from the expected output".into()),
                    )
                }
                _ => (VerdictKind::Accepted, None),
            }
        }
        Status::NonzeroExit => {
            return (
                VerdictKind::RuntimeError,
                Some(format!("exited with code {}", o.shell_code())),
            )
        }
        Status::Signaled => {
            return (
                VerdictKind::RuntimeError,
                Some(format!(
                    "killed by {}",
                    corral_checks::engine::signal_name(o.signal.unwrap_or(0))
                )),
            )
        }
        Status::BlockedSyscall => VerdictKind::RuntimeError,
        Status::TimeLimit | Status::WallTimeLimit => VerdictKind::TimeLimit,
        Status::MemoryLimit => VerdictKind::MemoryLimit,
        Status::OutputLimit => VerdictKind::OutputLimit,
        Status::SandboxError => VerdictKind::InternalError,
    };
    (k, o.reason())
}

fn grade_suite(
    pool: &Arc<Pool>,
    registry: &LanguageRegistry,
    spec: &JobSpec,
    s: &SuiteRef,
    at: &JobFiles,
) -> Verdict {
    let Some(dir) = at.suite_dir else {
        return Verdict::internal(format!("the files of suite {:?} are missing", s.id));
    };
    let Some(file) = suite_file(dir) else {
        return Verdict::internal(format!("suite {:?} has no suite file", s.id));
    };
    let suite = match Suite::load(&file) {
        Ok(s) => s,
        Err(e) => return Verdict::internal(format!("suite {:?}: {e}", s.id)),
    };
    let report =
        match corral_checks::grade(pool, registry, &suite, at.files, &GradeOptions { jobs: 2 }) {
            Ok(r) => r,
            Err(e) => return Verdict::internal(format!("grading: {e}")),
        };
    let view = if spec.staff {
        View::Staff
    } else {
        View::Student
    };
    let verdict = if report.has_errors() {
        VerdictKind::InternalError
    } else if report.passed() {
        VerdictKind::Accepted
    } else {
        VerdictKind::WrongAnswer
    };
    Verdict {
        verdict,
        score: report.score(),
        max_score: report.max_score(),
        run: None,
        compile: None,
        message: (verdict == VerdictKind::InternalError)
            .then(|| "a check could not be judged; see checks".to_string()),
        checks: Some(report.to_json(view)),
    }
}
