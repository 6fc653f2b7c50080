//! A layer from a folder of changes: the upper folder of an overlayfs mount (what a build step
//! wrote over its image) becomes an OCI layer — a deterministic tar, gzip'd into a blob — stored
//! like a pulled layer (the blob by digest, the folder unpacked by diff-id through the same
//! hostile-input unpacker as every other layer).
//!
//! The tar is reproducible: entries sorted by path bytes; owners mapped back through the build's
//! user namespace ([`IdMap`]); no user or group names; folders, links and whiteouts with mtime 0;
//! regular files keep their mtime (Python compares a source's mtime with the one its `.pyc`
//! recorded: clamping it would make every import recompile), so the same changes give the same
//! diff-id and, with gzip's fixed header, the same blob digest.
//!
//! overlayfs's own format is converted to OCI's: a 0/0 character device `NAME` becomes an empty
//! `.wh.NAME`; a folder with the `trusted.overlay.opaque=y` (or `user.overlay.opaque=y`, an overlay
//! mounted inside a user namespace) xattr becomes the folder and `.wh..wh..opq` in it; a zero-size
//! file with an `overlay.whiteout` xattr (overlayfs's "xwhiteout") is a whiteout too. A renamed
//! folder (`overlay.redirect`) or a metadata-only copy-up (`overlay.metacopy`) cannot be written as
//! a tar layer and is refused: build sandboxes mount overlayfs with `redirect_dir=off,metacopy=off`.
//! Other xattrs (file capabilities included) are not carried; device nodes and sockets are dropped.

use std::collections::HashMap;
use std::ffi::CString;
use std::io::{self, BufWriter, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::digest::HashingWriter;
use crate::error::{Error, IoContext};
use crate::store::{LayerRecord, Store};
use crate::unpack::media_type;
use corral_archive::decompress::Compression;

/// How owners on disk map to owners in the image: the build's user namespace maps image ids
/// `0..count` to host ids `base..base+count`. Host ids outside the range are what the build's
/// programs saw as `nobody` (65534), and are written so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdMap {
    pub uid_base: u32,
    pub gid_base: u32,
    pub count: u32,
}

impl IdMap {
    /// Owners on disk are the image's own (a folder written by corral itself, as root).
    pub const IDENTITY: IdMap = IdMap {
        uid_base: 0,
        gid_base: 0,
        count: u32::MAX,
    };

    fn map(base: u32, count: u32, id: u32) -> u64 {
        match id.checked_sub(base) {
            Some(inner) if inner < count => inner.into(),
            _ => 65534,
        }
    }
    fn uid(&self, id: u32) -> u64 {
        IdMap::map(self.uid_base, self.count, id)
    }
    fn gid(&self, id: u32) -> u64 {
        IdMap::map(self.gid_base, self.count, id)
    }
}

/// What a folder of changes turned into.
#[derive(Debug, Clone)]
pub struct NewLayer {
    pub layer: LayerRecord,
    /// Tar entries written (whiteouts included).
    pub entries: u64,
    /// Device nodes and sockets left out.
    pub dropped: u64,
}

/// One entry of the changes, in tar terms.
enum Kind {
    Dir {
        opaque: bool,
    },
    File,
    /// A later name of an inode already written (the first name, relative).
    HardLink(Vec<u8>),
    Symlink(PathBuf),
    Fifo,
    Whiteout,
}

struct Entry {
    /// Relative path, `/`-separated, no leading `./`.
    path: Vec<u8>,
    kind: Kind,
    meta: std::fs::Metadata,
}

/// Writes the changes in `upper` as a layer into `store` (blob + unpacked folder) and returns it.
/// `None` when the folder holds no change at all (a step that changed nothing adds no layer).
///
/// `max_bytes`: the step's disk limit, held to the files' *apparent* sizes. The upper folder is
/// a tmpfs of that size, but tmpfs charges only the blocks a file uses: a sparse file (`truncate
/// -s 4G`, the `lastlog` of `useradd -u 100000`) costs it nothing, while the layer carries every
/// zero and its unpacked folder writes them all to the host's disk.
pub fn layer_from_changes(
    store: &Store,
    upper: &Path,
    ids: IdMap,
    max_bytes: Option<u64>,
) -> Result<Option<NewLayer>, Error> {
    let (entries, dropped) = collect(upper)?;
    if entries.is_empty() {
        return Ok(None);
    }
    if let Some(max) = max_bytes {
        let files = entries.iter().filter(|e| matches!(e.kind, Kind::File));
        let total: u64 = files.clone().map(|e| e.meta.len()).sum();
        if total > max {
            let largest = files
                .max_by_key(|e| e.meta.len())
                .expect("a file when over");
            return Err(Error::LayerLimit(format!(
                "the step's files add up to {total} bytes, over its disk limit of {max}: files count at their full size, holes of sparse files included (the largest: /{} of {} bytes; `useradd --no-log-init` makes no sparse lastlog)",
                String::from_utf8_lossy(&largest.path),
                largest.meta.len()
            )));
        }
    }
    let dir = store.root().join("blobs/sha256");
    let tmp = tempfile::Builder::new()
        .prefix(".layer-")
        .tempfile_in(&dir)
        .at(&dir)?;
    let file = tmp.as_file().try_clone().at(tmp.path())?;
    let blob_hash = HashingWriter::new(BufWriter::new(file));
    // GzEncoder writes a fixed header (no name, mtime 0): the same tar gives the same blob.
    let gz = flate2::write::GzEncoder::new(blob_hash, flate2::Compression::default());
    let mut tar = tar::Builder::new(HashingWriter::new(gz));
    tar.mode(tar::HeaderMode::Complete);
    for e in &entries {
        write_entry(&mut tar, upper, e, ids).at(join(upper, &e.path))?;
    }
    let diff_hash = tar.into_inner().at(tmp.path())?;
    let (diff_id, _, gz) = diff_hash.finish();
    let blob_hash = gz.finish().at(tmp.path())?;
    let (blob, size, mut buf) = blob_hash.finish();
    buf.flush().at(tmp.path())?;
    tmp.as_file().sync_all().at(tmp.path())?;
    let path = store.blob_path(&blob);
    tmp.persist(&path).map_err(|e| Error::Io {
        path: path.clone(),
        source: e.error,
    })?;
    let layer = LayerRecord {
        blob,
        media_type: media_type::oci_media_type(Compression::Gzip).into(),
        size,
        diff_id,
    };
    // The blob was just written from the tar whose hash is the diff-id: nothing to check again.
    store.ensure_layer(&layer, false)?;
    Ok(Some(NewLayer {
        layer,
        entries: entries.len() as u64,
        dropped,
    }))
}

/// Every entry under `upper`, sorted by path bytes (a folder before what it holds), and the
/// number left out.
fn collect(upper: &Path) -> Result<(Vec<Entry>, u64), Error> {
    let mut out = Vec::new();
    let mut dropped = 0;
    let mut inodes: HashMap<(u64, u64), Vec<u8>> = HashMap::new();
    let mut stack: Vec<Vec<u8>> = vec![Vec::new()];
    while let Some(rel) = stack.pop() {
        let dir = join(upper, &rel);
        for e in std::fs::read_dir(&dir).at(&dir)? {
            let e = e.at(&dir)?;
            let mut path = rel.clone();
            if !path.is_empty() {
                path.push(b'/');
            }
            path.extend_from_slice(e.file_name().as_bytes());
            let full = e.path();
            let meta = std::fs::symlink_metadata(&full).at(&full)?;
            let ft = meta.file_type();
            let kind = if ft.is_dir() {
                refuse_unconvertible(&full, &path)?;
                stack.push(path.clone());
                Kind::Dir {
                    opaque: overlay_xattr(&full, "opaque").at(&full)?.as_deref() == Some(b"y"),
                }
            } else if ft.is_char_device() && meta.rdev() == 0 {
                Kind::Whiteout
            } else if ft.is_file() {
                refuse_unconvertible(&full, &path)?;
                if meta.len() == 0 && overlay_xattr(&full, "whiteout").at(&full)?.is_some() {
                    Kind::Whiteout
                } else if meta.nlink() > 1 {
                    match inodes.entry((meta.dev(), meta.ino())) {
                        std::collections::hash_map::Entry::Occupied(first) => {
                            Kind::HardLink(first.get().clone())
                        }
                        std::collections::hash_map::Entry::Vacant(v) => {
                            v.insert(path.clone());
                            Kind::File
                        }
                    }
                } else {
                    Kind::File
                }
            } else if ft.is_symlink() {
                Kind::Symlink(std::fs::read_link(&full).at(&full)?)
            } else if ft.is_fifo() {
                Kind::Fifo
            } else {
                // Real device nodes (a build cannot make them) and sockets: never in a layer.
                dropped += 1;
                continue;
            };
            out.push(Entry { path, kind, meta });
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    // A hardlink must follow the name it points to; the first name seen may sort later.
    let mut first_of: HashMap<(u64, u64), Vec<u8>> = HashMap::new();
    for e in &mut out {
        if matches!(e.kind, Kind::File | Kind::HardLink(_)) && e.meta.nlink() > 1 {
            let key = (e.meta.dev(), e.meta.ino());
            match first_of.get(&key) {
                Some(first) => e.kind = Kind::HardLink(first.clone()),
                None => {
                    first_of.insert(key, e.path.clone());
                    e.kind = Kind::File;
                }
            }
        }
    }
    Ok((out, dropped))
}

fn join(root: &Path, rel: &[u8]) -> PathBuf {
    if rel.is_empty() {
        root.to_path_buf()
    } else {
        root.join(std::ffi::OsStr::from_bytes(rel))
    }
}

/// Refuses what overlayfs wrote that a tar layer cannot say.
fn refuse_unconvertible(full: &Path, rel: &[u8]) -> Result<(), Error> {
    for (name, what) in [
        ("redirect", "a renamed folder (overlayfs redirect_dir)"),
        ("metacopy", "a metadata-only copy-up (overlayfs metacopy)"),
    ] {
        if overlay_xattr(full, name).at(full)?.is_some() {
            return Err(Error::LayerRefused {
                entry: crate::digest::excerpt(&String::from_utf8_lossy(rel)),
                reason: format!(
                    "{what} cannot be written as a layer; mount the build overlay with redirect_dir=off,metacopy=off"
                ),
            });
        }
    }
    Ok(())
}

/// Whether the folder `path` is an opaque overlayfs folder (hides the lower layers' folder).
pub(crate) fn is_opaque(path: &Path) -> bool {
    overlay_xattr(path, "opaque").ok().flatten().as_deref() == Some(b"y")
}

/// The value of `trusted.overlay.NAME`, else of `user.overlay.NAME` (an overlay mounted in a user
/// namespace uses the user namespace), without following a link.
fn overlay_xattr(path: &Path, name: &str) -> io::Result<Option<Vec<u8>>> {
    for prefix in ["trusted.overlay.", "user.overlay."] {
        if let Some(v) = lgetxattr(path, &format!("{prefix}{name}"))? {
            return Ok(Some(v));
        }
    }
    Ok(None)
}

/// `lgetxattr(2)`; `None` when the attribute is absent (or the filesystem has none). Hand-written:
/// nix has no xattr calls, and two calls do not justify another crate.
fn lgetxattr(path: &Path, name: &str) -> io::Result<Option<Vec<u8>>> {
    let p = CString::new(path.as_os_str().as_bytes()).map_err(io::Error::other)?;
    let n = CString::new(name).map_err(io::Error::other)?;
    let mut buf = vec![0u8; 256];
    // SAFETY: both strings are NUL-terminated and live across the call; `buf` is a writable
    // buffer of the length passed.
    let rc = unsafe { libc::lgetxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if rc >= 0 {
        buf.truncate(rc as usize);
        return Ok(Some(buf));
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::ENODATA) | Some(libc::ENOTSUP) => Ok(None),
        // A value over 256 bytes is no overlay marker corral reads; say it is there.
        Some(libc::ERANGE) => Ok(Some(Vec::new())),
        _ => Err(e),
    }
}

/// Appends one entry (two for an opaque folder).
fn write_entry<W: Write>(
    tar: &mut tar::Builder<W>,
    upper: &Path,
    e: &Entry,
    ids: IdMap,
) -> io::Result<()> {
    let name = std::ffi::OsStr::from_bytes(&e.path);
    let mut h = tar::Header::new_gnu();
    h.set_uid(ids.uid(e.meta.uid()));
    h.set_gid(ids.gid(e.meta.gid()));
    h.set_mode(e.meta.mode() & 0o7777);
    h.set_mtime(0);
    h.set_size(0);
    match &e.kind {
        Kind::Dir { opaque } => {
            h.set_entry_type(tar::EntryType::Directory);
            tar.append_data(&mut h, name, io::empty())?;
            if *opaque {
                let mut o = marker_header();
                let mut p = e.path.clone();
                p.extend_from_slice(b"/.wh..wh..opq");
                tar.append_data(&mut o, std::ffi::OsStr::from_bytes(&p), io::empty())?;
            }
        }
        Kind::Whiteout => {
            let mut w = marker_header();
            let (parent, base) = match e.path.iter().rposition(|b| *b == b'/') {
                Some(i) => (&e.path[..=i], &e.path[i + 1..]),
                None => (&e.path[..0], &e.path[..]),
            };
            let mut p = parent.to_vec();
            p.extend_from_slice(b".wh.");
            p.extend_from_slice(base);
            tar.append_data(&mut w, std::ffi::OsStr::from_bytes(&p), io::empty())?;
        }
        Kind::File => {
            h.set_entry_type(tar::EntryType::Regular);
            h.set_mtime(e.meta.mtime().max(0) as u64);
            h.set_size(e.meta.len());
            let f = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(join(upper, &e.path))?;
            tar.append_data(&mut h, name, Exact::new(f, e.meta.len()))?;
        }
        Kind::HardLink(target) => {
            h.set_entry_type(tar::EntryType::Link);
            tar.append_link(&mut h, name, std::ffi::OsStr::from_bytes(target))?;
        }
        Kind::Symlink(target) => {
            h.set_entry_type(tar::EntryType::Symlink);
            h.set_mode(0o777);
            tar.append_link(&mut h, name, target)?;
        }
        Kind::Fifo => {
            h.set_entry_type(tar::EntryType::Fifo);
            tar.append_data(&mut h, name, io::empty())?;
        }
    }
    Ok(())
}

/// Exactly `len` bytes of a file, or an error: a file that changed size since it was listed
/// would otherwise desynchronise the tar (a step's programs are gone by now, so this is a guard).
struct Exact<R> {
    inner: io::Take<R>,
    left: u64,
}

impl<R: io::Read> Exact<R> {
    fn new(inner: R, len: u64) -> Self {
        Exact {
            inner: io::Read::take(inner, len),
            left: len,
        }
    }
}

impl<R: io::Read> io::Read for Exact<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n == 0 && self.left > 0 && !buf.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the file shrank while its layer was written",
            ));
        }
        self.left -= n as u64;
        Ok(n)
    }
}

/// The header of an empty whiteout marker file.
fn marker_header() -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Regular);
    h.set_mode(0o600);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mtime(0);
    h.set_size(0);
    h
}
