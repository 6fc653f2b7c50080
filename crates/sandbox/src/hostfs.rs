//! Host-side file work on a sandbox's working directory, done so that nothing the program planted
//! (symlinks, hardlinks, FIFOs, devices, `..`) can make the host read or write elsewhere.
//!
//! Every lookup goes through `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS
//! | RESOLVE_NO_XDEV)` relative to a directory descriptor, names come one component at a time from
//! `readdir`, and only regular files with one link and directories are ever opened for content.
//! This is the class of bug behind the Judge0 escapes (CVE-2024-28185/28189) and go-judge #176.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use nix::fcntl::{openat2, OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::{fstat, mkdirat, Mode, SFlag};
use nix::unistd::{fchownat, FchownatFlags, Gid, Uid};

use crate::error::SandboxError;
use crate::host_tree::{host_dir_names, open_host_dir, open_host_entry, HostEntry};
use crate::openat2::openat2_retrying;

fn resolve() -> ResolveFlag {
    ResolveFlag::RESOLVE_BENEATH
        | ResolveFlag::RESOLVE_NO_SYMLINKS
        | ResolveFlag::RESOLVE_NO_MAGICLINKS
        | ResolveFlag::RESOLVE_NO_XDEV
}

/// Opens `name` (one path component) beneath `dir` without following anything.
fn open_beneath(
    dir: BorrowedFd<'_>,
    name: &Path,
    flags: OFlag,
    mode: Mode,
) -> nix::Result<OwnedFd> {
    openat2(
        dir,
        name,
        OpenHow::new()
            .flags(flags | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW)
            .mode(mode)
            .resolve(resolve()),
    )
}

fn pathio(path: &Path, why: impl std::fmt::Display) -> SandboxError {
    SandboxError::Path {
        path: path.to_path_buf(),
        why: why.to_string(),
    }
}

/// Copies the contents of the host folder `src` into the sandbox directory `dst`, owned by the
/// sandbox user. Files keep their permission bits minus setuid/setgid; symlinks are copied as
/// symlinks (they resolve inside the sandbox); other special files are skipped. Whatever already
/// sits at a name is replaced — removed without being followed, never written through — so
/// assignment files can be layered over a submission. A copy that does not fit the sandbox's disk
/// limit fails with [`SandboxError::NoSpace`]. The source is read by descriptor
/// ([`crate::host_tree`]): an entry swapped for a link or a FIFO while the copy runs is copied as
/// that link, or skipped, never followed or waited on.
pub fn copy_in(src: &Path, dst: BorrowedFd<'_>, uid: u32, gid: u32) -> Result<(), SandboxError> {
    let meta = std::fs::metadata(src).map_err(|e| pathio(src, e))?;
    if !meta.is_dir() {
        return Err(pathio(src, "not a directory"));
    }
    let from = open_host_dir(src).map_err(|e| pathio(src, e))?;
    let dst = open_beneath(
        dst,
        Path::new("."),
        OFlag::O_DIRECTORY | OFlag::O_RDONLY,
        Mode::empty(),
    )
    .map_err(|e| pathio(src, format!("opening the working directory: {e}")))?;
    copy_in_dir(from.as_fd(), src, dst.as_fd(), uid, gid, 0)
}

/// An error writing into the sandbox: running out of room is the copied files' fault, not ours.
fn write_err(path: &Path, e: impl Into<std::io::Error>) -> SandboxError {
    let e: std::io::Error = e.into();
    match e.raw_os_error() {
        Some(libc::ENOSPC) | Some(libc::EDQUOT) | Some(libc::EFBIG) => SandboxError::NoSpace {
            path: path.to_path_buf(),
        },
        _ => pathio(path, e),
    }
}

/// `src` is the host folder open as `from` (named in errors).
fn copy_in_dir(
    from: BorrowedFd<'_>,
    src: &Path,
    dst: BorrowedFd<'_>,
    uid: u32,
    gid: u32,
    depth: usize,
) -> Result<(), SandboxError> {
    if depth > 64 {
        return Err(pathio(src, "folders nested more than 64 deep"));
    }
    let owner = (Some(Uid::from_raw(uid)), Some(Gid::from_raw(gid)));
    for name in host_dir_names(from).map_err(|e| pathio(src, e))? {
        let path = src.join(&name);
        let name = Path::new(&name);
        let Some(entry) = open_host_entry(from, name).map_err(|e| pathio(&path, e))? else {
            continue;
        };
        match entry {
            HostEntry::Dir { mode, dir } => {
                // An existing real folder is merged into; anything else there is replaced.
                let sub = match open_beneath(
                    dst,
                    name,
                    OFlag::O_DIRECTORY | OFlag::O_RDONLY,
                    Mode::empty(),
                ) {
                    Ok(sub) => sub,
                    Err(_) => {
                        remove_beneath(dst, name, 0).map_err(|e| pathio(&path, e))?;
                        mkdirat(dst, name, Mode::from_bits_truncate((mode & 0o777) | 0o700))
                            .map_err(|e| write_err(&path, e))?;
                        open_beneath(
                            dst,
                            name,
                            OFlag::O_DIRECTORY | OFlag::O_RDONLY,
                            Mode::empty(),
                        )
                        .map_err(|e| pathio(&path, e))?
                    }
                };
                nix::unistd::fchown(&sub, owner.0, owner.1).map_err(|e| pathio(&path, e))?;
                copy_in_dir(dir.as_fd(), &path, sub.as_fd(), uid, gid, depth + 1)?;
            }
            HostEntry::Link(target) => {
                remove_beneath(dst, name, 0).map_err(|e| pathio(&path, e))?;
                nix::unistd::symlinkat(&target, dst, name).map_err(|e| write_err(&path, e))?;
                fchownat(
                    dst,
                    name,
                    owner.0,
                    owner.1,
                    FchownatFlags::AT_SYMLINK_NOFOLLOW,
                )
                .map_err(|e| pathio(&path, e))?;
            }
            HostEntry::File { mode, mut file } => {
                // Make sure no setuid/setgid bit survives. The owner (the sandbox's user) may
                // always read its copy: a file an unzip left at mode 000 is the student's work
                // all the same, and its owner could chmod it anyway.
                let mode = (mode & 0o777) | 0o400;
                remove_beneath(dst, name, 0).map_err(|e| pathio(&path, e))?;
                let to = open_beneath(
                    dst,
                    name,
                    OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL,
                    Mode::from_bits_truncate(mode),
                )
                .map_err(|e| write_err(&path, e))?;
                nix::unistd::fchown(&to, owner.0, owner.1).map_err(|e| pathio(&path, e))?;
                let mut to = File::from(to);
                std::io::copy(&mut file, &mut to).map_err(|e| write_err(&path, e))?;
                to.set_permissions(std::fs::Permissions::from_mode(mode))
                    .map_err(|e| pathio(&path, e))?;
            }
            // FIFOs, sockets and devices of the source are not copied.
            HostEntry::Other => {}
        }
    }
    Ok(())
}

/// Removes everything in the folder `dir` (never following a link): how a working directory that
/// cannot be replaced by a fresh mount (gVisor's, shared from the host) is emptied between users.
pub(crate) fn empty_dir(dir: BorrowedFd<'_>) -> std::io::Result<()> {
    empty_beneath(dir, 0)
}

/// Removes every entry of the folder `dir`, `depth` folders below where the removal started.
fn empty_beneath(dir: BorrowedFd<'_>, depth: usize) -> std::io::Result<()> {
    let listing = open_beneath(
        dir,
        Path::new("."),
        OFlag::O_DIRECTORY | OFlag::O_RDONLY,
        Mode::empty(),
    )?;
    let names: Vec<std::ffi::OsString> = nix::dir::Dir::from_fd(listing)?
        .iter()
        .filter_map(|e| e.ok())
        .map(|e| std::ffi::OsStr::from_bytes(e.file_name().to_bytes()).to_os_string())
        .filter(|n| n != "." && n != "..")
        .collect();
    for n in names {
        remove_beneath(dir, Path::new(&n), depth)?;
    }
    Ok(())
}

/// Removes `name` beneath `dir` if it exists — a file or link is unlinked (never followed), a
/// folder emptied the same way and removed.
fn remove_beneath(dir: BorrowedFd<'_>, name: &Path, depth: usize) -> std::io::Result<()> {
    use nix::unistd::{unlinkat, UnlinkatFlags};
    match unlinkat(dir, name, UnlinkatFlags::NoRemoveDir) {
        Ok(()) => return Ok(()),
        Err(nix::errno::Errno::ENOENT) => return Ok(()),
        Err(nix::errno::Errno::EISDIR) if depth < 64 => {}
        Err(e) => return Err(e.into()),
    }
    let sub = open_beneath(
        dir,
        name,
        OFlag::O_DIRECTORY | OFlag::O_RDONLY,
        Mode::empty(),
    )?;
    empty_beneath(sub.as_fd(), depth + 1)?;
    unlinkat(dir, name, UnlinkatFlags::RemoveDir)?;
    Ok(())
}

/// Copies the sandbox directory `src` to the host folder `dst` (created if missing). Returns the
/// relative paths that were skipped because they were not plain files or folders.
pub fn copy_out(
    src: BorrowedFd<'_>,
    dst: &Path,
    max_bytes: u64,
) -> Result<Vec<String>, SandboxError> {
    std::fs::create_dir_all(dst).map_err(|e| pathio(dst, e))?;
    let dst_fd = nix::fcntl::open(
        dst,
        OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| pathio(dst, e))?;
    let src = open_beneath(
        src,
        Path::new("."),
        OFlag::O_DIRECTORY | OFlag::O_RDONLY,
        Mode::empty(),
    )
    .map_err(|e| pathio(dst, format!("opening the working directory: {e}")))?;
    let mut skipped = Vec::new();
    let mut budget = max_bytes;
    copy_out_dir(src, dst_fd.as_fd(), "", &mut skipped, &mut budget, 0)?;
    Ok(skipped)
}

fn copy_out_dir(
    src: OwnedFd,
    dst: BorrowedFd<'_>,
    prefix: &str,
    skipped: &mut Vec<String>,
    budget: &mut u64,
    depth: usize,
) -> Result<(), SandboxError> {
    let dir_fd = src.try_clone().map_err(|e| SandboxError::io("dup", e))?;
    let mut dir = nix::dir::Dir::from_fd(dir_fd)
        .map_err(|e| SandboxError::io("reading the working directory", e.into()))?;
    let names: Vec<std::ffi::OsString> = dir
        .iter()
        .filter_map(|e| e.ok())
        .map(|e| std::ffi::OsStr::from_bytes(e.file_name().to_bytes()).to_os_string())
        .filter(|n| n != "." && n != "..")
        .collect();
    for name in names {
        let rel = format!("{prefix}{}", name.to_string_lossy());
        let name = Path::new(&name);
        // O_NONBLOCK: opening a FIFO must not wait for a writer; O_NOCTTY: never adopt a terminal.
        let fd = match open_beneath(
            src.as_fd(),
            name,
            OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_NOCTTY,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(_) => {
                skipped.push(rel);
                continue;
            }
        };
        let st = fstat(&fd).map_err(|e| SandboxError::io(format!("stat {rel}"), e.into()))?;
        let kind = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
        if kind == SFlag::S_IFDIR && depth < 64 {
            let _ = mkdirat(dst, name, Mode::from_bits_truncate(0o755));
            let sub_dst = open_beneath(
                dst,
                name,
                OFlag::O_DIRECTORY | OFlag::O_RDONLY,
                Mode::empty(),
            )
            .map_err(|e| SandboxError::io(format!("creating {rel}"), e.into()))?;
            copy_out_dir(
                fd,
                sub_dst.as_fd(),
                &format!("{rel}/"),
                skipped,
                budget,
                depth + 1,
            )?;
        } else if kind == SFlag::S_IFREG && st.st_nlink == 1 && (st.st_size as u64) <= *budget {
            *budget -= st.st_size as u64;
            let mode = Mode::from_bits_truncate(st.st_mode & 0o755);
            let out = open_beneath(
                dst,
                name,
                OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_TRUNC,
                mode,
            )
            .map_err(|e| SandboxError::io(format!("creating {rel}"), e.into()))?;
            let mut from = File::from(fd).take(st.st_size as u64);
            let mut to = File::from(out);
            std::io::copy(&mut from, &mut to)
                .map_err(|e| SandboxError::io(format!("copying {rel}"), e))?;
            to.flush()
                .map_err(|e| SandboxError::io(format!("copying {rel}"), e))?;
        } else {
            skipped.push(rel);
        }
    }
    Ok(())
}

/// Reads the regular file at `rel` (relative, no `..`) beneath `dir`: `Ok(None)` when it does not
/// exist or is anything but a plain file with one link; at most `max` bytes.
pub fn read_file(
    dir: BorrowedFd<'_>,
    rel: &Path,
    max: u64,
) -> Result<Option<Vec<u8>>, SandboxError> {
    if rel.is_absolute()
        || rel
            .components()
            .any(|c| !matches!(c, std::path::Component::Normal(_)))
    {
        return Err(pathio(rel, "must be a relative path without '..'"));
    }
    let fd = match open_beneath(
        dir,
        rel,
        OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_NOCTTY,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(_) => return Ok(None),
    };
    let st =
        fstat(&fd).map_err(|e| SandboxError::io(format!("stat {}", rel.display()), e.into()))?;
    let kind = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
    if kind != SFlag::S_IFREG || st.st_nlink != 1 {
        return Ok(None);
    }
    let mut data = Vec::new();
    File::from(fd)
        .take(max)
        .read_to_end(&mut data)
        .map_err(|e| SandboxError::io(format!("reading {}", rel.display()), e))?;
    Ok(Some(data))
}

/// Whether `rel` exists beneath `dir` as a program in the sandbox would find it (check50's
/// `exists`): links are followed while they stay beneath `dir`, so a dangling link, or one in a
/// loop, is not there, and a linked folder is looked into. A link whose target leaves `dir` (an
/// absolute one, say to `/usr/bin/python3`) names something of the sandbox's system, which the
/// host never resolves: as the last component it counts as itself; elsewhere in the path, the
/// path is not there.
pub fn exists(dir: BorrowedFd<'_>, rel: &Path) -> bool {
    if rel.is_absolute()
        || rel
            .components()
            .any(|c| !matches!(c, std::path::Component::Normal(_)))
    {
        return false;
    }
    // O_PATH opens nothing's contents: a FIFO or device is only looked up, never opened.
    let followed = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_CLOEXEC)
        .resolve(
            ResolveFlag::RESOLVE_BENEATH
                | ResolveFlag::RESOLVE_NO_MAGICLINKS
                | ResolveFlag::RESOLVE_NO_XDEV,
        );
    match openat2_retrying(dir, rel, followed) {
        Ok(_) => true,
        // The resolution would have left `dir` (or crossed a mount): the last component alone.
        Err(nix::errno::Errno::EXDEV) => {
            let itself = OpenHow::new()
                .flags(OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC)
                .resolve(resolve());
            openat2(dir, rel, itself).is_ok()
        }
        Err(_) => false,
    }
}

/// Bytes used on the filesystem holding `dir` (the working directory's tmpfs).
pub fn used_bytes(dir: BorrowedFd<'_>) -> u64 {
    match nix::sys::statfs::fstatfs(dir) {
        Ok(s) => (s.blocks().saturating_sub(s.blocks_free())) * s.block_size() as u64,
        Err(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn exists_follows_links_only_while_they_stay_beneath_the_folder() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("work");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(root.join("file.txt"), "x").unwrap();
        std::fs::write(root.join("sub/inner.txt"), "x").unwrap();
        std::fs::write(t.path().join("outside.txt"), "x").unwrap();
        symlink("file.txt", root.join("good")).unwrap();
        symlink("nowhere", root.join("dangling")).unwrap();
        symlink("loop", root.join("loop")).unwrap();
        symlink("sub", root.join("linked_dir")).unwrap();
        symlink("/usr/bin/env", root.join("absolute")).unwrap();
        symlink("/nowhere/at/all", root.join("absolute_dangling")).unwrap();
        symlink("../outside.txt", root.join("escapes")).unwrap();
        symlink("..", root.join("up")).unwrap();
        let dir = File::open(&root).unwrap();
        let has = |p: &str| exists(dir.as_fd(), Path::new(p));

        assert!(has("file.txt") && has("sub") && has("sub/inner.txt"));
        assert!(has("good"), "a link to a file beside it");
        assert!(has("linked_dir/inner.txt"), "a file in a linked folder");
        assert!(!has("dangling"), "a dangling link is not there");
        assert!(!has("loop"), "a link to itself is not there");
        assert!(!has("missing.txt") && !has("sub/missing.txt"));
        // Out of the folder the host judges nothing: a last-component link counts as itself...
        assert!(has("absolute") && has("absolute_dangling") && has("escapes"));
        // ...and nothing is ever looked up beyond a link that leaves.
        assert!(
            !has("up/outside.txt"),
            "found a file outside through a link"
        );
        assert!(!has("up/work/file.txt"));
        assert!(!has("../outside.txt") && !has("/etc/passwd") && !has("./file.txt"));
        assert!(!has(""), "the folder itself is not a path in it");
    }
}
