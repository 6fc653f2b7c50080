//! Image archives (OCI tar, docker-archive tar) are unpacked into a scratch folder of the store
//! first — regular files and folders only, paths checked — and then read as a folder.

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::error::IoContext;
use crate::store::Store;
use corral_archive::tar_stream::{Kind, TarError, TarStream};

const MAX_HEADER: u64 = 64 << 10;

fn tar_error(path: &Path, e: TarError) -> Error {
    match e {
        TarError::Io(source) => Error::Io {
            path: path.to_path_buf(),
            source,
        },
        TarError::Bad { entry, reason } => Error::UnknownImport {
            path: path.to_path_buf(),
            reason: format!("entry {entry:?}: {reason}"),
        },
    }
}

/// The tar at `path`, plain, gzip or zstd (`docker save | gzip` is as common as a plain one),
/// decompressed within the store's caps on a layer.
fn open_tar<'a>(store: &Store, path: &Path) -> Result<TarStream<impl Read + 'a>, Error> {
    let f = std::fs::File::open(path).at(path)?;
    let limits = store.limits();
    let (stream, _) =
        corral_archive::decompress::open(f, limits.max_bytes, limits.max_ratio).at(path)?;
    Ok(TarStream::new(std::io::BufReader::new(stream), MAX_HEADER))
}

/// Top-level folders of a root filesystem, which no image archive has: seeing one ends the
/// search for `index.json` early (a docker-archive writes its `manifest.json` last).
const ROOTFS_FOLDERS: [&[u8]; 6] = [b"bin", b"etc", b"lib", b"sbin", b"usr", b"var"];

/// Whether the tar at `path` (plain or compressed) has a top-level `index.json` or
/// `manifest.json`.
pub(super) fn is_image_archive(store: &Store, path: &Path) -> Result<bool, Error> {
    let mut tar = open_tar(store, path)?;
    while let Some(h) = tar.next_entry().map_err(|e| tar_error(path, e))? {
        let p = h.path.strip_prefix(b"./").unwrap_or(&h.path);
        if h.kind == Kind::File && (p == b"index.json" || p == b"manifest.json") {
            return Ok(true);
        }
        let top = p.split(|b| *b == b'/').next().unwrap_or_default();
        if ROOTFS_FOLDERS.contains(&top) {
            return Ok(false);
        }
    }
    Ok(false)
}

/// A scratch folder holding an archive's files; removed when dropped.
pub(super) struct Staged {
    dir: tempfile::TempDir,
}

impl Staged {
    pub fn extract(store: &Store, path: &Path) -> Result<Staged, Error> {
        let dir = tempfile::Builder::new()
            .prefix("archive-")
            .tempdir_in(store.tmp_dir())
            .at(store.tmp_dir())?;
        let mut tar = open_tar(store, path)?;
        while let Some(h) = tar.next_entry().map_err(|e| tar_error(path, e))? {
            if h.kind != Kind::File {
                continue; // folders are made as needed; links and the rest are not part of a layout
            }
            let rel = String::from_utf8_lossy(&h.path).into_owned();
            let comps: Vec<&str> = rel
                .split('/')
                .filter(|c| !c.is_empty() && *c != ".")
                .collect();
            if rel.starts_with('/') || comps.contains(&"..") || comps.is_empty() {
                return Err(Error::UnknownImport {
                    path: path.to_path_buf(),
                    reason: format!(
                        "entry {:?} leaves the archive",
                        crate::digest::excerpt(&rel)
                    ),
                });
            }
            // Only regular files and folders are ever created here, so no path can pass a link.
            let target: PathBuf = comps
                .iter()
                .fold(dir.path().to_path_buf(), |p, c| p.join(c));
            // A file where a folder must go (or the reverse) is the archive's fault.
            let clash = |e: std::io::Error, at: &Path| match e.kind() {
                std::io::ErrorKind::NotADirectory
                | std::io::ErrorKind::AlreadyExists
                | std::io::ErrorKind::IsADirectory => Error::UnknownImport {
                    path: path.to_path_buf(),
                    reason: format!(
                        "entry {:?} is both a file and a folder",
                        crate::digest::excerpt(&rel)
                    ),
                },
                _ => Error::Io {
                    path: at.to_path_buf(),
                    source: e,
                },
            };
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent).map_err(|e| clash(e, parent))?;
            }
            let mut out = std::fs::File::create(&target).map_err(|e| clash(e, &target))?;
            std::io::copy(&mut tar.data(h.size).take(h.size), &mut out).at(&target)?;
        }
        Ok(Staged { dir })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}
