//! Judging one submission, the same way in the server's in-process workers and in `corral worker`
//! on another host: the job's spec plus its files on disk become a [`Verdict`]. Blocking: call it
//! on a blocking thread.

use std::sync::Arc;

use corral_checks::image_root::{self, UsedImage};
use corral_checks::{GradeOptions, GradingKind, GradingSlots, LanguageRegistry, Suite, View};
use corral_images::Store as ImageStore;
use corral_sandbox::{Limits, NoSink, Outcome, Pool, RunSpec, SandboxConfig, Size, Status, Stdin};
use serde_json::Value;

use crate::job::{suite_file, JobFiles, JobSpec, SuiteRef};
use crate::verdict::{Verdict, VerdictKind};

/// Judges the job; its images are found (by the digests the job pins) in `images`; its programs
/// (a suite's checks, a language's compile and run) wait their turn for one of `slots` when
/// given, the process's cap on programs graded at once. Never panics on bad input: anything
/// that keeps it from being judged is an `internal_error` verdict that says why.
pub fn execute(
    pool: &Arc<Pool>,
    registry: &LanguageRegistry,
    images: Option<&ImageStore>,
    slots: Option<&Arc<GradingSlots>>,
    spec: &JobSpec,
    at: &JobFiles,
) -> Verdict {
    // Refused at submission; a job queued before that check still ends with the reason.
    if let Err(e) = spec.validate() {
        return Verdict::internal(format!("the job cannot run: {e}"));
    }
    if let Some(s) = &spec.suite {
        return grade_suite(pool, registry, images, slots, spec, s, at);
    }
    let mut compile: Option<Value> = None;
    let mut mounts = Vec::new();
    let mut env: Vec<(String, String)> = Vec::new();
    // The compiler's environment: the language's, told the compile's memory limit.
    let mut compile_env: Vec<(String, String)> = Vec::new();
    let compile_limits = spec.compile_limits.clone().unwrap_or(spec.limits.clone());
    let run_argv: Vec<String>;
    // The language's profile for its program's run (never the compile).
    let mut run_seccomp: corral_sandbox::Restrictions;
    let mut compile_argv: Option<Vec<String>> = None;
    let mut image = spec.image.clone();
    if let Some(id) = &spec.language {
        let lang = match registry.get(id) {
            Ok(l) => l,
            Err(e) => return Verdict::internal(format!("this worker cannot run {id:?}: {e}")),
        };
        image = image.or(lang.image.clone());
        // In an image the toolchain is the image's; on the host it must be here.
        if image.is_none() {
            if let Err(why) = lang.check_host() {
                return Verdict::internal(format!("language {id:?} is unavailable here: {why}"));
            }
        }
        mounts = lang.mounts().unwrap_or_default();
        // Its commands and environment told the memory limit of the run they are for.
        let compiling = lang.sized(&compile_limits);
        let lang = lang.sized(&spec.limits);
        env = lang.env_pairs();
        compile_env = compiling.env_pairs();
        let with = |cmd: &str, extra: &Option<String>| match extra {
            Some(a) if !a.trim().is_empty() => format!("{cmd} {a}"),
            _ => cmd.to_string(),
        };
        compile_argv = compiling
            .compile
            .as_ref()
            .map(|c| vec!["/bin/sh".into(), "-c".into(), with(c, &spec.compile_args)]);
        let run = with(&lang.run, &spec.run_args);
        // The request's profile adds to the language's: never less than the registry says.
        run_seccomp = match &spec.seccomp {
            Some(asked) => lang.seccomp.and(asked),
            None => lang.seccomp.clone(),
        };
        run_argv = match corral_checks::suite::Command::Shell(run.clone()).direct_argv() {
            // Under no_spawn nothing may exec once the program runs, a shell's exec included.
            Some(argv) if run_seccomp.no_spawn => argv,
            _ => {
                // A command that needs the shell cannot keep the language's no_spawn (one the
                // request asked for stays: its shell's exec is then blocked and reported).
                if !spec.seccomp.as_ref().is_some_and(|r| r.no_spawn) {
                    run_seccomp.no_spawn = false;
                }
                vec!["/bin/sh".into(), "-c".into(), format!("exec {run}")]
            }
        };
    } else {
        run_seccomp = spec.seccomp.clone().unwrap_or_default();
        run_argv = match spec.cmd.as_ref().map(|c| c.argv_under(&run_seccomp)) {
            Some(argv) if !argv.is_empty() => argv,
            _ => return Verdict::internal("the job has no language, command or suite"),
        };
    }
    env.extend(spec.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    compile_env.extend(spec.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    let pinned = image
        .as_deref()
        .map(|r| image_root::pinned(r, &spec.image_digests));
    let root = match image_root::root_for(images, pinned.as_deref()) {
        Ok(root) => root,
        Err(why) => return Verdict::internal(format!("this worker cannot run the job: {why}")),
    };
    let used = UsedImage::of(&root).map(Into::into);
    let disk = spec
        .limits
        .disk
        .max(spec.compile_limits.as_ref().map_or(Size(0), |l| l.disk));
    let shape = SandboxConfig {
        root: root.clone(),
        network: spec.network,
        runtime: spec.runtime_policy().choose(None),
        ..SandboxConfig::offline(mounts.clone(), disk.bytes())
    };
    // Its clocks start once it has a slot.
    let _slot = slots.map(|s| s.take(GradingKind::Queued));
    let mut lease = match pool.lease(&shape) {
        Ok(l) => l,
        Err(e) => return Verdict::internal(format!("no sandbox: {e}")),
    };
    let sb = lease.sandbox();
    if let Err(e) = sb.copy_in(at.files) {
        return Verdict::internal(format!("copying the files into the sandbox: {e}"));
    }
    let make = |argv: Vec<String>, env: &[(String, String)], limits: &Limits, stdin: Stdin| {
        let mut r = RunSpec::new(argv);
        r.env = env.to_vec();
        r.mounts = mounts.clone();
        r.stdin = stdin;
        r.limits = limits.clone();
        r.limits.disk = Size(shape.disk_bytes);
        r.root = root.clone();
        r.network = shape.network;
        r.runtime = shape.runtime;
        r
    };
    if let Some(argv) = compile_argv {
        let o = sb.run(
            &make(argv, &compile_env, &compile_limits, Stdin::Empty),
            &mut NoSink,
        );
        compile = Some(o.to_json());
        if o.status == Status::SandboxError {
            return Verdict {
                compile,
                image: used,
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
                staff_checks: None,
                message: Some(why),
                image: used,
            };
        }
    }
    let stdin = Stdin::Bytes(spec.stdin.clone().into_bytes());
    let mut run_spec = make(run_argv, &env, &spec.limits, stdin);
    run_spec.seccomp = run_seccomp;
    // Judge0's number_of_runs: the same program again until one run is not accepted; the last
    // run is the one reported, with the means of CPU time and memory over the runs made.
    let mut made: Vec<(u64, u64)> = Vec::new();
    let (o, verdict, message) = loop {
        let mut o = sb.run(&run_spec, &mut NoSink);
        if spec.stderr_to_stdout {
            o.stdout = std::mem::take(&mut o.script);
            o.script = o.stdout.clone();
            o.stderr = Default::default();
        }
        made.push((o.usage.cpu_time_ms, o.usage.memory_peak_bytes));
        let (verdict, message) = judge_run(&o, spec.expected_output.as_deref());
        if verdict != VerdictKind::Accepted || made.len() >= spec.runs.max(1) as usize {
            break (o, verdict, message);
        }
    };
    drop(lease);
    let mut run = o.to_json();
    if spec.runs > 1 {
        let n = made.len() as f64;
        let mean = |f: fn(&(u64, u64)) -> u64| made.iter().map(f).sum::<u64>() as f64 / n;
        run["runs"] = made.len().into();
        run["cpu_time_ms_mean"] = mean(|r| r.0).into();
        run["memory_peak_bytes_mean"] = mean(|r| r.1).into();
    }
    Verdict {
        verdict,
        score: if verdict == VerdictKind::Accepted {
            1.0
        } else {
            0.0
        },
        max_score: 1.0,
        run: Some(run),
        compile,
        checks: None,
        staff_checks: None,
        message,
        image: used,
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
    images: Option<&ImageStore>,
    slots: Option<&Arc<GradingSlots>>,
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
    let mut suite = match Suite::load_in(&file, spec.image.as_deref()) {
        Ok(s) => s,
        // Named as in the suite's folder: the job's temporary folder is the host's business.
        Err(e) => return Verdict::internal(format!("suite {:?}: {}", s.id, e.relative_to(dir))),
    };
    if spec.image.is_some() {
        suite.image = spec.image.clone();
    }
    let opts = GradeOptions {
        jobs: 2,
        images: images.cloned(),
        pins: spec.image_digests.clone(),
        runtime: spec.runtime_policy(),
        slots: slots.map(|s| (s.clone(), GradingKind::Queued)),
        progress: None,
        cancel: None,
        submitted: corral_checks::engine::Submitted::at_ms(
            spec.submitted_ms,
            spec.submitter.clone(),
        ),
    };
    let report = match corral_checks::grade(pool, registry, &suite, at.files, &opts) {
        Ok(r) => r,
        Err(e) => return Verdict::internal(format!("grading: {e}")),
    };
    let view = if spec.staff {
        View::Staff
    } else {
        View::Student
    };
    // When a limit ended the program of the first check that failed (a grader that graded
    // nothing, a step's program, a step's timeout), the verdict names it, as a run's does.
    let stopped = report.stopped().and_then(|(row, status)| {
        let kind = match status {
            Status::TimeLimit | Status::WallTimeLimit => VerdictKind::TimeLimit,
            Status::MemoryLimit => VerdictKind::MemoryLimit,
            Status::OutputLimit => VerdictKind::OutputLimit,
            Status::BlockedSyscall => VerdictKind::RuntimeError,
            _ => return None,
        };
        let why = row.visible_message(view).unwrap_or_default();
        Some((kind, format!("{}: {why}", row.id)))
    });
    let verdict = if report.has_errors() {
        VerdictKind::InternalError
    } else if report.not_gradable() {
        VerdictKind::NotGradable
    } else if report.passed() {
        VerdictKind::Accepted
    } else if report.failed_to_compile().is_some() {
        VerdictKind::CompileError
    } else if let Some((kind, _)) = &stopped {
        *kind
    } else {
        VerdictKind::WrongAnswer
    };
    let v = Verdict {
        verdict,
        score: report.score(),
        max_score: report.max_score(),
        run: None,
        compile: None,
        message: match verdict {
            VerdictKind::InternalError => Some("a check could not be judged; see checks".into()),
            // The grader's own words, for the student (as PrairieLearn shows them).
            VerdictKind::NotGradable => Some(
                report
                    .results
                    .iter()
                    .filter(|r| r.not_gradable)
                    .filter_map(|r| r.message.clone())
                    .collect::<Vec<_>>()
                    .join("\n"),
            ),
            VerdictKind::TimeLimit
            | VerdictKind::MemoryLimit
            | VerdictKind::OutputLimit
            | VerdictKind::RuntimeError => stopped.map(|(_, why)| why),
            VerdictKind::CompileError => report.failed_to_compile().map(|row| {
                format!(
                    "{}: {}",
                    row.id,
                    row.visible_message(view).unwrap_or_default()
                )
            }),
            _ => None,
        },
        checks: Some(report.to_json(view)),
        // Staff reading a student's submission see what staff see (a second rendering of the
        // same report; a staff submitter's `checks` already is).
        staff_checks: (view == View::Student).then(|| report.to_json(View::Staff)),
        image: report.used_images().into_iter().next().map(Into::into),
    };
    // One rule for this process's workers and remote ones (whose results the server checks
    // with the same function): a score no store or gradebook can hold is an error, said now.
    match v.unusable() {
        Some(why) => Verdict::internal(format!("the grading gave {why}")),
        None => v,
    }
}
