//! `RunSpec`: what to run. The CLI flags, a `--batch` line and (later) an HTTP body all become one.

use std::any::Any;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::SpecError;
use crate::limits::{Limits, LimitsRequest};

/// Where the sandboxed program lives: its working directory, which is also `$HOME`.
pub const WORKDIR: &str = "/home/sandbox";
/// The PATH the program sees.
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The filesystem a sandbox's programs see as `/`. Part of a sandbox's shape: runs in different
/// roots never share a pooled sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum Root {
    /// The host's system folders, bound read-only (see `inside::rootfs`).
    #[default]
    Host,
    /// The layers of a container image, stacked read-only.
    Image(ImageRoot),
}

/// Which kernel a sandbox's programs talk to. Part of a sandbox's shape: a pool never gives a run
/// of one runtime a sandbox of the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Runtime {
    /// The host kernel, behind namespaces, cgroups, seccomp and Landlock.
    #[default]
    Native,
    /// gVisor (`runsc`): a user-space kernel between the program and the host's, with corral's
    /// own init inside it (see the `gvisor` module).
    Gvisor,
}

impl Runtime {
    pub fn as_str(self) -> &'static str {
        match self {
            Runtime::Native => "native",
            Runtime::Gvisor => "gvisor",
        }
    }
}

impl std::str::FromStr for Runtime {
    type Err = SpecError;
    fn from_str(s: &str) -> Result<Self, SpecError> {
        match s {
            "native" => Ok(Runtime::Native),
            "gvisor" => Ok(Runtime::Gvisor),
            other => Err(SpecError::BadRuntime(other.to_string())),
        }
    }
}

impl std::fmt::Display for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which runtime an untrusted run gets: the operator's default, and the public-instance switch
/// that puts every such run under gVisor, so that no request can opt out. Every entry point that
/// takes a run request resolves its `runtime` here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RuntimePolicy {
    /// The runtime of a request that names none.
    pub default: Runtime,
    /// Every run is gVisor's; a request for `native` is refused.
    pub force_gvisor: bool,
}

impl RuntimePolicy {
    /// The runtime a run that asked for `requested` gets.
    pub fn resolve(&self, requested: Option<Runtime>) -> Result<Runtime, SpecError> {
        match (requested, self.force_gvisor) {
            (Some(Runtime::Native), true) => Err(SpecError::RuntimeForced),
            (_, true) => Ok(Runtime::Gvisor),
            (Some(r), false) => Ok(r),
            (None, false) => Ok(self.default),
        }
    }

    /// Like [`RuntimePolicy::resolve`], where a request that names none takes `preferred` (a
    /// language's or suite's own) over the default. A preference is not a request: under
    /// `force_gvisor` it is overridden, never refused.
    pub fn resolve_preferring(
        &self,
        requested: Option<Runtime>,
        preferred: Option<Runtime>,
    ) -> Result<Runtime, SpecError> {
        match requested {
            Some(_) => self.resolve(requested),
            None => Ok(self.choose(preferred)),
        }
    }

    /// The runtime of a run no request names, whose own configuration (a check's, a suite's, a
    /// language's) prefers `preferred`: gVisor under `force_gvisor`, else the preference, else
    /// the default. Grading resolves each check's runtime here, the caller's choice being the
    /// policy's `default`.
    pub fn choose(&self, preferred: Option<Runtime>) -> Runtime {
        match preferred {
            _ if self.force_gvisor => Runtime::Gvisor,
            Some(p) => p,
            None => self.default,
        }
    }
}

/// A container image resolved to what a sandbox needs (the images crate's store finds it; this
/// crate only mounts it).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ImageRoot {
    /// The name the image was chosen by (e.g. `python:3.12-slim`), for results.
    pub name: String,
    /// The image manifest's digest (`sha256:…`): what actually ran, recorded in results.
    pub digest: String,
    /// Unpacked layer folders, topmost first (overlayfs `lowerdir` order).
    pub layers: Vec<PathBuf>,
    /// The image configuration's `Env`, under the run's own variables.
    pub env: Vec<(String, String)>,
    /// The image configuration's `WorkingDir`, if it names one. Runs always start in
    /// [`WORKDIR`] (where corral puts their files); build mode starts its program here (or in `/`).
    pub working_dir: Option<String>,
    /// Build mode: overlayfs's writable `upperdir` on the host, `None` for an ordinary (read-only)
    /// run. Its `workdir` is the sibling folder `NAME.work` (made when missing; same filesystem).
    /// The program then runs as root inside a user namespace of its own (uids 0–65535 mapped to a
    /// leased unprivileged range), with network allowed, and whatever it changes lands here in
    /// overlayfs's own format with the image's uids: files owned by the uids the program gave them
    /// (0 for root), deletions as `0:0` character devices, replaced folders marked
    /// `trusted.overlay.opaque=y` — the format unpacked layers have. Mount points the image lacks
    /// (e.g. `/proc`, `/home/sandbox`, `/etc/resolv.conf`) never land here.
    pub upper: Option<PathBuf>,
    /// Root mode, for graders that expect to be their container's root (PrairieLearn's and
    /// Gradescope's run their graders as root): as in build mode the programs run as root of a
    /// user namespace of their own over a writable image, but what they change lands in a tmpfs
    /// of the run's disk size (its pages count in the sandbox's memory) that goes with the
    /// sandbox, which is never reused, and the network is on only when asked. The root of that
    /// namespace has no privilege over the host, the sandbox's mounts or its network. Implied by
    /// `upper` (build mode is root already).
    pub as_root: bool,
    /// Keeps the layers from `corral env gc` while this root (a sandbox built on it) lives.
    pub claim: RootClaim,
}

/// What keeps a root's files from being deleted while a sandbox uses them: the image store's
/// claim on an image's layers, which `corral env gc` leaves alone while it is held. Opaque here
/// (this crate sits below the store and only carries it); every clone of an [`ImageRoot`] shares
/// it, and a sandbox keeps its root's until it is dropped, so the last holder to go releases it.
/// Not part of a root's identity: equality and hashing ignore it, so pooled sandboxes of one
/// image are shared whoever claimed it.
#[derive(Clone, Default)]
pub struct RootClaim(Option<Arc<dyn Any + Send + Sync>>);

impl RootClaim {
    /// Holds `claim` until the last clone is dropped.
    pub fn new(claim: impl Any + Send + Sync) -> RootClaim {
        RootClaim(Some(Arc::new(claim)))
    }

    /// Whether anything is held (a root not made from a store's image holds nothing).
    pub fn is_held(&self) -> bool {
        self.0.is_some()
    }
}

impl std::fmt::Debug for RootClaim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.is_held() {
            "RootClaim(held)"
        } else {
            "RootClaim(none)"
        })
    }
}

impl PartialEq for RootClaim {
    fn eq(&self, _: &RootClaim) -> bool {
        true
    }
}

impl Eq for RootClaim {}

impl std::hash::Hash for RootClaim {
    fn hash<H: std::hash::Hasher>(&self, _: &mut H) {}
}

impl ImageRoot {
    /// Build mode (a writable upper folder): see [`ImageRoot::upper`].
    pub fn is_build(&self) -> bool {
        self.upper.is_some()
    }

    /// Whether programs run as root of their own user namespace: build mode or
    /// [`ImageRoot::as_root`].
    pub fn runs_as_root(&self) -> bool {
        self.upper.is_some() || self.as_root
    }
}

/// Variables that describe the sandbox itself: an image's `Env` never replaces them.
const SANDBOX_FACTS: &[&str] = &["HOME", "PWD", "USER", "LOGNAME", "TMPDIR"];

/// A host path made visible inside the sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mount {
    /// Absolute host path.
    pub src: PathBuf,
    /// Absolute path inside the sandbox.
    pub dst: PathBuf,
    /// Read-write bind (`--bind`) instead of read-only (`--ro-bind`).
    #[serde(default)]
    pub writable: bool,
}

impl Mount {
    /// Parses `SRC[:DST]` as given to `--ro-bind` / `--bind`.
    pub fn parse(arg: &str, writable: bool) -> Result<Mount, SpecError> {
        let (src, dst) = match arg.split_once(':') {
            Some((s, d)) => (s, d),
            None => (arg, arg),
        };
        let m = Mount {
            src: PathBuf::from(src),
            dst: PathBuf::from(dst),
            writable,
        };
        m.validate()?;
        Ok(m)
    }

    pub fn validate(&self) -> Result<(), SpecError> {
        let bad = |why: &str| {
            Err(SpecError::BadMount {
                mount: format!("{}:{}", self.src.display(), self.dst.display()),
                why: why.into(),
            })
        };
        if !self.src.is_absolute() {
            return bad("the source must be an absolute host path");
        }
        if !self.dst.is_absolute() {
            return bad("the destination must be an absolute path inside the sandbox");
        }
        if self
            .dst
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            return bad("the destination may not contain '..'");
        }
        let dst = self.dst.to_string_lossy();
        for reserved in ["/proc", "/dev", "/sys"] {
            if dst == reserved || dst.starts_with(&format!("{reserved}/")) {
                return bad("the destination may not be under /proc, /dev or /sys");
            }
        }
        if self.dst == Path::new("/") {
            return bad("the destination may not be /");
        }
        Ok(())
    }
}

/// Standard input of the program.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stdin {
    /// Reading gives end-of-file at once.
    #[default]
    Empty,
    /// A host file, opened by corral and handed to the program as fd 0.
    File(PathBuf),
    /// These bytes.
    Bytes(Vec<u8>),
    /// A pipe the caller writes to while the program runs ([`crate::Execution::write_stdin`]).
    Pipe,
}

/// Everything about one run of one command in a sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSpec {
    /// Program and arguments; the program is looked up in PATH inside the sandbox when it has no `/`.
    pub argv: Vec<String>,
    /// Extra environment variables on top of the minimal one.
    pub env: Vec<(String, String)>,
    pub stdin: Stdin,
    /// Host folder whose contents are copied into the working directory before the run.
    pub dir: Option<PathBuf>,
    /// Extra bind mounts.
    pub mounts: Vec<Mount>,
    /// Share the host's network instead of an empty network namespace.
    pub network: bool,
    pub limits: Limits,
    /// After the run, copy the working directory's regular files and folders here.
    pub copy_out: Option<PathBuf>,
    /// Run attached to a pseudo-terminal of (columns, rows) instead of pipes: stdin, stdout and
    /// stderr are the terminal (output arrives as stdout, input is echoed), which is what an
    /// interactive program in a browser terminal expects.
    pub tty: Option<(u16, u16)>,
    /// What `/` is: the host's system folders or a container image's layers.
    pub root: Root,
    /// A stricter seccomp profile on top of the default one (`no_spawn`, `no_sockets`,
    /// `allow:…`); the default adds nothing.
    pub seccomp: corral_seccomp::Restrictions,
    /// Which kernel runs the program.
    pub runtime: Runtime,
    /// What output past `limits.output` does.
    pub output_overflow: OutputOverflow,
}

/// What a run's output past its limit (`limits.output`, stdout and stderr together) does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OutputOverflow {
    /// The run ends, status `output_limit`: a program's output is what is judged, and a flood
    /// is its failure (and a client's to be spared).
    #[default]
    Ends,
    /// The rest is read and dropped (`stdout_truncated`/`stderr_truncated`, `output_bytes` the
    /// whole count) and the run goes on to its end: a grader's log, which Gradescope cuts while
    /// its results file decides. The time limits still bound the flood.
    Dropped,
}

impl RunSpec {
    pub fn new(argv: Vec<String>) -> Self {
        RunSpec {
            argv,
            env: Vec::new(),
            stdin: Stdin::Empty,
            dir: None,
            mounts: Vec::new(),
            network: false,
            limits: Limits::default(),
            copy_out: None,
            tty: None,
            root: Root::Host,
            seccomp: corral_seccomp::Restrictions::default(),
            runtime: Runtime::Native,
            output_overflow: OutputOverflow::Ends,
        }
    }

    /// Checks everything a sandbox would otherwise fail on later, with a message that names the field.
    pub fn validate(&self) -> Result<(), SpecError> {
        validate_command(&self.argv, &self.env)?;
        for m in &self.mounts {
            m.validate()?;
        }
        self.limits.validate()?;
        self.limits
            .check_open_files(crate::limits::host_open_files_max())?;
        match &self.copy_out {
            Some(dest) => check_copy_out(dest),
            None => Ok(()),
        }
    }

    /// The complete environment of the program: minimal defaults, then an image's `Env` (its
    /// `PATH` replaces the default one; it never changes `HOME`, `PWD`, `USER`, `LOGNAME` or
    /// `TMPDIR`, which describe the sandbox), then the spec's own variables.
    pub fn environment(&self) -> Vec<(String, String)> {
        let (home, user, pwd) = match &self.root {
            Root::Image(img) if img.is_build() => (
                "/root",
                "root",
                img.working_dir.clone().unwrap_or_else(|| "/".into()),
            ),
            Root::Image(img) if img.as_root => ("/root", "root", WORKDIR.to_string()),
            _ => (WORKDIR, "sandbox", WORKDIR.to_string()),
        };
        // A later value of a name replaces the earlier one and goes last. Slots are emptied and
        // found by name in a map: a scan of the list per variable made 100,000 of them cost the
        // supervisor 23 s of CPU (found by a red-team trial), outside every run limit.
        let mut env: Vec<Option<(String, String)>> = Vec::new();
        let mut at: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
        let mut set = |k: &str, v: &str| {
            if let Some(i) = at.insert(k.to_string(), env.len()) {
                env[i] = None;
            }
            env.push(Some((k.to_string(), v.to_string())));
        };
        for (k, v) in [
            ("PATH", DEFAULT_PATH),
            ("HOME", home),
            ("PWD", &pwd),
            ("USER", user),
            ("LOGNAME", user),
            ("SHELL", "/bin/sh"),
            ("TMPDIR", "/tmp"),
            ("LANG", "C.UTF-8"),
        ] {
            set(k, v);
        }
        if let Root::Image(img) = &self.root {
            for (k, v) in &img.env {
                if !SANDBOX_FACTS.contains(&k.as_str()) {
                    set(k, v);
                }
            }
        }
        for (k, v) in &self.env {
            set(k, v);
        }
        env.into_iter().flatten().collect()
    }
}

/// Parses `K=V` as given to `--env`.
pub fn parse_env(arg: &str) -> Result<(String, String), SpecError> {
    let (k, v) = arg
        .split_once('=')
        .ok_or_else(|| SpecError::BadEnv(arg.to_string()))?;
    parse_env_key(k)?;
    Ok((k.to_string(), v.to_string()))
}

/// The longest single argument or environment string the kernel passes (`MAX_ARG_STRLEN`, 128
/// KiB with its NUL).
pub const MAX_ARG_BYTES: usize = (128 << 10) - 1;
/// The most bytes of arguments and environment together: well within the kernel's `ARG_MAX`
/// (a quarter of the 8 MiB stack), so a run never fails late in `execve` with `E2BIG`.
pub const MAX_COMMAND_BYTES: usize = 1 << 20;

/// Checks a command and its extra environment the way every entry point must (the CLI, batch
/// lines, `/run`, the WebSocket, submissions, Judge0): a non-empty program, no NUL bytes,
/// variable names of letters, digits and `_`, and sizes the kernel accepts.
pub fn validate_command(argv: &[String], env: &[(String, String)]) -> Result<(), SpecError> {
    if argv.first().is_none_or(|a| a.is_empty()) {
        return Err(SpecError::EmptyCommand);
    }
    for a in argv {
        if a.contains('\0') {
            return Err(SpecError::NulByte("argv"));
        }
    }
    validate_env(env)?;
    let mut total = 0usize;
    for s in argv {
        if s.len() > MAX_ARG_BYTES {
            return Err(SpecError::TooLarge {
                what: "an argument",
                max: MAX_ARG_BYTES,
            });
        }
        total += s.len() + 1;
    }
    for (k, v) in env {
        total += k.len() + v.len() + 2;
    }
    if total > MAX_COMMAND_BYTES {
        return Err(SpecError::TooLarge {
            what: "the arguments and environment together",
            max: MAX_COMMAND_BYTES,
        });
    }
    Ok(())
}

/// Checks extra environment variables (for requests whose command is not the caller's, such as
/// a language's): names of letters, digits and `_`, no NUL bytes, each within the kernel's size.
pub fn validate_env(env: &[(String, String)]) -> Result<(), SpecError> {
    for (k, v) in env {
        // Sizes first: a refused name is quoted in the error.
        if k.len() + v.len() + 1 > MAX_ARG_BYTES {
            return Err(SpecError::TooLarge {
                what: "an environment variable",
                max: MAX_ARG_BYTES,
            });
        }
        parse_env_key(k)?;
        if v.contains('\0') {
            return Err(SpecError::NulByte("env"));
        }
    }
    Ok(())
}

fn parse_env_key(k: &str) -> Result<(), SpecError> {
    let ok = !k.is_empty()
        && !k.starts_with(|c: char| c.is_ascii_digit())
        && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(SpecError::BadEnv(k.to_string()))
    }
}

/// The JSON form of a run, as one `--batch` line gives it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSpecJson {
    pub argv: Vec<String>,
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    pub dir: Option<PathBuf>,
    #[serde(default)]
    pub stdin_file: Option<PathBuf>,
    #[serde(default)]
    pub stdin: Option<String>,
    #[serde(default)]
    pub ro_bind: Vec<String>,
    #[serde(default)]
    pub bind: Vec<String>,
    #[serde(default)]
    pub network: bool,
    #[serde(default)]
    pub limits: LimitsRequest,
    #[serde(default)]
    pub copy_out: Option<PathBuf>,
    /// Attach the program to an 80×24 pseudo-terminal instead of pipes.
    #[serde(default)]
    pub tty: bool,
    /// Run in this container image (a name, `name@sha256:…` or a digest) instead of the host's
    /// root. [`RunSpecJson::into_spec`] leaves the root to the caller, which owns the image store.
    #[serde(default)]
    pub image: Option<String>,
    /// A stricter seccomp profile: `no_spawn`, `no_sockets`, `allow:NAME,…`, joined by `+`.
    #[serde(default)]
    pub seccomp: Option<String>,
    /// `"native"` or `"gvisor"`; absent means the caller's default.
    #[serde(default)]
    pub runtime: Option<Runtime>,
}

/// A copy-out destination that cannot be written is refused before the run, when that can be
/// known: something not a folder there, or no folder to make it in, or one this process may not
/// write (a read-only file system). Otherwise the program would run and its files be lost.
fn check_copy_out(dest: &Path) -> Result<(), SpecError> {
    let bad = |why: String| SpecError::BadCopyOut {
        path: dest.to_path_buf(),
        why,
    };
    // The folder that is there already: DEST, or the nearest ancestor it would be made in.
    let mut there = dest;
    let folder = loop {
        let why = match std::fs::metadata(there) {
            Ok(m) if m.is_dir() => break there,
            Ok(_) if there == dest => "it exists and is not a folder".to_string(),
            Ok(_) => format!("{} is not a folder", there.display()),
            // Missing, or under a file (ENOTDIR): the nearest ancestor there says which.
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                ) =>
            {
                there = match there.parent() {
                    Some(p) if p.as_os_str().is_empty() => Path::new("."),
                    Some(p) => p,
                    None => return Err(bad("no folder of it exists".into())),
                };
                continue;
            }
            Err(e) => format!("{}: {e}", there.display()),
        };
        return Err(bad(format!(
            "{why}: give a folder, or a path where one can be made"
        )));
    };
    use nix::unistd::AccessFlags;
    nix::unistd::access(folder, AccessFlags::W_OK | AccessFlags::X_OK).map_err(|e| {
        bad(format!(
            "{} cannot be written: {}",
            folder.display(),
            std::io::Error::from(e)
        ))
    })
}

impl RunSpecJson {
    /// Turns the JSON form into a spec; relative paths are taken relative to `base`.
    pub fn into_spec(self, base: &Path, defaults: &Limits) -> Result<RunSpec, SpecError> {
        let rel = |p: PathBuf| if p.is_absolute() { p } else { base.join(p) };
        let mut spec = RunSpec::new(self.argv);
        spec.env = self.env.into_iter().collect();
        spec.dir = self.dir.map(rel);
        spec.stdin = match (self.stdin_file, self.stdin) {
            (Some(_), Some(_)) => return Err(SpecError::Conflict("stdin", "stdin_file")),
            (Some(f), None) => Stdin::File(rel(f)),
            (None, Some(s)) => Stdin::Bytes(s.into_bytes()),
            (None, None) => Stdin::Empty,
        };
        for m in &self.ro_bind {
            spec.mounts.push(Mount::parse(m, false)?);
        }
        for m in &self.bind {
            spec.mounts.push(Mount::parse(m, true)?);
        }
        spec.network = self.network;
        spec.limits = self.limits.resolve(defaults)?;
        spec.copy_out = self.copy_out.map(rel);
        spec.tty = self.tty.then_some((80, 24));
        if let Some(name) = &self.seccomp {
            spec.seccomp = name.parse()?;
        }
        spec.runtime = self.runtime.unwrap_or_default();
        spec.validate()?;
        Ok(spec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_public_instance_switch_leaves_no_way_to_a_native_run() {
        let open = RuntimePolicy::default();
        assert_eq!(open.resolve(None).unwrap(), Runtime::Native);
        assert_eq!(
            open.resolve(Some(Runtime::Gvisor)).unwrap(),
            Runtime::Gvisor
        );
        let gvisor_default = RuntimePolicy {
            default: Runtime::Gvisor,
            force_gvisor: false,
        };
        assert_eq!(gvisor_default.resolve(None).unwrap(), Runtime::Gvisor);
        assert_eq!(
            gvisor_default.resolve(Some(Runtime::Native)).unwrap(),
            Runtime::Native
        );
        let forced = RuntimePolicy {
            default: Runtime::Native,
            force_gvisor: true,
        };
        assert_eq!(forced.resolve(None).unwrap(), Runtime::Gvisor);
        assert_eq!(
            forced.resolve(Some(Runtime::Gvisor)).unwrap(),
            Runtime::Gvisor
        );
        assert!(matches!(
            forced.resolve(Some(Runtime::Native)),
            Err(SpecError::RuntimeForced)
        ));
        // A language's or suite's own runtime is a default: the switch overrides it.
        let native = Some(Runtime::Native);
        let gvisor = Some(Runtime::Gvisor);
        assert_eq!(
            open.resolve_preferring(None, gvisor).unwrap(),
            Runtime::Gvisor
        );
        assert_eq!(
            open.resolve_preferring(native, gvisor).unwrap(),
            Runtime::Native
        );
        assert_eq!(
            forced.resolve_preferring(None, native).unwrap(),
            Runtime::Gvisor
        );
        assert!(forced.resolve_preferring(native, gvisor).is_err());
        // A check's or suite's own runtime beats the caller's default, never the switch.
        assert_eq!(gvisor_default.choose(native), Runtime::Native);
        assert_eq!(gvisor_default.choose(None), Runtime::Gvisor);
        assert_eq!(open.choose(gvisor), Runtime::Gvisor);
        assert_eq!(forced.choose(native), Runtime::Gvisor);
        assert_eq!(forced.choose(None), Runtime::Gvisor);
    }

    #[test]
    fn mounts_parse_and_refuse_bad_destinations() {
        let m = Mount::parse("/data:/srv/data", false).unwrap();
        assert_eq!(m.dst, PathBuf::from("/srv/data"));
        assert!(Mount::parse("relative", false).is_err());
        assert!(Mount::parse("/x:/proc/sys", true).is_err());
        assert!(Mount::parse("/x:/a/../etc", true).is_err());
        assert!(Mount::parse("/x:/", true).is_err());
    }

    #[test]
    fn env_is_minimal_and_overridable() {
        let mut s = RunSpec::new(vec!["true".into()]);
        s.env.push(("LANG".into(), "fr_FR.UTF-8".into()));
        let env = s.environment();
        assert_eq!(env.iter().filter(|(k, _)| k == "LANG").count(), 1);
        assert!(env.iter().any(|(k, v)| k == "LANG" && v == "fr_FR.UTF-8"));
        assert!(parse_env("1BAD=x").is_err());
        assert!(parse_env("NOEQ").is_err());
        assert_eq!(parse_env("A=b=c").unwrap(), ("A".into(), "b=c".into()));
    }

    #[test]
    fn an_images_env_applies_under_the_runs_own_and_never_moves_the_sandbox() {
        let kv = |k: &str, v: &str| (k.to_string(), v.to_string());
        let img = ImageRoot {
            name: "py".into(),
            digest: "sha256:00".into(),
            layers: vec![],
            env: vec![
                kv("PATH", "/usr/local/bin:/usr/bin"),
                kv("LANG", "de_DE.UTF-8"),
                kv("HOME", "/root"),
                kv("TMPDIR", "/var/x"),
                kv("PYTHON_VERSION", "3.12"),
            ],
            working_dir: Some("/app".into()),
            upper: None,
            as_root: false,
            claim: RootClaim::default(),
        };
        let mut s = RunSpec::new(vec!["true".into()]);
        s.env.push(kv("LANG", "C"));
        s.root = Root::Image(img.clone());
        let env = s.environment();
        let get = |env: &[(String, String)], k: &str| {
            let v: Vec<&String> = env
                .iter()
                .filter(|(ek, _)| ek == k)
                .map(|(_, v)| v)
                .collect();
            assert_eq!(v.len(), 1, "{k} once: {env:?}");
            v[0].clone()
        };
        assert_eq!(get(&env, "PATH"), "/usr/local/bin:/usr/bin");
        assert_eq!(get(&env, "LANG"), "C", "the run's own wins");
        assert_eq!(get(&env, "PYTHON_VERSION"), "3.12");
        assert_eq!(get(&env, "HOME"), WORKDIR, "the image never moves HOME");
        assert_eq!(get(&env, "TMPDIR"), "/tmp");
        assert_eq!(get(&env, "PWD"), WORKDIR);
        // Build mode: root's HOME, the image's working folder.
        s.root = Root::Image(ImageRoot {
            upper: Some("/x/upper".into()),
            ..img.clone()
        });
        let env = s.environment();
        assert_eq!(get(&env, "HOME"), "/root");
        assert_eq!(get(&env, "USER"), "root");
        assert_eq!(get(&env, "PWD"), "/app");
        // Root mode: root's HOME, the working directory as for any run.
        s.root = Root::Image(ImageRoot {
            as_root: true,
            ..img
        });
        let env = s.environment();
        assert_eq!(get(&env, "HOME"), "/root");
        assert_eq!(get(&env, "USER"), "root");
        assert_eq!(get(&env, "PWD"), WORKDIR);
    }

    #[test]
    fn batch_line_becomes_spec() {
        let j: RunSpecJson = serde_json::from_str(
            r#"{"argv": ["./a.out"], "dir": "sub1", "stdin_file": "in1.txt", "limits": {"cpu_time": "1s", "wall_time": "100ms", "memory": "64M", "pids": 16, "output": "1M"}}"#,
        )
        .unwrap();
        let s = j.into_spec(Path::new("/base"), &Limits::default()).unwrap();
        assert_eq!(s.dir, Some(PathBuf::from("/base/sub1")));
        assert_eq!(s.stdin, Stdin::File(PathBuf::from("/base/in1.txt")));
        assert_eq!(s.limits.pids, 16);
        assert!(serde_json::from_str::<RunSpecJson>(r#"{"argv":[],"bogus":1}"#).is_err());
        let empty: RunSpecJson = serde_json::from_str(r#"{"argv":[]}"#).unwrap();
        assert!(empty.into_spec(Path::new("/"), &Limits::default()).is_err());
    }

    #[test]
    fn commands_are_checked_alike() {
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let env = |k: &str, val: &str| vec![(k.to_string(), val.to_string())];
        assert!(validate_command(&v(&["echo", "hi"]), &env("A_1", "x")).is_ok());
        let refused = [
            validate_command(&[], &[]),
            validate_command(&v(&[""]), &[]),
            validate_command(&v(&["echo", "a\0b"]), &[]),
            validate_command(&v(&["true"]), &env("A", "x\0")),
            validate_command(&v(&["true"]), &env("A\0B", "x")),
            validate_command(&v(&["true"]), &env("A=B", "x")),
            validate_command(&v(&["true"]), &env("1A", "x")),
            validate_command(&[String::from("echo"), "x".repeat(MAX_ARG_BYTES + 1)], &[]),
            validate_command(&vec!["x".repeat(1000); MAX_COMMAND_BYTES / 1000 + 1], &[]),
            validate_env(&env("BIG", &"x".repeat(MAX_ARG_BYTES))),
        ];
        for (i, r) in refused.iter().enumerate() {
            assert!(r.is_err(), "case {i} was accepted");
        }
        // A refused name is quoted, but never a huge one.
        let e = validate_env(&env(&"=".repeat(MAX_ARG_BYTES), "")).unwrap_err();
        assert!(e.to_string().len() < 200, "{e}");
    }

    #[test]
    fn a_copy_out_destination_that_cannot_be_written_is_refused_before_the_run() {
        let t = tempfile::tempdir().unwrap();
        let file = t.path().join("in.txt");
        std::fs::write(&file, "x").unwrap();
        let spec = |dest: &Path| {
            let mut s = RunSpec::new(vec!["true".into()]);
            s.copy_out = Some(dest.to_path_buf());
            s.validate()
        };
        let e = spec(&file).unwrap_err().to_string();
        assert!(e.contains("in.txt: it exists and is not a folder"), "{e}");
        let e = spec(&file.join("out")).unwrap_err().to_string();
        assert!(e.contains("in.txt is not a folder"), "{e}");
        // A folder, or a path one can be made at (parents too), is fine.
        spec(t.path()).unwrap();
        spec(&t.path().join("new/deeper")).unwrap();
        // Relative to the working directory.
        spec(Path::new("not-there-yet")).unwrap();
    }
}
