//! Blobs read from files of a folder (an OCI layout, or a staged archive).

use std::collections::HashSet;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::digest::{Digest, HashingReader};
use crate::error::Error;
use crate::error::IoContext;
use crate::ingest::BlobSource;
use crate::oci::Descriptor;
use crate::store::{LayerRecord, Store};

/// A folder whose blobs are at `blobs/sha256/HEX` (other files are stored by the importer first,
/// and listed with [`Folder::stored`]).
pub(super) struct Folder {
    pub root: PathBuf,
    /// Blobs the importer stored from the folder's own files (a docker-archive's config and
    /// layers, a root-filesystem tar): stored under the digest their bytes hash to.
    stored: HashSet<Digest>,
    /// Layers (blob, diff-id) the importer unpacked from those files itself.
    vouched: Vec<(Digest, Digest)>,
}

impl Folder {
    pub fn new(root: &Path) -> Self {
        Folder {
            root: root.to_path_buf(),
            stored: HashSet::new(),
            vouched: Vec::new(),
        }
    }

    /// Notes that the blob `d` was stored from this folder's files by the importer.
    pub fn stored(&mut self, d: Digest) {
        self.stored.insert(d);
    }

    /// Notes that the importer unpacked the blob `blob` itself and found the diff-id `diff_id`.
    pub fn vouch(&mut self, blob: Digest, diff_id: Digest) {
        self.vouched.push((blob, diff_id));
    }

    /// `rel` inside the folder; absolute paths and `..` are refused.
    pub fn file(&self, rel: &str) -> Result<PathBuf, Error> {
        let bad = rel.starts_with('/') || rel.split('/').any(|c| c == "..");
        if bad {
            return Err(Error::BadManifest {
                what: "manifest.json".into(),
                reason: format!("file {:?} leaves the archive", crate::digest::excerpt(rel)),
            });
        }
        Ok(self.root.join(rel))
    }
}

/// Opens the archive's file `rel` (relative, no `..`: see [`Folder::file`]) beneath `root`: a
/// file that is missing, not a regular file, or reached through a symbolic link (staging keeps
/// only regular files; a folder given to `corral env import` may hold links, which must not
/// read a host file into the store) is the archive's fault, said without the folder's path.
pub(super) fn open_member(
    root: &Path,
    rel: &str,
    missing: impl FnOnce() -> Error,
) -> Result<std::fs::File, Error> {
    let path = root.join(rel);
    match open_nofollow(root, rel) {
        Ok(f) => match f.metadata() {
            Ok(m) if m.is_file() => Ok(f),
            Ok(_) => Err(missing()),
            Err(e) => Err(Error::Io { path, source: e }),
        },
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::ENOENT | libc::ELOOP | libc::ENOTDIR)
            ) =>
        {
            Err(missing())
        }
        Err(e) => Err(Error::Io { path, source: e }),
    }
}

/// Opens `rel` beneath `root` following no symbolic link: each folder on the way is opened
/// relative to the last with `O_NOFOLLOW | O_DIRECTORY`, the file with `O_NOFOLLOW` (a link is
/// `ELOOP` or `ENOTDIR`) and `O_NONBLOCK` (a FIFO does not wait for a writer; the caller
/// refuses what is not a regular file).
fn open_nofollow(root: &Path, rel: &str) -> std::io::Result<std::fs::File> {
    use nix::fcntl::{openat, OFlag};
    use nix::sys::stat::Mode;
    use std::os::fd::OwnedFd;
    let comps: Vec<&str> = rel
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    let Some((last, folders)) = comps.split_last() else {
        return Err(std::io::Error::from_raw_os_error(libc::ENOENT));
    };
    let base = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let mut dir: OwnedFd = std::fs::File::open(root)?.into();
    for c in folders {
        dir = openat(&dir, *c, base | OFlag::O_DIRECTORY, Mode::empty())?;
    }
    let fd = openat(&dir, *last, base | OFlag::O_NONBLOCK, Mode::empty())?;
    Ok(std::fs::File::from(fd))
}

impl BlobSource for Folder {
    fn fetch(&mut self, store: &Store, d: &Descriptor, what: &str) -> Result<(), Error> {
        if self.stored.contains(&d.digest) {
            return Ok(());
        }
        // Read from the folder even when the store has the blob: what the archive names must be
        // in it, or a store without the blob (a remote worker's) would refuse the same image.
        let rel = format!("blobs/sha256/{}", d.digest.hex());
        let path = self.root.join(&rel);
        let f = open_member(&self.root, &rel, || Error::MissingBlob {
            what: what.to_string(),
            digest: d.digest.to_string(),
        })?;
        let len = f.metadata().at(&path)?.len();
        if len != d.size {
            return Err(Error::BadManifest {
                what: what.to_string(),
                reason: format!(
                    "its descriptor says {} bytes, but the archive's blob {} has {len}",
                    d.size, d.digest
                ),
            });
        }
        if !store.has_blob(&d.digest) {
            store.put_blob(f, Some(&d.digest), d.size, what)?;
        } else {
            let mut reader = HashingReader::new(f.take(d.size.saturating_add(1)));
            std::io::copy(&mut reader, &mut std::io::sink()).at(&path)?;
            let (actual, _) = reader.finish();
            if actual != d.digest {
                return Err(Error::digest_mismatch(what, &d.digest, &actual));
            }
        }
        self.stored.insert(d.digest.clone());
        Ok(())
    }

    fn vouches(&self, layer: &LayerRecord) -> bool {
        self.vouched
            .iter()
            .any(|(b, id)| *b == layer.blob && *id == layer.diff_id)
    }
}
