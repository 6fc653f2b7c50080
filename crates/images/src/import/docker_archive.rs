//! A docker-archive (what `docker save` wrote before Docker 25): `manifest.json` listing each
//! image's config file and layer tars. There is no registry manifest, so an OCI manifest is
//! written for it; the layers (and so their diff-ids) are the same as in any other form.

use std::path::Path;

use serde::Deserialize;

use super::folder::{open_member, Folder};
use super::oci_layout::read_small;
use crate::error::Error;
use crate::error::IoContext;
use crate::ingest::ingest;
use crate::oci::{Descriptor, Manifest};
use crate::store::{ImageRecord, Store};
use crate::unpack::media_type::oci_media_type;
use corral_archive::decompress;

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Entry {
    config: String,
    #[serde(default)]
    repo_tags: Option<Vec<String>>,
    layers: Vec<String>,
}

pub(super) fn import(
    store: &Store,
    dir: &Path,
    name: Option<&str>,
    source: String,
) -> Result<ImageRecord, Error> {
    let mut folder = Folder::new(dir);
    let manifest = open_member(dir, "manifest.json", || Error::MissingFile {
        what: "the docker-archive".into(),
        file: "manifest.json".into(),
    })?;
    let bytes = read_small(manifest, &dir.join("manifest.json"))?;
    let entries: Vec<Entry> = serde_json::from_slice(&bytes).map_err(|e| Error::BadManifest {
        what: "manifest.json".into(),
        reason: e.to_string(),
    })?;
    let entry = match entries.as_slice() {
        [one] => one,
        [] => {
            return Err(Error::BadManifest {
                what: "manifest.json".into(),
                reason: "no image in it".into(),
            })
        }
        _ => {
            return Err(Error::BadManifest {
                what: "manifest.json".into(),
                reason: "more than one image; save one image per archive".into(),
            })
        }
    };
    let missing = |what: &str, rel: &str| {
        let (what, file) = (what.to_string(), crate::digest::excerpt(rel));
        move || Error::MissingFile { what, file }
    };
    let config_path = folder.file(&entry.config)?;
    let f = open_member(dir, &entry.config, missing("the config", &entry.config))?;
    let config = read_small(f, &config_path)?;
    let config_digest = store.put_blob_bytes(&config, "config")?;
    folder.stored(config_digest.clone());
    let mut layers = Vec::new();
    for (i, rel) in entry.layers.iter().enumerate() {
        let what = format!("layer {}", i + 1);
        let path = folder.file(rel)?;
        let mut f = open_member(dir, rel, missing(&what, rel))?;
        let mut head = [0u8; 4];
        let n = std::io::Read::read(&mut f, &mut head).at(&path)?;
        let compression = decompress::sniff(&head[..n]);
        std::io::Seek::rewind(&mut f).at(&path)?;
        let size = f.metadata().at(&path)?.len();
        let digest = store.put_blob(f, None, u64::MAX, &what)?;
        folder.stored(digest.clone());
        layers.push(Descriptor::new(oci_media_type(compression), digest, size));
    }
    let manifest = Manifest::written(&config, config_digest, layers);
    let recorded = entry.repo_tags.as_ref().and_then(|t| t.first());
    let recorded = super::names::recorded_name(recorded);
    let name = super::names::image_name(name, recorded.as_deref());
    ingest(store, &mut { folder }, &manifest, None, name, source)
}
