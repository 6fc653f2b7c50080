//! Image records, resolution of a REF, and the name operations (tag, rm).

use super::model::{ImageRecord, Store};
use super::refs::{normalise_name, Ref};
use crate::digest::{excerpt, Digest};
use crate::error::Error;
use crate::error::IoContext;

/// An image with the names that point to it.
#[derive(Debug, Clone)]
pub struct Listed {
    pub names: Vec<String>,
    pub record: ImageRecord,
}

/// The name an image is saved under: one given by whoever imports, pulls or builds it (it may take
/// the name from another image), or one an archive records for itself (it may not: a hostile
/// archive would take over a name the course's runs use).
#[derive(Debug, Clone, Copy)]
pub(crate) enum ImageName<'a> {
    Given(&'a str),
    Recorded(&'a str),
}

impl Store {
    fn record_path(&self, d: &Digest) -> std::path::PathBuf {
        self.root
            .join("records/sha256")
            .join(format!("{}.json", d.hex()))
    }

    pub fn record(&self, d: &Digest) -> Result<Option<ImageRecord>, Error> {
        let path = self.record_path(d);
        match std::fs::read(&path) {
            Ok(b) => serde_json::from_slice(&b)
                .map(Some)
                .map_err(|e| Error::Index {
                    path,
                    reason: e.to_string(),
                }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::Io { path, source: e }),
        }
    }

    pub fn records(&self) -> Result<Vec<ImageRecord>, Error> {
        let dir = self.root.join("records/sha256");
        let mut out = Vec::new();
        for e in std::fs::read_dir(&dir).at(&dir)? {
            let name = e.at(&dir)?.file_name();
            let Some(hex) = name.to_str().and_then(|n| n.strip_suffix(".json")) else {
                continue;
            };
            if let Ok(d) = Digest::from_hex(hex) {
                out.extend(self.record(&d)?);
            }
        }
        out.sort_by(|a, b| a.digest.cmp(&b.digest));
        Ok(out)
    }

    /// Writes the record (its blobs and layers must be stored already) and points `name` at it.
    pub fn save_image(&self, record: &ImageRecord, name: Option<&str>) -> Result<(), Error> {
        self.save_image_as(record, name.map(ImageName::Given))
    }

    /// As [`Store::save_image`]; a [`ImageName::Recorded`] name that names another image already
    /// is refused, and nothing is saved.
    pub(crate) fn save_image_as(
        &self,
        record: &ImageRecord,
        name: Option<ImageName<'_>>,
    ) -> Result<(), Error> {
        let (name, recorded) = match name {
            Some(ImageName::Given(n)) => (Some(n), false),
            Some(ImageName::Recorded(n)) => (Some(n), true),
            None => (None, false),
        };
        let name = match name {
            Some(n) => Some(normalise_name(n).ok_or_else(|| Error::BadReference(excerpt(n)))?),
            None => None,
        };
        let json = serde_json::to_vec_pretty(record).expect("records serialise");
        // Under the names lock, so a concurrent `rm` cannot remove the record between the two.
        self.update_names(|n| {
            if let Some(name) = name.as_ref().filter(|_| recorded) {
                if let Some(other) = n.names.get(name).filter(|d| **d != record.digest) {
                    return Err(Error::NameTaken {
                        name: name.clone(),
                        other: other.to_string(),
                    });
                }
            }
            self.write_atomic(
                &format!("records/sha256/{}.json", record.digest.hex()),
                &json,
            )?;
            if let Some(name) = name {
                n.names.insert(name, record.digest.clone());
            }
            Ok(())
        })
    }

    /// The image `reference` names, and the name it was found by (`None` for a digest or prefix;
    /// in `NAME@sha256:…` the digest alone names the image).
    pub fn resolve(&self, reference: &str) -> Result<(Option<String>, ImageRecord), Error> {
        let not_found = || Error::NotFound(excerpt(reference));
        match Ref::parse(reference)? {
            Ref::Name(name) => {
                let names = self.read_names()?;
                let d = names.names.get(&name).ok_or_else(not_found)?;
                Ok((Some(name), self.record(d)?.ok_or_else(not_found)?))
            }
            Ref::Digest(_, d) => {
                if let Some(r) = self.record(&d)? {
                    return Ok((None, r));
                }
                // A digest of the index an image was picked from names it too.
                let r = self
                    .records()?
                    .into_iter()
                    .find(|r| r.index.as_ref() == Some(&d));
                Ok((None, r.ok_or_else(not_found)?))
            }
            Ref::Prefix(p) => {
                // Hex is a digest prefix, never a name (no name can be hex alone: a store of an
                // older corral that let an archive name itself so is not asked).
                let mut hits: Vec<ImageRecord> = self
                    .records()?
                    .into_iter()
                    .filter(|r| r.digest.hex().starts_with(&p))
                    .collect();
                match hits.len() {
                    0 => Err(not_found()),
                    1 => Ok((None, hits.remove(0))),
                    count => Err(Error::Ambiguous { prefix: p, count }),
                }
            }
        }
    }

    /// Every image with its names, names sorted.
    pub fn list(&self) -> Result<Vec<Listed>, Error> {
        let names = self.read_names()?;
        Ok(self
            .records()?
            .into_iter()
            .map(|record| Listed {
                names: names
                    .names
                    .iter()
                    .filter(|(_, d)| **d == record.digest)
                    .map(|(n, _)| n.clone())
                    .collect(),
                record,
            })
            .collect())
    }

    /// The names pointing at the image `digest`, sorted.
    pub fn names_of(&self, digest: &Digest) -> Result<Vec<String>, Error> {
        let names = self.read_names()?;
        Ok(names
            .names
            .into_iter()
            .filter(|(_, d)| d == digest)
            .map(|(n, _)| n)
            .collect())
    }

    /// Points `name` at the image `reference` names.
    pub fn tag(&self, reference: &str, name: &str) -> Result<(String, Digest), Error> {
        let (_, rec) = self.resolve(reference)?;
        let name = normalise_name(name).ok_or_else(|| Error::BadReference(excerpt(name)))?;
        self.update_names(|n| {
            n.names.insert(name.clone(), rec.digest.clone());
            Ok(())
        })?;
        Ok((name, rec.digest))
    }

    /// Removes a name; the image itself goes when no name is left. A digest reference removes the
    /// image and all its names. Returns the names removed and whether the image was removed.
    /// Its blobs and layers stay until `gc`.
    pub fn remove(&self, reference: &str) -> Result<(Vec<String>, Option<Digest>), Error> {
        let (by_name, rec) = self.resolve(reference)?;
        let record_path = self.record_path(&rec.digest);
        // Under the names lock, so no concurrent tag can point a name at a record being removed.
        self.update_names(|n| {
            let removed: Vec<String> = match &by_name {
                Some(name) => n
                    .names
                    .remove_entry(name)
                    .map(|(k, _)| k)
                    .into_iter()
                    .collect(),
                None => {
                    let all: Vec<String> = n
                        .names
                        .iter()
                        .filter(|(_, d)| **d == rec.digest)
                        .map(|(k, _)| k.clone())
                        .collect();
                    for k in &all {
                        n.names.remove(k);
                    }
                    all
                }
            };
            if n.names.values().any(|d| *d == rec.digest) {
                return Ok((removed, None));
            }
            std::fs::remove_file(&record_path).at(&record_path)?;
            Ok((removed, Some(rec.digest.clone())))
        })
    }
}
