//! One `corral serve` per data folder. A server owns its folder's `tmp/` (it empties it at start:
//! what is there is a crashed predecessor's) and its kept sandboxes' files: a second server on
//! the same folder deleted the first one's jobs in flight. So a server holds an exclusive `flock`
//! on `DATA/serve.lock` for its whole life (the kernel drops it when the process dies, `kill -9`
//! too), and the lock file names its process for the next one's error.
//!
//! Only servers take it: `corral token create` and the other commands on the same folder work
//! while one runs, and nodes sharing one PostgreSQL database each have a data folder of their own.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

use crate::error::ServerError;

/// The lock file, in the data folder.
pub const LOCK_FILE: &str = "serve.lock";

/// The data folder, held for this process while the value lives.
pub struct DataLock {
    dir: PathBuf,
    _lock: Flock<File>,
}

impl std::fmt::Debug for DataLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataLock").field("dir", &self.dir).finish()
    }
}

impl DataLock {
    /// Takes the data folder `dir` (it exists) for this server, or says which process has it.
    /// A folder this process may not write is refused here too: it is the first write there.
    pub fn acquire(dir: &Path) -> Result<DataLock, ServerError> {
        let path = dir.join(LOCK_FILE);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(|e| {
                ServerError::Config(format!(
                    "the data folder {} cannot be written ({e}): corral serve keeps its \
                     database, uploads and temporary files there",
                    dir.display()
                ))
            })?;
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(mut lock) => {
                // Best effort: only the next server's error message reads it.
                let _ = lock
                    .set_len(0)
                    .and_then(|()| writeln!(lock, "{}", std::process::id()));
                Ok(DataLock {
                    dir: dir.to_path_buf(),
                    _lock: lock,
                })
            }
            Err((_, Errno::EWOULDBLOCK)) => {
                let holder = std::fs::read_to_string(&path)
                    .ok()
                    .and_then(|s| s.trim().parse::<u32>().ok())
                    .map_or_else(|| "another process".to_string(), |p| format!("process {p}"));
                Err(ServerError::Config(format!(
                    "the data folder {} is in use by another corral serve ({holder} holds {}): \
                     one server per data folder (a second one would delete the first one's \
                     files in use); give each server its own --data, even when they share a \
                     PostgreSQL database",
                    dir.display(),
                    path.display()
                )))
            }
            Err((_, e)) => Err(ServerError::Io {
                what: format!("locking {}", path.display()),
                source: e.into(),
            }),
        }
    }

    /// The data folder held.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_data_folder_is_held_by_one_server_at_a_time() {
        let d = tempfile::tempdir().unwrap();
        let first = DataLock::acquire(d.path()).unwrap();
        assert_eq!(first.dir(), d.path());
        let e = DataLock::acquire(d.path()).unwrap_err().to_string();
        assert!(e.contains(&d.path().display().to_string()), "{e}");
        assert!(
            e.contains(&format!("process {} holds", std::process::id())),
            "{e}"
        );
        drop(first);
        DataLock::acquire(d.path()).unwrap();
    }
}
