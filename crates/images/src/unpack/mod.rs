//! Unpacking one image layer — hostile input — into a folder that overlayfs can stack read-only.
//!
//! Rules (each broken rule refuses the whole layer, naming the entry):
//! - Paths: absolute paths and `..` components are refused; at most [`Limits::max_path`] bytes and
//!   [`Limits::max_depth`] components (each ≤ 255 bytes).
//! - Links are never followed while unpacking (see [`apply`]); symlinks are stored as written,
//!   absolute targets included — they resolve inside the image root at run time. Hardlinks may only
//!   name a regular file written earlier in the same layer.
//! - Device nodes are dropped (counted in [`Unpacked::dropped`]); fifos are kept. Setuid, setgid are
//!   never set. Extended attributes in the layer (PAX `SCHILY.xattr.*`) are not applied at all, so
//!   file capabilities (`security.capability`) never reach the disk.
//! - Whiteouts are stored in overlayfs's own format, so the layers stack as `lowerdir=` with no
//!   conversion at run time: `.wh.NAME` becomes a 0/0 character device `NAME`, and
//!   `.wh..wh..opq` sets `trusted.overlay.opaque=y` on its folder (root's overlay) and
//!   `user.overlay.opaque=y` (the `userxattr` overlay of rootless sandboxes reads only `user.*`);
//!   one of the two must succeed (`trusted.*` needs root, `user.*` a filesystem with user
//!   xattrs: ext4, xfs, btrfs, tmpfs since Linux 6.6).
//!   Other `.wh..wh.*` names (aufs bookkeeping) are skipped.
//! - Caps: total unpacked bytes, entries (inodes), bytes of all paths, extended-header size (checked before anything
//!   is allocated), decompressed stream size and decompression ratio.
//! - Files are owned as in the layer when unpacking as root (ids must fit in 32 bits); mtimes of
//!   regular files are kept (Python compares them with its .pyc caches).
//!
//! The layer is written into a temporary folder beside the target and renamed into place only
//! when complete: a crash leaves no half layer.

mod apply;
pub mod media_type;
pub mod room;

use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::Path;

use crate::digest::{excerpt, Digest, HashingReader};
use crate::error::Error;
use crate::error::IoContext;
use corral_archive::decompress::{self, Compression};
use corral_archive::tar_stream::{Kind, TarError, TarStream};

/// Caps on one layer.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Bytes of regular-file content.
    pub max_bytes: u64,
    /// Entries (each becomes an inode).
    pub max_entries: u64,
    /// Bytes of one path (or link target).
    pub max_path: usize,
    /// Components of one path.
    pub max_depth: usize,
    /// Bytes of all paths together (they are remembered as hardlink targets).
    pub max_path_bytes: u64,
    /// Bytes of one GNU long-name/long-link or PAX header.
    pub max_header: u64,
    /// Decompressed/compressed ratio (checked once past 64 MiB).
    pub max_ratio: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bytes: 16 << 30,
            max_entries: 500_000,
            max_path: 4096,
            max_depth: 128,
            max_path_bytes: 64 << 20,
            max_header: 64 << 10,
            max_ratio: 200,
        }
    }
}

/// What an unpacked layer turned out to be.
#[derive(Debug, Clone)]
pub struct Unpacked {
    /// sha256 of the uncompressed tar stream (the config's `rootfs.diff_ids` entry).
    pub diff_id: Digest,
    pub compression: Compression,
    /// Bytes of file content written.
    pub size: u64,
    pub entries: u64,
    /// Device nodes skipped.
    pub dropped: u64,
}

/// Unpacks the (possibly compressed) tar `input` into `target`, which must not exist yet. If
/// `expected` is given the stream's diff-id must match it, or nothing is kept.
pub fn unpack_layer(
    input: impl Read,
    media_type: Option<&str>,
    target: &Path,
    expected: Option<&Digest>,
    limits: &Limits,
) -> Result<Unpacked, Error> {
    media_type::check_media_type(media_type)?;
    let parent = target
        .parent()
        .ok_or_else(|| Error::LayerLimit("layer target has no parent".into()))?;
    std::fs::create_dir_all(parent).at(parent)?;
    let tmp = tempfile::Builder::new()
        .prefix(".unpacking-")
        .tempdir_in(parent)
        .at(parent)?;
    let root: OwnedFd = std::fs::File::open(tmp.path()).at(tmp.path())?.into();
    let (stream, compression) = decompress::open(input, max_stream(limits), limits.max_ratio)
        .map_err(Error::LayerStream)?;
    let mut tar = TarStream::new(HashingReader::new(stream), limits.max_header);
    let mut tree = apply::Tree::new(root);
    // A temporary folder is 0700; a layer root without its own `./` entry is an ordinary 0755.
    tree.root_attributes(0o755, 0, 0)
        .map_err(|reason| Error::LayerRefused {
            entry: ".".into(),
            reason,
        })?;
    let mut out = Unpacked {
        diff_id: Digest::of_bytes(b""),
        compression,
        size: 0,
        entries: 0,
        dropped: 0,
    };
    let mut budget = limits.max_bytes;
    let mut room_looked = 0u64;
    let mut path_bytes = 0u64;
    loop {
        let header = match tar.next_entry() {
            Ok(Some(h)) => h,
            Ok(None) => break,
            Err(TarError::Io(e)) => return Err(Error::LayerStream(e)),
            Err(TarError::Bad { entry, reason }) => {
                return Err(Error::LayerRefused { entry, reason })
            }
        };
        out.entries += 1;
        // The disk's room, looked at as the layer grows (a statvfs every 256 entries or 16 MiB).
        let written = limits.max_bytes - budget;
        if out.entries.is_multiple_of(256) || written >= room_looked + (16 << 20) {
            room::check(parent)?;
            room_looked = written;
        }
        let refuse = |reason: String| Error::LayerRefused {
            entry: excerpt(&String::from_utf8_lossy(&header.path)),
            reason,
        };
        if out.entries > limits.max_entries {
            return Err(refuse(format!(
                "more than {} entries in one layer",
                limits.max_entries
            )));
        }
        let (comps, path) = normalise(&header.path, limits).map_err(refuse)?;
        path_bytes += path.len() as u64;
        if path_bytes > limits.max_path_bytes {
            return Err(refuse(format!(
                "more than {} bytes of paths in one layer",
                limits.max_path_bytes
            )));
        }
        let mode = header.mode & 0o1777; // no setuid, no setgid
        let name = comps.last().copied().unwrap_or(b".");
        let result = if name == b".wh..wh..opq" {
            tree.opaque(&comps[..comps.len() - 1])
        } else if name.starts_with(b".wh..wh.") {
            Ok(())
        } else if let Some(hidden) = name.strip_prefix(b".wh.") {
            if matches!(hidden, b"" | b"." | b"..") {
                return Err(refuse("a whiteout of no name, `.` or `..`".into()));
            }
            let mut hidden_path = path[..path.len() - name.len()].to_vec();
            hidden_path.extend_from_slice(hidden);
            tree.whiteout(&comps[..comps.len() - 1], hidden, &hidden_path)
        } else {
            match header.kind {
                Kind::Dir => tree.mkdir(&comps, &path, mode, header.uid, header.gid),
                Kind::File => {
                    let mut data = tar.data(header.size);
                    match tree.file(
                        &comps,
                        &path,
                        mode,
                        header.uid,
                        header.gid,
                        header.mtime,
                        header.size,
                        &mut data,
                        &mut budget,
                    ) {
                        Ok(Ok(())) => Ok(()),
                        Ok(Err(e)) => return Err(Error::LayerStream(e)),
                        Err(r) => Err(r),
                    }
                }
                Kind::Symlink => {
                    if header.link.len() > limits.max_path {
                        Err(format!("link target longer than {} bytes", limits.max_path))
                    } else {
                        tree.symlink(&comps, &path, &header.link, header.uid, header.gid)
                    }
                }
                Kind::HardLink => match normalise(&header.link, limits) {
                    Ok((tcomps, tpath)) => tree.hardlink(&comps, &path, &tcomps, &tpath),
                    Err(r) => Err(format!("hardlink target: {r}")),
                },
                Kind::Fifo => tree.fifo(&comps, &path, mode, header.uid, header.gid),
                Kind::CharDevice | Kind::BlockDevice => {
                    out.dropped += 1;
                    Ok(())
                }
            }
        };
        result.map_err(refuse)?;
    }
    let mut rest = match tar.into_inner() {
        Ok(r) => r,
        Err(TarError::Io(e)) => return Err(Error::LayerStream(e)),
        Err(TarError::Bad { entry, reason }) => return Err(Error::LayerRefused { entry, reason }),
    };
    std::io::copy(&mut rest, &mut std::io::sink()).map_err(Error::LayerStream)?;
    let (diff_id, _) = rest.finish();
    if let Some(expected) = expected {
        if *expected != diff_id {
            return Err(Error::digest_mismatch(
                "layer (uncompressed)",
                expected,
                &diff_id,
            ));
        }
    }
    out.diff_id = diff_id;
    out.size = limits.max_bytes - budget;
    let kept = tmp.keep();
    if let Err(e) = std::fs::rename(&kept, target) {
        let _ = std::fs::remove_dir_all(&kept);
        // Another process may have unpacked the same layer meanwhile: theirs is as good.
        if !target.is_dir() {
            return Err(Error::Io {
                path: target.to_path_buf(),
                source: e,
            });
        }
    }
    tracing::debug!(diff_id = %out.diff_id, entries = out.entries, bytes = out.size, "layer unpacked");
    Ok(out)
}

/// The largest decompressed stream a layer may be: tar overhead is at most 1024 bytes per entry
/// (header + padding) on top of the content.
fn max_stream(limits: &Limits) -> u64 {
    limits
        .max_bytes
        .saturating_add(limits.max_entries.saturating_mul(3 << 10))
        .saturating_add(1 << 20)
}

/// The diff-id of the (possibly compressed) layer `input`: the sha256 of its decompressed stream,
/// read to the end under the same caps as [`unpack_layer`], nothing written. For a layer blob
/// whose diff-id is unpacked already: the blob must still be what it claims to be.
pub fn diff_id_of(input: impl Read, limits: &Limits) -> Result<Digest, Error> {
    let (stream, _) = decompress::open(input, max_stream(limits), limits.max_ratio)
        .map_err(Error::LayerStream)?;
    let mut hashed = HashingReader::new(stream);
    std::io::copy(&mut hashed, &mut std::io::sink()).map_err(Error::LayerStream)?;
    Ok(hashed.finish().0)
}

/// For callers' `inspect_err`: a layer refused for what it holds is an operator's concern (a
/// hostile or broken image), so it is logged even when the caller only passes the error on.
pub(crate) fn log_refusal(e: &Error) {
    if matches!(e, Error::LayerRefused { .. } | Error::LayerLimit(_)) {
        tracing::warn!(error = %e, "layer refused");
    }
}

/// Splits a tar path into components, refusing absolute paths, `..`, and over-long paths.
/// Returns the components and the normalised path (components joined by `/`).
fn normalise<'a>(raw: &'a [u8], limits: &Limits) -> Result<(Vec<&'a [u8]>, Vec<u8>), String> {
    if raw.len() > limits.max_path {
        return Err(format!("path longer than {} bytes", limits.max_path));
    }
    if raw.first() == Some(&b'/') {
        return Err("absolute path".into());
    }
    let mut comps = Vec::new();
    for c in raw.split(|&b| b == b'/') {
        match c {
            b"" | b"." => {}
            b".." => return Err("path with a `..` component".into()),
            c if c.len() > 255 => return Err("path component longer than 255 bytes".into()),
            c => comps.push(c),
        }
    }
    if comps.len() > limits.max_depth {
        return Err(format!("path deeper than {} components", limits.max_depth));
    }
    let path = comps.join(&b'/');
    Ok((comps, path))
}
