//! Small, strict file helpers for cgroupfs.
//!
//! cgroupfs is not a normal filesystem: control files exist exactly when the kernel provides them,
//! a write is applied (or rejected) as one unit, and a directory "full" of files can be removed
//! with plain rmdir. These helpers therefore never create files, write each value with a single
//! `write(2)` and treat a short write as an error, and attach the path to every error.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::Error;
use crate::parse::{parse_pids, parse_u64};

/// Reads a whole control file.
pub(crate) fn read(path: &Path) -> Result<String, Error> {
    #[cfg(test)]
    if let Some(source) = crate::testfs::read_fault(path) {
        return Err(Error::Read {
            path: path.to_owned(),
            source,
        });
    }
    std::fs::read_to_string(path).map_err(|source| Error::Read {
        path: path.to_owned(),
        source,
    })
}

/// Reads a file that may legitimately be absent on older kernels.
pub(crate) fn read_optional(path: &Path) -> Result<Option<String>, Error> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(Error::Read {
            path: path.to_owned(),
            source,
        }),
    }
}

/// Writes `value` to an existing control file with one `write(2)`.
///
/// O_TRUNC is what `echo v > file` does; kernfs ignores it, and it keeps the fake trees used in
/// tests honest. There is no O_CREAT: a missing file means the controller is absent, and that must
/// surface as an error rather than as a stray regular file.
pub(crate) fn write(path: &Path, value: &str) -> Result<(), Error> {
    write_once(path, value, || {
        OpenOptions::new()
            .write(true)
            .truncate(true)
            .custom_flags(libc::O_CLOEXEC)
            .open(path)?
            .write(value.as_bytes())
    })
}

/// One write of `value` to the control file `path`, done by `op` (which returns the bytes
/// written): a fault the tests injected comes first, a short write is an error, and every error
/// names the file and the value.
pub(crate) fn write_once(
    path: &Path,
    value: &str,
    op: impl FnOnce() -> io::Result<usize>,
) -> Result<(), Error> {
    let err = |source| Error::Write {
        path: path.to_owned(),
        value: value.to_owned(),
        source,
    };
    #[cfg(test)]
    if let Some(e) = crate::testfs::write_fault(path, value) {
        return Err(err(e));
    }
    let n = op().map_err(err)?;
    if n != value.len() {
        return Err(err(io::Error::new(
            io::ErrorKind::WriteZero,
            format!("short write: {n} of {} bytes", value.len()),
        )));
    }
    Ok(())
}

/// Opens an existing control file read-write, writes `value` with one `write(2)` and returns the
/// still open file: for knobs whose effect is local to the open file (v2 `memory.peak`'s reset,
/// Linux 6.12+), read back later through the same fd with [`pread_u64`].
pub(crate) fn open_and_write(path: &Path, value: &str) -> Result<File, Error> {
    let mut opened = None;
    write_once(path, value, || {
        let f = opened.insert(
            OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(libc::O_CLOEXEC)
                .open(path)?,
        );
        #[cfg(test)]
        if let Some(result) = crate::testfs::fd_local_write(path, f, value) {
            return result.map(|()| value.len());
        }
        f.write(value.as_bytes())
    })?;
    Ok(opened.expect("write_once ran the write"))
}

/// Reads a single unsigned integer from offset 0 of an open control file (`pread`, so the file
/// position does not matter and the kernel regenerates the content on every call). `path` is for
/// error messages only.
pub(crate) fn pread_u64(file: &File, path: &Path) -> Result<u64, Error> {
    let mut buf = [0u8; 64];
    let mut len = 0;
    loop {
        if len == buf.len() {
            return Err(Error::Parse {
                path: path.to_owned(),
                reason: "longer than 64 bytes".to_owned(),
            });
        }
        let n = file
            .read_at(&mut buf[len..], len as u64)
            .map_err(|source| Error::Read {
                path: path.to_owned(),
                source,
            })?;
        if n == 0 {
            break;
        }
        len += n;
    }
    parse_u64(path, &String::from_utf8_lossy(&buf[..len]))
}

/// Opens a cgroup's join file (`cgroup.procs`, v1 `tasks`) write-only and close-on-exec, for a
/// child to join by writing "0".
pub(crate) fn open_join_file(path: &Path) -> Result<OwnedFd, Error> {
    let path = path.to_path_buf();
    OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_CLOEXEC)
        .open(&path)
        .map(OwnedFd::from)
        .map_err(|source| Error::Open { path, source })
}

/// Opens a cgroup's directory `O_PATH` and close-on-exec: a handle for `clone3`'s
/// `CLONE_INTO_CGROUP`, which reads or writes nothing through it.
pub(crate) fn open_dir_path(path: &Path) -> Result<OwnedFd, Error> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(path)
        .map(OwnedFd::from)
        .map_err(|source| Error::Open {
            path: path.to_path_buf(),
            source,
        })
}

/// Creates one cgroup directory (mode 0755). EEXIST is returned as an error; callers decide.
pub(crate) fn mkdir(path: &Path) -> Result<(), Error> {
    DirBuilder::new()
        .mode(0o755)
        .create(path)
        .map_err(|source| Error::Mkdir {
            path: path.to_owned(),
            source,
        })?;
    #[cfg(test)]
    crate::testfs::after_mkdir(path);
    Ok(())
}

/// `mkdir -p` that stops at `floor` (which must exist, e.g. the mount point). Returns whether the
/// final directory was created by this call.
pub(crate) fn mkdir_p(floor: &Path, path: &Path) -> Result<bool, Error> {
    if path.is_dir() {
        return Ok(false);
    }
    if path == floor {
        return Err(Error::Mkdir {
            path: path.to_owned(),
            source: io::Error::from(io::ErrorKind::NotFound),
        });
    }
    if let Some(parent) = path.parent() {
        if parent.starts_with(floor) {
            mkdir_p(floor, parent)?;
        }
    }
    match mkdir(path) {
        Ok(()) => Ok(true),
        // Somebody else (another corral process) created it concurrently.
        Err(e) if e.raw_os_error() == Some(libc::EEXIST) => Ok(false),
        Err(e) => Err(e),
    }
}

/// How long `rmdir_retry` keeps retrying EBUSY: exiting tasks leave their cgroup asynchronously.
pub(crate) const RMDIR_TIMEOUT: Duration = Duration::from_secs(1);

/// Removes a cgroup directory, retrying EBUSY a few ms at a time for up to [`RMDIR_TIMEOUT`].
/// A directory that is already gone counts as removed.
pub(crate) fn rmdir_retry(path: &Path) -> Result<(), Error> {
    let start = Instant::now();
    loop {
        #[cfg(test)]
        crate::testfs::before_rmdir(path);
        match std::fs::remove_dir(path) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && start.elapsed() < RMDIR_TIMEOUT => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(source) => {
                return Err(Error::Rmdir {
                    path: path.to_owned(),
                    source,
                })
            }
        }
    }
}

/// One rmdir attempt, errors ignored: for removing corral's base when it may still be in use
/// (then the kernel refuses with EBUSY and nothing happens).
pub(crate) fn rmdir_if_unused(path: &Path) {
    #[cfg(test)]
    crate::testfs::before_rmdir(path);
    let _ = std::fs::remove_dir(path);
}

/// Sub-cgroups of `dir` (recursively), deepest first, so they can be removed in order.
/// Sandboxed code normally cannot create them, but if it could, they must not survive us.
pub(crate) fn subdirs_post_order(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for entry in rd.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                let p = entry.path();
                out.extend(subdirs_post_order(&p));
                out.push(p);
            }
        }
    }
    out
}

/// Pids in `dir` and all its sub-cgroups. A sub-cgroup vanishing meanwhile is not an error.
pub(crate) fn pids_recursive(dir: &Path, out: &mut Vec<i32>) -> Result<(), Error> {
    let path = dir.join("cgroup.procs");
    out.extend(parse_pids(&path, &read(&path)?)?);
    for sub in subdirs_post_order(dir) {
        let p = sub.join("cgroup.procs");
        match read_optional(&p)? {
            Some(text) => out.extend(parse_pids(&p, &text)?),
            None => continue,
        }
    }
    Ok(())
}
