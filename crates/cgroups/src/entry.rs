//! The crate's entry points: find what this host mounts and build a [`Manager`] over it
//! ([`detect`]), or only describe it for `corral doctor` ([`probe`]).

use std::path::Path;

use crate::detect::{self, Probe};
use crate::error::Error;
use crate::fs;
use crate::model::{Manager, Version};
use crate::options::Options;
use crate::{v1, v2};

fn read_proc(path: &str) -> Result<String, Error> {
    fs::read(Path::new(path))
}

/// Detect what this host offers and build a manager rooted at corral's base cgroup.
///
/// Honours [`ENV_VERSION`](crate::ENV_VERSION) and [`ENV_PARENT`](crate::ENV_PARENT). Creates the base cgroup(s) if needed. On v2, when
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
