//! Build mode's id mapping: a user namespace that maps ids 0–65535 to a leased range of host ids,
//! and idmapped clones of the image's folders through it (what rootful podman does with
//! `--userns=auto` on kernels that have idmapped mounts, 5.19+ for overlayfs layers).
//!
//! The image's files are owned by real uid 0 on the host. Seen through an idmapped mount they are
//! owned by the range's first id — the build program's root — so it may change them, while the
//! host's own files (owned by ids outside the range) stay out of its reach. Writes through the
//! idmapped upper folder store the image's own ids (0, 42 for `_apt`, …) on disk, so the upper
//! folder is an ordinary layer.
//!
//! Leaves only: raw system calls, nothing else of the sandbox. `nix` wraps neither `open_tree`
//! nor `mount_setattr`, hence the `libc::syscall`s.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

use nix::errno::Errno;
use nix::sched::{unshare, CloneFlags};
use nix::sys::signal::{kill, Signal};
use nix::sys::wait::waitpid;
use nix::unistd::{fork, ForkResult};

use crate::inside::error::SetupError;

/// How many ids a build namespace maps.
pub(crate) const IDS: u32 = 65_536;

/// Makes a user namespace whose 0–65535 are the host's `base`–`base + 65535`, and returns a
/// descriptor that keeps it alive. Must run in the host's PID namespace (its helper's
/// `/proc/PID` must name the helper) and be single-threaded (it forks).
pub(crate) fn build_user_namespace(base: u32) -> Result<OwnedFd, SetupError> {
    let (r, w) = nix::unistd::pipe().map_err(SetupError::BuildUserns)?;
    // SAFETY: the caller is single-threaded; the child only unshares, writes a byte and waits.
    match unsafe { fork() }.map_err(SetupError::BuildUserns)? {
        ForkResult::Child => {
            drop(r);
            let ok = unshare(CloneFlags::CLONE_NEWUSER).is_ok();
            let _ = nix::unistd::write(&w, if ok { b"y" } else { b"n" });
            drop(w);
            // Killed by the parent once it holds the namespace.
            loop {
                nix::unistd::pause();
            }
        }
        ForkResult::Parent { child } => {
            drop(w);
            let mut byte = [0u8];
            let got = nix::unistd::read(&r, &mut byte);
            let result = (|| {
                if got != Ok(1) || byte[0] != b'y' {
                    return Err(SetupError::BuildUserns(Errno::EPERM));
                }
                let proc = format!("/proc/{child}");
                let map = format!("0 {base} {IDS}");
                for file in ["uid_map", "gid_map"] {
                    std::fs::write(format!("{proc}/{file}"), &map).map_err(|source| {
                        SetupError::BuildIdMap {
                            file,
                            why: source.to_string(),
                        }
                    })?;
                }
                let ns = std::fs::File::open(format!("{proc}/ns/user")).map_err(|e| {
                    SetupError::BuildUserns(Errno::from_raw(e.raw_os_error().unwrap_or(0)))
                })?;
                Ok(OwnedFd::from(ns))
            })();
            let _ = kill(child, Signal::SIGKILL);
            let _ = waitpid(child, None);
            result
        }
    }
}

/// A detached clone of the folder `path`, idmapped through `userns` (and read-only when asked):
/// a mount no namespace shows, usable as an overlayfs layer through `/proc/self/fd/N`.
pub(crate) fn idmapped_clone(
    path: &Path,
    userns: &OwnedFd,
    read_only: bool,
) -> Result<OwnedFd, SetupError> {
    let fail = |step: &'static str| {
        let errno = Errno::last();
        move || SetupError::IdmappedMount {
            path: path.display().to_string(),
            step,
            errno,
        }
    };
    let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| SetupError::NulByte(path.display().to_string()))?;
    // SAFETY: open_tree with a NUL-terminated path; the kernel returns a new descriptor or -1.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            c_path.as_ptr(),
            libc::OPEN_TREE_CLONE | libc::OPEN_TREE_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(fail("open_tree")());
    }
    // SAFETY: the kernel just gave us this descriptor; nobody else owns it.
    let tree = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    let mut attr: libc::mount_attr = libc::mount_attr {
        attr_set: libc::MOUNT_ATTR_IDMAP
            | libc::MOUNT_ATTR_NOSUID
            | libc::MOUNT_ATTR_NODEV
            | if read_only {
                libc::MOUNT_ATTR_RDONLY
            } else {
                0
            },
        attr_clr: 0,
        propagation: 0,
        userns_fd: userns.as_raw_fd() as u64,
    };
    // SAFETY: mount_setattr on the detached tree we own, with a mount_attr of the size we pass.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH as libc::c_uint,
            &mut attr as *mut libc::mount_attr,
            std::mem::size_of::<libc::mount_attr>(),
        )
    };
    if rc < 0 {
        return Err(fail("mount_setattr(MOUNT_ATTR_IDMAP)")());
    }
    Ok(tree)
}
