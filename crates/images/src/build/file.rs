//! The build file: a base image and a list of steps, in YAML (or JSON), parsed strictly — unknown
//! keys are errors, and every error names the file, the line and the key (`schemas/build.schema.json`
//! describes the same shape).
//!
//! ```yaml
//! from: debian:minbase
//! name: course:2025            # optional; `--name` wins
//! limits: {wall_time: 20m}     # every run step's (see `BUILD_LIMITS` for the defaults)
//! steps:
//!   - run: apt-get update && apt-get install -y python3-numpy
//!   - copy: {src: files, dst: /opt/course}
//!   - env: {PYTHONPATH: /opt/course}
//!   - workdir: /opt/course
//! ```

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use corral_sandbox::{Limits, LimitsRequest, Millis, Size};
use serde::{Deserialize, Serialize};

use super::error::BuildError;
use crate::document::{self, DocumentError};

/// The limits of a `run` step when neither the file nor the step says: package managers need far
/// more than a graded run (apt-get resolving and unpacking a few hundred MiB). `disk` caps what a
/// step may write into the image (its upper folder is a tmpfs of that size); tmpfs pages count
/// as the step's memory too, so `memory` is larger than `disk`.
pub fn build_limits() -> Limits {
    Limits {
        cpu_time: Millis::ms(30 * 60_000),
        wall_time: Millis::ms(30 * 60_000),
        memory: Size::mib(6144),
        pids: 1024,
        output: Size::mib(16),
        disk: Size::mib(4096),
        open_files: 4096,
        file_size: Size::mib(4096),
    }
}

/// A parsed, validated build file.
#[derive(Debug, Clone)]
pub struct BuildFile {
    /// The base image (a REF of the store: pull or import it first).
    pub from: String,
    /// The name the result gets when the command line gives none.
    pub name: Option<String>,
    /// The limits of every run step (missing keys: [`build_limits`]).
    pub limits: LimitsRequest,
    pub steps: Vec<Step>,
    /// The file itself.
    pub path: PathBuf,
    /// Its folder: every `copy` source is relative to it and must stay inside it.
    pub dir: PathBuf,
}

/// One step. Its canonical JSON (serde's, below) is part of its cache key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Step {
    /// Run a command in a build sandbox; its changes to the root become a layer.
    Run {
        command: Command,
        #[serde(skip)]
        limits: LimitsRequest,
    },
    /// Copy a file or folder of the build file's folder into the image: a layer.
    Copy { src: String, dst: String },
    /// Set environment variables (`$NAME` and `${NAME}` expand to the current value): config only.
    Env(BTreeMap<String, String>),
    /// Set the working directory of later steps and of runs in the image: config only.
    Workdir(String),
}

/// A command line: a string for `/bin/sh -c`, or an argv list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Command {
    Shell(String),
    Argv(Vec<String>),
}

impl Command {
    pub fn argv(&self) -> Vec<String> {
        match self {
            Command::Shell(s) => vec!["/bin/sh".into(), "-c".into(), s.clone()],
            Command::Argv(a) => a.clone(),
        }
    }
}

impl std::fmt::Display for Step {
    /// One line for progress reports and the image's history.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Step::Run { command, .. } => match command {
                Command::Shell(s) => write!(f, "run: {s}"),
                Command::Argv(a) => write!(f, "run: {a:?}"),
            },
            Step::Copy { src, dst } => write!(f, "copy: {src} -> {dst}"),
            Step::Env(vars) => {
                let kv: Vec<String> = vars.iter().map(|(k, v)| format!("{k}={v}")).collect();
                write!(f, "env: {}", kv.join(" "))
            }
            Step::Workdir(w) => write!(f, "workdir: {w}"),
        }
    }
}

// ------------------------------------------------------------------------------------------ raw

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    from: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    limits: LimitsRequest,
    steps: Vec<Step>,
}

/// A step as written: exactly one of the kinds (plus `limits` beside `run`). Checked in
/// `TryFrom`, inside deserialization, so errors carry the step's line.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    #[serde(default)]
    run: Option<Command>,
    #[serde(default)]
    limits: Option<LimitsRequest>,
    #[serde(default)]
    copy: Option<RawCopy>,
    #[serde(default)]
    env: Option<BTreeMap<String, String>>,
    #[serde(default)]
    workdir: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCopy {
    src: String,
    dst: String,
}

impl<'de> Deserialize<'de> for Step {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = RawStep::deserialize(d)?;
        Step::try_from(raw).map_err(serde::de::Error::custom)
    }
}

impl TryFrom<RawStep> for Step {
    type Error = String;
    fn try_from(raw: RawStep) -> Result<Step, String> {
        let kinds = [
            raw.run.is_some(),
            raw.copy.is_some(),
            raw.env.is_some(),
            raw.workdir.is_some(),
        ];
        match kinds.iter().filter(|k| **k).count() {
            0 => return Err("a step needs one of `run`, `copy`, `env`, `workdir`".into()),
            1 => {}
            _ => {
                return Err(
                    "a step has exactly one of `run`, `copy`, `env`, `workdir` (write them as two steps)"
                        .into(),
                )
            }
        }
        if raw.limits.is_some() && raw.run.is_none() {
            return Err("`limits` goes only with `run`".into());
        }
        if let Some(command) = raw.run {
            let limits = raw.limits.unwrap_or_default();
            limits
                .resolve(&build_limits())
                .map_err(|e| format!("limits: {e}"))?;
            return Ok(Step::Run { command, limits });
        }
        if let Some(c) = raw.copy {
            check_src(&c.src).map_err(|why| format!("copy.src: {:?} {why}", c.src))?;
            check_image_path(&c.dst).map_err(|why| format!("copy.dst: {:?} {why}", c.dst))?;
            return Ok(Step::Copy {
                src: c.src,
                dst: c.dst,
            });
        }
        if let Some(vars) = raw.env {
            if vars.is_empty() {
                return Err("env: give at least one variable".into());
            }
            for k in vars.keys() {
                let ok = k
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                    && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if !ok {
                    return Err(format!(
                        "env: {k:?} is not a variable name (letters, digits, '_', not starting with a digit)"
                    ));
                }
            }
            if let Some((k, _)) = vars.iter().find(|(_, v)| v.contains('\0')) {
                return Err(format!("env: {k}: a value may not contain a NUL byte"));
            }
            return Ok(Step::Env(vars));
        }
        let w = raw.workdir.expect("one kind is present");
        check_image_path(&w).map_err(|why| format!("workdir: {w:?} {why}"))?;
        Ok(Step::Workdir(w))
    }
}

impl<'de> Deserialize<'de> for Command {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(
            untagged,
            expecting = "a command: a string (run with /bin/sh -c) or a list of arguments"
        )]
        enum Raw {
            Shell(String),
            Argv(Vec<String>),
        }
        let c = match Raw::deserialize(d)? {
            Raw::Shell(s) => Command::Shell(s),
            Raw::Argv(a) => Command::Argv(a),
        };
        let empty = match &c {
            Command::Shell(s) => s.trim().is_empty(),
            Command::Argv(a) => a.first().is_none_or(|a| a.is_empty()),
        };
        if empty {
            return Err(serde::de::Error::custom("empty command"));
        }
        let nul = match &c {
            Command::Shell(s) => s.contains('\0'),
            Command::Argv(a) => a.iter().any(|s| s.contains('\0')),
        };
        if nul {
            return Err(serde::de::Error::custom(
                "a command may not contain a NUL byte",
            ));
        }
        Ok(c)
    }
}

/// A `copy` source: relative to the build file's folder, no `..`, not absolute. (Symlinks that
/// leave the folder are refused when the step runs: the path is opened beneath the folder.)
fn check_src(p: &str) -> Result<(), &'static str> {
    if p.is_empty() {
        return Err("is empty");
    }
    let path = Path::new(p);
    if path.is_absolute() {
        return Err("must be relative to the build file's folder");
    }
    if path.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err("may not contain '..' (a copy source stays inside the build file's folder)");
    }
    if p.contains('\0') {
        return Err("may not contain a NUL byte");
    }
    Ok(())
}

/// A path inside the image: absolute, no `..`, not `/` itself.
fn check_image_path(p: &str) -> Result<(), &'static str> {
    let path = Path::new(p);
    if !path.is_absolute() {
        return Err("must be an absolute path inside the image");
    }
    if path.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err("may not contain '..'");
    }
    if p.contains('\0') || p.len() > 4096 {
        return Err("may not contain a NUL byte or be longer than 4096 bytes");
    }
    if path
        .components()
        .all(|c| matches!(c, Component::RootDir | Component::CurDir))
    {
        return Err("may not be the image's root");
    }
    Ok(())
}

// ------------------------------------------------------------------------------------ loading

impl BuildFile {
    /// Reads and validates a build file (`.json` is read as JSON, anything else as YAML).
    pub fn load(path: &Path) -> Result<BuildFile, BuildError> {
        let (text, json) = document::read(path)?;
        BuildFile::parse(&text, path, json)
    }

    /// Parses build-file text; `path` names it in errors and locates the `copy` sources.
    pub fn parse(text: &str, path: &Path, json: bool) -> Result<BuildFile, BuildError> {
        let parse_err = |location: Option<(usize, usize)>, message: String| {
            BuildError::File(DocumentError::Parse {
                path: path.to_path_buf(),
                location,
                message,
            })
        };
        let raw: RawFile = if json {
            serde_json::from_str(text).map_err(|e| {
                let loc = (e.line() > 0).then_some((e.line(), e.column()));
                parse_err(loc, e.to_string())
            })?
        } else {
            document::from_yaml(text, path)?
        };
        let invalid = |message: String| parse_err(None, message);
        if raw.from.trim().is_empty() {
            return Err(invalid("from: must name an image".into()));
        }
        crate::store::Ref::parse(&raw.from).map_err(|e| invalid(format!("from: {e}")))?;
        if let Some(n) = &raw.name {
            crate::store::refs::normalise_name(n)
                .ok_or_else(|| invalid(format!("name: {n:?} is not an image name")))?;
        }
        raw.limits
            .resolve(&build_limits())
            .map_err(|e| invalid(format!("limits: {e}")))?;
        if raw.steps.is_empty() {
            return Err(invalid("steps: a build needs at least one step".into()));
        }
        let dir = document::folder(path);
        Ok(BuildFile {
            from: raw.from,
            name: raw.name,
            limits: raw.limits,
            steps: raw.steps,
            path: path.to_path_buf(),
            dir,
        })
    }

    /// The limits of run step `step` (its own over the file's over [`build_limits`]).
    pub fn limits_of(&self, step: &Step) -> Limits {
        let file = self
            .limits
            .resolve(&build_limits())
            .expect("validated when parsed");
        match step {
            Step::Run { limits, .. } => limits.resolve(&file).expect("validated when parsed"),
            _ => file,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<BuildFile, String> {
        BuildFile::parse(text, Path::new("/b/build.yaml"), false).map_err(|e| e.to_string())
    }

    #[test]
    fn parses_every_step_kind() {
        let f = parse(
            "from: debian:minbase\nname: course\nlimits: {wall_time: 5m}\nsteps:\n  - run: apt-get update\n  - run: [echo, hi]\n    limits: {memory: 1G}\n  - copy: {src: files, dst: /opt/course}\n  - env: {A: '1', B: x}\n  - workdir: /opt/course\n",
        )
        .unwrap();
        assert_eq!(f.steps.len(), 5);
        assert_eq!(f.dir, Path::new("/b"));
        assert_eq!(f.limits_of(&f.steps[0]).wall_time, Millis::ms(300_000));
        assert_eq!(f.limits_of(&f.steps[1]).memory, Size::mib(1024));
        assert_eq!(f.limits_of(&f.steps[1]).wall_time, Millis::ms(300_000));
        assert_eq!(
            f.steps[2],
            Step::Copy {
                src: "files".into(),
                dst: "/opt/course".into()
            }
        );
        assert_eq!(
            serde_json::to_string(&f.steps[1]).unwrap(),
            r#"{"run":{"command":{"argv":["echo","hi"]}}}"#
        );
    }

    #[test]
    fn refuses_with_the_field_and_line() {
        for (text, want) in [
            ("from: x\nsteps:\n  - rn: ls\n", "build.yaml:3:"),
            ("from: x\nsteps:\n  - rn: ls\n", "rn"),
            ("from: x\nbogus: 1\nsteps: [{run: ls}]\n", "bogus"),
            (
                "from: x\nsteps:\n  - {run: ls, copy: {src: a, dst: /b}}\n",
                "exactly one",
            ),
            ("from: x\nsteps:\n  - copy: {src: ../a, dst: /b}\n", "'..'"),
            (
                "from: x\nsteps:\n  - copy: {src: /etc/passwd, dst: /b}\n",
                "relative",
            ),
            ("from: x\nsteps:\n  - copy: {src: a, dst: b}\n", "absolute"),
            ("from: x\nsteps:\n  - copy: {src: a}\n", "dst"),
            ("from: x\nsteps:\n  - workdir: /a/../b\n", "'..'"),
            ("from: x\nsteps:\n  - env: {1A: x}\n", "variable name"),
            (
                "from: x\nsteps:\n  - {env: {A: x}, limits: {memory: 1G}}\n",
                "only with `run`",
            ),
            (
                "from: x\nsteps:\n  - {run: ls, limits: {memry: 1G}}\n",
                "memry",
            ),
            ("from: x\nsteps:\n  - run: ''\n", "empty command"),
            ("from: x\nsteps: []\n", "at least one step"),
            ("steps: [{run: ls}]\n", "from"),
            ("from: UPPER\nsteps: [{run: ls}]\n", "from"),
            (
                "from: x\nlimits: {memory: 1K}\nsteps: [{run: ls}]\n",
                "memory",
            ),
        ] {
            let e = parse(text).expect_err(text);
            assert!(e.contains(want), "{text:?}: {e}");
            assert!(e.starts_with("/b/build.yaml"), "{e}");
        }
    }
}
