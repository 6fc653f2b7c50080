//! One interface over cgroup v1 and cgroup v2 for corral's per-run resource control.
//!
//! The supervisor (host side, root) calls [`detect()`] once to get a [`Manager`] rooted at corral's
//! base cgroup, then for every sandboxed run [`Manager::create`]s a fresh leaf with memory and pids
//! limits, hands [`Cgroup::procs_files`] to the child (which joins by writing `"0"` to each fd
//! right after fork, before it loses access to the host's cgroupfs), reads [`Cgroup::cpu_time`]
//! while it runs and [`Cgroup::usage`] afterwards, and finally [`Cgroup::destroy`]s it.
//!
//! Both backends only ever open control files the kernel already provides (no file creation in
//! cgroupfs), write each value in one `write(2)`, and name the path in every error.

mod detect;
mod error;
mod fs;
mod leaf;
#[cfg(test)]
mod testfs;
#[cfg(test)]
mod tests;
mod v1;
mod v2;

use std::fmt;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

pub use detect::{Probe, V1Hierarchy, V2Hierarchy};
pub use error::Error;

/// Environment variable forcing the cgroup version (`v1` or `v2`).
pub const ENV_VERSION: &str = "CORRAL_CGROUP_VERSION";
/// Environment variable overriding corral's base cgroup (a path relative to the mount root, used
/// for every hierarchy), e.g. a cgroup delegated to corral by the administrator.
pub const ENV_PARENT: &str = "CORRAL_CGROUP_PARENT";

/// Which cgroup interface a [`Manager`] drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Version {
    /// Legacy per-controller hierarchies (memory, pids, cpuacct mounted separately).
    V1,
    /// The unified hierarchy.
    V2,
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Version::V1 => "v1",
            Version::V2 => "v2",
        })
    }
}

impl FromStr for Version {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "v1" | "1" => Ok(Version::V1),
            "v2" | "2" => Ok(Version::V2),
            other => Err(format!("expected v1 or v2, got {other:?}")),
        }
    }
}

/// Limits applied to a run's leaf cgroup. `None` means unlimited.
///
/// Swap is always disabled where the kernel allows it (v2 `memory.swap.max=0`; v1
/// `memory.memsw.limit_in_bytes` equal to the memory limit, plus `memory.swappiness=0`), so a
/// memory limit cannot be dodged by swapping out.
#[derive(Debug, Clone, Default)]
pub struct Limits {
    /// Memory limit in bytes (the kernel rounds it down to whole pages).
    pub memory_bytes: Option<u64>,
    /// Maximum number of tasks (processes and threads) in the cgroup.
    pub pids: Option<u64>,
}

/// What a run consumed, read from the leaf after (or while) it ran.
#[derive(Debug, Clone, Default)]
pub struct Usage {
    /// Total CPU (user+sys) of every process that was in the cgroup, exited ones included.
    pub cpu_time: Duration,
    /// v1 `memory.max_usage_in_bytes`; v2 `memory.peak` (falls back to `memory.current` on
    /// kernels before 5.19, which is then only a lower bound).
    pub memory_peak_bytes: u64,
    /// The kernel OOM killer killed something in the cgroup.
    pub oom_killed: bool,
    /// Memory usage hit the limit at least once (reclaim may have coped without an OOM kill).
    /// v2: `memory.events` max > 0. v1: `memory.failcnt` (or `memory.memsw.failcnt`) > 0, an
    /// OOM kill, or a recorded peak within 2 MiB of the limit — the last because kernels with
    /// memsw limits may count no failures at all (seen on 6.18).
    pub memory_limit_hit: bool,
    /// v2 `pids.peak` where the kernel has it; always `None` on v1.
    pub pids_peak: Option<u64>,
    /// A fork/clone failed because of `pids.max`.
    pub pids_limit_hit: bool,
}

/// Creates per-run cgroups under corral's base cgroup. Obtained from [`detect()`].
pub trait Manager: Send + Sync {
    /// The interface in use.
    fn version(&self) -> Version;
    /// Creates a fresh leaf cgroup named `name` (unique, `[A-Za-z0-9_-]`) under corral's base,
    /// applies the limits, returns it. Fails with [`Error::Exists`] if the leaf already exists.
    fn create(&self, name: &str, limits: &Limits) -> Result<Box<dyn Cgroup>, Error>;
    /// Human-readable facts for `corral doctor`: base path(s), controllers available.
    fn describe(&self) -> Vec<(String, String)>;
}

/// One run's leaf cgroup (one directory per hierarchy on v1).
///
/// Dropping it without calling [`destroy`](Cgroup::destroy) destroys it on a best-effort basis
/// (only in the process that created it, so a forked child can never tear it down).
pub trait Cgroup: Send {
    /// One open (O_WRONLY|O_CLOEXEC) fd to `cgroup.procs` per hierarchy (v2: one; v1: memory,
    /// pids, cpuacct — fewer if some are co-mounted). A process joins the cgroup by writing
    /// `b"0"` to each — done by the sandboxed child itself right after fork, so the fds must be
    /// usable without any path lookups (the child is already inside another mount namespace).
    /// The kernel checks permissions against the opener's credentials, so the fds keep working
    /// after the child drops privileges.
    fn procs_files(&self) -> Result<Vec<OwnedFd>, Error>;
    /// CPU time used so far (cheap: one read; the supervisor calls it on its CPU-limit timer).
    fn cpu_time(&self) -> Result<Duration, Error>;
    /// Everything in [`Usage`]; several reads.
    fn usage(&self) -> Result<Usage, Error>;
    /// Pids currently in the cgroup (all hierarchies and any sub-cgroups, deduplicated, sorted),
    /// as seen from the caller's pid namespace.
    fn pids(&self) -> Result<Vec<i32>, Error>;
    /// SIGKILLs everything in it and waits (bounded) until `cgroup.procs` is empty. v2 uses
    /// `cgroup.kill` when present, which also catches tasks forked during the kill; otherwise a
    /// read-and-kill loop.
    fn kill_all(&self) -> Result<(), Error>;
    /// `kill_all`, then rmdir every directory (retrying EBUSY a few ms at a time, up to ~1 s).
    /// Leaves nothing behind.
    fn destroy(self: Box<Self>) -> Result<(), Error>;
    /// The leaf directories (one per distinct hierarchy).
    fn paths(&self) -> Vec<PathBuf>;
}

/// Settings that normally come from the environment, injectable for tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// Force a version instead of choosing ([`ENV_VERSION`]).
    pub version: Option<Version>,
    /// Use this cgroup path (relative to every mount root) as corral's base ([`ENV_PARENT`]),
    /// normalised to `/a/b` form.
    pub parent: Option<String>,
}

impl Options {
    /// Reads [`ENV_VERSION`] and [`ENV_PARENT`]; empty values count as unset.
    pub fn from_env() -> Result<Options, Error> {
        let version = match std::env::var(ENV_VERSION) {
            Ok(v) if !v.trim().is_empty() => {
                Some(v.parse::<Version>().map_err(|reason| Error::Config {
                    var: ENV_VERSION,
                    value: v.clone(),
                    reason,
                })?)
            }
            _ => None,
        };
        let parent = match std::env::var(ENV_PARENT) {
            Ok(p) if !p.trim().is_empty() => Some(normalize_parent(&p)?),
            _ => None,
        };
        Ok(Options { version, parent })
    }
}

/// Normalises a cgroup path given by the user to `/a/b` form, rejecting `.`/`..` so the base
/// cannot escape the mount.
pub fn normalize_parent(p: &str) -> Result<String, Error> {
    let mut parts = Vec::new();
    for c in p.split('/').filter(|c| !c.is_empty()) {
        if c == "." || c == ".." {
            return Err(Error::Config {
                var: ENV_PARENT,
                value: p.to_owned(),
                reason: "`.` and `..` are not allowed".to_owned(),
            });
        }
        parts.push(c);
    }
    Ok(format!("/{}", parts.join("/")))
}

/// Checks a leaf name: one path component of `[A-Za-z0-9_-]`, at most 128 bytes.
pub(crate) fn validate_name(name: &str) -> Result<(), Error> {
    let ok = !name.is_empty()
        && name.len() <= 128
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidName(name.to_owned()))
    }
}

fn read_proc(path: &str) -> Result<String, Error> {
    fs::read(Path::new(path))
}

/// Detect what this host offers and build a manager rooted at corral's base cgroup.
///
/// Honours [`ENV_VERSION`] and [`ENV_PARENT`]. Creates the base cgroup(s) if needed. On v2, when
/// this process's own cgroup is not the root, it first moves itself (all threads) into
/// `<own>/corral-supervisor`: the kernel only lets a non-root cgroup enable controllers for its
/// children while it holds no processes itself.
pub fn detect() -> Result<Box<dyn Manager>, Error> {
    let mountinfo = read_proc("/proc/self/mountinfo")?;
    let self_cgroup = read_proc("/proc/self/cgroup")?;
    detect_from(&mountinfo, &self_cgroup, Path::new("/"))
}

/// Same, with injectable inputs for tests: the cgroupfs mount root(s) come from `mountinfo` text,
/// the process's own cgroup paths from `self_cgroup` text (format of /proc/self/cgroup), and
/// `fs_root` is prepended to every mount point (so a test can point it at a temp dir laid out like
/// /sys/fs/cgroup). Environment overrides still apply; see [`detect_with`] to inject those too.
pub fn detect_from(
    mountinfo: &str,
    self_cgroup: &str,
    fs_root: &Path,
) -> Result<Box<dyn Manager>, Error> {
    detect_with(mountinfo, self_cgroup, fs_root, &Options::from_env()?)
}

/// [`detect_from`] with explicit [`Options`] instead of environment variables.
pub fn detect_with(
    mountinfo: &str,
    self_cgroup: &str,
    fs_root: &Path,
    options: &Options,
) -> Result<Box<dyn Manager>, Error> {
    let (v1, v2) = detect::layout(mountinfo, self_cgroup, fs_root);
    let version = detect::select(&v1, v2.as_ref(), options.version).map_err(Error::Unsupported)?;
    match (version, v2) {
        (Version::V2, Some(h)) => Ok(Box::new(v2::V2Manager::new(&h, options.parent.as_deref())?)),
        _ => Ok(Box::new(v1::V1Manager::new(
            &v1,
            options.parent.as_deref(),
        )?)),
    }
}

/// For doctor: what is mounted (v1 controllers with their mount points, v2 mount point and its
/// cgroup.controllers) and which version would be used, without creating anything.
pub fn probe() -> Result<Probe, Error> {
    let mountinfo = read_proc("/proc/self/mountinfo")?;
    let self_cgroup = read_proc("/proc/self/cgroup")?;
    probe_from(
        &mountinfo,
        &self_cgroup,
        Path::new("/"),
        &Options::from_env()?,
    )
}

/// [`probe`] with injectable inputs (see [`detect_from`]).
pub fn probe_from(
    mountinfo: &str,
    self_cgroup: &str,
    fs_root: &Path,
    options: &Options,
) -> Result<Probe, Error> {
    Ok(detect::probe_from(
        mountinfo,
        self_cgroup,
        fs_root,
        options.version,
    ))
}
