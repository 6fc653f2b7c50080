//! Blobs read from files of a folder (an OCI layout, or a staged archive).

use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::error::IoContext;
use crate::ingest::BlobSource;
use crate::oci::Descriptor;
use crate::store::Store;

/// A folder whose blobs are at `blobs/sha256/HEX` (other files are stored by the importer first).
pub(super) struct Folder {
    pub root: PathBuf,
}

impl Folder {
    pub fn new(root: &Path) -> Self {
        Folder {
            root: root.to_path_buf(),
        }
    }

    /// `rel` inside the folder; absolute paths and `..` are refused.
    pub fn file(&self, rel: &str) -> Result<PathBuf, Error> {
        let bad = rel.starts_with('/') || rel.split('/').any(|c| c == "..");
        if bad {
            return Err(Error::UnknownImport {
                path: self.root.clone(),
                reason: format!("file {:?} leaves the folder", crate::digest::excerpt(rel)),
            });
        }
        Ok(self.root.join(rel))
    }
}

impl BlobSource for Folder {
    fn fetch(&mut self, store: &Store, d: &Descriptor, what: &str) -> Result<(), Error> {
        if store.has_blob(&d.digest) {
            return Ok(());
        }
        let path = self.root.join("blobs/sha256").join(d.digest.hex());
        let f = std::fs::File::open(&path).at(&path)?;
        store.put_blob(f, Some(&d.digest), d.size, what)?;
        Ok(())
    }
}
