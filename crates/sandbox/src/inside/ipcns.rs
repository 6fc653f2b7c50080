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
    /// The root of the namespace's mqueue filesystem (a detached mount), open for listing: kept
    /// between resets and rewound, not opened again (five calls fewer each reset). The open
    /// directory keeps the mount alive.
    mqueue: rustix::fs::Dir,
    /// The detached mount itself, held as long as the listing: closing the last descriptor of a
    /// detached mount dissolves it, and that waits for an expedited RCU grace period (IPIs to
    /// every CPU; 0.1–0.35 ms of a fresh sandbox's build here). Held, it goes with PID 1 (or with
    /// the namespace a reset replaces), off the build's path.
    _mount: std::os::fd::OwnedFd,
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
        let root = rustix::fs::openat(
            &mqueue,
            ".",
            rustix::fs::OFlags::RDONLY
                | rustix::fs::OFlags::DIRECTORY
                | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .ok()?;
        let mount = above_runs(mqueue).ok()?;
        let mqueue = rustix::fs::Dir::new(above_runs(root).ok()?).ok()?;
        let mut usage = Usage {
            sysv,
            empty,
            mqueue,
            _mount: mount,
        };
        // A namespace that is not empty now cannot be told apart from a used one later.
        usage.unused().then_some(usage)
    }

    /// True when the namespace holds no SysV object and no POSIX message queue.
    pub(crate) fn unused(&mut self) -> bool {
        let sysv_empty = self
            .sysv
            .iter()
            .zip(&self.empty)
            .all(|(f, empty)| read_all(f).is_some_and(|now| now == *empty));
        sysv_empty && self.no_queues()
    }

    /// The mqueue root lists nothing but `.` and `..` (a failed read counts as a queue).
    fn no_queues(&mut self) -> bool {
        self.mqueue.rewind();
        while let Some(entry) = self.mqueue.read() {
            match entry {
                Ok(e) if matches!(e.file_name().to_bytes(), b"." | b"..") => {}
                _ => return false,
            }
        }
        true
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

#[cfg(test)]
mod tests {
    use super::*;

    /// In an IPC namespace of its own (a thread's: namespaces are per task), the view says
    /// "unused" until a POSIX queue or a SysV queue exists, every time it is asked (the kept
    /// mqueue listing is rewound), and again once they are gone. Needs root (CI runs the tests as
    /// root); elsewhere the kernel refuses the new namespace and there is nothing to look at.
    #[test]
    fn a_queue_is_seen_at_every_look_until_it_is_gone() {
        let looked = std::thread::spawn(|| {
            if nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWIPC).is_err() {
                assert!(!nix::unistd::geteuid().is_root(), "root may unshare IPC");
                return None;
            }
            let mut usage = Usage::capture().expect("a view of a new IPC namespace");
            let mut seen = vec![usage.unused(), usage.unused()];
            let name = c"/corral-ipcns-test";
            // SAFETY: mq_open with a NUL-terminated name and no attributes (the default ones).
            let q = unsafe {
                libc::mq_open(
                    name.as_ptr(),
                    libc::O_CREAT | libc::O_RDWR | libc::O_CLOEXEC,
                    0o600,
                    std::ptr::null_mut::<libc::mq_attr>(),
                )
            };
            assert!(q >= 0, "mq_open: {}", std::io::Error::last_os_error());
            seen.extend([usage.unused(), usage.unused()]);
            // SAFETY: closes the queue descriptor made above and removes the name.
            unsafe {
                libc::mq_close(q);
                libc::mq_unlink(name.as_ptr());
            }
            seen.push(usage.unused());
            // SAFETY: msgget/msgctl on a private queue of this namespace, removed at once after.
            let id = unsafe { libc::msgget(libc::IPC_PRIVATE, libc::IPC_CREAT | 0o600) };
            assert!(id >= 0, "msgget: {}", std::io::Error::last_os_error());
            seen.push(usage.unused());
            // SAFETY: IPC_RMID of the queue made above takes no buffer.
            unsafe { libc::msgctl(id, libc::IPC_RMID, std::ptr::null_mut()) };
            seen.push(usage.unused());
            Some(seen)
        })
        .join()
        .expect("the probe thread");
        if let Some(seen) = looked {
            assert_eq!(seen, [true, true, false, false, true, false, true]);
        }
    }
}
