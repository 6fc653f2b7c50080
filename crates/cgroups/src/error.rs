//! Errors of this crate. Every variant that touches the filesystem names the path, because
//! "Permission denied" alone is useless when debugging cgroup delegation on someone else's host.

use std::io;
use std::path::PathBuf;

/// Everything that can go wrong while detecting, creating, reading or removing cgroups.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Reading a cgroup (or /proc) file failed.
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    /// Writing a value to a cgroup control file failed (or the kernel took only part of it).
    #[error("cannot write {value:?} to {path}: {source}")]
    Write {
        path: PathBuf,
        value: String,
        #[source]
        source: io::Error,
    },

    /// Opening a cgroup file (e.g. `cgroup.procs` for the child to join) failed.
    #[error("cannot open {path}: {source}")]
    Open {
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    /// Creating a cgroup directory failed.
    #[error("cannot create cgroup directory {path}: {source}")]
    Mkdir {
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    /// Removing a cgroup directory failed (after retries, for EBUSY).
    #[error("cannot remove cgroup directory {path}: {source}")]
    Rmdir {
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    /// A file had content we could not make sense of.
    #[error("cannot parse {path}: {reason}")]
    Parse { path: PathBuf, reason: String },

    /// The host offers no cgroup setup corral can use (or not the one that was forced).
    #[error("no usable cgroup hierarchy: {0}")]
    Unsupported(String),

    /// Enabling controllers for child cgroups was refused: the subtree is not delegated to us.
    #[error(
        "cannot enable controllers ({controllers}) in {path}: {source}; corral needs a delegated \
         cgroup subtree whose cgroup has no other processes: run it in a unit with Delegate=yes \
         (e.g. `systemd-run --scope -p Delegate=yes corral ...`) or set CORRAL_CGROUP_PARENT to a \
         cgroup it may manage"
    )]
    Delegation {
        path: PathBuf,
        controllers: String,
        #[source]
        source: io::Error,
    },

    /// The controllers corral needs do not reach the cgroup it would manage.
    #[error(
        "controllers {missing} are not available in {path} (not delegated by its parent); run \
         corral in a unit with Delegate=yes (e.g. `systemd-run --scope -p Delegate=yes corral ...`) \
         or set CORRAL_CGROUP_PARENT to a cgroup that has them"
    )]
    NotDelegated { path: PathBuf, missing: String },

    /// The cgroup name given to `Manager::create` is not a single safe path component.
    #[error("invalid cgroup name {0:?}: use 1-128 characters from [A-Za-z0-9_-]")]
    InvalidName(String),

    /// A memory limit below the cgroup's current usage was refused: the kernel could not reclaim
    /// enough (v1 `memory.limit_in_bytes` answers EBUSY; on v2 `memory.reclaim` gave up). The
    /// previous limits are still in place.
    #[error(
        "cannot lower the memory limit of {path} to {limit} bytes: {usage} bytes are in use and \
         the kernel could not reclaim enough ({source}); stop processes in the cgroup or choose a \
         higher limit"
    )]
    MemoryLimitBelowUsage {
        path: PathBuf,
        limit: u64,
        usage: u64,
        #[source]
        source: io::Error,
    },

    /// A leaf with this name already exists; names must be unique per run.
    #[error("cgroup {0} already exists")]
    Exists(PathBuf),

    /// Processes kept appearing in the cgroup despite repeated SIGKILL rounds.
    #[error("cgroup {path} still has processes after {rounds} kill rounds: {pids:?}")]
    KillFailed {
        path: PathBuf,
        rounds: u32,
        pids: Vec<i32>,
    },

    /// An environment variable (CORRAL_CGROUP_VERSION, CORRAL_CGROUP_PARENT) has a bad value.
    #[error("invalid {var}={value:?}: {reason}")]
    Config {
        var: &'static str,
        value: String,
        reason: String,
    },
}

impl Error {
    /// The OS error number behind this error, if there is one (tests and callers use it to tell
    /// EBUSY/EPERM/ENOENT apart without string matching).
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            Error::Read { source, .. }
            | Error::Write { source, .. }
            | Error::Open { source, .. }
            | Error::Mkdir { source, .. }
            | Error::Rmdir { source, .. }
            | Error::Delegation { source, .. }
            | Error::MemoryLimitBelowUsage { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }

    /// Whether this error says a cgroup directory went away under us: ENOENT once it is gone,
    /// ENODEV for a file looked up while another process's rmdir was removing it (kernfs answers
    /// that for a deactivated node). Another corral process removes the shared base when it
    /// exits with the base empty, so setup that meets this starts again.
    pub(crate) fn is_vanished(&self) -> bool {
        matches!(self.raw_os_error(), Some(libc::ENOENT | libc::ENODEV))
    }
}

/// Runs `step` again, up to three more times, while it fails because a directory went away under
/// it ([`Error::is_vanished`]): setup that another corral process's cleanup raced.
pub(crate) fn again_if_vanished<T>(mut step: impl FnMut() -> Result<T, Error>) -> Result<T, Error> {
    let mut attempts = 0;
    loop {
        match step() {
            Err(e) if e.is_vanished() && attempts < 3 => attempts += 1,
            r => return r,
        }
    }
}
