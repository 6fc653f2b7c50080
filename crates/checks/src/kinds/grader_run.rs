//! What the `gradescope` and `prairielearn` kinds share: a course's grader run unmodified in one
//! sandbox with the submission, its contract's folder laid out (see [`crate::shared::layout`]),
//! and its results file read back without following links.
//!
//! The grader and the submission share that sandbox, as on Gradescope and PrairieLearn: the
//! submission's code can rewrite the results file. What corral guarantees is the sandbox (limits,
//! no network, nothing outside it reachable) and that a missing, oversized or malformed results
//! file is an error, never a pass.

use std::path::{Path, PathBuf};

use corral_sandbox::{Mount, NoSink, Outcome, OutputOverflow, Root, RunSpec, Status};
use serde_json::json;

use crate::kinds::runner::CheckContext;
use crate::report::{CheckResult, Observation, ScriptEntry};
use crate::shared::layout::layout_folder;
use crate::shared::text::MAX_VALUE;
use crate::suite::Check;

/// A grader contract's fixed folder: where it is mounted and the names in it, each a link to
/// the same name in the working directory.
pub struct Layout {
    /// `/autograder` or `/grade`.
    pub root: &'static str,
    pub names: &'static [&'static str],
    /// Variables the platform gives every grader, under the check's own (its language's).
    pub env: &'static [(&'static str, &'static str)],
}

/// What a grader runs on: `root` (the host's system folders or an image), and whether as root of
/// it (see [`run_grader`]).
pub struct GraderRoot {
    pub root: Root,
    pub as_root: bool,
}

/// Whether a check's grader runs as root here: its `root:` (`written`) against this host and
/// the check's runtime (see [`crate::suite::graders::runs_as_root`]).
pub fn runs_as_root_here(
    cx: &CheckContext<'_>,
    key: &str,
    written: Option<bool>,
    has_image: bool,
) -> Result<bool, String> {
    crate::suite::graders::runs_as_root(
        key,
        written,
        has_image,
        cx.settings.runtime == corral_sandbox::Runtime::Gvisor,
        cx.pool.host().root_mode(),
    )
}

/// How the grader's run ended.
pub enum GraderRun {
    /// The grader ended on its own (whatever its exit code) and wrote this results file.
    Results { bytes: Vec<u8>, outcome: Outcome },
    /// The grader ended on its own without a results file (or with a link or special file there).
    NoResults { outcome: Outcome },
    /// A limit stopped it (the submission's loop, flood, memory …): no results are trusted.
    Stopped { reason: String, outcome: Outcome },
    /// corral could not run it.
    Error(String),
}

/// Runs `command` (a shell command, from the contract's root folder) in `root` (the host's
/// system folders or an image), in a sandbox whose working directory is a copy of `staged`;
/// reads `results` (relative to the working directory), at most `max_results` bytes.
///
/// As the sandbox's user, `layout.root` is a read-only folder of links into the working
/// directory. `as_root` (an image only): the grader is root of the sandbox over a writable copy
/// of its image (root mode), and `layout.root` is the working directory itself, mounted there
/// too (hiding whatever the image has there, as the platforms' mounts do), so the grader may
/// make folders in it (PrairieLearn's own `run.sh` makes `/grade/run`).
pub fn run_grader(
    cx: &CheckContext<'_>,
    GraderRoot { root, as_root }: GraderRoot,
    layout: &Layout,
    staged: &Path,
    command: &str,
    results: &str,
    max_results: usize,
) -> GraderRun {
    let (root, folder, alias) = match root {
        Root::Image(mut img) if as_root => {
            img.as_root = true;
            (Root::Image(img), None, Some(PathBuf::from(layout.root)))
        }
        Root::Host if as_root => {
            return GraderRun::Error("a grader runs as root only in an image".into())
        }
        root => {
            let links: Vec<(&str, String)> = layout
                .names
                .iter()
                .map(|n| (*n, format!("{}/{n}", corral_sandbox::WORKDIR)))
                .collect();
            let links: Vec<(&str, &str)> = links.iter().map(|(n, t)| (*n, t.as_str())).collect();
            match layout_folder(&links) {
                Ok(f) => (root, Some(f), None),
                Err(e) => return GraderRun::Error(format!("preparing {}: {e}", layout.root)),
            }
        }
    };
    let mount = folder.as_ref().map(|f| Mount {
        src: f.path().to_path_buf(),
        dst: PathBuf::from(layout.root),
        writable: false,
    });
    let mut lease = match cx.lease_with(mount, staged, root.clone(), alias) {
        Ok(l) => l,
        Err(e) => return GraderRun::Error(e),
    };
    let sb = lease.sandbox();
    let mut spec = RunSpec::new(vec![
        "/bin/sh".into(),
        "-c".into(),
        format!("cd {} && {command}", layout.root),
    ]);
    spec.limits = cx.settings.limits.clone();
    // The root decides the environment: the image's `Env` under the check's own variables,
    // and root's `HOME` and `USER` in root mode.
    spec.root = root;
    spec.env = grader_env(layout, &cx.settings.env);
    // The check's or suite's `seccomp:` (a grader starts other programs, so a language's
    // `no_spawn` is left out, as for the other harnesses): Otter's Jupyter kernel needs the
    // `list_interfaces` grant, given there.
    spec.seccomp = cx.settings.harness_seccomp();
    // Its output is a log (Gradescope cuts it; its results file decides): a flood past the
    // output limit is dropped, not the end of the grading. A student's module printing 50 MB
    // at import scored 0 where Gradescope scored it.
    spec.output_overflow = OutputOverflow::Dropped;
    let outcome = sb.run(&spec, &mut NoSink);
    match outcome.status {
        Status::SandboxError => {
            return GraderRun::Error(crate::shared::text::sandbox_error(&outcome))
        }
        Status::Ok | Status::NonzeroExit | Status::Signaled => {}
        _ => {
            return GraderRun::Stopped {
                reason: crate::shared::text::stop_reason(&outcome),
                outcome,
            }
        }
    }
    match sb.read_file(Path::new(results), max_results as u64 + 1) {
        Ok(Some(bytes)) => GraderRun::Results { bytes, outcome },
        Ok(None) => GraderRun::NoResults { outcome },
        Err(e) => GraderRun::Error(format!("reading {results}: {e}")),
    }
}

/// The grader's variables: the platform's (`layout.env`), then the check's own, which win.
fn grader_env(layout: &Layout, own: &[(String, String)]) -> Vec<(String, String)> {
    layout
        .env
        .iter()
        .filter(|(k, _)| !own.iter().any(|(o, _)| o == k))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .chain(own.iter().cloned())
        .collect()
}

/// Lines of the grader's output staff see when it wrote no results.
const TAIL_LINES: usize = 20;

/// The end of the grader's output (its last [`TAIL_LINES`] lines, 4 KiB at most), for the
/// check's staff-only diagnostics when it wrote no results, malformed ones, or was stopped: why it failed (a
/// traceback, `ModuleNotFoundError: No module named 'gradescope_utils'`) is usually there, and
/// the text views show no script. `None` when it printed nothing.
pub fn output_tail(outcome: &Outcome) -> Option<String> {
    let text = outcome.script.text();
    if text.trim().is_empty() {
        return None;
    }
    let tail = crate::shared::text::output_tail(text.trim_end().as_bytes(), 4096);
    let lines: Vec<&str> = tail.lines().collect();
    Some(format!(
        "the grader's output ends:\n{}",
        lines[lines.len().saturating_sub(TAIL_LINES)..].join("\n")
    ))
}

/// When a grader that could not be judged says its disk filled (`No space left on device`, a
/// student's flood of output, say), its error says which limit that is: its folders (and a root
/// mode image's copy) live on a tmpfs of the check's `disk` limit.
pub fn name_a_full_disk(out: &mut CheckResult, outcome: &Outcome) {
    if out.error.is_none() || !outcome.script.text().contains("No space left on device") {
        return;
    }
    let hint = format!(
        " (the grader's output says its disk is full: the check's files live on a tmpfs of its \
         disk limit, {}; a suite's `limits: {{disk: …}}` raises it)",
        outcome.limits.disk
    );
    for text in [&mut out.error, &mut out.message].into_iter().flatten() {
        text.push_str(&hint);
    }
}

/// The grader's own output (stdout and stderr, interleaved), as a row of its own worth no
/// points: `CHECK/output`, hidden from students unless `visible` (Gradescope's
/// `stdout_visibility`), so staff always see it and students see it only when the grader says.
/// A failed row when the grader failed (`ok` false: no results, stopped, malformed), so no
/// view shows it as passed.
pub fn output_row(check: &Check, outcome: &Outcome, visible: bool, ok: bool) -> CheckResult {
    let mut text = crate::report::cut_text(&outcome.script.text(), MAX_VALUE, "\n[… cut]");
    if outcome.script.truncated {
        text.push_str(&format!(
            "\n[… {} bytes of output in all: what came past the output limit ({}) was dropped]",
            outcome.usage.output_bytes, outcome.limits.output
        ));
    }
    CheckResult {
        dependencies: vec![check.id.clone()],
        result: Some(ok),
        script: vec![ScriptEntry {
            expected: Observation::new("run", json!(null)),
            actual: Observation::new("output", text),
        }],
        time_ms: outcome.usage.wall_time_ms,
        hidden: !visible || check.hidden,
        ..CheckResult::new(format!("{}/output", check.id), "the grader's output")
    }
}

/// How the run ended, for the check's script and messages.
pub fn ended(outcome: &Outcome) -> String {
    match (outcome.exit_code, outcome.signal) {
        (Some(c), _) => format!("exit code {c}"),
        (None, Some(s)) => format!("killed by {}", crate::shared::text::signal_name(s)),
        _ => outcome.status.as_str().to_string(),
    }
}
