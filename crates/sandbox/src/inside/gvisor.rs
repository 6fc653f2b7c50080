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
