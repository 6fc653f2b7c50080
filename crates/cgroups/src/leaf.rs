//! What both backends do the same way with a run's leaf: check its name, list pids, kill, remove.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::error::Error;
use crate::fs;

/// Upper bound on kill rounds; a fork bomb is capped by pids.max, so a few rounds normally do.
const MAX_ROUNDS: u32 = 200;
/// Upper bound on the whole loop: SIGKILLed tasks still need to run their exit path (and free
/// their memory) before they leave `cgroup.procs`.
const KILL_TIMEOUT: Duration = Duration::from_secs(2);

/// All pids in `dirs` (and their sub-cgroups), sorted and deduplicated (v1 hierarchies list the
/// same process once per hierarchy).
pub(crate) fn pids_in(dirs: &[PathBuf]) -> Result<Vec<i32>, Error> {
    let mut pids = Vec::new();
    for d in dirs {
        fs::pids_recursive(d, &mut pids)?;
    }
    pids.sort_unstable();
    pids.dedup();
    Ok(pids)
}

/// SIGKILLs everything in `dirs` until they are empty, within bounds.
///
/// With `kill_file` (v2 `cgroup.kill`) the kernel kills the whole subtree atomically, including
/// tasks forked during the kill; otherwise we read `cgroup.procs` and signal each pid, repeating
/// because a process may fork between our read and our kill. (A pid read here could in theory be
/// reused by an unrelated process before we signal it; that needs the pid space to wrap within
/// microseconds, and on v2 `cgroup.kill` avoids the question entirely.)
///
/// The calling process is never signalled, even if it somehow ended up inside the cgroup.
pub(crate) fn kill_until_empty(dirs: &[PathBuf], kill_file: Option<&Path>) -> Result<(), Error> {
    let me = std::process::id() as i32;
    let start = Instant::now();
    let mut pause = Duration::from_millis(1);
    let mut rounds = 0;
    loop {
        let mut pids = pids_in(dirs)?;
        let contains_me = pids.contains(&me);
        pids.retain(|&p| p != me);
        if pids.is_empty() {
            return Ok(());
        }
        if rounds >= MAX_ROUNDS || start.elapsed() >= KILL_TIMEOUT {
            return Err(Error::KillFailed {
                path: dirs.first().cloned().unwrap_or_default(),
                rounds,
                pids,
            });
        }
        rounds += 1;
        let used_kill_file = match kill_file {
            Some(f) if !contains_me => fs::write(f, "1").is_ok(),
            _ => false,
        };
        if !used_kill_file {
            for &pid in &pids {
                // ESRCH just means it already exited; anything else will show up as a survivor.
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// The [`Cgroup`](crate::Cgroup) methods that v1 and v2 answer alike: through their [`Leaf`]
/// (`leaf` field) and their own `measure`, `set_memory_limit` and `set_pids_limit`. Expanded
/// inside each backend's `impl Cgroup`. On v1, which has no freezer, `kill_all` relies on the
/// pids limit bounding how fast the set can grow, and its loop repeats until `cgroup.procs`
/// stays empty.
macro_rules! leaf_cgroup_methods {
    () => {
        fn procs_files(&self) -> Result<Vec<std::os::fd::OwnedFd>, Error> {
            self.leaf.procs_files()
        }

        fn usage(&self) -> Result<Usage, Error> {
            self.measure(None)
        }

        fn pids(&self) -> Result<Vec<i32>, Error> {
            self.leaf.pids()
        }

        fn kill_all(&self) -> Result<(), Error> {
            self.leaf.kill_all()
        }

        fn destroy(mut self: Box<Self>) -> Result<(), Error> {
            self.leaf.destroy()
        }

        fn paths(&self) -> Vec<PathBuf> {
            self.leaf.dirs.clone()
        }

        fn set_limits(&self, limits: &Limits) -> Result<(), Error> {
            self.set_memory_limit(limits.memory_bytes)?;
            self.set_pids_limit(limits.pids)
        }
    };
}
pub(crate) use leaf_cgroup_methods;

/// The directories of one run's cgroup plus the cleanup logic both backends share.
pub(crate) struct Leaf {
    /// One directory per distinct hierarchy.
    pub(crate) dirs: Vec<PathBuf>,
    /// v2 `cgroup.kill`, when the kernel has it (5.14+).
    kill_file: Option<PathBuf>,
    /// The file a process joins by writing `"0"` (see [`crate::Cgroup::procs_files`]).
    join_file: &'static str,
    /// The process that created the cgroup; only it may clean up on drop.
    owner: u32,
    destroyed: bool,
}

impl Leaf {
    pub(crate) fn new(
        dirs: Vec<PathBuf>,
        kill_file: Option<PathBuf>,
        join_file: &'static str,
    ) -> Leaf {
        Leaf {
            dirs,
            kill_file,
            join_file,
            owner: std::process::id(),
            destroyed: false,
        }
    }

    pub(crate) fn procs_files(&self) -> Result<Vec<OwnedFd>, Error> {
        self.dirs
            .iter()
            .map(|d| fs::open_join_file(&d.join(self.join_file)))
            .collect()
    }

    pub(crate) fn pids(&self) -> Result<Vec<i32>, Error> {
        pids_in(&self.dirs)
    }

    pub(crate) fn kill_all(&self) -> Result<(), Error> {
        kill_until_empty(&self.dirs, self.kill_file.as_deref())
    }

    /// Kills, then removes sub-cgroups and the directories themselves. Tries every directory
    /// even after a failure and reports the first error.
    pub(crate) fn destroy(&mut self) -> Result<(), Error> {
        self.destroyed = true;
        let mut first_err = self.kill_all().err();
        for d in &self.dirs {
            for sub in fs::subdirs_post_order(d) {
                if let Err(e) = fs::rmdir_retry(&sub) {
                    first_err.get_or_insert(e);
                }
            }
            if let Err(e) = fs::rmdir_retry(d) {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}

impl Drop for Leaf {
    /// Best-effort cleanup if the owner forgot `destroy` (or unwound past it). Skipped in any
    /// other process, e.g. a forked child that somehow returned into Rust code: it must never
    /// kill its siblings or remove the cgroup it is running in.
    fn drop(&mut self) {
        if !self.destroyed && std::process::id() == self.owner {
            let _ = self.destroy();
        }
    }
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
