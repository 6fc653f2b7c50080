//! Typed errors of the sandbox library.

use std::path::PathBuf;

/// A run specification that cannot be honoured; the message names the offending field.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("invalid size {0:?}: use a number of bytes or a number with K, M or G (e.g. 64M)")]
    BadSize(String),
    #[error("invalid duration {0:?}: use e.g. 100ms, 2s or 1m")]
    BadDuration(String),
    #[error("invalid limit {key}: {why}")]
    BadLimit { key: &'static str, why: String },
    #[error("invalid mount {mount}: {why}")]
    BadMount { mount: String, why: String },
    #[error("invalid environment variable {0:?}: expected NAME=VALUE with NAME made of letters, digits and _")]
    BadEnv(String),
    #[error("no command given")]
    EmptyCommand,
    #[error("{0} may not contain a NUL byte")]
    NulByte(&'static str),
    #[error("{what} is longer than {max} bytes: pass large data as a file or standard input")]
    TooLarge { what: &'static str, max: usize },
    #[error("unknown runtime {0:?}: use \"native\" or \"gvisor\"")]
    BadRuntime(String),
    #[error("this server runs every program under gVisor: a native run cannot be asked for (leave runtime out or give \"gvisor\")")]
    RuntimeForced,
    #[error("give either {0} or {1}, not both")]
    Conflict(&'static str, &'static str),
    #[error("copy-out destination {}: {why}", path.display())]
    BadCopyOut { path: PathBuf, why: String },
    #[error(transparent)]
    BadSeccompProfile(#[from] corral_seccomp::RestrictionsError),
}

/// The sandbox could not be set up or supervised. A run that hits one of these never ran with less
/// isolation than asked: it did not run at all.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error("not supported here: {0}")]
    Unsupported(&'static str),
    #[error("cgroups: {0}")]
    Cgroup(#[from] corral_cgroups::Error),
    #[error("seccomp: {0}")]
    Seccomp(#[from] corral_seccomp::Error),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {why}")]
    Path { path: PathBuf, why: String },
    /// Files copied into a sandbox did not fit its disk limit (the files' fault, not the host's).
    #[error("{path}: the files do not fit the sandbox's disk limit")]
    NoSpace { path: PathBuf },
    #[error("sandbox init failed: {0}")]
    Init(String),
    #[error("sandbox protocol error: {0}")]
    Protocol(String),
}

impl SandboxError {
    pub fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        SandboxError::Io {
            what: what.into(),
            source,
        }
    }
}

impl From<nix::Error> for SandboxError {
    fn from(e: nix::Error) -> Self {
        SandboxError::io("system call", std::io::Error::from(e))
    }
}

/// A setup step inside the sandbox failed; the supervisor hears about it as text anyway
/// (`Event::Failed`), so it arrives as [`SandboxError::Init`] either way.
impl From<crate::inside::error::SetupError> for SandboxError {
    fn from(e: crate::inside::error::SetupError) -> Self {
        SandboxError::Init(e.to_string())
    }
}
