//! Blobs by digest: `blobs/sha256/HEX`, written to a temporary file, verified, then renamed.

use std::io::{Read, Write};
use std::path::PathBuf;

use super::model::Store;
use crate::digest::{Digest, HashingReader};
use crate::error::Error;
use crate::error::IoContext;

impl Store {
    pub fn blob_path(&self, d: &Digest) -> PathBuf {
        self.root.join("blobs/sha256").join(d.hex())
    }

    pub fn has_blob(&self, d: &Digest) -> bool {
        self.blob_path(d).is_file()
    }

    /// Stores `input` as the blob `expected` (refused if its digest differs), or under the digest
    /// it turns out to have when `expected` is `None`. At most `max` bytes are read.
    pub fn put_blob(
        &self,
        input: impl Read,
        expected: Option<&Digest>,
        max: u64,
        what: &str,
    ) -> Result<Digest, Error> {
        if let Some(d) = expected {
            if self.has_blob(d) {
                return Ok(d.clone());
            }
        }
        let dir = self.root.join("blobs/sha256");
        let mut tmp = tempfile::Builder::new()
            .prefix(".incoming-")
            .tempfile_in(&dir)
            .at(&dir)?;
        let mut reader = HashingReader::new(input.take(max.saturating_add(1)));
        std::io::copy(&mut reader, tmp.as_file_mut()).at(tmp.path())?;
        if reader.count() > max {
            return Err(Error::BadManifest {
                what: what.to_string(),
                reason: format!("larger than {max} bytes"),
            });
        }
        let (actual, _) = reader.finish();
        if let Some(expected) = expected {
            if *expected != actual {
                return Err(Error::digest_mismatch(what, expected, &actual));
            }
        }
        tmp.as_file_mut().flush().at(tmp.path())?;
        tmp.as_file().sync_all().at(tmp.path())?;
        let path = self.blob_path(&actual);
        tmp.persist(&path).map_err(|e| Error::Io {
            path: path.clone(),
            source: e.error,
        })?;
        Ok(actual)
    }

    /// Checks that the stored blob `d` has `size` bytes, as its descriptor says (a blob the store
    /// had already was never read against this descriptor).
    pub fn check_blob_size(&self, d: &Digest, size: u64, what: &str) -> Result<(), Error> {
        let path = self.blob_path(d);
        let actual = std::fs::metadata(&path).at(&path)?.len();
        if actual != size {
            return Err(Error::BadManifest {
                what: what.to_string(),
                reason: format!("its descriptor says {size} bytes, but blob {d} has {actual}"),
            });
        }
        Ok(())
    }

    pub fn put_blob_bytes(&self, bytes: &[u8], what: &str) -> Result<Digest, Error> {
        self.put_blob(bytes, None, bytes.len() as u64, what)
    }

    /// A small blob (manifest, config) read whole; its digest is checked again.
    pub fn read_document(&self, d: &Digest) -> Result<Vec<u8>, Error> {
        let path = self.blob_path(d);
        let f = std::fs::File::open(&path).at(&path)?;
        let mut bytes = Vec::new();
        f.take(crate::oci::MAX_DOCUMENT + 1)
            .read_to_end(&mut bytes)
            .at(&path)?;
        let actual = Digest::of_bytes(&bytes);
        if actual != *d {
            return Err(Error::digest_mismatch(
                path.display().to_string(),
                d,
                &actual,
            ));
        }
        Ok(bytes)
    }
}

impl Store {
    /// Moves the downloaded file `file` into the store as blob `expected`, after checking its
    /// digest; a file that does not match is deleted (so a retry starts afresh).
    pub fn adopt_blob(
        &self,
        file: &std::path::Path,
        expected: &Digest,
        what: &str,
    ) -> Result<(), Error> {
        let f = std::fs::File::open(file).at(file)?;
        let mut reader = HashingReader::new(std::io::BufReader::new(f));
        std::io::copy(&mut reader, &mut std::io::sink()).at(file)?;
        let (actual, _) = reader.finish();
        if actual != *expected {
            let _ = std::fs::remove_file(file);
            return Err(Error::digest_mismatch(what, expected, &actual));
        }
        let path = self.blob_path(expected);
        std::fs::rename(file, &path).at(&path)
    }
}
