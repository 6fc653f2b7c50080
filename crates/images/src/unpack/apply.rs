//! Writes tar entries into a layer folder without ever following a link.
//!
//! Every parent folder is reached one component at a time with `openat2(RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)` from the layer's root descriptor, and the final
//! component is created with `*at` calls that do not follow it (`O_EXCL|O_NOFOLLOW`, `symlinkat`,
//! `mknodat`, `linkat` without `AT_SYMLINK_FOLLOW`). So a symlink in the layer — whatever its
//! target — is only ever created, never traversed: "a link, then a file through it" fails.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

use nix::errno::Errno;
use nix::fcntl::{openat2, OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::{fstatat, mkdirat, mknodat, Mode, SFlag};
use nix::unistd::{fchownat, linkat, symlinkat, unlinkat, Gid, Uid, UnlinkatFlags};

/// Why one entry could not be written (the caller names the entry).
pub type Refusal = String;

fn resolve() -> ResolveFlag {
    ResolveFlag::RESOLVE_BENEATH
        | ResolveFlag::RESOLVE_NO_SYMLINKS
        | ResolveFlag::RESOLVE_NO_MAGICLINKS
}

fn os(b: &[u8]) -> &OsStr {
    OsStr::from_bytes(b)
}

/// The layer folder being filled.
pub struct Tree {
    root: OwnedFd,
    /// Regular files created by this layer (normalised paths): the only valid hardlink targets.
    files: HashSet<Vec<u8>>,
    /// Whiteouts created by this layer (normalised paths): a folder entry that replaces one
    /// must hide the lower layers' folder, so it is made opaque.
    whiteouts: HashSet<Vec<u8>>,
    chown: bool,
}

impl Tree {
    pub fn new(root: OwnedFd) -> Self {
        Tree {
            root,
            files: HashSet::new(),
            whiteouts: HashSet::new(),
            chown: nix::unistd::geteuid().is_root(),
        }
    }

    /// Opens (creating as needed, mode 0755) the folder `comps` beneath the root.
    fn dir(&self, comps: &[&[u8]]) -> Result<OwnedFd, Refusal> {
        let mut cur = self.open_dir(self.root.as_fd(), b".")?;
        for c in comps {
            cur = match self.open_dir(cur.as_fd(), c) {
                Ok(fd) => fd,
                Err(_) => {
                    match mkdirat(cur.as_fd(), os(c), Mode::from_bits_truncate(0o755)) {
                        Ok(()) | Err(Errno::EEXIST) => {}
                        Err(e) => return Err(format!("cannot create parent folder: {e}")),
                    }
                    self.open_dir(cur.as_fd(), c)?
                }
            };
        }
        Ok(cur)
    }

    fn open_dir(&self, at: BorrowedFd<'_>, name: &[u8]) -> Result<OwnedFd, Refusal> {
        let how = OpenHow::new()
            .flags(OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC)
            .resolve(resolve());
        let is_link = || {
            fstatat(at, os(name), nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW).is_ok_and(|st| {
                SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFLNK
            })
        };
        openat2(at, os(name), how).map_err(|e| match e {
            Errno::ELOOP | Errno::ENOTDIR if is_link() => {
                "a parent is a symlink (links are never followed while unpacking)".to_string()
            }
            Errno::ENOTDIR => "a parent is not a folder".to_string(),
            Errno::EXDEV => "the path leaves the layer".to_string(),
            e => format!("cannot open parent folder: {e}"),
        })
    }

    /// Clears `name` in `parent` if this layer already wrote something there (tar may repeat a path).
    /// A folder is kept when `keep_dir` (a folder entry over a folder just updates its mode).
    fn clear(
        &mut self,
        parent: BorrowedFd<'_>,
        name: &[u8],
        path: &[u8],
        keep_dir: bool,
    ) -> Result<bool, Refusal> {
        match fstatat(parent, os(name), nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW) {
            Err(Errno::ENOENT) => Ok(false),
            Err(e) => Err(format!("cannot inspect existing entry: {e}")),
            Ok(st) if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR => {
                if keep_dir {
                    Ok(true)
                } else {
                    Err("replaces a folder written earlier in the same layer".into())
                }
            }
            Ok(_) => {
                unlinkat(parent, os(name), UnlinkatFlags::NoRemoveDir)
                    .map_err(|e| format!("cannot replace: {e}"))?;
                self.files.remove(path);
                Ok(false)
            }
        }
    }

    fn owner(
        &self,
        parent: BorrowedFd<'_>,
        name: &[u8],
        uid: u64,
        gid: u64,
    ) -> Result<(), Refusal> {
        if !self.chown {
            return Ok(());
        }
        let id = |v: u64| u32::try_from(v).ok().filter(|&v| v != u32::MAX);
        let (Some(uid), Some(gid)) = (id(uid), id(gid)) else {
            return Err("owner id out of range".into());
        };
        fchownat(
            parent,
            os(name),
            Some(Uid::from_raw(uid)),
            Some(Gid::from_raw(gid)),
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .map_err(|e| format!("cannot set owner: {e}"))
    }

    /// Opens the parent of `comps` and clears the final name for a new non-folder entry.
    fn replace<'c>(
        &mut self,
        comps: &[&'c [u8]],
        path: &[u8],
        what: &str,
    ) -> Result<(OwnedFd, &'c [u8]), Refusal> {
        let Some((name, parents)) = comps.split_last() else {
            return Err(format!("{what} at the layer root"));
        };
        let parent = self.dir(parents)?;
        self.clear(parent.as_fd(), name, path, false)?;
        Ok((parent, name))
    }

    pub fn mkdir(
        &mut self,
        comps: &[&[u8]],
        path: &[u8],
        mode: u32,
        uid: u64,
        gid: u64,
    ) -> Result<(), Refusal> {
        let Some((name, parents)) = comps.split_last() else {
            // The layer's own root (`./`): overlayfs shows the top layer's root as `/`.
            return self.root_attributes(mode, uid, gid);
        };
        let parent = self.dir(parents)?;
        // `.wh.d` then `d/` in one layer (`rm -r d && mkdir d`): the whiteout applies to the
        // lower layers, so the new folder shows none of their `d`.
        let over_whiteout = self.whiteouts.remove(path);
        if !self.clear(parent.as_fd(), name, path, true)? {
            mkdirat(parent.as_fd(), os(name), Mode::from_bits_truncate(0o700))
                .map_err(|e| format!("cannot create folder: {e}"))?;
        }
        self.owner(parent.as_fd(), name, uid, gid)?;
        let dir = self.open_dir(parent.as_fd(), name)?;
        nix::sys::stat::fchmod(dir.as_fd(), Mode::from_bits_truncate(mode))
            .map_err(|e| format!("cannot set mode: {e}"))?;
        if over_whiteout {
            self.opaque(comps)?;
        }
        Ok(())
    }

    /// Mode (and owner, as root) of the layer's root folder.
    pub fn root_attributes(&self, mode: u32, uid: u64, gid: u64) -> Result<(), Refusal> {
        if self.chown {
            let id = |v: u64| u32::try_from(v).ok().filter(|&v| v != u32::MAX);
            let (Some(uid), Some(gid)) = (id(uid), id(gid)) else {
                return Err("owner id out of range".into());
            };
            nix::unistd::fchown(
                &self.root,
                Some(Uid::from_raw(uid)),
                Some(Gid::from_raw(gid)),
            )
            .map_err(|e| format!("cannot set owner: {e}"))?;
        }
        nix::sys::stat::fchmod(self.root.as_fd(), Mode::from_bits_truncate(mode))
            .map_err(|e| format!("cannot set mode: {e}"))
    }

    /// Creates a regular file from `data`; `budget` is decremented by what was written.
    #[allow(clippy::too_many_arguments)]
    pub fn file(
        &mut self,
        comps: &[&[u8]],
        path: &[u8],
        mode: u32,
        uid: u64,
        gid: u64,
        mtime: i64,
        size: u64,
        data: &mut dyn Read,
        budget: &mut u64,
    ) -> Result<Result<(), io::Error>, Refusal> {
        let (parent, name) = self.replace(comps, path, "a file")?;
        let how = OpenHow::new()
            .flags(
                OFlag::O_CREAT
                    | OFlag::O_EXCL
                    | OFlag::O_WRONLY
                    | OFlag::O_NOFOLLOW
                    | OFlag::O_CLOEXEC,
            )
            .mode(Mode::from_bits_truncate(0o600))
            .resolve(resolve());
        let fd = openat2(parent.as_fd(), os(name), how)
            .map_err(|e| format!("cannot create file: {e}"))?;
        let mut f = std::fs::File::from(fd);
        let mut buf = vec![0u8; 64 << 10];
        let mut written = 0u64;
        loop {
            let n = match data.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Ok(Err(e)),
            };
            if n as u64 > *budget {
                return Err("the layer's unpacked size passes its cap".into());
            }
            *budget -= n as u64;
            written += n as u64;
            f.write_all(&buf[..n])
                .map_err(|e| format!("cannot write: {e}"))?;
        }
        if written != size {
            return Ok(Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "tar stream ends inside a file",
            )));
        }
        self.owner(parent.as_fd(), name, uid, gid)?;
        // After chown (which clears setuid/setgid anyway); those bits are never set: see `mode`.
        nix::sys::stat::fchmod(f.as_fd(), Mode::from_bits_truncate(mode))
            .map_err(|e| format!("cannot set mode: {e}"))?;
        let t = nix::sys::time::TimeSpec::new(mtime, 0);
        let _ = nix::sys::stat::futimens(f.as_fd(), &t, &t);
        self.files.insert(path.to_vec());
        Ok(Ok(()))
    }

    pub fn symlink(
        &mut self,
        comps: &[&[u8]],
        path: &[u8],
        target: &[u8],
        uid: u64,
        gid: u64,
    ) -> Result<(), Refusal> {
        let (parent, name) = self.replace(comps, path, "a symlink")?;
        // Stored as written (absolute targets too): resolved inside the image root at run time.
        symlinkat(os(target), parent.as_fd(), os(name))
            .map_err(|e| format!("cannot create symlink: {e}"))?;
        self.owner(parent.as_fd(), name, uid, gid)
    }

    pub fn hardlink(
        &mut self,
        comps: &[&[u8]],
        path: &[u8],
        target_comps: &[&[u8]],
        target: &[u8],
    ) -> Result<(), Refusal> {
        if !self.files.contains(target) {
            return Err(format!(
                "hardlink to {:?}, which is not a regular file earlier in this layer",
                crate::digest::excerpt(&String::from_utf8_lossy(target))
            ));
        }
        let (tname, tparents) = target_comps
            .split_last()
            .ok_or("hardlink to the layer root")?;
        let (parent, name) = self.replace(comps, path, "a hardlink")?;
        let tparent = self.dir(tparents)?;
        linkat(
            tparent.as_fd(),
            os(tname),
            parent.as_fd(),
            os(name),
            nix::fcntl::AtFlags::empty(),
        )
        .map_err(|e| format!("cannot create hardlink: {e}"))?;
        self.files.insert(path.to_vec());
        Ok(())
    }

    pub fn fifo(
        &mut self,
        comps: &[&[u8]],
        path: &[u8],
        mode: u32,
        uid: u64,
        gid: u64,
    ) -> Result<(), Refusal> {
        let (parent, name) = self.replace(comps, path, "a fifo")?;
        mknodat(
            parent.as_fd(),
            os(name),
            SFlag::S_IFIFO,
            Mode::from_bits_truncate(mode),
            0,
        )
        .map_err(|e| format!("cannot create fifo: {e}"))?;
        self.owner(parent.as_fd(), name, uid, gid)?;
        // mknod's mode passed through the umask; the layer's is the tar's (a FIFO is never a
        // link, so following is no concern).
        nix::sys::stat::fchmodat(
            parent.as_fd(),
            os(name),
            Mode::from_bits_truncate(mode),
            nix::sys::stat::FchmodatFlags::FollowSymlink,
        )
        .map_err(|e| format!("cannot set mode: {e}"))
    }

    /// `.wh.NAME`: overlayfs's whiteout, a 0/0 character device named NAME.
    pub fn whiteout(
        &mut self,
        parent_comps: &[&[u8]],
        name: &[u8],
        path: &[u8],
    ) -> Result<(), Refusal> {
        let parent = self.dir(parent_comps)?;
        self.clear(parent.as_fd(), name, path, false)?;
        mknodat(parent.as_fd(), os(name), SFlag::S_IFCHR, Mode::empty(), 0)
            .map_err(|e| format!("cannot create whiteout: {e}"))?;
        self.whiteouts.insert(path.to_vec());
        Ok(())
    }

    /// `.wh..wh..opq`: overlayfs's opaque folder, marked for both kinds of mount: the
    /// `trusted.overlay.opaque=y` xattr (root's overlay) and `user.overlay.opaque=y` (the
    /// `userxattr` overlay of a rootless sandbox, which reads only `user.*`: without it the
    /// folder would show the lower layers' files there). One of them is enough to unpack: an
    /// unprivileged store cannot write `trusted.*`, and a filesystem may lack user xattrs.
    pub fn opaque(&mut self, parent_comps: &[&[u8]]) -> Result<(), Refusal> {
        let dir = self.dir(parent_comps)?;
        let set = |name: &std::ffi::CStr| {
            // SAFETY: `dir` is an open descriptor; name is a NUL-terminated string and the value
            // a valid 1-byte buffer whose length is passed.
            let rc = unsafe {
                libc::fsetxattr(dir.as_raw_fd(), name.as_ptr(), b"y".as_ptr().cast(), 1, 0)
            };
            if rc == 0 {
                Ok(())
            } else {
                Err(io::Error::last_os_error())
            }
        };
        match (
            set(c"trusted.overlay.opaque"),
            set(c"user.overlay.opaque"),
        ) {
            (Err(t), Err(u)) => Err(format!(
                "cannot mark the folder opaque (trusted.overlay.opaque: {t}; user.overlay.opaque: {u}; use a filesystem with extended attributes such as ext4, xfs or btrfs)"
            )),
            _ => Ok(()),
        }
    }
}
