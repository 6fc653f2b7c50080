//! What init does differently inside gVisor (whose kernel lacks some of what the native build
//! uses; runsc built the root from the bundle, see `crate::gvisor`):
//! - the program's processes are counted by gVisor's own pids cgroup: the host cgroup around
//!   runsc sees gVisor's threads, not the program's processes. PID 1 joins a cgroup of its own
//!   there once (every program inherits it, as natively) and sets its limit before each run;
//! - a reset replaces `/tmp` and `/dev/shm` with fresh tmpfs (the working directory is the
//!   host's, emptied by the supervisor). gVisor's tmpfs takes no inode limit.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use nix::mount::{mount, umount2, MntFlags, MsFlags};

use crate::error::SandboxError;

/// Where the cgroup filesystem is mounted for a moment, before the root is built over it.
const MOUNT_AT: &str = "/tmp";

/// Joins a fresh pids cgroup and returns its `pids.max`, open for writing; the mount itself is
/// detached at once, so no program can reach it by path.
pub(crate) fn join() -> Result<File, SandboxError> {
    let io = |what: &str| {
        let what = what.to_string();
        move |e: std::io::Error| SandboxError::io(format!("gVisor pids cgroup: {what}"), e)
    };
    mount(
        Some("cgroup"),
        MOUNT_AT,
        Some("cgroup"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        Some("pids"),
    )
    .map_err(|e| SandboxError::io("gVisor pids cgroup: mounting", e.into()))?;
    let joined = (|| {
        let dir = Path::new(MOUNT_AT).join("sandbox");
        std::fs::create_dir(&dir).map_err(io("creating"))?;
        std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join("cgroup.procs"))
            .and_then(|mut f| f.write_all(std::process::id().to_string().as_bytes()))
            .map_err(io("joining"))?;
        std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join("pids.max"))
            .map_err(io("opening pids.max"))
    })();
    umount2(MOUNT_AT, MntFlags::MNT_DETACH)
        .map_err(|e| SandboxError::io("gVisor pids cgroup: unmounting", e.into()))?;
    joined
}

/// Where corral's binary appears in the container: in the `/tmp` tmpfs, where gVisor makes the
/// mount point (nothing in the root folder), and which [`hide_runsc_additions`] removes.
pub(crate) const INIT_IN_CONTAINER: &str = "/tmp/.corral-init";

/// Removes what runsc adds to the root that the native sandbox does not have: the bind of
/// corral's binary (init runs from its open file), gVisor's `/sys` (natively not mounted; an
/// empty folder stays) and the device nodes the native `/dev` lacks.
pub(crate) fn hide_runsc_additions() -> Result<(), SandboxError> {
    umount2(INIT_IN_CONTAINER, MntFlags::MNT_DETACH)
        .map_err(|e| SandboxError::io("unmounting corral's binary", e.into()))?;
    // gVisor makes a missing mount point a folder, even for a file.
    std::fs::remove_dir(INIT_IN_CONTAINER)
        .or_else(|_| std::fs::remove_file(INIT_IN_CONTAINER))
        .map_err(|e| SandboxError::io("removing corral's binary's mount point", e))?;
    // The host's loader and libraries the init was loaded with (mapped, so still in use).
    let libs = crate::gvisor::loader::LIB_IN_CONTAINER;
    umount2(libs, MntFlags::MNT_DETACH)
        .map_err(|e| SandboxError::io("unmounting the init's libraries", e.into()))?;
    std::fs::remove_dir(libs)
        .map_err(|e| SandboxError::io("removing the init's libraries' mount point", e))?;
    // Its mount point stays, empty: the root is read-only.
    umount2("/sys", MntFlags::MNT_DETACH)
        .map_err(|e| SandboxError::io("unmounting gVisor's /sys", e.into()))?;
    // gVisor's /dev (a tmpfs) also has fuse, net/tun and tty: the native /dev has none of them.
    const DEV_KEPT: [&str; 12] = [
        "null", "zero", "full", "random", "urandom", "shm", "pts", "ptmx", "fd", "stdin", "stdout",
        "stderr",
    ];
    let entries = std::fs::read_dir("/dev").map_err(|e| SandboxError::io("listing /dev", e))?;
    for entry in entries.flatten() {
        if DEV_KEPT.iter().any(|k| entry.file_name() == *k) {
            continue;
        }
        let path = entry.path();
        let removed = match entry.file_type() {
            Ok(t) if t.is_dir() => std::fs::remove_dir_all(&path),
            _ => std::fs::remove_file(&path),
        };
        removed.map_err(|e| SandboxError::io(format!("removing {}", path.display()), e))?;
    }
    Ok(())
}

/// Limits the cgroup (PID 1 included, so the program gets `pids` of its own).
pub(crate) fn limit(pids_max: &File, pids: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    pids_max.write_at(pids.saturating_add(1).to_string().as_bytes(), 0)?;
    Ok(())
}

/// Fresh, empty, size-limited tmpfs on `/tmp` and `/dev/shm`.
pub(crate) fn reset_scratch(disk_bytes: u64) -> Result<(), SandboxError> {
    for p in ["/tmp", "/dev/shm"] {
        umount2(p, MntFlags::MNT_DETACH)
            .map_err(|e| SandboxError::io(format!("unmounting {p}"), e.into()))?;
        mount(
            Some("tmpfs"),
            p,
            Some("tmpfs"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            Some(format!("size={disk_bytes},mode=1777").as_str()),
        )
        .map_err(|e| SandboxError::io(format!("mounting a tmpfs on {p}"), e.into()))?;
    }
    Ok(())
}
