//! `corral env import PATH`: an OCI image layout (folder or tar), a docker-archive tar, or a plain
//! root-filesystem tar (plain, gzip or zstd) which becomes a one-layer image.
//!
//! What a file is: a gzip/zstd file is a root-filesystem tar; a plain tar with a top-level
//! `index.json` (OCI, also what `docker save` writes since Docker 25) or `manifest.json`
//! (docker-archive) is an image archive, staged into a scratch folder and read as a folder;
//! any other tar is a root filesystem.

mod docker_archive;
mod folder;
mod names;
mod oci_layout;
mod rootfs;
mod staging;

use std::path::Path;

use crate::error::Error;
use crate::error::IoContext;
use crate::store::{ImageRecord, Store};

/// Imports the image at `path`; `name` (if given) wins over a name recorded in the archive. The
/// record's `source` is `import PATH`.
pub fn import(store: &Store, path: &Path, name: Option<&str>) -> Result<ImageRecord, Error> {
    import_as(store, path, name, &format!("import {}", path.display()))
}

/// As [`import`], recording `source` as where the image came from (shown by `GET /images`: an
/// upload's scratch path on the server means nothing to its readers, and is the server's own).
pub fn import_as(
    store: &Store,
    path: &Path,
    name: Option<&str>,
    source: &str,
) -> Result<ImageRecord, Error> {
    let _writer = store.writer_lock()?;
    let source = source.to_string();
    let meta = std::fs::metadata(path).at(path)?;
    if meta.is_dir() {
        return import_folder(store, path, name, source);
    }
    // `/dev/zero` or a FIFO would be read for ever, past any size the store allows.
    if !meta.is_file() {
        return Err(Error::UnknownImport {
            path: path.to_path_buf(),
            reason: "neither a regular file nor a folder".into(),
        });
    }
    // What `docker load` also takes but corral does not read: said, not parsed as a tar.
    let mut head = [0u8; 6];
    let n = std::io::Read::read(&mut std::fs::File::open(path).at(path)?, &mut head).at(path)?;
    let other = match &head[..n] {
        [0xfd, b'7', b'z', b'X', b'Z', 0] => Some("xz"),
        [b'B', b'Z', b'h', ..] => Some("bzip2"),
        _ => None,
    };
    if let Some(kind) = other {
        return Err(Error::UnknownImport {
            path: path.to_path_buf(),
            reason: format!(
                "{kind}-compressed: decompress it first (archives are read plain, gzip or zstd)"
            ),
        });
    }
    if staging::is_image_archive(store, path)? {
        let staged = staging::Staged::extract(store, path)?;
        return import_folder(store, staged.path(), name, source);
    }
    rootfs::import(store, path, name, source)
}

fn import_folder(
    store: &Store,
    dir: &Path,
    name: Option<&str>,
    source: String,
) -> Result<ImageRecord, Error> {
    if dir.join("index.json").is_file() {
        oci_layout::import(store, dir, name, source)
    } else if dir.join("manifest.json").is_file() {
        docker_archive::import(store, dir, name, source)
    } else {
        Err(Error::UnknownImport {
            path: dir.to_path_buf(),
            reason: "a folder must be an OCI image layout (index.json, blobs/) or an unpacked docker-archive (manifest.json)".into(),
        })
    }
}
