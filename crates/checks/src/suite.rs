//! Suite files: the assignment's checks, in YAML (or JSON), with CS50 Check semantics.
//!
//! ```yaml
//! name: hello
//! files: [{path: expected.txt, protected: true}]
//! checks:
//!   - id: compiles
//!     steps: [{run: gcc -o hello hello.c}, {exit: 0}]
//! ```
//!
//! Parsing is strict: unknown keys are errors, and every error names the file, the line (when the
//! parser knows it) and the key. See the README ("Checks and grading") for every key.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use corral_sandbox::{Limits, LimitsRequest, Millis};
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use crate::error::SuiteError;

/// How long a check may take, start to end, when neither the check nor the suite says.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// A whole suite, validated.
#[derive(Debug, Clone)]
pub struct Suite {
    pub name: String,
    pub description: Option<String>,
    /// Default language of the checks (a language id of the registry).
    pub language: Option<String>,
    /// Default limits of every run of every check.
    pub limits: LimitsRequest,
    /// Default time a check may take.
    pub timeout: Option<Millis>,
    /// Files of the assignment copied in next to the submission.
    pub files: Vec<AssignmentFile>,
    /// The checks, in file order.
    pub checks: Vec<Check>,
    /// The optional static safety check of Python files (off unless the suite asks for it).
    pub safety: Option<crate::safety::SafetyConfig>,
    /// The suite file.
    pub path: PathBuf,
    /// The assignment folder: the suite file's folder. Every assignment path is relative to it.
    pub dir: PathBuf,
}

/// A file (or folder) of the assignment.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AssignmentFile {
    /// Relative to the assignment folder; also where it lands in the working directory.
    pub path: String,
    /// Always taken from the assignment, never from the submission (and flagged when the
    /// submission's copy differs). Unprotected files are only copied when the submission lacks them.
    #[serde(default)]
    pub protected: bool,
}

/// One check.
#[derive(Debug, Clone)]
pub struct Check {
    pub id: String,
    pub description: String,
    /// Checks that must pass first; this one runs in a copy of their working directories.
    pub depends: Vec<String>,
    /// Points for passing (default 1).
    pub points: f64,
    /// Students see only pass/fail, never expected/actual.
    pub hidden: bool,
    pub timeout: Option<Millis>,
    pub limits: LimitsRequest,
    pub language: Option<String>,
    pub kind: CheckKind,
}

/// What a check does.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum CheckKind {
    /// A sequence of steps run against live processes (CS50 Check's chains).
    Steps(Vec<Step>),
    /// The assignment's pytest files (public and hidden) with a rubric; see [`crate::pytest`].
    Pytest(Box<crate::pytest::PytestCheck>),
    /// A check50 problem folder run by check50 itself; see [`crate::check50`].
    Check50(Box<crate::check50::Check50Check>),
}

/// One step of a check.
#[derive(Debug, Clone)]
pub enum Step {
    /// Start a program (the previous one, if still running, is first waited for).
    Run(Command),
    /// Type into the running program.
    Stdin(Input),
    /// Wait until the program's standard output matches.
    Stdout(Matcher),
    /// Wait until the program's standard error matches.
    Stderr(Matcher),
    /// Close stdin, wait for the program to end and compare its exit code.
    Exit(i32),
    /// A path exists in the working directory (as anything, links included).
    Exists(String),
    /// A path does not exist in the working directory.
    NotExists(String),
    /// A file the program wrote equals an assignment file.
    Diff { actual: String, expected: String },
}

/// A command line: a string for `/bin/sh -c`, or an argv list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Shell(String),
    Argv(Vec<String>),
}

/// What a `stdin` step types.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// A line: the text and a newline.
    Line(String),
    /// Exactly this text (no newline added); `true`: then close stdin (end of file).
    Text(String, bool),
    /// The bytes of an assignment file; `true`: then close stdin.
    File(String, bool),
    /// Close stdin: the program reads end of file.
    Eof,
    /// First wait until the program is blocked reading its standard input (CS50 Check's
    /// `stdin` assertion), then type the inner input.
    Wait(Box<Input>),
}

impl Input {
    /// Whether the step ends the program's input.
    pub fn closes(&self) -> bool {
        match self {
            Input::Eof | Input::Text(_, true) | Input::File(_, true) => true,
            Input::Wait(inner) => inner.closes(),
            _ => false,
        }
    }

    /// Whether the step first waits for the program to read.
    pub fn waits(&self) -> bool {
        matches!(self, Input::Wait(_))
    }

    /// The input without the wait.
    pub fn inner(&self) -> &Input {
        match self {
            Input::Wait(inner) => inner,
            other => other,
        }
    }
}

/// How output is matched. See the README for the exact semantics.
#[derive(Debug, Clone)]
pub enum Matcher {
    /// The unread output contains this text (check50's `stdout("...")` with the text escaped).
    Contains(String),
    /// The unread output contains a match of this regular expression.
    Regex(regex::bytes::Regex),
    /// Once the program ended, the unread output equals this text (modulo trailing whitespace at
    /// line ends and trailing blank lines).
    Exact(String),
    /// Like `Exact`, with the contents of an assignment file.
    File(String),
}

impl Matcher {
    /// `contains`, `regex`, `exact` or `file`.
    pub fn kind(&self) -> &'static str {
        match self {
            Matcher::Contains(_) => "contains",
            Matcher::Regex(_) => "regex",
            Matcher::Exact(_) => "exact",
            Matcher::File(_) => "file",
        }
    }

    /// The pattern as the suite wrote it.
    pub fn pattern(&self) -> &str {
        match self {
            Matcher::Contains(s) | Matcher::Exact(s) | Matcher::File(s) => s,
            Matcher::Regex(r) => r.as_str(),
        }
    }
}

impl Command {
    /// What the sandbox runs. A string is `/bin/sh -c STRING`; when it is a simple command (words
    /// of plain characters, no shell syntax) the shell `exec`s it, so that the program's own exit
    /// code or signal is what the check sees (not the shell's `128+N`).
    pub fn argv(&self) -> Vec<String> {
        match self {
            Command::Shell(s) if is_simple(s) => {
                vec!["/bin/sh".into(), "-c".into(), format!("exec {}", s.trim())]
            }
            Command::Shell(s) => vec!["/bin/sh".into(), "-c".into(), s.clone()],
            Command::Argv(a) => a.clone(),
        }
    }
}

/// Words of characters the shell gives no meaning to, the first not an assignment or a builtin
/// that `exec` would not find.
fn is_simple(s: &str) -> bool {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_./=:,+-@%".contains(c) || c == ' ';
    let first = s.split_whitespace().next().unwrap_or("");
    s.chars().all(plain)
        && !first.is_empty()
        && !first.contains('=')
        && !matches!(
            first,
            "cd" | "exit"
                | "export"
                | "set"
                | "unset"
                | "exec"
                | "."
                | "eval"
                | "read"
                | "ulimit"
                | "umask"
                | "wait"
        )
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Command::Shell(s) => f.write_str(s),
            Command::Argv(a) => f.write_str(&a.join(" ")),
        }
    }
}

// ------------------------------------------------------------------------------------------ raw

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSuite {
    name: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    language: Option<String>,
    #[serde(default)]
    limits: LimitsRequest,
    #[serde(default)]
    timeout: Option<Millis>,
    #[serde(default)]
    files: Vec<AssignmentFile>,
    #[serde(default)]
    safety: Option<crate::safety::RawSafety>,
    checks: Vec<RawCheck>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCheck {
    id: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    depends: Vec<String>,
    #[serde(default)]
    points: Option<f64>,
    #[serde(default)]
    hidden: bool,
    #[serde(default)]
    timeout: Option<Millis>,
    #[serde(default)]
    limits: LimitsRequest,
    #[serde(default)]
    language: Option<String>,
    #[serde(default)]
    steps: Option<Vec<Step>>,
    #[serde(default)]
    pytest: Option<crate::pytest::RawPytest>,
    #[serde(default)]
    check50: Option<crate::check50::RawCheck50>,
}

const STEP_KINDS: &[&str] = &[
    "run",
    "stdin",
    "stdout",
    "stderr",
    "exit",
    "exists",
    "not_exists",
    "diff",
];

impl<'de> Deserialize<'de> for Step {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Step;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a step: a map with one key (run, stdin, stdout, stderr, exit, exists, not_exists or diff)")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Step, A::Error> {
                let Some(key) = map.next_key::<String>()? else {
                    return Err(de::Error::custom("empty step: give one of run, stdin, stdout, stderr, exit, exists, not_exists, diff"));
                };
                let step = match key.as_str() {
                    "run" => Step::Run(map.next_value()?),
                    "stdin" => Step::Stdin(map.next_value()?),
                    "stdout" => Step::Stdout(map.next_value()?),
                    "stderr" => Step::Stderr(map.next_value()?),
                    "exit" => Step::Exit(map.next_value()?),
                    "exists" => Step::Exists(map.next_value()?),
                    "not_exists" => Step::NotExists(map.next_value()?),
                    "diff" => {
                        let d: RawDiff = map.next_value()?;
                        Step::Diff {
                            actual: d.actual,
                            expected: d.expected,
                        }
                    }
                    other => return Err(de::Error::unknown_variant(other, STEP_KINDS)),
                };
                if let Some(extra) = map.next_key::<String>()? {
                    return Err(de::Error::custom(format!(
                        "a step has exactly one key, found `{key}` and `{extra}` (write them as two steps)"
                    )));
                }
                Ok(step)
            }
        }
        d.deserialize_map(V)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDiff {
    actual: String,
    expected: String,
}

impl<'de> Deserialize<'de> for Command {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Command;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a command: a string (run with /bin/sh -c) or a list of arguments")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Command, E> {
                if v.trim().is_empty() {
                    return Err(E::custom("empty command"));
                }
                Ok(Command::Shell(v.to_string()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Command, A::Error> {
                let mut argv = Vec::new();
                while let Some(a) = seq.next_element::<String>()? {
                    argv.push(a);
                }
                if argv.first().is_none_or(|a| a.is_empty()) {
                    return Err(de::Error::custom("empty command"));
                }
                Ok(Command::Argv(argv))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawInput {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    file: Option<String>,
    #[serde(default)]
    eof: bool,
    #[serde(default)]
    line: Option<String>,
    #[serde(default)]
    wait: bool,
}

impl<'de> Deserialize<'de> for Input {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Input;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a line of text, or {line|text|file: ..., eof: true, wait: true}")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Input, E> {
                Ok(Input::Line(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Input, E> {
                Ok(Input::Line(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Input, E> {
                Ok(Input::Line(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Input, E> {
                Ok(Input::Line(v.to_string()))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Input, A::Error> {
                let raw = RawInput::deserialize(de::value::MapAccessDeserializer::new(map))?;
                let input = match (raw.line, raw.text, raw.file, raw.eof) {
                    (Some(l), None, None, false) => Input::Line(l),
                    (None, Some(t), None, eof) => Input::Text(t, eof),
                    (None, None, Some(f), eof) => Input::File(f, eof),
                    (None, None, None, true) => Input::Eof,
                    (None, None, None, false) if raw.wait => Input::Text(String::new(), false),
                    _ => {
                        return Err(de::Error::custom(
                            "stdin: give one of `line`, `text` or `file` (`eof: true` may go with `text` or `file`, or alone), and optionally `wait: true`",
                        ))
                    }
                };
                Ok(if raw.wait {
                    Input::Wait(Box::new(input))
                } else {
                    input
                })
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMatcher {
    #[serde(default)]
    contains: Option<String>,
    #[serde(default)]
    regex: Option<String>,
    #[serde(default)]
    exact: Option<String>,
    #[serde(default)]
    file: Option<String>,
}

impl<'de> Deserialize<'de> for Matcher {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Matcher;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "text to find, {contains: ...}, {regex: ...}, {exact: ...} or {file: ...}",
                )
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Matcher, E> {
                Ok(Matcher::Contains(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Matcher, E> {
                Ok(Matcher::Contains(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Matcher, E> {
                Ok(Matcher::Contains(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Matcher, E> {
                Ok(Matcher::Contains(v.to_string()))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Matcher, A::Error> {
                let raw = RawMatcher::deserialize(de::value::MapAccessDeserializer::new(map))?;
                let given = [&raw.contains, &raw.regex, &raw.exact, &raw.file]
                    .iter()
                    .filter(|o| o.is_some())
                    .count();
                if given != 1 {
                    return Err(de::Error::custom(
                        "give exactly one of `contains`, `regex`, `exact` or `file`",
                    ));
                }
                if let Some(r) = raw.regex {
                    return regex::bytes::Regex::new(&r)
                        .map(Matcher::Regex)
                        .map_err(|e| de::Error::custom(format!("invalid regex {r:?}: {e}")));
                }
                Ok(raw
                    .contains
                    .map(Matcher::Contains)
                    .or(raw.exact.map(Matcher::Exact))
                    .or(raw.file.map(Matcher::File))
                    .expect("one is given"))
            }
        }
        d.deserialize_any(V)
    }
}

// ------------------------------------------------------------------------------------ loading

impl Suite {
    /// Reads and validates a suite file (`.json` is read as JSON, anything else as YAML).
    pub fn load(path: &Path) -> Result<Suite, SuiteError> {
        let text = std::fs::read_to_string(path).map_err(|source| SuiteError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let is_json = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("json"));
        Suite::parse(&text, path, is_json)
    }

    /// Parses and validates suite text; `path` names it in errors and locates the assignment folder.
    pub fn parse(text: &str, path: &Path, json: bool) -> Result<Suite, SuiteError> {
        let raw: RawSuite = if json {
            let mut de = serde_json::Deserializer::from_str(text);
            serde_path_to_error::deserialize(&mut de).map_err(|e| {
                let inner = e.inner();
                let (line, column) = (inner.line(), inner.column());
                SuiteError::Parse {
                    path: path.to_path_buf(),
                    location: (line > 0).then_some((line, column)),
                    message: format!("{}: {}", e.path(), inner),
                }
            })?
        } else {
            serde_yaml::from_str(text).map_err(|e| {
                let location = e.location().map(|l| (l.line(), l.column()));
                let mut message = e.to_string();
                if let Some((l, c)) = location {
                    // The location is reported once, in front.
                    let suffix = format!(" at line {l} column {c}");
                    if let Some(cut) = message.rfind(&suffix) {
                        message.replace_range(cut..cut + suffix.len(), "");
                    }
                }
                SuiteError::Parse {
                    path: path.to_path_buf(),
                    location,
                    message,
                }
            })?
        };
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_path_buf();
        Suite::from_raw(raw, text, path, &dir)
    }

    fn from_raw(raw: RawSuite, text: &str, path: &Path, dir: &Path) -> Result<Suite, SuiteError> {
        let invalid = |message: String| SuiteError::Invalid {
            path: path.to_path_buf(),
            message,
        };
        // Semantic errors about one check point at the line of its `id:`.
        let check_err = |id: &str, message: String| SuiteError::Parse {
            path: path.to_path_buf(),
            location: line_of_id(text, id).map(|l| (l, 1)),
            message: format!("check {id:?}: {message}"),
        };
        if raw.name.trim().is_empty() {
            return Err(invalid("name: must not be empty".into()));
        }
        raw.limits
            .resolve(&Limits::default())
            .map_err(|e| invalid(format!("limits: {e}")))?;
        let assignment_path = |key: &str, p: &str| -> Result<(), String> {
            relative(p).map_err(|why| format!("{key}: {p:?} {why}"))?;
            if std::fs::symlink_metadata(dir.join(p)).is_err() {
                return Err(format!(
                    "{key}: {p:?} is not in the assignment folder {}",
                    dir.display()
                ));
            }
            Ok(())
        };
        let mut seen_files = BTreeSet::new();
        for (i, f) in raw.files.iter().enumerate() {
            assignment_path(&format!("files[{i}].path"), &f.path).map_err(invalid)?;
            if !seen_files.insert(normalize_rel(&f.path)) {
                return Err(invalid(format!(
                    "files[{i}].path: {:?} listed twice",
                    f.path
                )));
            }
        }

        let mut checks = Vec::new();
        let mut ids = BTreeSet::new();
        for (i, rc) in raw.checks.into_iter().enumerate() {
            let id = rc.id.clone();
            if id.is_empty()
                || !id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
            {
                return Err(invalid(format!(
                    "checks[{i}].id: {id:?} must be made of letters, digits, '_', '-' and '.'"
                )));
            }
            if !ids.insert(id.clone()) {
                return Err(check_err(&id, "id: used by two checks".into()));
            }
            let points = rc.points.unwrap_or(1.0);
            if !points.is_finite() || points < 0.0 {
                return Err(check_err(&id, "points: must be a number >= 0".into()));
            }
            rc.limits
                .resolve(&Limits::default())
                .map_err(|e| check_err(&id, format!("limits: {e}")))?;
            let kinds = [
                rc.steps.is_some(),
                rc.pytest.is_some(),
                rc.check50.is_some(),
            ];
            if kinds.iter().filter(|k| **k).count() > 1 {
                return Err(check_err(
                    &id,
                    "give only one of `steps`, `pytest` and `check50`".into(),
                ));
            }
            let rubric_kind = rc.pytest.is_some() || rc.check50.is_some();
            if rubric_kind && rc.points.is_some() {
                return Err(check_err(
                    &id,
                    "points: a pytest or check50 check gets its points from its own `points` (per test)".into(),
                ));
            }
            if let Some(raw) = rc.pytest {
                let pc = crate::pytest::PytestCheck::resolve(raw, &id, dir)
                    .map_err(|m| check_err(&id, m))?;
                checks.push(Check {
                    description: rc.description.unwrap_or_else(|| id.clone()),
                    points: pc.max_points(),
                    id,
                    depends: rc.depends,
                    hidden: rc.hidden,
                    timeout: rc.timeout,
                    limits: rc.limits,
                    language: rc.language,
                    kind: CheckKind::Pytest(Box::new(pc)),
                });
                continue;
            }
            if let Some(raw) = rc.check50 {
                let cc = crate::check50::Check50Check::resolve(raw, &id, dir)
                    .map_err(|m| check_err(&id, m))?;
                checks.push(Check {
                    description: rc.description.unwrap_or_else(|| id.clone()),
                    points: cc.max_points(),
                    id,
                    depends: rc.depends,
                    hidden: rc.hidden,
                    timeout: rc.timeout,
                    limits: rc.limits,
                    language: rc.language,
                    kind: CheckKind::Check50(Box::new(cc)),
                });
                continue;
            }
            let Some(steps) = rc.steps else {
                return Err(check_err(
                    &id,
                    "missing `steps` (or `pytest`, or `check50`)".into(),
                ));
            };
            if steps.is_empty() {
                return Err(check_err(&id, "steps: must not be empty".into()));
            }
            let mut running = false;
            let language = rc.language.as_ref().or(raw.language.as_ref());
            for (j, s) in steps.iter().enumerate() {
                let at = |m: String| check_err(&id, format!("steps[{j}].{m}"));
                match s {
                    Step::Run(Command::Shell(c))
                        if language.is_none()
                            && ["{compile}", "{run}", "{source}"]
                                .iter()
                                .any(|p| c.contains(p)) =>
                    {
                        return Err(at(format!(
                            "run: {c:?} uses a language placeholder but neither the check nor the suite names a `language`"
                        )))
                    }
                    Step::Run(_) => running = true,
                    Step::Stdin(_) | Step::Stdout(_) | Step::Stderr(_) | Step::Exit(_)
                        if !running =>
                    {
                        return Err(at(format!("{}: needs a `run` step before it", step_key(s))))
                    }
                    Step::Stdin(input) if matches!(input.inner(), Input::File(..)) => {
                        let Input::File(f, _) = input.inner() else {
                            unreachable!("matched above")
                        };
                        assignment_path("stdin.file", f).map_err(at)?;
                    }
                    Step::Stdout(Matcher::File(f)) | Step::Stderr(Matcher::File(f)) => {
                        assignment_path(&format!("{}.file", step_key(s)), f).map_err(at)?;
                    }
                    Step::Exists(p) | Step::NotExists(p) => {
                        // A file step waits for the program's end; talking to it needs a new run.
                        running = false;
                        relative(p).map_err(|why| at(format!("{}: {p:?} {why}", step_key(s))))?;
                    }
                    Step::Diff { actual, expected } => {
                        running = false;
                        relative(actual)
                            .map_err(|why| at(format!("diff.actual: {actual:?} {why}")))?;
                        assignment_path("diff.expected", expected).map_err(at)?;
                    }
                    _ => {}
                }
            }
            checks.push(Check {
                description: rc.description.unwrap_or_else(|| id.clone()),
                id,
                depends: rc.depends,
                points,
                hidden: rc.hidden,
                timeout: rc.timeout,
                limits: rc.limits,
                language: rc.language,
                kind: CheckKind::Steps(steps),
            });
        }
        if checks.is_empty() {
            return Err(invalid("checks: a suite needs at least one check".into()));
        }
        for c in &checks {
            let mut seen = BTreeSet::new();
            for d in &c.depends {
                if d == &c.id {
                    return Err(check_err(
                        &c.id,
                        "depends: a check cannot depend on itself".into(),
                    ));
                }
                if !ids.contains(d) {
                    return Err(check_err(&c.id, format!("depends: unknown check {d:?}")));
                }
                if !seen.insert(d) {
                    return Err(check_err(&c.id, format!("depends: {d:?} listed twice")));
                }
            }
        }
        if let Some(cycle) = find_cycle(&checks) {
            return Err(invalid(format!(
                "depends: dependency cycle {}",
                cycle.join(" -> ")
            )));
        }
        Ok(Suite {
            name: raw.name,
            description: raw.description,
            language: raw.language,
            limits: raw.limits,
            timeout: raw.timeout,
            files: raw.files,
            checks,
            safety: raw
                .safety
                .map(crate::safety::SafetyConfig::resolve)
                .transpose()
                .map_err(|m| invalid(format!("safety: {m}")))?
                .flatten(),
            path: path.to_path_buf(),
            dir: dir.to_path_buf(),
        })
    }

    pub fn check(&self, id: &str) -> Option<&Check> {
        self.checks.iter().find(|c| c.id == id)
    }

    /// Total points of the suite.
    pub fn max_score(&self) -> f64 {
        self.checks.iter().map(|c| c.points).sum()
    }

    /// How long a check may take.
    pub fn timeout_of(&self, check: &Check) -> Duration {
        check
            .timeout
            .or(self.timeout)
            .map(|m| m.duration())
            .unwrap_or(DEFAULT_TIMEOUT)
    }

    /// The language of a check: its own, or the suite's.
    pub fn language_of<'a>(&'a self, check: &'a Check) -> Option<&'a str> {
        check.language.as_deref().or(self.language.as_deref())
    }
}

fn step_key(s: &Step) -> &'static str {
    match s {
        Step::Run(_) => "run",
        Step::Stdin(_) => "stdin",
        Step::Stdout(_) => "stdout",
        Step::Stderr(_) => "stderr",
        Step::Exit(_) => "exit",
        Step::Exists(_) => "exists",
        Step::NotExists(_) => "not_exists",
        Step::Diff { .. } => "diff",
    }
}

/// A relative path with only normal components (no `/` at the start, no `..`, no `.`).
pub fn relative(p: &str) -> Result<&Path, &'static str> {
    let path = Path::new(p);
    if p.is_empty() {
        return Err("is empty");
    }
    if path.is_absolute() {
        return Err("must be relative to the working directory");
    }
    if path
        .components()
        .any(|c| !matches!(c, Component::Normal(_)))
    {
        return Err("may not contain '..' or '.'");
    }
    Ok(path)
}

fn normalize_rel(p: &str) -> PathBuf {
    Path::new(p).components().collect()
}

/// The 1-based line of `id: ID` in the suite text (best effort, for error messages).
fn line_of_id(text: &str, id: &str) -> Option<usize> {
    text.lines()
        .position(|l| {
            let t = l.trim_start().trim_start_matches('-').trim_start();
            let Some(rest) = t.strip_prefix("id:").or_else(|| t.strip_prefix("\"id\":")) else {
                return false;
            };
            rest.trim()
                .trim_end_matches(',')
                .trim()
                .trim_matches(['"', '\''])
                == id
        })
        .map(|i| i + 1)
}

/// A dependency cycle, as ids from its first check back to it, if any.
fn find_cycle(checks: &[Check]) -> Option<Vec<String>> {
    let index: BTreeMap<&str, usize> = checks
        .iter()
        .enumerate()
        .map(|(i, c)| (c.id.as_str(), i))
        .collect();
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Active,
        Done,
    }
    let mut mark = vec![Mark::New; checks.len()];
    fn visit(
        i: usize,
        checks: &[Check],
        index: &BTreeMap<&str, usize>,
        mark: &mut [Mark],
        stack: &mut Vec<usize>,
    ) -> Option<Vec<String>> {
        mark[i] = Mark::Active;
        stack.push(i);
        for d in &checks[i].depends {
            let j = index[d.as_str()];
            match mark[j] {
                Mark::Active => {
                    let from = stack.iter().position(|&k| k == j).expect("on the stack");
                    let mut cycle: Vec<String> = stack[from..]
                        .iter()
                        .map(|&k| checks[k].id.clone())
                        .collect();
                    cycle.push(checks[j].id.clone());
                    return Some(cycle);
                }
                Mark::New => {
                    if let Some(c) = visit(j, checks, index, mark, stack) {
                        return Some(c);
                    }
                }
                Mark::Done => {}
            }
        }
        stack.pop();
        mark[i] = Mark::Done;
        None
    }
    for i in 0..checks.len() {
        if mark[i] == Mark::New {
            if let Some(c) = visit(i, checks, &index, &mut mark, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}
