//! Sandbox uids: every live sandbox on a host runs as a uid that no other live sandbox has —
//! across every corral process (CLI runs, servers, workers) — and that no account of the host uses.
//!
//! Per-user kernel budgets (`RLIMIT_NPROC`, inotify instances, message-queue bytes, keys) follow
//! the uid, so two sandboxes sharing one would share those budgets: one tenant's processes would
//! count against the other's. A uid is leased by holding an exclusive `flock` on
//! `/run/corral/uids/UID` for the sandbox's lifetime; the kernel drops the lock when its holder
//! exits, however it exits, so a killed supervisor leaks no uid. The lock files stay (empty).

use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};

use crate::error::SandboxError;

/// The uids (and, equal to them, gids) sandboxes use: far from the accounts a distribution makes
/// (below 60000) and from the 16-bit overflow ids, which are skipped anyway.
pub(crate) const FIRST: u32 = 60_000;
pub(crate) const COUNT: u32 = 30_000;

/// Build sandboxes (a program that is root in a user namespace of its own) need 65536 ids each:
/// ranges of that many, from 0x7000_0000 up (unused by distributions and by systemd's container
/// ranges, below 2^31 - 1), leased like single uids (lock files `range-N`).
pub(crate) const RANGE_FIRST: u32 = 0x7000_0000;
pub(crate) const RANGE_SIZE: u32 = 65_536;
pub(crate) const RANGES: u32 = 4095;

/// Where the lock files live: shared by every corral process of the host.
pub(crate) const LOCK_DIR: &str = "/run/corral/uids";

/// A uid held for one sandbox; dropping it gives the uid back.
#[derive(Debug)]
pub(crate) struct UidLease {
    uid: u32,
    _lock: Flock<File>,
}

impl UidLease {
    pub(crate) fn uid(&self) -> u32 {
        self.uid
    }
}

/// The uids and gids the host's account databases use, plus the kernel's overflow ids (what an
/// unmapped id shows as: usually 65534, `nobody`) and 65535 (`(uid16_t)-1`).
pub(crate) fn host_ids() -> BTreeSet<u32> {
    let mut ids = BTreeSet::new();
    for (file, fields) in [("/etc/passwd", &[2usize, 3][..]), ("/etc/group", &[2][..])] {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let cols: Vec<&str> = line.split(':').collect();
            for &i in fields {
                if let Some(id) = cols.get(i).and_then(|c| c.trim().parse::<u32>().ok()) {
                    ids.insert(id);
                }
            }
        }
    }
    for file in [
        "/proc/sys/kernel/overflowuid",
        "/proc/sys/kernel/overflowgid",
        "/proc/sys/fs/overflowuid",
        "/proc/sys/fs/overflowgid",
    ] {
        if let Some(id) = std::fs::read_to_string(file)
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok())
        {
            ids.insert(id);
        }
    }
    ids.extend([65534, 65535]);
    ids
}

/// Leases a free uid, trying `hint` first (spreading concurrent processes over the range keeps
/// the search short) and then the ones after it, skipping `taken_by_host`.
pub(crate) fn lease(
    dir: &Path,
    hint: u32,
    taken_by_host: &BTreeSet<u32>,
) -> Result<UidLease, SandboxError> {
    make_lock_dir(dir)?;
    for i in 0..COUNT {
        let uid = FIRST + (hint.wrapping_add(i) % COUNT);
        if taken_by_host.contains(&uid) {
            continue;
        }
        if let Some(lease) = hold(dir, &uid.to_string(), uid)? {
            return Ok(lease);
        }
    }
    Err(SandboxError::Init(format!(
        "all {COUNT} sandbox uids ({FIRST}..{}) are in use on this host",
        FIRST + COUNT
    )))
}

/// Leases a free range of [`RANGE_SIZE`] ids for a build sandbox; the lease's `uid()` is its first.
/// Ranges holding an id of the host's accounts are skipped.
pub(crate) fn lease_range(
    dir: &Path,
    hint: u32,
    taken_by_host: &BTreeSet<u32>,
) -> Result<UidLease, SandboxError> {
    make_lock_dir(dir)?;
    for i in 0..RANGES {
        let n = hint.wrapping_add(i) % RANGES;
        let base = RANGE_FIRST + n * RANGE_SIZE;
        if taken_by_host
            .range(base..base + RANGE_SIZE)
            .next()
            .is_some()
        {
            continue;
        }
        if let Some(lease) = hold(dir, &format!("range-{n}"), base)? {
            return Ok(lease);
        }
    }
    Err(SandboxError::Init(format!(
        "all {RANGES} build uid ranges are in use on this host"
    )))
}

fn make_lock_dir(dir: &Path) -> Result<(), SandboxError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| SandboxError::io(format!("creating {}", dir.display()), e))
}

/// The lease of `uid` (lock file `name`) if no process holds it now.
fn hold(dir: &Path, name: &str, uid: u32) -> Result<Option<UidLease>, SandboxError> {
    let path: PathBuf = dir.join(name);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .map_err(|e| SandboxError::io(format!("opening {}", path.display()), e))?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => Ok(Some(UidLease { uid, _lock: lock })),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Ok(None),
        Err((_, e)) => Err(SandboxError::io(
            format!("locking {}", path.display()),
            e.into(),
        )),
    }
}

/// [`hold`] for a uid found in a cgroup name: `None` when it is held or cannot be checked.
pub(crate) fn try_hold(dir: &Path, uid: u32) -> Option<UidLease> {
    if !(FIRST..FIRST + COUNT).contains(&uid) || !dir.is_dir() {
        return None;
    }
    hold(dir, &uid.to_string(), uid).ok().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_are_exclusive_and_skip_host_ids() {
        let dir = tempfile::tempdir().unwrap();
        let taken: BTreeSet<u32> = [FIRST, FIRST + 1].into();
        let a = lease(dir.path(), 0, &taken).unwrap();
        assert_eq!(a.uid(), FIRST + 2, "host ids are skipped");
        // The same hint from "another process" (a second open file description) gets the next.
        let b = lease(dir.path(), 0, &taken).unwrap();
        assert_eq!(b.uid(), FIRST + 3);
        drop(a);
        let c = lease(dir.path(), 0, &taken).unwrap();
        assert_eq!(c.uid(), FIRST + 2, "a dropped lease is free again");
        // The range wraps around.
        let d = lease(dir.path(), COUNT - 1, &taken).unwrap();
        assert_eq!(d.uid(), FIRST + COUNT - 1);
        let e = lease(dir.path(), COUNT - 1, &taken).unwrap();
        assert_eq!(e.uid(), FIRST + 4);
        drop((b, c, d, e));
    }

    #[test]
    fn build_ranges_are_exclusive_disjoint_and_skip_host_ids() {
        let dir = tempfile::tempdir().unwrap();
        let taken: BTreeSet<u32> = [RANGE_FIRST + 5].into();
        let a = lease_range(dir.path(), 0, &taken).unwrap();
        assert_eq!(
            a.uid(),
            RANGE_FIRST + RANGE_SIZE,
            "a range with a host id is skipped"
        );
        let b = lease_range(dir.path(), 0, &taken).unwrap();
        assert_eq!(b.uid(), RANGE_FIRST + 2 * RANGE_SIZE);
        let last = lease_range(dir.path(), RANGES - 1, &taken).unwrap();
        assert!(u64::from(last.uid()) + u64::from(RANGE_SIZE) <= 0x7FFF_FFFF);
        // Ranges never meet the single uids.
        const { assert!(RANGE_FIRST > FIRST + COUNT) };
        drop((a, b, last));
    }

    #[test]
    fn nobody_and_the_overflow_ids_are_never_leased() {
        let ids = host_ids();
        assert!(ids.contains(&65534) && ids.contains(&65535));
        assert!(ids.contains(&0), "root is in /etc/passwd");
    }
}
