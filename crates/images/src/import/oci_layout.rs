//! An OCI image layout folder: `oci-layout`, `index.json`, `blobs/sha256/…`.

use std::path::Path;

use super::folder::{open_member, Folder};
use crate::error::Error;
use crate::error::IoContext;
use crate::ingest::{ingest, BlobSource};
use crate::oci::{self, Document, MAX_DOCUMENT};
use crate::store::{ImageRecord, Store};

pub(super) fn import(
    store: &Store,
    dir: &Path,
    name: Option<&str>,
    source: String,
) -> Result<ImageRecord, Error> {
    let mut folder = Folder::new(dir);
    let index_path = dir.join("index.json");
    let index = open_member(dir, "index.json", || Error::MissingFile {
        what: "the OCI layout".into(),
        file: "index.json".into(),
    })?;
    let bytes = read_small(index, &index_path)?;
    let mut doc = oci::parse_document(&bytes, "index.json")?;
    let mut index_digest = None;
    // Nested indexes (an image index inside the layout's index) are followed, a few levels deep.
    for _ in 0..4 {
        let idx = match doc {
            Document::Index(i) => i,
            Document::Manifest(_) => {
                return Err(Error::BadManifest {
                    what: "index.json".into(),
                    reason: "not an index".into(),
                })
            }
        };
        let d = oci::pick_platform(&idx)?.clone();
        let recorded = d
            .annotations
            .as_ref()
            .and_then(|a| a.get("io.containerd.image.name"));
        let recorded = super::names::recorded_name(recorded);
        let name = super::names::image_name(name, recorded.as_deref());
        folder.fetch(store, &d, "manifest")?;
        let m = store.read_document(&d.digest)?;
        match oci::parse_document(&m, "manifest")? {
            Document::Manifest(_) => {
                return ingest(store, &mut folder, &m, index_digest, name, source)
            }
            next @ Document::Index(_) => {
                index_digest = Some(d.digest.clone());
                doc = next;
            }
        }
    }
    Err(Error::BadManifest {
        what: "index.json".into(),
        reason: "indexes nested too deep".into(),
    })
}

/// The document in `f` (the archive's file `path`), at most [`MAX_DOCUMENT`] bytes.
pub(super) fn read_small(f: std::fs::File, path: &Path) -> Result<Vec<u8>, Error> {
    use std::io::Read;
    let mut b = Vec::new();
    f.take(MAX_DOCUMENT + 1).read_to_end(&mut b).at(path)?;
    if b.len() as u64 > MAX_DOCUMENT {
        return Err(Error::BadManifest {
            what: path.display().to_string(),
            reason: "too large".into(),
        });
    }
    Ok(b)
}
