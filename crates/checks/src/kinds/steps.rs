//! The `steps` kind: a check's steps run in order against live processes in one leased sandbox
//! (see [`crate::suite::Step`] and the README for each step's semantics).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use corral_sandbox::{Execution, NoSink, Outcome, RunSpec, Sandbox, SandboxError, Status, Stdin};
use serde_json::Value;

use crate::kinds::output_search::OutputSearch;
use crate::kinds::runner::{CheckContext, CheckRunner};
use crate::report::{show, CheckResult, Observation, ScriptEntry};
use crate::shared::rows::{errored, row};
use crate::shared::settings::RunSettings;
use crate::shared::text::{normalize, signal_name, MAX_VALUE};
use crate::suite::{Command, Input, Matcher, Step, Suite};

/// Largest file a `diff` step or an output `file` matcher reads.
const MAX_FILE: u64 = 16 << 20;

impl CheckRunner for Vec<Step> {
    /// Runs the steps in a leased sandbox whose working directory starts as a copy of the stage.
    /// When they pass and dependents need it, the working directory is copied out.
    fn run(&self, cx: &CheckContext<'_>) -> (CheckResult, Option<PathBuf>) {
        let (check, settings) = (cx.check, cx.settings);
        let started = Instant::now();
        let mut lease = match cx.lease(None) {
            Ok(l) => l,
            Err(e) => return (errored(check, e), None),
        };
        let sb = lease.sandbox();
        let mut runner = Runner {
            suite: cx.suite,
            stage: cx.stage,
            settings,
            deadline: Instant::now() + settings.timeout,
            script: Vec::new(),
            message: None,
            error: None,
            stopped_by: None,
            compile_failed: false,
        };
        let passed = runner.run(sb, self);
        let mut result = row(check);
        result.script = runner.script;
        result.message = runner.message;
        if !passed {
            result.stopped_by = runner.stopped_by;
            result.compile_failed = runner.compile_failed;
        }
        if let Some(e) = runner.error {
            result.message = Some(format!("could not be checked: {e}"));
            result.error = Some(e);
        }
        let mut out = None;
        if passed && result.error.is_none() {
            result.result = Some(true);
            result.points = check.points;
            if let Some(dir) = cx.output {
                match sb.copy_out(dir, settings.limits.disk.bytes()) {
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
    /// The host's copy the working directory started as (what a missing file's hint searches).
    stage: &'a Path,
    settings: &'a RunSettings,
    deadline: Instant,
    script: Vec<ScriptEntry>,
    message: Option<String>,
    error: Option<String>,
    /// The limit that ended the program the check failed on (the check's `timeout` while it
    /// waited for the program counts as its wall time): a queued submission's verdict names it.
    stopped_by: Option<Status>,
    /// The check failed on the program of a `compile` step (or of `run: "{compile}"`, the
    /// language's compile command): a queued submission's verdict is `compile_error`.
    compile_failed: bool,
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
        format!("{}", corral_sandbox::Millis(self.settings.timeout))
    }

    /// The timeout passed while the step waited for the program `to` do something; the program
    /// was `doing` instead (`still running`, `not reading`).
    fn timed_out(&mut self, expected: Observation, doing: &str, to: &str) -> Flow {
        self.stopped_by = Some(Status::WallTimeLimit);
        let t = self.timeout_text();
        self.fail(
            expected,
            Observation::new("timeout", format!("{doing} after {t}")),
            format!("timed out after {t} while waiting for the program to {to}"),
        )
    }

    /// Runs the steps; `true` when every one passed.
    fn run(&mut self, sb: &mut Sandbox, steps: &[Step]) -> bool {
        let mut i = 0;
        while i < steps.len() {
            let flow = match &steps[i] {
                Step::Run(cmd) => {
                    // The language's own compile command is a compilation however it is named.
                    let compiles = matches!(cmd, Command::Shell(c) if c.trim() == "{compile}");
                    self.segment(sb, steps, i, cmd, compiles)
                }
                Step::Compile(cmd) => self.segment(sb, steps, i, cmd, true),
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

    /// A `run` (or `compile`) step and the process steps after it.
    /// `compiles`: the program compiles the submission (a `compile` step).
    fn segment(
        &mut self,
        sb: &mut Sandbox,
        steps: &[Step],
        at: usize,
        cmd: &Command,
        compiles: bool,
    ) -> Flow {
        let (argv, seccomp) = self.settings.launch(cmd);
        let cmd = &self.settings.expand(cmd);
        let mut spec = RunSpec::new(argv);
        spec.seccomp = seccomp;
        spec.env = self.settings.env.clone();
        spec.stdin = Stdin::Pipe;
        spec.limits = self.settings.limits.clone();
        spec.mounts = self.settings.mounts.clone();
        spec.root = self.settings.root.clone();
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
        // The check failed on a program a limit had ended (not one stopped below, after it).
        if let (Flow::Stop, Some(o)) = (&flow, &live.outcome) {
            if matches!(
                o.status,
                Status::TimeLimit
                    | Status::WallTimeLimit
                    | Status::MemoryLimit
                    | Status::OutputLimit
            ) {
                self.stopped_by.get_or_insert(o.status);
            }
        }
        if matches!(flow, Flow::Stop) && compiles && self.error.is_none() {
            self.compile_failed = true;
        }
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
                    return self.timed_out(
                        Observation::new("exit", "the program ends"),
                        "still running",
                        "exit",
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
                self.timed_out(expected, "not reading", "read input");
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
        let mut search = match &how {
            How::Search(re) => Some(OutputSearch::new(re)),
            How::Whole(_) => None,
        };
        let mut quiet = false;
        loop {
            let over = live.outcome.is_some();
            let buf = &live.output(stream)[(*consumed).min(live.output(stream).len())..];
            match &how {
                How::Search(_) => {
                    let search = search.as_mut().expect("made for How::Search");
                    if let Some(found) = search.find(buf, quiet || over) {
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
                    return Ok(self.mismatch(live, expected, actual));
                }
                How::Whole(_) => {}
            }
            if over {
                let actual = Observation::new(key, clip(buf));
                return Ok(self.mismatch(live, expected, actual));
            }
            if Instant::now() >= self.deadline {
                // The check's timeout ended the program's time as its wall limit would have.
                self.stopped_by = Some(Status::WallTimeLimit);
                let actual = Observation::new(key, clip(buf));
                let msg = format!(
                    "timed out after {} while waiting for {key} to match {}",
                    self.timeout_text(),
                    show(&expected.value, 200)
                );
                self.fail(expected, actual, msg);
                return Ok(false);
            }
            // Output no search has read yet: come back soon even if nothing more arrives.
            let behind = search.as_ref().is_some_and(|s| s.behind(buf));
            let until = if behind {
                self.deadline
                    .min(Instant::now() + Duration::from_millis(10))
            } else {
                self.deadline
            };
            let before = live.output(stream).len();
            live.step(until)?;
            quiet = live.output(stream).len() == before;
        }
    }

    /// Output that did not match once the program ended: why (how it ended, or what was expected
    /// and what it printed). Always `false`.
    fn mismatch(&mut self, live: &Live<'_>, expected: Observation, actual: Observation) -> bool {
        let msg = self.ended_message(live).unwrap_or_else(|| {
            // A pattern as the suite wrote it (`\d+\n`), not quoted again as a string (`\\d+`).
            let want = match (expected.matcher.as_deref(), expected.value.as_str()) {
                (Some("regex"), Some(p)) => format!(
                    "a match of /{}/",
                    p.chars()
                        .map(|c| match c {
                            '\n' => "\\n".to_string(),
                            '\t' => "\\t".to_string(),
                            c if c.is_control() => c.escape_default().to_string(),
                            c => c.to_string(),
                        })
                        .collect::<String>()
                ),
                _ => show(&expected.value, 200),
            };
            let got = show(&actual.value, 200);
            if want != got {
                return format!("expected {want}, not {got}");
            }
            // Cut to the same 200 characters, the two read alike: say where they part.
            match (expected.value.as_str(), actual.value.as_str()) {
                (Some(e), Some(a)) => first_difference(e, a),
                _ => format!("expected {want}, not {got}"),
            }
        });
        self.fail(expected, actual, msg);
        false
    }

    /// When the program was ended by a limit or a signal, or failed: the one-line reason.
    fn ended_message(&self, live: &Live<'_>) -> Option<String> {
        let o = live.outcome.as_ref()?;
        match o.status {
            Status::Ok => None,
            Status::NonzeroExit => Some(format!(
                "the program exited with code {}{}{}",
                o.exit_code.unwrap_or(-1),
                pids_note(o),
                stderr_tail(o)
            )),
            Status::Signaled => Some(format!(
                "the program was killed by {}{}",
                signal_name(o.signal.unwrap_or(0)),
                pids_note(o)
            )),
            _ => o.reason().map(|r| format!("the program was stopped: {r}")),
        }
    }

    fn exit(&mut self, live: &mut Live<'_>, code: i32) -> Result<bool, SandboxError> {
        live.exec.close_stdin();
        let expected = Observation::new("exit", code);
        if !live.wait_end(self.deadline)? {
            self.timed_out(expected, "still running", "exit");
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
                    format!(
                        "expected exit code {code}, not {c}{}{}",
                        pids_note(o),
                        stderr_tail(o)
                    ),
                )
            }
            Status::Signaled => {
                let name = signal_name(o.signal.unwrap_or(0));
                (
                    Observation::new("signal", name.clone()),
                    format!("the program was killed by {name}{}", pids_note(o)),
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
            let hint = near_miss(self.stage, p)
                .map(|h| format!(" ({h})"))
                .unwrap_or_default();
            (
                Observation::new("missing", p),
                format!("{p} does not exist{hint}"),
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
/// " (the limit of N processes and threads was reached: …)" when that limit refused the program
/// a fork or a thread before it failed, else nothing.
fn pids_note(o: &Outcome) -> String {
    o.pids_note().map(|n| format!(" ({n})")).unwrap_or_default()
}

fn stderr_tail(o: &Outcome) -> String {
    let text = o.stderr.text();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.is_empty() {
        return String::new();
    }
    let tail = crate::report::cut_text(&lines[..lines.len().min(6)].join("\n"), 1000, "...");
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

/// `found` is `wanted` renamed the ways downloads and uploads rename a file: a browser's
/// `caesar (1).c`, an LMS's resubmission `caesar-1.c`, a hidden extension's `caesar.c.txt`.
fn renamed(found: &str, wanted: &str) -> bool {
    let (stem, ext) = match wanted.rsplit_once('.') {
        Some((s, e)) if !s.is_empty() => (s, format!(".{e}")),
        _ => (wanted, String::new()),
    };
    if found == format!("{wanted}.txt") {
        return true;
    }
    let Some(middle) = found
        .strip_prefix(stem)
        .and_then(|rest| rest.strip_suffix(ext.as_str()))
    else {
        return false;
    };
    let number = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    middle
        .strip_prefix(" (")
        .and_then(|m| m.strip_suffix(')'))
        .is_some_and(number)
        || middle.strip_prefix('-').is_some_and(number)
}

/// Where two texts that begin alike part: the character's place and a little of each from a
/// few characters before it.
fn first_difference(expected: &str, actual: &str) -> String {
    let (e, a): (Vec<char>, Vec<char>) = (expected.chars().collect(), actual.chars().collect());
    let at = e.iter().zip(&a).take_while(|(x, y)| x == y).count();
    let from = at.saturating_sub(20);
    let piece = |t: &[char]| -> Value {
        Value::from(
            t[from.min(t.len())..(at + 40).min(t.len())]
                .iter()
                .collect::<String>(),
        )
    };
    format!(
        "the output differs from what was expected at character {}: expected …{}, not …{}",
        at + 1,
        show(&piece(&e), 200),
        show(&piece(&a), 200)
    )
}

/// Where a missing file may be instead, in the submission as it started (`stage`, never
/// following links): the same name in a folder (an archive unpacked with its top folder), the
/// name in other letters' case, or an archive at the top that nobody unpacked — what a student
/// (and a TA grading an LMS download) needs to see beside "does not exist".
fn near_miss(stage: &Path, wanted: &str) -> Option<String> {
    let name = Path::new(wanted).file_name()?.to_str()?.to_string();
    let mut found: (Option<String>, Option<String>, Option<String>) = (None, None, None);
    let mut seen = 0usize;
    let mut todo = vec![(stage.to_path_buf(), String::new(), 0usize)];
    while let Some((dir, rel, depth)) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.filter_map(Result::ok) {
            seen += 1;
            if seen > 5000 {
                break;
            }
            let Ok(n) = e.file_name().into_string() else {
                continue;
            };
            let path = if rel.is_empty() {
                n.clone()
            } else {
                format!("{rel}/{n}")
            };
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                if depth < 3 && n != "__MACOSX" {
                    todo.push((e.path(), path, depth + 1));
                }
                continue;
            }
            if path == wanted {
                continue;
            }
            let lower = n.to_ascii_lowercase();
            if n == name && found.0.is_none() {
                found.0 = Some(path);
            } else if (lower == name.to_ascii_lowercase() || renamed(&n, &name))
                && found.1.is_none()
            {
                found.1 = Some(path);
            } else if depth == 0
                && found.2.is_none()
                && [".zip", ".tar", ".tar.gz", ".tgz", ".rar", ".7z"]
                    .iter()
                    .any(|x| lower.ends_with(x))
            {
                found.2 = Some(path);
            }
        }
    }
    match found {
        (Some(p), ..) => Some(format!(
            "the submission has {p}: the file must be at {wanted}, not in a folder"
        )),
        (None, Some(p), _) => Some(format!(
            "the submission has {p}: the file must be named exactly {name}"
        )),
        (None, None, Some(p)) => Some(format!(
            "the submission has {p}: archives are not unpacked, submit the files themselves"
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::{first_difference, near_miss};

    #[test]
    fn long_outputs_that_begin_alike_say_where_they_part() {
        let e = format!("{}XYZ tail", "a".repeat(300));
        let a = format!("{}XQZ tail", "a".repeat(300));
        let said = first_difference(&e, &a);
        assert!(said.contains("at character 302"), "{said}");
        assert!(said.contains("\"aaaaaaaaaaaaaaaaaaaXYZ tail\""), "{said}");
        assert!(said.contains("\"aaaaaaaaaaaaaaaaaaaXQZ tail\""), "{said}");
        // One a prefix of the other: it parts where the shorter ends.
        assert!(first_difference("abc", "abcd").contains("at character 4"));
    }

    #[test]
    fn a_missing_file_is_looked_for_where_students_put_it() {
        let d = tempfile::tempdir().unwrap();
        let at = |files: &[&str]| {
            let sub = tempfile::tempdir_in(d.path()).unwrap();
            for f in files {
                let p = sub.path().join(f);
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                std::fs::write(p, "x").unwrap();
            }
            near_miss(sub.path(), "caesar.c")
        };
        assert_eq!(
            at(&["caesar/caesar.c"]).unwrap(),
            "the submission has caesar/caesar.c: the file must be at caesar.c, not in a folder"
        );
        assert!(at(&["Caesar.c"])
            .unwrap()
            .contains("has Caesar.c: the file must be named exactly caesar.c"));
        for renamed in ["caesar (1).c", "caesar-2.c", "caesar.c.txt"] {
            let said = at(&[renamed]).unwrap_or_default();
            assert!(
                said.contains(&format!("has {renamed}: the file must be named exactly")),
                "{renamed}: {said}"
            );
        }
        assert_eq!(at(&["caesar-x.c", "caesar (a).c"]), None);
        assert!(at(&["caesar.zip"])
            .unwrap()
            .contains("archives are not unpacked"));
        // The Mac's resource forks are no submission's files.
        assert_eq!(at(&["__MACOSX/caesar.c", "notes.txt"]), None);
        assert_eq!(at(&[]), None);
    }
}
