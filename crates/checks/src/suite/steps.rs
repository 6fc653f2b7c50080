//! The `steps` kind's model: a check as a sequence of steps run against live processes (CS50
//! Check's chains), parsed strictly from the suite file.
//!
//! ```yaml
//! steps: [{run: ./hello}, {stdin: David}, {stdout: "hello, David"}, {exit: 0}]
//! ```

use std::fmt;
use std::path::Path;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use super::paths::{assignment_path, relative};

/// One step of a check.
#[derive(Debug, Clone)]
pub enum Step {
    /// Start a program (the previous one, if still running, is first waited for).
    Run(Command),
    /// Start a program that compiles the submission: a `run` whose failure (the check failing
    /// while it is the program, a nonzero exit, a limit) makes a queued submission's verdict
    /// `compile_error`.
    Compile(Command),
    /// Type into the running program.
    Stdin(Input),
    /// Wait until the program's standard output matches.
    Stdout(Matcher),
    /// Wait until the program's standard error matches.
    Stderr(Matcher),
    /// Close stdin, wait for the program to end and compare its exit code.
    Exit(i32),
    /// A path exists in the working directory, as anything (links followed while they stay in it).
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

/// The assignment files `steps` read on the host (typed into stdin, compared with output or with
/// a file the program wrote), in step order: a change to one changes the grade.
pub fn files_read(steps: &[Step]) -> Vec<&String> {
    steps
        .iter()
        .filter_map(|s| match s {
            Step::Stdin(input) => match input.inner() {
                Input::File(f, _) => Some(f),
                _ => None,
            },
            Step::Stdout(Matcher::File(f)) | Step::Stderr(Matcher::File(f)) => Some(f),
            Step::Diff { expected, .. } => Some(expected),
            _ => None,
        })
        .collect()
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

impl Command {
    /// The argv that runs this command without a shell: an argv as given, a simple command's
    /// words (see [`Command::argv`]); `None` when the command needs the shell.
    pub fn direct_argv(&self) -> Option<Vec<String>> {
        match self {
            Command::Shell(s) if is_simple(s) => {
                Some(s.split_whitespace().map(str::to_string).collect())
            }
            Command::Shell(_) => None,
            Command::Argv(a) => Some(a.clone()),
        }
    }

    /// Whether this runs the language's program (`{run}`).
    pub fn runs_program(&self) -> bool {
        matches!(self, Command::Shell(s) if s.contains("{run}"))
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

const STEP_KINDS: &[&str] = &[
    "run",
    "compile",
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
                f.write_str("a step: a map with one key (run, compile, stdin, stdout, stderr, exit, exists, not_exists or diff)")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Step, A::Error> {
                let Some(key) = map.next_key::<String>()? else {
                    return Err(de::Error::custom("empty step: give one of run, compile, stdin, stdout, stderr, exit, exists, not_exists, diff"));
                };
                let step = match key.as_str() {
                    "run" => Step::Run(map.next_value()?),
                    "compile" => Step::Compile(map.next_value()?),
                    "stdin" => Step::Stdin(map.next_value()?),
                    "stdout" => Step::Stdout(map.next_value()?),
                    "stderr" => Step::Stderr(map.next_value()?),
                    "exit" => Step::Exit(map.next_value::<super::values::ExitCode>()?.0),
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
    #[serde(default, deserialize_with = "super::values::flag")]
    eof: bool,
    #[serde(default)]
    line: Option<String>,
    #[serde(default, deserialize_with = "super::values::flag")]
    wait: bool,
}

impl<'de> Deserialize<'de> for Input {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        text_or_map(
            d,
            "a line of text, or {line|text|file: ..., eof: true, wait: true}",
            Input::Line,
            |raw: RawInput| {
                let input = match (raw.line, raw.text, raw.file, raw.eof) {
                    (Some(l), None, None, false) => Input::Line(l),
                    (None, Some(t), None, eof) => Input::Text(t, eof),
                    (None, None, Some(f), eof) => Input::File(f, eof),
                    (None, None, None, true) => Input::Eof,
                    (None, None, None, false) if raw.wait => Input::Text(String::new(), false),
                    _ => {
                        return Err(
                            "stdin: give one of `line`, `text` or `file` (`eof: true` may go with `text` or `file`, or alone), and optionally `wait: true`".into(),
                        )
                    }
                };
                Ok(if raw.wait {
                    Input::Wait(Box::new(input))
                } else {
                    input
                })
            },
        )
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
        text_or_map(
            d,
            "text to find, {contains: ...}, {regex: ...}, {exact: ...} or {file: ...}",
            Matcher::Contains,
            |raw: RawMatcher| {
                let given = [&raw.contains, &raw.regex, &raw.exact, &raw.file]
                    .iter()
                    .filter(|o| o.is_some())
                    .count();
                if given != 1 {
                    return Err("give exactly one of `contains`, `regex`, `exact` or `file`".into());
                }
                if let Some(r) = raw.regex {
                    return regex::bytes::Regex::new(&r)
                        .map(Matcher::Regex)
                        .map_err(|e| format!("invalid regex {r:?}: {e}"));
                }
                Ok(raw
                    .contains
                    .map(Matcher::Contains)
                    .or(raw.exact.map(Matcher::Exact))
                    .or(raw.file.map(Matcher::File))
                    .expect("one is given"))
            },
        )
    }
}

/// The shape of `stdin` and of the output matchers: text written as a scalar (a string, or a
/// number read as its text) becomes `text(..)`; a map is read as `M` and becomes what `map` makes
/// of it, or the error it names.
fn text_or_map<'de, D: Deserializer<'de>, M: Deserialize<'de>, T>(
    d: D,
    expecting: &'static str,
    text: fn(String) -> T,
    map: fn(M) -> Result<T, String>,
) -> Result<T, D::Error> {
    struct V<M, T> {
        expecting: &'static str,
        text: fn(String) -> T,
        map: fn(M) -> Result<T, String>,
    }
    impl<'de, M: Deserialize<'de>, T> Visitor<'de> for V<M, T> {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.expecting)
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
            Ok((self.text)(v.to_string()))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
            Ok((self.text)(v.to_string()))
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
            Ok((self.text)(v.to_string()))
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<T, E> {
            Ok((self.text)(v.to_string()))
        }
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
            let raw = M::deserialize(de::value::MapAccessDeserializer::new(map))?;
            (self.map)(raw).map_err(de::Error::custom)
        }
    }
    d.deserialize_any(V {
        expecting,
        text,
        map,
    })
}

impl Step {
    /// The step's key as a suite writes it.
    pub fn key(&self) -> &'static str {
        match self {
            Step::Run(_) => "run",
            Step::Compile(_) => "compile",
            Step::Stdin(_) => "stdin",
            Step::Stdout(_) => "stdout",
            Step::Stderr(_) => "stderr",
            Step::Exit(_) => "exit",
            Step::Exists(_) => "exists",
            Step::NotExists(_) => "not_exists",
            Step::Diff { .. } => "diff",
        }
    }
}

/// Validates a check's steps against the assignment folder `dir`: every process step follows a
/// `run`, paths are relative, assignment files exist, language placeholders have a language.
/// Errors are `steps[N].key: message`.
pub(crate) fn validate(steps: &[Step], has_language: bool, dir: &Path) -> Result<(), String> {
    if steps.is_empty() {
        return Err("steps: must not be empty".into());
    }
    let mut running = false;
    for (j, s) in steps.iter().enumerate() {
        let at = |m: String| format!("steps[{j}].{m}");
        match s {
            Step::Run(Command::Shell(c)) | Step::Compile(Command::Shell(c))
                if !has_language
                    && [
                        "{compile}",
                        "{run}",
                        "{source}",
                        "{memory_mib}",
                        "{memory_mib_half}",
                    ]
                    .iter()
                        .any(|p| c.contains(p)) =>
            {
                return Err(at(format!(
                    "{}: {c:?} uses a language placeholder but neither the check nor the suite names a `language`",
                    s.key()
                )))
            }
            Step::Run(_) | Step::Compile(_) => running = true,
            Step::Stdin(_) | Step::Stdout(_) | Step::Stderr(_) | Step::Exit(_) if !running => {
                return Err(at(format!("{}: needs a `run` step before it", s.key())))
            }
            Step::Stdin(input) if matches!(input.inner(), Input::File(..)) => {
                let Input::File(f, _) = input.inner() else {
                    unreachable!("matched above")
                };
                assignment_path(dir, "stdin.file", f).map_err(at)?;
            }
            Step::Stdout(Matcher::File(f)) | Step::Stderr(Matcher::File(f)) => {
                assignment_path(dir, &format!("{}.file", s.key()), f).map_err(at)?;
            }
            Step::Exists(p) | Step::NotExists(p) => {
                // A file step waits for the program's end; talking to it needs a new run.
                running = false;
                relative(p).map_err(|why| at(format!("{}: {p:?} {why}", s.key())))?;
            }
            Step::Diff { actual, expected } => {
                running = false;
                relative(actual).map_err(|why| at(format!("diff.actual: {actual:?} {why}")))?;
                assignment_path(dir, "diff.expected", expected).map_err(at)?;
            }
            _ => {}
        }
    }
    Ok(())
}
