//! A `copy` step: a file or folder of the build file's folder, written into a folder of changes
//! (the same shape as a run step's overlayfs upper folder), which then becomes a layer.
//!
//! The source is hostile-ish (a course's repository): it is opened beneath the build folder with
//! `openat2(RESOLVE_BENEATH)`, so `..` or a symlink that leaves the folder is refused (one that
//! stays inside is followed); inside a copied folder nothing is followed — symlinks are copied as links, devices and sockets refused.
//! Copied entries are owned by root, keep their permission bits, and get one fixed mtime
//! ([`COPY_MTIME`]), so the same content always gives the same layer.
//!
//! `dst` is a path in the image: a folder source fills the folder `dst`; a file source becomes
//! `dst`, or goes into it when `dst` ends in `/` or is a folder of the image. Folders created on the
//! way take the image's own mode and owner when the image has them (a copy into `/tmp/x` must not
//! turn `/tmp` into 0755); a path through a symlink of the image is refused (name the real folder).

use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use corral_sandbox::openat2_retrying;
use nix::errno::Errno;
use nix::fcntl::{openat2, AtFlags, OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::{fstatat, FileStat, SFlag};
use sha2::{Digest as _, Sha256};

use crate::digest::Digest;

/// The mtime of every copied file: 2000-01-01 UTC. Fixed so a copy is reproducible; not 0, since
/// zip (Python wheels) cannot store times before 1980.
pub const COPY_MTIME: u64 = 946_684_800;

/// A copied entry, relative to the source (empty: the source itself).
#[derive(Debug)]
struct Item {
    rel: PathBuf,
    kind: ItemKind,
    mode: u32,
}

#[derive(Debug)]
enum ItemKind {
    Dir,
    File { size: u64 },
    Symlink(OsString),
}

/// A source opened beneath the build folder, listed (sorted) but not yet read.
pub struct Source {
    /// The source itself (a folder or a file), opened without following a final link.
    root: OwnedFd,
    items: Vec<Item>,
    name: OsString,
}

fn is(st: &FileStat, kind: SFlag) -> bool {
    SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == kind
}

fn os_err(what: &str, e: Errno) -> String {
    format!("{what}: {e}")
}

impl Source {
    /// Opens `src` beneath `dir` and lists it. Errors are messages for the step.
    pub fn open(dir: &Path, src: &str) -> Result<Source, String> {
        let base = std::fs::File::open(dir)
            .map_err(|e| format!("cannot open the build folder {}: {e}", dir.display()))?;
        let how = OpenHow::new()
            .flags(OFlag::O_PATH | OFlag::O_CLOEXEC)
            .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_MAGICLINKS);
        let root = openat2_retrying(base.as_fd(), src, how).map_err(|e| match e {
            Errno::EXDEV => {
                format!("src {src:?} leaves the build file's folder (through '..' or a symlink)")
            }
            Errno::ENOENT => format!(
                "src {src:?} is not in the build file's folder {}",
                dir.display()
            ),
            Errno::ELOOP => format!("src {src:?}: too many symlinks"),
            e => format!("src {src:?}: {e}"),
        })?;
        let st = fstatat(root.as_fd(), "", AtFlags::AT_EMPTY_PATH).map_err(|e| os_err("src", e))?;
        let name = Path::new(src)
            .components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(n.to_os_string()),
                _ => None,
            })
            .next_back()
            .unwrap_or_default();
        let mut items = Vec::new();
        if is(&st, SFlag::S_IFDIR) {
            items.push(Item {
                rel: PathBuf::new(),
                kind: ItemKind::Dir,
                mode: st.st_mode & 0o777,
            });
            let how = OpenHow::new()
                .flags(OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC)
                .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS);
            let dirfd = openat2(root.as_fd(), ".", how).map_err(|e| os_err("src", e))?;
            list(dirfd, PathBuf::new(), &mut items)?;
        } else if is(&st, SFlag::S_IFREG) {
            items.push(Item {
                rel: PathBuf::new(),
                kind: ItemKind::File {
                    size: st.st_size as u64,
                },
                mode: st.st_mode & 0o777,
            });
        } else {
            return Err(format!("src {src:?} is not a file or a folder"));
        }
        items.sort_by(|a, b| {
            a.rel
                .as_os_str()
                .as_bytes()
                .cmp(b.rel.as_os_str().as_bytes())
        });
        Ok(Source { root, items, name })
    }

    pub fn is_dir(&self) -> bool {
        matches!(self.items.first().map(|i| &i.kind), Some(ItemKind::Dir))
    }

    /// Opens the regular file `rel` of the source for reading, following nothing.
    fn open_file(&self, rel: &Path) -> Result<std::fs::File, String> {
        let how = OpenHow::new()
            .flags(OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC)
            .resolve(
                ResolveFlag::RESOLVE_BENEATH
                    | ResolveFlag::RESOLVE_NO_SYMLINKS
                    | ResolveFlag::RESOLVE_NO_MAGICLINKS,
            );
        let path: &Path = if rel.as_os_str().is_empty() {
            Path::new("")
        } else {
            rel
        };
        let fd = if path.as_os_str().is_empty() {
            // The source is the file itself: reopen its O_PATH descriptor for reading.
            let proc = format!(
                "/proc/self/fd/{}",
                std::os::fd::AsRawFd::as_raw_fd(&self.root)
            );
            return std::fs::File::open(proc).map_err(|e| format!("cannot read src: {e}"));
        } else {
            openat2(self.root.as_fd(), path, how)
                .map_err(|e| os_err(&format!("cannot read {}", rel.display()), e))?
        };
        Ok(std::fs::File::from(fd))
    }

    /// sha256 over the listing and every file's bytes: the copy's part of its step's cache key.
    pub fn digest(&self) -> Result<Digest, String> {
        let mut h = Sha256::new();
        for it in &self.items {
            match &it.kind {
                ItemKind::Dir => h.update(format!("D {:o} ", it.mode)),
                ItemKind::File { size } => {
                    let mut f = self.open_file(&it.rel)?;
                    let mut fh = Sha256::new();
                    let n = std::io::copy(&mut (&mut f).take(*size), &mut fh)
                        .map_err(|e| format!("cannot read {}: {e}", it.rel.display()))?;
                    if n != *size {
                        return Err(format!("{} changed while it was read", it.rel.display()));
                    }
                    h.update(format!(
                        "F {:o} {size} {} ",
                        it.mode,
                        hex::encode(fh.finalize())
                    ));
                }
                ItemKind::Symlink(t) => {
                    h.update(b"L ");
                    h.update(t.as_bytes());
                    h.update(b" ");
                }
            }
            h.update(it.rel.as_os_str().as_bytes());
            h.update(b"\0");
        }
        Ok(Digest::from_hex(&hex::encode(h.finalize())).expect("sha256 hex"))
    }

    /// Writes the source into the changes folder `upper` at `dst` of the image whose layer
    /// folders are `lower_dirs` (top first).
    pub fn write(&self, upper: &Path, dst: &str, lower_dirs: &[PathBuf]) -> Result<(), String> {
        let dst_path = Path::new(dst);
        let in_image = image_entry(lower_dirs, dst_path)?;
        let target: PathBuf = if self.is_dir() {
            dst_path.to_path_buf()
        } else if dst.ends_with('/') || matches!(in_image, ImageEntry::Dir(_)) {
            dst_path.join(&self.name)
        } else {
            dst_path.to_path_buf()
        };
        let rel_target: PathBuf = target
            .components()
            .filter(|c| matches!(c, Component::Normal(_)))
            .collect();
        // The folders on the way, with the image's own mode and owner.
        let mut cur = PathBuf::from("/");
        let comps: Vec<_> = rel_target.components().collect();
        for c in &comps[..comps.len().saturating_sub(1)] {
            cur.push(c);
            let (mode, uid, gid) = match image_entry(lower_dirs, &cur)? {
                ImageEntry::Dir(m) => m,
                ImageEntry::Absent => (0o755, 0, 0),
                ImageEntry::Other => {
                    return Err(format!(
                        "dst {dst:?}: {} is not a folder in the image (a symlink? name the real folder)",
                        cur.display()
                    ))
                }
            };
            make_dir(
                &upper.join(cur.strip_prefix("/").expect("absolute")),
                mode,
                uid,
                gid,
            )?;
        }
        for it in &self.items {
            let out = if it.rel.as_os_str().is_empty() {
                upper.join(&rel_target)
            } else {
                upper.join(&rel_target).join(&it.rel)
            };
            match &it.kind {
                ItemKind::Dir => make_dir(&out, it.mode, 0, 0)?,
                ItemKind::File { size } => {
                    let mut f = self.open_file(&it.rel)?;
                    let mut o = std::fs::OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .mode(0o600)
                        .custom_flags(libc::O_NOFOLLOW)
                        .open(&out)
                        .map_err(|e| format!("cannot write {}: {e}", out.display()))?;
                    let n = std::io::copy(&mut (&mut f).take(*size), &mut o)
                        .map_err(|e| format!("cannot copy {}: {e}", it.rel.display()))?;
                    if n != *size {
                        return Err(format!("{} changed while it was copied", it.rel.display()));
                    }
                    o.flush().map_err(|e| format!("{}: {e}", out.display()))?;
                    o.set_permissions(std::fs::Permissions::from_mode(it.mode))
                        .map_err(|e| format!("{}: {e}", out.display()))?;
                    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(COPY_MTIME);
                    o.set_modified(t)
                        .map_err(|e| format!("{}: {e}", out.display()))?;
                }
                ItemKind::Symlink(t) => std::os::unix::fs::symlink(t, &out)
                    .map_err(|e| format!("cannot write {}: {e}", out.display()))?,
            }
        }
        Ok(())
    }
}

/// Lists the folder `dir` (relative path `rel` in the source) into `items`, following nothing.
fn list(dir: OwnedFd, rel: PathBuf, items: &mut Vec<Item>) -> Result<(), String> {
    let mut d = nix::dir::Dir::from_fd(dir).map_err(|e| os_err("cannot list src", e))?;
    let mut subdirs = Vec::new();
    let fd = d.as_fd().try_clone_to_owned().map_err(|e| format!("{e}"))?;
    for e in d.iter() {
        let e = e.map_err(|e| os_err("cannot list src", e))?;
        let name = OsStr::from_bytes(e.file_name().to_bytes()).to_os_string();
        if name == "." || name == ".." {
            continue;
        }
        let child = rel.join(&name);
        let st = fstatat(fd.as_fd(), name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW)
            .map_err(|e| os_err(&format!("cannot inspect {}", child.display()), e))?;
        let mode = st.st_mode & 0o777;
        let kind = if is(&st, SFlag::S_IFDIR) {
            subdirs.push((name, child.clone()));
            ItemKind::Dir
        } else if is(&st, SFlag::S_IFREG) {
            ItemKind::File {
                size: st.st_size as u64,
            }
        } else if is(&st, SFlag::S_IFLNK) {
            let t = nix::fcntl::readlinkat(fd.as_fd(), name.as_os_str())
                .map_err(|e| os_err(&format!("cannot read link {}", child.display()), e))?;
            ItemKind::Symlink(t)
        } else {
            return Err(format!(
                "{} is not a file, folder or symlink (devices, fifos and sockets are not copied)",
                child.display()
            ));
        };
        items.push(Item {
            rel: child,
            kind,
            mode,
        });
        if items.len() > 500_000 {
            return Err("more than 500000 entries to copy".into());
        }
    }
    for (name, child) in subdirs {
        let sub = open_subdir(fd.as_fd(), &name)
            .map_err(|e| os_err(&format!("cannot open {}", child.display()), e))?;
        list(sub, child, items)?;
    }
    Ok(())
}

fn open_subdir(at: BorrowedFd<'_>, name: &OsStr) -> nix::Result<OwnedFd> {
    let how = OpenHow::new()
        .flags(OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS);
    openat2(at, name, how)
}

fn make_dir(path: &Path, mode: u32, uid: u32, gid: u32) -> Result<(), String> {
    match std::fs::DirBuilder::new().mode(0o700).create(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && path.is_dir() => {}
        Err(e) => return Err(format!("cannot create {}: {e}", path.display())),
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    std::os::unix::fs::lchown(path, Some(uid), Some(gid))
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// What a path is in the merged image.
enum ImageEntry {
    Absent,
    /// A folder: mode, uid, gid (of the topmost layer that has it).
    Dir((u32, u32, u32)),
    /// A file, symlink or anything else.
    Other,
}

/// Looks `path` up through the layer folders (top first) with overlayfs's rules: a 0/0 character
/// device hides what is below; an opaque folder hides the lower layers' folder of that name.
fn image_entry(lower_dirs: &[PathBuf], path: &Path) -> Result<ImageEntry, String> {
    // The layers whose folder at the current depth is visible, top first.
    let mut visible: Vec<&PathBuf> = lower_dirs.iter().collect();
    let mut cur = PathBuf::new();
    let comps: Vec<_> = path
        .components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .collect();
    let mut found = ImageEntry::Dir((0o755, 0, 0));
    for (i, c) in comps.iter().enumerate() {
        cur.push(c);
        let mut next = Vec::new();
        let mut top: Option<std::fs::Metadata> = None;
        for layer in &visible {
            let p = layer.join(&cur);
            let Ok(m) = std::fs::symlink_metadata(&p) else {
                continue;
            };
            let whiteout = m.file_type().is_char_device() && m.rdev() == 0;
            if whiteout {
                break;
            }
            if !m.is_dir() {
                if top.is_none() {
                    top = Some(m);
                }
                break;
            }
            let opaque = crate::changes::is_opaque(&p);
            if top.is_none() {
                top = Some(m);
            }
            next.push(*layer);
            if opaque {
                break;
            }
        }
        found = match &top {
            None => ImageEntry::Absent,
            Some(m) if m.is_dir() => ImageEntry::Dir((m.mode() & 0o7777, m.uid(), m.gid())),
            Some(_) => ImageEntry::Other,
        };
        if i + 1 < comps.len() && !matches!(found, ImageEntry::Dir(_)) {
            return Ok(match found {
                ImageEntry::Other => ImageEntry::Other,
                _ => ImageEntry::Absent,
            });
        }
        visible = next;
    }
    Ok(found)
}
