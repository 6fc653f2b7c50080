//! Control files opened once per cgroup. Every run reads and resets about a dozen counters; a
//! fresh `open` of a cgroupfs path is a path walk and a kernfs open (and a `close` after), while
//! a file kept open is read with one `pread` at offset 0 (the kernel regenerates the content on
//! every read from offset 0) and written with one `pwrite`. Files are opened on first use, read
//! and write ends separately (many counters are read-only), and a file the kernel lacks is
//! remembered as absent. Same errors, and same single-`write(2)` rule, as [`crate::fs`].

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::error::Error;
use crate::fs;
use crate::parse::parse_u64;

/// Path → the open file, or None when the kernel has no such file. Keyed by the path's bytes
/// (a lookup hashes them without building a key; `Path`'s own hash walks its components).
type Cache = HashMap<OsString, Option<Arc<File>>>;

#[derive(Default)]
pub(crate) struct OpenFiles {
    /// [read ends, write ends]
    files: Mutex<[Cache; 2]>,
}

impl OpenFiles {
    fn get(&self, path: &Path, write: bool) -> io::Result<Option<Arc<File>>> {
        let side = usize::from(write);
        if let Some(f) = self
            .files
            .lock()
            .ok()
            .and_then(|m| m[side].get(path.as_os_str()).cloned())
        {
            return Ok(f);
        }
        let opened = OpenOptions::new()
            .read(!write)
            .write(write)
            .custom_flags(libc::O_CLOEXEC)
            .open(path);
        let f = match opened {
            Ok(f) => Some(Arc::new(f)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        if let Ok(mut m) = self.files.lock() {
            m[side].insert(path.as_os_str().to_owned(), f.clone());
        }
        Ok(f)
    }

    /// Reads a whole control file; `None` when the kernel does not have it.
    pub(crate) fn read_optional(&self, path: &Path) -> Result<Option<String>, Error> {
        let err = |source| Error::Read {
            path: path.to_owned(),
            source,
        };
        let Some(f) = self.get(path, false).map_err(err)? else {
            return Ok(None);
        };
        let mut buf = Vec::with_capacity(256);
        let mut chunk = [0u8; 4096];
        loop {
            let n = f.read_at(&mut chunk, buf.len() as u64).map_err(err)?;
            buf.extend_from_slice(&chunk[..n]);
            // A short read is the end: kernfs and seq files fill the buffer while content is
            // left (as regular files do), so a counter costs one `pread`, not a second for EOF.
            if n < chunk.len() {
                break;
            }
        }
        String::from_utf8(buf)
            .map(Some)
            .map_err(|_| err(io::Error::new(io::ErrorKind::InvalidData, "not UTF-8")))
    }

    pub(crate) fn read(&self, path: &Path) -> Result<String, Error> {
        self.read_optional(path)?.ok_or_else(|| Error::Read {
            path: path.to_owned(),
            source: io::Error::from_raw_os_error(libc::ENOENT),
        })
    }

    pub(crate) fn read_u64(&self, path: &Path) -> Result<u64, Error> {
        parse_u64(path, &self.read(path)?)
    }

    pub(crate) fn read_optional_u64(&self, path: &Path) -> Result<Option<u64>, Error> {
        match self.read_optional(path)? {
            Some(t) => parse_u64(path, &t).map(Some),
            None => Ok(None),
        }
    }

    /// Writes `value` with one `pwrite(2)` (cgroupfs ignores the offset).
    pub(crate) fn write(&self, path: &Path, value: &str) -> Result<(), Error> {
        fs::write_once(path, value, || {
            let f = self
                .get(path, true)?
                .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))?;
            // The fake trees of the tests are regular files: make the write replace the content.
            #[cfg(test)]
            let _ = f.set_len(0);
            f.write_at(value.as_bytes(), 0)
        })
    }

    /// Writes only if the file exists; returns whether it was written.
    pub(crate) fn write_if_exists(&self, path: &Path, value: &str) -> Result<bool, Error> {
        match self.write(path, value) {
            Ok(()) => Ok(true),
            Err(Error::Write { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }
}
