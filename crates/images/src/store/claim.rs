//! Claims on an image's files while sandboxes use them. A claim is a shared `flock` on each of
//! the image's layer folders and blobs, taken under `gc.lock` (shared) where the image is
//! resolved, so no gc runs between reading the record and holding its files. `gc` holds
//! `gc.lock` exclusive (no claim is being taken meanwhile), tries an exclusive lock on each object
//! no record names, and keeps those it cannot get.
//!
//! The lock lives on the object's own inode: there is no count or lock file to go stale, and it
//! goes with the descriptor whatever way its holder ends (containers/storage keeps a mount
//! count per layer in a file instead, which must be corrected when a holder dies uncounted).

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

use crate::error::Error;
use crate::error::IoContext;

/// The layer folders and blobs of one image, held until the last clone is dropped: `gc` leaves
/// them while it lives, even when no image names them any more. A sandbox keeps it for as long
/// as it is mounted on those layers (as `corral_sandbox::RootClaim`).
#[derive(Clone, Default)]
pub struct ImageClaim {
    held: Vec<Arc<Flock<File>>>,
}

impl std::fmt::Debug for ImageClaim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ImageClaim({} objects)", self.held.len())
    }
}

impl From<ImageClaim> for corral_sandbox::RootClaim {
    fn from(claim: ImageClaim) -> Self {
        corral_sandbox::RootClaim::new(claim)
    }
}

/// The locks this process holds, by path: one descriptor per object however many claims share
/// it (a server's pool keeps many sandboxes of one image).
static HELD: Mutex<BTreeMap<PathBuf, Weak<Flock<File>>>> = Mutex::new(BTreeMap::new());

impl ImageClaim {
    /// Shared locks on those of `paths` that exist (an absent object is nothing to keep). Call
    /// with `gc.lock` held shared.
    pub(crate) fn take(paths: impl IntoIterator<Item = PathBuf>) -> Result<ImageClaim, Error> {
        let mut table = HELD.lock().unwrap_or_else(|e| e.into_inner());
        table.retain(|_, w| w.strong_count() > 0);
        let mut held = Vec::new();
        for path in paths {
            if let Some(lock) = table.get(&path).and_then(Weak::upgrade) {
                held.push(lock);
                continue;
            }
            let file = match open(&path) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                r => r.at(&path)?,
            };
            // Blocks only behind a gc of a store that does not take `gc.lock` first (none does).
            let lock = Flock::lock(file, FlockArg::LockShared)
                .map_err(|(_, e)| std::io::Error::from(e))
                .at(&path)?;
            let lock = Arc::new(lock);
            table.insert(path, Arc::downgrade(&lock));
            held.push(lock);
        }
        Ok(ImageClaim { held })
    }

    /// How many layer folders and blobs it holds.
    pub fn len(&self) -> usize {
        self.held.len()
    }

    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }
}

/// What `gc` may do with an object no image names.
pub(crate) enum Exclusive {
    /// A claim holds it: keep it.
    Claimed,
    /// Nobody does; the lock (held while it is deleted) when it could be opened — what cannot be
    /// opened, no claim can hold either.
    Free(Option<Flock<File>>),
}

/// Tries an exclusive lock on `path` without waiting. Call with `gc.lock` held exclusive.
pub(crate) fn exclusive(path: &Path) -> Result<Exclusive, Error> {
    let Ok(file) = open(path) else {
        return Ok(Exclusive::Free(None));
    };
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => Ok(Exclusive::Free(Some(lock))),
        Err((_, Errno::EWOULDBLOCK)) => Ok(Exclusive::Claimed),
        Err((_, e)) => Err(std::io::Error::from(e)).at(path),
    }
}

/// Opens a layer folder or blob for its lock: read-only (`flock` refuses an `O_PATH`
/// descriptor), never through a link, and close-on-exec (std's default) so no program a sandbox
/// starts inherits it.
fn open(path: &Path) -> std::io::Result<File> {
    File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}
