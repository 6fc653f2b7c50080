//! The room left on the filesystem a layer is unpacked on. Each layer is capped (entries,
//! bytes), but an image may have many, and a store many images: without a floor, a few megabytes
//! of archive of empty files could take every inode of the host's disk, and its services with it.

use std::path::Path;

use crate::error::Error;

/// The share of its inodes and of its space a store's filesystem keeps free: 1 in 20 (5%).
const KEEP_FREE: u64 = 20;

/// Refuses when `path`'s filesystem has less than 5% of its inodes or of its space left.
pub fn check(path: &Path) -> Result<(), Error> {
    let st = nix::sys::statvfs::statvfs(path).map_err(|e| Error::Io {
        path: path.to_path_buf(),
        source: e.into(),
    })?;
    let under = |free: u64, total: u64| total > 0 && free.saturating_mul(KEEP_FREE) < total;
    let (inodes, files) = (st.files_available() as u64, st.files() as u64);
    let block = st.fragment_size() as u64;
    let (bytes, size) = (
        st.blocks_available() as u64 * block,
        st.blocks() as u64 * block,
    );
    let left = if under(inodes, files) {
        format!("{inodes} of {files} inodes")
    } else if under(bytes, size) {
        format!("{} MiB of {} MiB", bytes >> 20, size >> 20)
    } else {
        return Ok(());
    };
    Err(Error::NoRoom {
        path: path.to_path_buf(),
        left,
    })
}
