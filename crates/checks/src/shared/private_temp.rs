//! Private (0700) temporary folders for a grading's staging — submissions, hidden tests, a
//! worker's job files — named after the process that made them, so that the folders of a process
//! that died without removing its own (`kill -9`, the OOM killer, a power cut) are removed by the
//! next corral process that makes one with the same prefix.
//!
//! A folder is `PREFIX<pid namespace>-<pid>-<random>`. It is an orphan when it belongs to this
//! user, its pid namespace is this process's, and no process has that pid. A live process's
//! folders are never touched; neither are other users', other namespaces' (a /tmp shared between
//! containers) or ones named otherwise.

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::{Mutex, OnceLock};

/// A temporary folder no other user of the host can enter (0700), removed when dropped. The
/// first call for a prefix in this process first removes that prefix's orphans.
pub fn private_tempdir(prefix: &str) -> std::io::Result<tempfile::TempDir> {
    use std::os::unix::fs::PermissionsExt;
    let tmp = std::env::temp_dir();
    let ns = pid_namespace();
    static SWEPT: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    let first = SWEPT
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(prefix.to_string());
    if first {
        if let Some(ns) = ns {
            remove_orphans(&tmp, prefix, ns);
        }
    }
    tempfile::Builder::new()
        .prefix(&format!(
            "{prefix}{}-{}-",
            ns.unwrap_or(0),
            std::process::id()
        ))
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir_in(tmp)
}

/// This process's PID namespace (its inode), which the pids in folder names belong to.
fn pid_namespace() -> Option<u64> {
    std::fs::metadata("/proc/self/ns/pid").ok().map(|m| m.ino())
}

/// Removes the folders of `dir` named `PREFIX<ns>-<pid>-…` that this user owns and whose process
/// is gone. Best effort: what cannot be read or removed stays.
fn remove_orphans(dir: &Path, prefix: &str, ns: u64) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    // SAFETY: geteuid has no arguments and cannot fail.
    let uid = unsafe { libc::geteuid() };
    let me = std::process::id();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| owner_pid(n, prefix, ns)) else {
            continue;
        };
        if pid == me || process_exists(pid) {
            continue;
        }
        // Not followed: a link planted under the name is not a folder of ours.
        let Ok(meta) = std::fs::symlink_metadata(entry.path()) else {
            continue;
        };
        if meta.is_dir() && meta.uid() == uid {
            match std::fs::remove_dir_all(entry.path()) {
                Ok(()) => {
                    tracing::info!(folder = %entry.path().display(), pid, "removed the staging folder of a corral process that is gone")
                }
                Err(e) => {
                    tracing::debug!(folder = %entry.path().display(), error = %e, "an orphaned staging folder stays")
                }
            }
        }
    }
}

/// The pid in `PREFIX<ns>-<pid>-<random>`, when `ns` is the one given.
fn owner_pid(name: &str, prefix: &str, ns: u64) -> Option<u32> {
    let mut parts = name.strip_prefix(prefix)?.splitn(3, '-');
    let (in_ns, pid, random) = (parts.next()?, parts.next()?, parts.next()?);
    (in_ns.parse::<u64>().ok()? == ns && !random.is_empty())
        .then(|| pid.parse().ok())
        .flatten()
}

/// Whether any process has `pid` (one of another user counts: EPERM).
fn process_exists(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return true;
    };
    // SAFETY: signal 0 only checks that the process exists and may be signalled.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn a_private_tempdir_is_0700_whatever_the_umask() {
        let t = private_tempdir("corral-unit-").unwrap();
        assert_eq!(mode(t.path()), 0o700);
        let name = t.path().file_name().unwrap().to_str().unwrap();
        let ns = pid_namespace().unwrap();
        assert_eq!(
            owner_pid(name, "corral-unit-", ns),
            Some(std::process::id())
        );
    }

    /// A dead process's folder goes, with what it held; a live one's, another namespace's and
    /// one named otherwise stay.
    #[test]
    fn only_the_folders_of_processes_that_are_gone_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let ns = pid_namespace().unwrap();
        let mut child = std::process::Command::new("/bin/true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let p = "corral-orphan-";
        let orphan = dir.path().join(format!("{p}{ns}-{dead}-abc"));
        // Another live process's (this one's parent), and this process's own.
        let live = dir.path().join(format!(
            "{p}{ns}-{}-abc",
            std::os::unix::process::parent_id()
        ));
        let mine = dir
            .path()
            .join(format!("{p}{ns}-{}-abc", std::process::id()));
        let other_ns = dir.path().join(format!("{p}{}-{dead}-abc", ns + 1));
        let unnamed = dir.path().join(format!("{p}abc"));
        let link = dir.path().join(format!("{p}{ns}-{dead}-link"));
        for d in [&orphan, &live, &mine, &other_ns, &unnamed] {
            std::fs::create_dir(d).unwrap();
        }
        std::fs::write(orphan.join("hidden_test.py"), "x").unwrap();
        std::os::unix::fs::symlink(&live, &link).unwrap();
        remove_orphans(dir.path(), p, ns);
        assert!(!orphan.exists(), "the orphan stayed");
        for kept in [&live, &mine, &other_ns, &unnamed] {
            assert!(kept.exists(), "{} was removed", kept.display());
        }
        assert!(
            std::fs::symlink_metadata(&link).is_ok(),
            "a link was removed"
        );
    }

    #[test]
    fn names_are_read_strictly() {
        assert_eq!(owner_pid("corral-x-7-42-Ab1", "corral-x-", 7), Some(42));
        assert_eq!(owner_pid("corral-x-7-42-", "corral-x-", 7), None);
        assert_eq!(owner_pid("corral-x-8-42-Ab1", "corral-x-", 7), None);
        assert_eq!(owner_pid("corral-x-7-forty-Ab1", "corral-x-", 7), None);
        assert_eq!(owner_pid("corral-y-7-42-Ab1", "corral-x-", 7), None);
    }
}
