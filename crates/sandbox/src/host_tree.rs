//! Reading a host folder that someone else may be changing while corral reads it: a student's
//! submission folder in their own home or a shared drop folder, copied in by root.
//!
//! A walk by path (`read_dir`, then `File::open` or `read_dir` of the entry's path) lets an entry
//! listed as a file be swapped for a link or a FIFO before it is opened: the link is followed (a
//! root-only host file copied into the sandbox) and the FIFO waits forever for a writer. Here an
//! entry is opened beneath its folder's descriptor with `O_NOFOLLOW | O_NONBLOCK` and classified
//! by `fstat` of what was opened, so it is copied as what it is when opened, never followed, never
//! waited on.

use std::ffi::OsString;
use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::{fstat, Mode, SFlag};

use crate::openat2::openat2_retrying;

/// One entry of a host folder, as it was when opened.
pub enum HostEntry {
    /// A folder: its permission bits and a descriptor to list it by.
    Dir { mode: u32, dir: OwnedFd },
    /// A regular file, open for reading: its permission bits.
    File { mode: u32, file: File },
    /// A symbolic link: its target, read without following it.
    Link(PathBuf),
    /// Anything else (a FIFO, a socket, a device): never opened for content.
    Other,
}

/// Opens the host folder `path` for a walk (following links on the way: the path is the
/// caller's, not the folder's contents).
pub fn open_host_dir(path: &Path) -> std::io::Result<OwnedFd> {
    Ok(nix::fcntl::open(
        path,
        OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?)
}

/// The names in the folder `dir` (without `.` and `..`).
pub fn host_dir_names(dir: BorrowedFd<'_>) -> std::io::Result<Vec<OsString>> {
    let listing = nix::dir::Dir::from_fd(dir.try_clone_to_owned()?)?;
    let mut names = Vec::new();
    for e in listing.into_iter() {
        let e = e?;
        let name = std::ffi::OsStr::from_bytes(e.file_name().to_bytes());
        if name != "." && name != ".." {
            names.push(name.to_os_string());
        }
    }
    Ok(names)
}

/// Opens the entry `name` of the folder `dir` as what it is now. `Ok(None)`: it is gone.
pub fn open_host_entry(dir: BorrowedFd<'_>, name: &Path) -> std::io::Result<Option<HostEntry>> {
    // A link swapped for something else between the open and the read of its target is opened
    // again; an entry that keeps changing is said to have changed.
    for _ in 0..4 {
        match open_once(dir, name) {
            Err(Opening::Changed) => continue,
            Err(Opening::Failed(e)) => return Err(e),
            Ok(entry) => return Ok(entry),
        }
    }
    Err(changed(name))
}

enum Opening {
    /// A link when opened, no longer one when its target was read.
    Changed,
    Failed(std::io::Error),
}

impl From<Errno> for Opening {
    fn from(e: Errno) -> Self {
        Opening::Failed(e.into())
    }
}

fn open_once(dir: BorrowedFd<'_>, name: &Path) -> Result<Option<HostEntry>, Opening> {
    // One component, beneath `dir`, no link followed anywhere; a FIFO opens without a writer.
    let how = OpenHow::new()
        .flags(
            OFlag::O_RDONLY
                | OFlag::O_NONBLOCK
                | OFlag::O_NOCTTY
                | OFlag::O_NOFOLLOW
                | OFlag::O_CLOEXEC,
        )
        .resolve(
            ResolveFlag::RESOLVE_BENEATH
                | ResolveFlag::RESOLVE_NO_SYMLINKS
                | ResolveFlag::RESOLVE_NO_MAGICLINKS,
        );
    let fd = match openat2_retrying(dir, name, how) {
        Ok(fd) => fd,
        Err(Errno::ENOENT) => return Ok(None),
        // The last component is a link (O_NOFOLLOW), or a link was met (RESOLVE_NO_SYMLINKS).
        Err(Errno::ELOOP) => {
            return match nix::fcntl::readlinkat(dir, name) {
                Ok(target) => Ok(Some(HostEntry::Link(PathBuf::from(target)))),
                Err(Errno::ENOENT) => Ok(None),
                // No longer a link (swapped meanwhile): opened again, never guessed at.
                Err(Errno::EINVAL) => Err(Opening::Changed),
                Err(e) => Err(e.into()),
            };
        }
        // A socket cannot be opened; a device may refuse: neither is copied.
        Err(Errno::ENXIO) | Err(Errno::ENODEV) | Err(Errno::EACCES) | Err(Errno::EPERM) => {
            return Ok(Some(HostEntry::Other))
        }
        Err(e) => return Err(e.into()),
    };
    let st = fstat(&fd)?;
    let mode = st.st_mode & 0o7777;
    Ok(Some(
        match SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT {
            SFlag::S_IFDIR => HostEntry::Dir { mode, dir: fd },
            SFlag::S_IFREG => {
                // Reads block as usual (O_NONBLOCK was for opening a FIFO).
                let file = File::from(fd);
                nix::fcntl::fcntl(file.as_fd(), nix::fcntl::FcntlArg::F_SETFL(OFlag::empty()))?;
                HostEntry::File { mode, file }
            }
            _ => HostEntry::Other,
        },
    ))
}

fn changed(name: &Path) -> std::io::Error {
    std::io::Error::other(format!(
        "{} changed while it was being copied",
        name.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(dir: &Path, name: &str) -> Option<HostEntry> {
        let d = open_host_dir(dir).unwrap();
        open_host_entry(d.as_fd(), Path::new(name)).unwrap()
    }

    #[test]
    fn entries_are_what_they_are_when_opened_and_links_are_never_followed() {
        let t = tempfile::tempdir().unwrap();
        let secret = t.path().join("secret");
        std::fs::write(&secret, "host only").unwrap();
        let sub = t.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        std::fs::write(sub.join("f"), "mine").unwrap();
        std::os::unix::fs::symlink(&secret, sub.join("link")).unwrap();
        std::os::unix::fs::symlink(t.path(), sub.join("dirlink")).unwrap();
        nix::unistd::mkfifo(&sub.join("fifo"), Mode::from_bits_truncate(0o644)).unwrap();

        let mut names = host_dir_names(open_host_dir(&sub).unwrap().as_fd()).unwrap();
        names.sort();
        assert_eq!(names, ["dirlink", "f", "fifo", "link"]);
        match open(&sub, "f") {
            Some(HostEntry::File { mut file, mode }) => {
                let mut s = String::new();
                std::io::Read::read_to_string(&mut file, &mut s).unwrap();
                assert_eq!((s.as_str(), mode & 0o777 != 0), ("mine", true));
            }
            _ => panic!("f is a file"),
        }
        assert!(matches!(open(&sub, "link"), Some(HostEntry::Link(p)) if p == secret));
        assert!(matches!(open(&sub, "dirlink"), Some(HostEntry::Link(p)) if p == t.path()));
        // Opened without waiting for a writer, and not copied.
        assert!(matches!(open(&sub, "fifo"), Some(HostEntry::Other)));
        assert!(matches!(open(t.path(), "sub"), Some(HostEntry::Dir { .. })));
        assert!(open(&sub, "gone").is_none());
    }
}
