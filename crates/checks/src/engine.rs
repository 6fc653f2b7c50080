//! The check engine: runs a suite's checks against one submission, each in a pooled sandbox.
//!
//! - A check runs only when all its dependencies passed, in a copy of the working directories they
//!   left (merged in dependency order), with the protected assignment files put back on top.
//!   Otherwise its result is `null` (skipped).
//! - Independent checks run in parallel, up to `jobs` at once, over the shared [`Pool`].
//! - Steps run in order against a live process (see [`crate::suite::Step`] and the README).

use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use corral_sandbox::{
    Execution, Limits, Mount, NoSink, Outcome, Pool, RunSpec, Sandbox, SandboxConfig, SandboxError,
    Status, Stdin,
};
use serde_json::Value;

use crate::error::GradeError;
use crate::languages::{Language, Registry};
use crate::report::{CheckResult, Observation, Report, ScriptEntry, SKIPPED};
use crate::stage;
use crate::suite::{Check, CheckKind, Command, Input, Matcher, Step, Suite};

/// Longest value (in bytes of output) kept in a script entry.
pub const MAX_VALUE: usize = 8 * 1024;
/// Largest file a `diff` step or an output `file` matcher reads.
const MAX_FILE: u64 = 16 << 20;

/// How a suite is graded.
#[derive(Debug, Clone)]
pub struct GradeOptions {
    /// Checks running at once (default: the number of CPUs).
    pub jobs: usize,
}

impl Default for GradeOptions {
    fn default() -> Self {
        GradeOptions {
            jobs: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
        }
    }
}

/// Everything a check's runs need, resolved once.
#[derive(Debug, Clone)]
pub struct Plan {
    pub limits: Limits,
    pub mounts: Vec<Mount>,
    pub env: Vec<(String, String)>,
    pub timeout: Duration,
    /// The check's language, for `{compile}`, `{run}` and `{source}` in commands.
    pub language: Option<Language>,
}

impl Plan {
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

/// Resolves language, limits and timeout of every check; fails on an unknown or unavailable
/// language before anything runs.
pub fn plan(suite: &Suite, registry: &Registry) -> Result<Vec<Plan>, GradeError> {
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
            Ok(Plan {
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

/// Grades the submission in `submission` (a host folder) against `suite`.
pub fn grade(
    pool: &Arc<Pool>,
    registry: &Registry,
    suite: &Suite,
    submission: &Path,
    opts: &GradeOptions,
) -> Result<Report, GradeError> {
    let meta = std::fs::metadata(submission).map_err(|e| GradeError::Submission {
        path: submission.to_path_buf(),
        why: e.to_string(),
    })?;
    if !meta.is_dir() {
        return Err(GradeError::Submission {
            path: submission.to_path_buf(),
            why: "not a folder".into(),
        });
    }
    let plans = plan(suite, registry)?;
    let io = |what: &str| {
        let what = what.to_string();
        move |source| GradeError::Io { what, source }
    };
    let tmp = tempfile::Builder::new()
        .prefix("corral-check-")
        .tempdir()
        .map_err(io("creating a temporary folder"))?;
    let base = tmp.path().join("base");
    stage::copy_tree(submission, &base).map_err(io("copying the submission"))?;
    stage::place_assignment_files(suite, &base, false)
        .map_err(io("copying the assignment files"))?;
    let mut integrity = stage::integrity(suite, submission);
    integrity
        .flagged
        .extend(crate::pytest::integrity_flags(suite, submission));
    integrity.ok = integrity.flagged.is_empty();

    // The optional static safety check: a submission it blocks is not run at all.
    let safety = suite
        .safety
        .as_ref()
        .map(|cfg| crate::safety::scan(pool, cfg, submission));
    if let Some(report) = safety.as_ref().filter(|r| r.blocks()) {
        let why = format!(
            "not run: the static safety check found {}",
            report.describe().join("; ")
        );
        let results = suite
            .checks
            .iter()
            .flat_map(|c| {
                expand(
                    c,
                    CheckResult {
                        message: Some(why.clone()),
                        ..base_result(c)
                    },
                )
            })
            .collect();
        return Ok(Report {
            suite: suite.name.clone(),
            results,
            integrity,
            safety,
        });
    }

    let n = suite.checks.len();
    let index = |id: &str| suite.checks.iter().position(|c| c.id == id);
    let deps: Vec<Vec<usize>> = suite
        .checks
        .iter()
        .map(|c| c.depends.iter().filter_map(|d| index(d)).collect())
        .collect();
    let mut dependents = vec![Vec::new(); n];
    for (i, ds) in deps.iter().enumerate() {
        for &d in ds {
            dependents[d].push(i);
        }
    }

    #[derive(Clone, Copy, PartialEq)]
    enum State {
        Waiting,
        Queued,
        Done(bool),
        Skipped,
    }
    let mut state = vec![State::Waiting; n];
    let mut results: Vec<Option<CheckResult>> = vec![None; n];
    let mut outputs: Vec<Option<PathBuf>> = vec![None; n];

    struct Job {
        index: usize,
        sources: Vec<PathBuf>,
        output: Option<PathBuf>,
    }
    let workers = opts.jobs.max(1).min(n);
    std::thread::scope(|s| {
        let (job_tx, job_rx) = mpsc::channel::<Job>();
        let job_rx = Arc::new(Mutex::new(job_rx));
        let (done_tx, done_rx) = mpsc::channel::<(usize, CheckResult, Option<PathBuf>)>();
        for _ in 0..workers {
            let (job_rx, done_tx) = (job_rx.clone(), done_tx.clone());
            let (plans, base, tmp) = (&plans, &base, tmp.path());
            s.spawn(move || loop {
                let job = job_rx.lock().ok().and_then(|rx| rx.recv().ok());
                let Some(job) = job else { break };
                let check = &suite.checks[job.index];
                let plan = &plans[job.index];
                let (result, out) = if job.sources.len() == 1 && &job.sources[0] == base {
                    run_check(pool, suite, check, plan, base, job.output.as_deref())
                } else {
                    let dir = tmp.join(format!("stage-{}", job.index));
                    match stage_from(suite, &job.sources, &dir) {
                        Ok(()) => run_check(pool, suite, check, plan, &dir, job.output.as_deref()),
                        Err(e) => (
                            errored(check, format!("preparing the working directory: {e}")),
                            None,
                        ),
                    }
                };
                if done_tx.send((job.index, result, out)).is_err() {
                    break;
                }
            });
        }
        drop(done_tx);

        let output_of = |i: usize| -> Option<PathBuf> {
            (!dependents[i].is_empty()).then(|| tmp.path().join(format!("out-{i}")))
        };
        let mut in_flight = 0usize;
        for i in 0..n {
            if deps[i].is_empty() {
                state[i] = State::Queued;
                in_flight += 1;
                let _ = job_tx.send(Job {
                    index: i,
                    sources: vec![base.clone()],
                    output: output_of(i),
                });
            }
        }
        while in_flight > 0 {
            let Ok((i, result, out)) = done_rx.recv() else {
                break;
            };
            in_flight -= 1;
            state[i] = State::Done(result.result == Some(true));
            results[i] = Some(result);
            outputs[i] = out;
            // Resolve dependents whose dependencies are now all decided, transitively for skips.
            let mut todo: Vec<usize> = dependents[i].clone();
            while let Some(j) = todo.pop() {
                if state[j] != State::Waiting {
                    continue;
                }
                let decided = deps[j]
                    .iter()
                    .all(|&d| matches!(state[d], State::Done(_) | State::Skipped));
                if !decided {
                    continue;
                }
                let all_passed = deps[j].iter().all(|&d| state[d] == State::Done(true));
                let sources: Option<Vec<PathBuf>> =
                    deps[j].iter().map(|&d| outputs[d].clone()).collect();
                match (all_passed, sources) {
                    (true, Some(sources)) => {
                        state[j] = State::Queued;
                        in_flight += 1;
                        let _ = job_tx.send(Job {
                            index: j,
                            sources,
                            output: output_of(j),
                        });
                    }
                    _ => {
                        state[j] = State::Skipped;
                        results[j] = Some(skipped(&suite.checks[j]));
                        todo.extend(dependents[j].iter().copied());
                    }
                }
            }
        }
        drop(job_tx);
    });

    let results = results
        .into_iter()
        .zip(&suite.checks)
        .flat_map(|(r, c)| expand(c, r.unwrap_or_else(|| skipped(c))))
        .collect();
    Ok(Report {
        suite: suite.name.clone(),
        results,
        integrity,
        safety,
    })
}

/// A dependent check's working directory: its dependencies' directories in order, then the
/// protected assignment files on top.
fn stage_from(suite: &Suite, sources: &[PathBuf], dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    for s in sources {
        stage::copy_tree(s, dir)?;
    }
    stage::place_assignment_files(suite, dir, true)
}

/// A check's rows in the report: its own, then (pytest and check50 checks) one per rubric item.
/// A check that did not run still lists its items, so every report has the same rows and the
/// same maximum score.
fn expand(check: &Check, mut r: CheckResult) -> Vec<CheckResult> {
    let mut children = std::mem::take(&mut r.children);
    if children.is_empty() {
        match &check.kind {
            CheckKind::Pytest(pc) => children = crate::pytest::rows_not_run(check, pc, &r),
            CheckKind::Check50(cc) => children = crate::check50::rows_not_run(check, cc, &r),
            _ => {}
        }
    }
    if !matches!(check.kind, CheckKind::Steps(_)) {
        // The points are the items'.
        r.points = 0.0;
        r.max_points = 0.0;
    }
    let mut out = vec![r];
    out.extend(children);
    out
}

fn base_result(check: &Check) -> CheckResult {
    CheckResult {
        id: check.id.clone(),
        description: check.description.clone(),
        dependencies: check.depends.clone(),
        result: Some(false),
        script: Vec::new(),
        points: 0.0,
        max_points: check.points,
        time_ms: 0,
        hidden: check.hidden,
        message: None,
        error: None,
        children: Vec::new(),
    }
}

fn skipped(check: &Check) -> CheckResult {
    CheckResult {
        result: None,
        message: Some(SKIPPED.into()),
        ..base_result(check)
    }
}

fn errored(check: &Check, error: String) -> CheckResult {
    CheckResult {
        message: Some(format!("could not be checked: {error}")),
        error: Some(error),
        ..base_result(check)
    }
}

/// Runs one check in a leased sandbox whose working directory starts as a copy of `stage`.
/// When it passes and `output` is given, its working directory is copied out there.
fn run_check(
    pool: &Arc<Pool>,
    suite: &Suite,
    check: &Check,
    plan: &Plan,
    stage: &Path,
    output: Option<&Path>,
) -> (CheckResult, Option<PathBuf>) {
    match &check.kind {
        CheckKind::Pytest(pc) => {
            return crate::pytest::run_check(pool, suite, check, pc, plan, stage, output)
        }
        CheckKind::Check50(cc) => {
            return crate::check50::run_check(pool, suite, check, cc, plan, stage)
        }
        _ => {}
    }
    let started = Instant::now();
    let shape = SandboxConfig::offline(plan.mounts.clone(), plan.limits.disk.bytes());
    let mut lease = match pool.lease(&shape) {
        Ok(l) => l,
        Err(e) => return (errored(check, format!("sandbox error: {e}")), None),
    };
    let sb = lease.sandbox();
    if let Err(e) = sb.copy_in(stage) {
        return (
            errored(check, format!("copying files into the sandbox: {e}")),
            None,
        );
    }
    let mut runner = Runner {
        suite,
        plan,
        deadline: Instant::now() + plan.timeout,
        script: Vec::new(),
        message: None,
        error: None,
    };
    let passed = match &check.kind {
        CheckKind::Steps(steps) => runner.run(sb, steps),
        _ => unreachable!("dispatched above"),
    };
    let mut result = base_result(check);
    result.script = runner.script;
    result.message = runner.message;
    if let Some(e) = runner.error {
        result.message = Some(format!("could not be checked: {e}"));
        result.error = Some(e);
    }
    let mut out = None;
    if passed && result.error.is_none() {
        result.result = Some(true);
        result.points = check.points;
        if let Some(dir) = output {
            match sb.copy_out(dir, plan.limits.disk.bytes()) {
                Ok(_) => out = Some(dir.to_path_buf()),
                Err(e) => {
                    result.result = Some(false);
                    result.points = 0.0;
                    result.error = Some(format!("copying the working directory out: {e}"));
                    result.message = result.error.clone();
                }
            }
        }
    }
    result.time_ms = started.elapsed().as_millis() as u64;
    (result, out)
}

/// A running program and, once it ended, its outcome.
struct Live<'s> {
    exec: Execution<'s>,
    outcome: Option<Outcome>,
}

#[derive(Clone, Copy, PartialEq)]
enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    fn key(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

impl Live<'_> {
    fn output(&self, s: Stream) -> &[u8] {
        match (&self.outcome, s) {
            (Some(o), Stream::Stdout) => &o.stdout.bytes,
            (Some(o), Stream::Stderr) => &o.stderr.bytes,
            (None, Stream::Stdout) => self.exec.stdout_so_far(),
            (None, Stream::Stderr) => self.exec.stderr_so_far(),
        }
    }

    fn step(&mut self, deadline: Instant) -> Result<(), SandboxError> {
        if self.outcome.is_none() {
            if let Some(o) = self.exec.step(Some(deadline), &mut NoSink)? {
                self.outcome = Some(o);
            }
        }
        Ok(())
    }

    /// Waits for the end; `false` when the deadline passed first.
    fn wait_end(&mut self, deadline: Instant) -> Result<bool, SandboxError> {
        while self.outcome.is_none() {
            if Instant::now() >= deadline {
                return Ok(false);
            }
            self.step(deadline)?;
        }
        Ok(true)
    }

    /// Kills the program (if still running) and collects its end.
    fn stop(&mut self) -> Result<(), SandboxError> {
        if self.outcome.is_none() {
            self.exec.kill()?;
            while self.outcome.is_none() {
                if let Some(o) = self.exec.step(None, &mut NoSink)? {
                    self.outcome = Some(o);
                }
            }
        }
        Ok(())
    }
}

enum Flow {
    /// Go on with the step at this index.
    Next(usize),
    /// The check failed (the script and message say why) or corral failed (`error`).
    Stop,
}

struct Runner<'a> {
    suite: &'a Suite,
    plan: &'a Plan,
    deadline: Instant,
    script: Vec<ScriptEntry>,
    message: Option<String>,
    error: Option<String>,
}

impl Runner<'_> {
    fn entry(&mut self, expected: Observation, actual: Observation) {
        self.script.push(ScriptEntry { expected, actual });
    }

    fn fail(&mut self, expected: Observation, actual: Observation, message: String) -> Flow {
        self.entry(expected, actual);
        self.message = Some(message);
        Flow::Stop
    }

    fn timeout_text(&self) -> String {
        format!("{}", corral_sandbox::Millis(self.plan.timeout))
    }

    /// Runs the steps; `true` when every one passed.
    fn run(&mut self, sb: &mut Sandbox, steps: &[Step]) -> bool {
        let mut i = 0;
        while i < steps.len() {
            let flow = match &steps[i] {
                Step::Run(cmd) => self.segment(sb, steps, i, cmd),
                Step::Exists(p) => self.exists(sb, p, true, i),
                Step::NotExists(p) => self.exists(sb, p, false, i),
                Step::Diff { actual, expected } => self.diff(sb, actual, expected, i),
                // Validation puts a `run` before every process step.
                _ => {
                    self.error = Some(format!("step {i} has no program to talk to"));
                    Flow::Stop
                }
            };
            match flow {
                Flow::Next(next) => i = next,
                Flow::Stop => return false,
            }
        }
        true
    }

    /// A `run` step and the process steps after it.
    fn segment(&mut self, sb: &mut Sandbox, steps: &[Step], at: usize, cmd: &Command) -> Flow {
        let cmd = &self.plan.expand(cmd);
        let mut spec = RunSpec::new(cmd.argv());
        spec.env = self.plan.env.clone();
        spec.stdin = Stdin::Pipe;
        spec.limits = self.plan.limits.clone();
        spec.mounts = self.plan.mounts.clone();
        let run_obs = Observation::new("run", cmd.to_string());
        let exec = match sb.start(&spec) {
            Ok(e) => e,
            Err(e) => {
                self.entry(run_obs, Observation::new("error", e.to_string()));
                self.error = Some(format!("sandbox error: {e}"));
                return Flow::Stop;
            }
        };
        self.entry(run_obs.clone(), run_obs);
        let mut live = Live {
            exec,
            outcome: None,
        };
        let flow = self.talk(&mut live, steps, at + 1);
        let stopped = live.stop();
        if let Err(e) = stopped {
            if self.error.is_none() {
                self.error = Some(format!("sandbox error: {e}"));
            }
            return Flow::Stop;
        }
        flow
    }

    fn talk(&mut self, live: &mut Live<'_>, steps: &[Step], from: usize) -> Flow {
        let mut consumed = [0usize; 2];
        let mut i = from;
        while i < steps.len() {
            let r = match &steps[i] {
                Step::Stdin(input) => self.stdin(live, input),
                Step::Stdout(m) => self.expect(live, Stream::Stdout, m, &mut consumed[0]),
                Step::Stderr(m) => self.expect(live, Stream::Stderr, m, &mut consumed[1]),
                Step::Exit(code) => self.exit(live, *code),
                _ => break,
            };
            match r {
                Ok(true) => i += 1,
                Ok(false) => return Flow::Stop,
                Err(e) => {
                    self.error = Some(format!("sandbox error: {e}"));
                    return Flow::Stop;
                }
            }
        }
        if i < steps.len() {
            // Another program or a file step follows: this program must end first.
            live.exec.close_stdin();
            match live.wait_end(self.deadline) {
                Ok(true) => {}
                Ok(false) => {
                    let t = self.timeout_text();
                    return self.fail(
                        Observation::new("exit", "the program ends"),
                        Observation::new("timeout", format!("still running after {t}")),
                        format!("timed out after {t} while waiting for the program to exit"),
                    );
                }
                Err(e) => {
                    self.error = Some(format!("sandbox error: {e}"));
                    return Flow::Stop;
                }
            }
        }
        Flow::Next(i)
    }

    fn stdin(&mut self, live: &mut Live<'_>, input: &Input) -> Result<bool, SandboxError> {
        if input.waits() && !self.wait_for_reader(live)? {
            return Ok(false);
        }
        let input = input.inner();
        let (bytes, shown) = match input {
            Input::Line(s) => (format!("{s}\n").into_bytes(), Value::from(s.clone())),
            Input::Text(s, _) => (s.clone().into_bytes(), Value::from(s.clone())),
            Input::Eof => (Vec::new(), Value::Null),
            Input::Wait(_) => unreachable!("inner() removed the wait"),
            Input::File(f, _) => match read_limited(&self.suite.dir.join(f)) {
                Ok(b) => {
                    let shown = clip(&b);
                    (b, shown)
                }
                Err(e) => {
                    self.error = Some(format!("reading {f}: {e}"));
                    return Ok(false);
                }
            },
        };
        if live.outcome.is_none() && !bytes.is_empty() {
            live.exec.write_stdin(&bytes);
        }
        if input.closes() {
            live.exec.close_stdin();
        }
        let obs = Observation::new(if input.closes() { "eof" } else { "stdin" }, shown);
        self.entry(obs.clone(), obs);
        Ok(true)
    }

    /// Waits until the program is blocked reading its standard input. The kernel is asked after
    /// each event and at growing intervals (1ms to 50ms) in between.
    fn wait_for_reader(&mut self, live: &mut Live<'_>) -> Result<bool, SandboxError> {
        let expected = Observation::new("stdin", "the program waits for input");
        let mut pause = Duration::from_millis(1);
        loop {
            if live.outcome.is_none() && live.exec.waiting_for_stdin(&mut NoSink)? {
                return Ok(true);
            }
            if let Some(o) = &live.outcome {
                let (actual, msg) = match o.status {
                    Status::Ok | Status::NonzeroExit => (
                        Observation::new("exit", o.exit_code.unwrap_or(-1)),
                        format!(
                            "the program exited (code {}) instead of waiting for input",
                            o.exit_code.unwrap_or(-1)
                        ),
                    ),
                    _ => (
                        Observation::new("limit", o.status.as_str()),
                        self.ended_message(live).unwrap_or_default(),
                    ),
                };
                self.fail(expected, actual, msg);
                return Ok(false);
            }
            let now = Instant::now();
            if now >= self.deadline {
                let t = self.timeout_text();
                self.fail(
                    expected,
                    Observation::new("timeout", format!("not reading after {t}")),
                    format!("timed out after {t} while waiting for the program to read input"),
                );
                return Ok(false);
            }
            live.step(self.deadline.min(now + pause))?;
            pause = (pause * 2).min(Duration::from_millis(50));
        }
    }

    fn expect(
        &mut self,
        live: &mut Live<'_>,
        stream: Stream,
        m: &Matcher,
        consumed: &mut usize,
    ) -> Result<bool, SandboxError> {
        enum How {
            Search(regex::bytes::Regex),
            Whole(Vec<u8>),
        }
        let how = match m {
            Matcher::Contains(t) => How::Search(
                regex::bytes::Regex::new(&regex::escape(t)).expect("an escaped literal"),
            ),
            Matcher::Regex(r) => How::Search(r.clone()),
            Matcher::Exact(t) => How::Whole(t.clone().into_bytes()),
            Matcher::File(f) => match read_limited(&self.suite.dir.join(f)) {
                Ok(b) => How::Whole(b),
                Err(e) => {
                    self.error = Some(format!("reading {f}: {e}"));
                    return Ok(false);
                }
            },
        };
        if matches!(how, How::Whole(_)) {
            // The whole output is only known at the end: let a program reading to EOF finish.
            live.exec.close_stdin();
        }
        let key = stream.key();
        let mut expected = Observation::new(
            key,
            match &how {
                How::Whole(b) => clip(b),
                How::Search(_) => Value::from(m.pattern()),
            },
        );
        expected.matcher = Some(m.kind().to_string());
        loop {
            let over = live.outcome.is_some();
            let buf = &live.output(stream)[(*consumed).min(live.output(stream).len())..];
            match &how {
                How::Search(re) => {
                    if let Some(found) = re.find(buf) {
                        let actual = Observation::new(key, clip(found.as_bytes()));
                        *consumed += found.end();
                        self.entry(expected, actual);
                        return Ok(true);
                    }
                }
                How::Whole(want) if over => {
                    let actual = Observation::new(key, clip(buf));
                    let ok = normalize(buf) == normalize(want);
                    *consumed += buf.len();
                    if ok {
                        self.entry(expected, actual);
                        return Ok(true);
                    }
                    let msg = self.ended_message(live).unwrap_or_else(|| {
                        format!(
                            "expected {}, not {}",
                            crate::report::show(&expected.value, 200),
                            crate::report::show(&actual.value, 200)
                        )
                    });
                    self.fail(expected, actual, msg);
                    return Ok(false);
                }
                How::Whole(_) => {}
            }
            if over {
                let actual = Observation::new(key, clip(buf));
                let msg = self.ended_message(live).unwrap_or_else(|| {
                    format!(
                        "expected {}, not {}",
                        crate::report::show(&expected.value, 200),
                        crate::report::show(&actual.value, 200)
                    )
                });
                self.fail(expected, actual, msg);
                return Ok(false);
            }
            if Instant::now() >= self.deadline {
                let actual = Observation::new(key, clip(buf));
                let msg = format!(
                    "timed out after {} while waiting for {key} to match {}",
                    self.timeout_text(),
                    crate::report::show(&expected.value, 200)
                );
                self.fail(expected, actual, msg);
                return Ok(false);
            }
            live.step(self.deadline)?;
        }
    }

    /// When the program was ended by a limit or a signal, or failed: the one-line reason.
    fn ended_message(&self, live: &Live<'_>) -> Option<String> {
        let o = live.outcome.as_ref()?;
        match o.status {
            Status::Ok => None,
            Status::NonzeroExit => Some(format!(
                "the program exited with code {}{}",
                o.exit_code.unwrap_or(-1),
                stderr_tail(o)
            )),
            Status::Signaled => Some(format!(
                "the program was killed by {}",
                signal_name(o.signal.unwrap_or(0))
            )),
            _ => o.reason().map(|r| format!("the program was stopped: {r}")),
        }
    }

    fn exit(&mut self, live: &mut Live<'_>, code: i32) -> Result<bool, SandboxError> {
        live.exec.close_stdin();
        let expected = Observation::new("exit", code);
        if !live.wait_end(self.deadline)? {
            let t = self.timeout_text();
            self.fail(
                expected,
                Observation::new("timeout", format!("still running after {t}")),
                format!("timed out after {t} while waiting for the program to exit"),
            );
            return Ok(false);
        }
        let o = live.outcome.as_ref().expect("ended");
        let (actual, msg) = match o.status {
            Status::Ok | Status::NonzeroExit => {
                let c = o.exit_code.unwrap_or(-1);
                if c == code {
                    self.entry(expected, Observation::new("exit", c));
                    return Ok(true);
                }
                (
                    Observation::new("exit", c),
                    format!("expected exit code {code}, not {c}{}", stderr_tail(o)),
                )
            }
            Status::Signaled => {
                let name = signal_name(o.signal.unwrap_or(0));
                (
                    Observation::new("signal", name.clone()),
                    format!("the program was killed by {name}"),
                )
            }
            _ => {
                let r = o.reason().unwrap_or_else(|| o.status.as_str().to_string());
                (
                    Observation::new("limit", r.clone()),
                    format!("the program was stopped: {r}"),
                )
            }
        };
        self.fail(expected, actual, msg);
        Ok(false)
    }

    fn exists(&mut self, sb: &mut Sandbox, p: &str, want: bool, at: usize) -> Flow {
        let found = corral_sandbox::exists_beneath(sb.workdir(), Path::new(p));
        let key = if want { "exists" } else { "not_exists" };
        let expected = Observation::new(key, p);
        if found == want {
            self.entry(expected.clone(), expected);
            return Flow::Next(at + 1);
        }
        let (actual, msg) = if want {
            (
                Observation::new("missing", p),
                format!("{p} does not exist"),
            )
        } else {
            (
                Observation::new("exists", p),
                format!("{p} should not exist"),
            )
        };
        self.fail(expected, actual, msg)
    }

    fn diff(&mut self, sb: &mut Sandbox, actual_rel: &str, expected_rel: &str, at: usize) -> Flow {
        let want = match read_limited(&self.suite.dir.join(expected_rel)) {
            Ok(b) => b,
            Err(e) => {
                self.error = Some(format!("reading {expected_rel}: {e}"));
                return Flow::Stop;
            }
        };
        let mut expected = Observation::new("file", clip(&want));
        expected.matcher = Some(format!("diff {actual_rel} {expected_rel}"));
        let got = match sb.read_file(Path::new(actual_rel), MAX_FILE) {
            Ok(Some(b)) => b,
            Ok(None) => {
                return self.fail(
                    expected,
                    Observation::new("missing", actual_rel),
                    format!("{actual_rel} does not exist or is not a regular file"),
                )
            }
            Err(e) => {
                self.error = Some(format!("reading {actual_rel}: {e}"));
                return Flow::Stop;
            }
        };
        let actual = Observation::new("file", clip(&got));
        let (a, b) = (normalize(&want), normalize(&got));
        if a == b {
            self.entry(expected, actual);
            return Flow::Next(at + 1);
        }
        let (la, lb): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
        let line = la
            .iter()
            .zip(&lb)
            .position(|(x, y)| x != y)
            .unwrap_or(la.len().min(lb.len()));
        let msg = format!(
            "{actual_rel} differs from {expected_rel} at line {}: expected {:?}, not {:?}",
            line + 1,
            la.get(line).copied().unwrap_or("end of file"),
            lb.get(line).copied().unwrap_or("end of file"),
        );
        self.fail(expected, actual, msg)
    }
}

/// The first lines of a program's standard error, to show why it failed (compiler errors, …).
fn stderr_tail(o: &Outcome) -> String {
    let text = o.stderr.text();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.is_empty() {
        return String::new();
    }
    let mut tail: String = lines[..lines.len().min(6)].join("\n");
    if tail.len() > 1000 {
        let mut cut = 1000;
        while !tail.is_char_boundary(cut) {
            cut -= 1;
        }
        tail.truncate(cut);
        tail.push_str("...");
    }
    format!("\n{tail}")
}

fn read_limited(p: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut v = Vec::new();
    std::fs::File::open(p)?.take(MAX_FILE).read_to_end(&mut v)?;
    Ok(v)
}

/// Output as text for a script entry: lossy UTF-8, at most [`MAX_VALUE`] bytes.
fn clip(b: &[u8]) -> Value {
    let cut = &b[..b.len().min(MAX_VALUE)];
    let mut s = String::from_utf8_lossy(cut).into_owned();
    if b.len() > MAX_VALUE {
        s.push_str("...");
    }
    Value::String(s)
}

/// Text compared by `exact`, `file` and `diff`: CRLF as LF, trailing whitespace of every line
/// and trailing blank lines ignored.
pub fn normalize(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(b).replace("\r\n", "\n");
    let lines: Vec<&str> = s.lines().map(str::trim_end).collect();
    let end = lines
        .iter()
        .rposition(|l| !l.is_empty())
        .map_or(0, |i| i + 1);
    lines[..end].join("\n")
}

/// `SIGSEGV (segmentation fault)`-style names of the signals programs usually die of.
pub fn signal_name(sig: i32) -> String {
    let (name, what) = match sig {
        libc_sig::SIGHUP => ("SIGHUP", "hangup"),
        libc_sig::SIGINT => ("SIGINT", "interrupt"),
        libc_sig::SIGILL => ("SIGILL", "illegal instruction"),
        libc_sig::SIGABRT => ("SIGABRT", "aborted"),
        libc_sig::SIGBUS => ("SIGBUS", "bus error"),
        libc_sig::SIGFPE => ("SIGFPE", "floating point exception"),
        libc_sig::SIGKILL => ("SIGKILL", "killed"),
        libc_sig::SIGSEGV => ("SIGSEGV", "segmentation fault"),
        libc_sig::SIGPIPE => ("SIGPIPE", "broken pipe"),
        libc_sig::SIGTERM => ("SIGTERM", "terminated"),
        libc_sig::SIGXCPU => ("SIGXCPU", "CPU time limit"),
        libc_sig::SIGXFSZ => ("SIGXFSZ", "file size limit"),
        _ => return format!("signal {sig}"),
    };
    format!("{name} ({what})")
}

/// Linux signal numbers (x86, arm and most architectures agree on these).
mod libc_sig {
    pub const SIGHUP: i32 = 1;
    pub const SIGINT: i32 = 2;
    pub const SIGILL: i32 = 4;
    pub const SIGABRT: i32 = 6;
    pub const SIGBUS: i32 = 7;
    pub const SIGFPE: i32 = 8;
    pub const SIGKILL: i32 = 9;
    pub const SIGSEGV: i32 = 11;
    pub const SIGPIPE: i32 = 13;
    pub const SIGTERM: i32 = 15;
    pub const SIGXCPU: i32 = 24;
    pub const SIGXFSZ: i32 = 25;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalization_ignores_only_trailing_whitespace() {
        assert_eq!(normalize(b"a  \r\nb\n\n\n"), "a\nb");
        assert_eq!(normalize(b"a\nb"), normalize(b"a\nb\n"));
        assert_ne!(normalize(b" a"), normalize(b"a"));
        assert_ne!(normalize(b"a\n\nb"), normalize(b"a\nb"));
    }

    #[test]
    fn signals_have_names() {
        assert_eq!(signal_name(11), "SIGSEGV (segmentation fault)");
        assert_eq!(signal_name(99), "signal 99");
    }
}
