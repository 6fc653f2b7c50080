//! Whether anything used the sandbox's IPC namespace, so a reset can keep one nobody touched.
//!
//! An IPC namespace holds SysV shared memory, semaphores and message queues, and POSIX message
//! queues; its sysctls are behind a read-only `/proc/sys`. A namespace with none of those
//! objects is as good as new. Making a new one is not free: every new IPC namespace mounts its
//! own mqueue filesystem, and the old one is torn down (~2.3 % of all CPU time of a warm
//! `/bin/true` loop, `perf record -a`).
//!
//! SysV objects are listed in `/proc/sysvipc/{shm,sem,msg}` (each shows the namespace it was
//! opened in). POSIX queues live only in the namespace's mqueue filesystem, which the sandbox
//! does not mount anywhere: PID 1 holds a detached mount of it (`fsopen` + `fsmount`, never
//! attached to a path, so no program can reach it) and lists it.

use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileExt;

use crate::inside::fds::above_runs;
use rustix::mount::{fsconfig_create, fsmount, fsopen, FsMountFlags, FsOpenFlags, MountAttrFlags};

const SYSV: [&str; 3] = [
    "/proc/sysvipc/shm",
    "/proc/sysvipc/sem",
    "/proc/sysvipc/msg",
];

/// A view of the current IPC namespace.
pub(crate) struct Usage {
    sysv: Vec<File>,
    /// What the SysV lists showed when the namespace was new (their header lines).
    empty: Vec<Vec<u8>>,
    /// The root of the namespace's mqueue filesystem (a detached mount).
    mqueue: OwnedFd,
}

impl Usage {
    /// Looks at the IPC namespace PID 1 is in now, which must be new (None when the kernel
    /// offers no way to look: then every reset makes a new namespace).
    pub(crate) fn capture() -> Option<Usage> {
        let sysv: Vec<File> = SYSV
            .iter()
            .map(|f| Ok(File::from(above_runs(File::open(f)?)?)))
            .collect::<std::io::Result<_>>()
            .ok()?;
        let empty = sysv.iter().map(read_all).collect::<Option<_>>()?;
        let fs = fsopen("mqueue", FsOpenFlags::FSOPEN_CLOEXEC).ok()?;
        fsconfig_create(&fs).ok()?;
        let mqueue = fsmount(
            &fs,
            FsMountFlags::FSMOUNT_CLOEXEC,
            MountAttrFlags::MOUNT_ATTR_RDONLY
                | MountAttrFlags::MOUNT_ATTR_NOEXEC
                | MountAttrFlags::MOUNT_ATTR_NOSUID
                | MountAttrFlags::MOUNT_ATTR_NODEV,
        )
        .ok()?;
        let mqueue = above_runs(mqueue).ok()?;
        let usage = Usage {
            sysv,
            empty,
            mqueue,
        };
        // A namespace that is not empty now cannot be told apart from a used one later.
        usage.unused().then_some(usage)
    }

    /// True when the namespace holds no SysV object and no POSIX message queue.
    pub(crate) fn unused(&self) -> bool {
        let sysv_empty = self
            .sysv
            .iter()
            .zip(&self.empty)
            .all(|(f, empty)| read_all(f).is_some_and(|now| now == *empty));
        sysv_empty && self.no_queues()
    }

    fn no_queues(&self) -> bool {
        let Ok(dir) = nix::fcntl::openat(
            self.mqueue.as_fd(),
            ".",
            nix::fcntl::OFlag::O_RDONLY
                | nix::fcntl::OFlag::O_DIRECTORY
                | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        ) else {
            return false;
        };
        let Ok(mut dir) = nix::dir::Dir::from_fd(dir) else {
            return false;
        };
        let empty = dir.iter().all(|e| {
            e.is_ok_and(|e| {
                let name = e.file_name().to_bytes();
                name == b"." || name == b".."
            })
        });
        empty
    }
}

/// A `/proc/sysvipc` list, whole (a header line when there is nothing).
fn read_all(f: &File) -> Option<Vec<u8>> {
    let mut all = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = f.read_at(&mut buf, all.len() as u64).ok()?;
        if n == 0 {
            return Some(all);
        }
        all.extend_from_slice(&buf[..n]);
        if all.len() > 1 << 20 {
            return None;
        }
    }
}
