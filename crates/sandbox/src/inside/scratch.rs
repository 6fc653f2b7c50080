//! Empties the scratch mounts (`/tmp`, `/dev/shm`, the working directory) in place between
//! users of a warm sandbox, and proves them as good as new — or says it could not, and PID 1
//! replaces them with fresh mounts instead ([`crate::inside::rootfs::reset_scratch`]).
//!
//! Why not always remount: every `umount` waits for an expedited RCU grace period (IPIs to
//! every CPU, the running program's included), and new mounts are new inodes, so the Landlock
//! ruleset must be built again. Measured on a 2-core host (`corral-bench`, same invocation,
//! taking turns): runs/s at parallelism 2 rose ~35 % when the reset stopped remounting.
//!
//! "As good as new" is checked, not assumed: after the walk, each mount's free blocks and free
//! inodes (tmpfs counts both exactly) must equal what the fresh mount had, its root must have
//! the fresh mode, owner and (no) extended attributes, and it must be the same mount (device).
//! Anything else — a directory tree deeper or larger than the walk's budget, a mount point
//! inside, an entry the walk cannot remove — is a reason to remount, never to keep going.

use std::ffi::CStr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use nix::dir::{Dir, Type};
use nix::fcntl::{openat, OFlag};
use nix::sys::stat::{fstat, Mode};
use nix::sys::statfs::fstatfs;
use nix::unistd::{unlinkat, UnlinkatFlags};

use crate::spec::WORKDIR;

/// The scratch mounts, in the order they are emptied.
const MOUNTS: [&str; 3] = [WORKDIR, "/tmp", "/dev/shm"];

/// Entries removed in one reset before the walk gives up (a remount is cheaper for big trees).
const BUDGET: usize = 4096;

/// Directory depth the walk follows (deeper trees are left to a remount).
const MAX_DEPTH: usize = 64;

/// What one scratch mount looked like right after it was mounted.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fresh {
    dev: u64,
    mode: u32,
    uid: u32,
    gid: u32,
    blocks_free: u64,
    files_free: u64,
    xattr_bytes: usize,
}

impl Fresh {
    fn of(root: BorrowedFd<'_>) -> Result<Fresh, Why> {
        let st = fstat(root).map_err(|e| Why::Call("fstat", e))?;
        let fs = fstatfs(root).map_err(|e| Why::Call("fstatfs", e))?;
        let xattr_bytes = rustix::fs::flistxattr_query(root)
            .map_err(|e| Why::Call("flistxattr", nix::errno::Errno::from_raw(e.raw_os_error())))?;
        Ok(Fresh {
            dev: st.st_dev,
            mode: st.st_mode,
            uid: st.st_uid,
            gid: st.st_gid,
            blocks_free: fs.blocks_free() as u64,
            files_free: fs.files_free() as u64,
            xattr_bytes,
        })
    }
}

/// The scratch mounts of a sandbox as they were when fresh, and the size they were made with.
#[derive(Debug)]
pub(crate) struct Scratch {
    fresh: Vec<Fresh>,
    disk_bytes: u64,
    inodes: u64,
}

/// Why the scratch mounts were not emptied in place (PID 1 remounts them instead).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Why {
    /// The next user asked for another size.
    Resized,
    /// More entries or a deeper tree than the walk takes on.
    TooBig,
    /// A directory on another device: a mount point, which the walk never enters.
    MountPoint,
    /// After the walk, the mount is not what it was fresh (a root changed, space still used).
    NotAsNew(&'static str),
    Call(&'static str, nix::errno::Errno),
}

impl std::fmt::Display for Why {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Why::Resized => write!(f, "the next run has another disk size"),
            Why::TooBig => write!(f, "more than {BUDGET} entries or {MAX_DEPTH} levels"),
            Why::MountPoint => write!(f, "a mount point inside"),
            Why::NotAsNew(what) => write!(f, "not as new after emptying: {what}"),
            Why::Call(call, e) => write!(f, "{call}: {e}"),
        }
    }
}

impl Scratch {
    /// Records the scratch mounts as they are now: call right after mounting them.
    pub(crate) fn capture(disk_bytes: u64, inodes: u64) -> Result<Scratch, Why> {
        let fresh = MOUNTS
            .iter()
            .map(|m| Fresh::of(open_root(m)?.as_fd()))
            .collect::<Result<_, _>>()?;
        Ok(Scratch {
            fresh,
            disk_bytes,
            inodes,
        })
    }

    /// Removes everything in the scratch mounts and checks each is as it was fresh.
    pub(crate) fn empty(&self, disk_bytes: u64, inodes: u64) -> Result<(), Why> {
        if (disk_bytes, inodes) != (self.disk_bytes, self.inodes) {
            return Err(Why::Resized);
        }
        let mut budget = BUDGET;
        for (m, fresh) in MOUNTS.iter().zip(&self.fresh) {
            let root = open_root(m)?;
            let before = Fresh::of(root.as_fd())?;
            if before.dev != fresh.dev {
                return Err(Why::NotAsNew("another mount on the scratch folder"));
            }
            // Every entry of a tmpfs (file, directory, link, socket, fifo) takes one of its
            // inodes, and a hard link needs an inode of the same mount: a mount with all its
            // inodes free holds nothing, and the walk (a dozen calls) has nothing to do.
            // Without an inode limit tmpfs reports no free inodes at all, so that never passes.
            let (root, now) = if before == *fresh && fresh.files_free > 0 {
                (root, before)
            } else {
                empty_dir(root, fresh.dev, 0, &mut budget)?;
                let root = open_root(m)?;
                let now = Fresh::of(root.as_fd())?;
                (root, now)
            };
            // Only the times may differ (set to now, as a fresh mount's are).
            if now != *fresh {
                return Err(Why::NotAsNew(
                    if now.blocks_free != fresh.blocks_free || now.files_free != fresh.files_free {
                        "space or inodes still in use"
                    } else {
                        "the root's mode, owner or attributes changed"
                    },
                ));
            }
            let t = nix::sys::time::TimeSpec::UTIME_NOW;
            nix::sys::stat::futimens(root.as_fd(), &t, &t).map_err(|e| Why::Call("futimens", e))?;
        }
        Ok(())
    }
}

fn open_root(path: &str) -> Result<OwnedFd, Why> {
    nix::fcntl::open(
        path,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| Why::Call("open", e))
}

/// Removes every entry under `dir` (not `dir` itself), never leaving the device `dev`.
fn empty_dir(dir: OwnedFd, dev: u64, depth: usize, budget: &mut usize) -> Result<(), Why> {
    if depth > MAX_DEPTH {
        return Err(Why::TooBig);
    }
    let mut dir = Dir::from_fd(dir).map_err(|e| Why::Call("fdopendir", e))?;
    // Names first, removal after: the directory is not changed while it is being read.
    let mut entries = Vec::new();
    for entry in dir.iter() {
        let entry = entry.map_err(|e| Why::Call("getdents", e))?;
        let name = entry.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        *budget = budget.checked_sub(1).ok_or(Why::TooBig)?;
        entries.push((name.to_owned(), entry.file_type()));
    }
    for (name, kind) in entries {
        remove(dir.as_fd(), &name, kind, dev, depth, budget)?;
    }
    Ok(())
}

fn remove(
    parent: BorrowedFd<'_>,
    name: &CStr,
    kind: Option<Type>,
    dev: u64,
    depth: usize,
    budget: &mut usize,
) -> Result<(), Why> {
    let is_dir = match kind {
        Some(Type::Directory) => true,
        Some(_) => false,
        // getdents may not know (tmpfs always does): ask without following a link.
        None => {
            nix::sys::stat::fstatat(parent, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)
                .map_err(|e| Why::Call("fstatat", e))?
                .st_mode
                & libc::S_IFMT
                == libc::S_IFDIR
        }
    };
    if !is_dir {
        // A mount point refuses (EBUSY): the reset remounts then.
        return unlinkat(parent, name, UnlinkatFlags::NoRemoveDir)
            .map_err(|e| Why::Call("unlink", e));
    }
    let sub = openat(
        parent,
        name,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| Why::Call("openat", e))?;
    if fstat(sub.as_fd())
        .map_err(|e| Why::Call("fstat", e))?
        .st_dev
        != dev
    {
        return Err(Why::MountPoint);
    }
    empty_dir(sub, dev, depth + 1, budget)?;
    unlinkat(parent, name, UnlinkatFlags::RemoveDir).map_err(|e| Why::Call("rmdir", e))
}
