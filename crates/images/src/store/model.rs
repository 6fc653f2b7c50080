//! The store handle and the records it keeps; its operations live in the sibling modules.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::claim::ImageClaim;
use crate::digest::Digest;
use crate::error::Error;
use crate::error::IoContext;
use crate::unpack::{self, Limits};

/// An image store rooted at `DATA/images`.
#[derive(Debug, Clone)]
pub struct Store {
    pub(super) root: PathBuf,
    pub(super) limits: Limits,
}

/// One layer of an image.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct LayerRecord {
    /// The (possibly compressed) blob's digest.
    pub blob: Digest,
    pub media_type: String,
    /// Bytes of the blob.
    pub size: u64,
    /// sha256 of the uncompressed tar: names the unpacked folder.
    pub diff_id: Digest,
}

/// What the store knows about one image (`records/sha256/MANIFEST-HEX.json`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ImageRecord {
    /// The image manifest's digest: the image's identity.
    pub digest: Digest,
    /// The index (manifest list) it was picked from, when pulled through one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<Digest>,
    pub config: Digest,
    /// Bottom layer first, as in the manifest.
    pub layers: Vec<LayerRecord>,
    pub env: Vec<String>,
    pub working_dir: Option<String>,
    pub cmd: Option<Vec<String>>,
    pub entrypoint: Option<Vec<String>>,
    /// Recorded for information only: programs never run as the image's user.
    pub user: Option<String>,
    pub platform: String,
    /// The config's `created`, when it has one.
    pub created: Option<String>,
    /// Sum of the blobs' sizes.
    pub size: u64,
    /// Where it came from (`pull …`, `import …`).
    pub source: String,
}

/// What a sandbox needs to run in an image.
#[derive(Debug, Clone)]
pub struct RootFs {
    pub digest: Digest,
    /// Unpacked layer folders, TOP layer first — the order of overlayfs's `lowerdir=a:b:c`.
    pub lower_dirs: Vec<PathBuf>,
    pub env: Vec<String>,
    pub working_dir: Option<String>,
    /// Keeps the layers and blobs from `gc` while it (or a clone) lives, even after the image's
    /// last name is removed: a sandbox built on `lower_dirs` holds it until it is dropped.
    pub claim: ImageClaim,
}

impl Store {
    /// Opens (creating its folders) the store of the data folder `data_dir` (relative to the
    /// current folder when not absolute).
    pub fn open(data_dir: &Path) -> Result<Store, Error> {
        // Absolute: layer and build folders are handed to sandboxes, which mount them elsewhere.
        let root = std::path::absolute(data_dir).at(data_dir)?.join("images");
        for sub in [
            "blobs/sha256",
            "layers/sha256",
            "records/sha256",
            "cache/sha256",
            "tmp",
        ] {
            let p = root.join(sub);
            std::fs::create_dir_all(&p).at(&p)?;
        }
        Ok(Store {
            root,
            limits: Limits::default(),
        })
    }

    /// Replaces the per-layer caps (tests use small ones).
    pub fn with_limits(mut self, limits: Limits) -> Store {
        self.limits = limits;
        self
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn layer_path(&self, diff_id: &Digest) -> PathBuf {
        self.root.join("layers/sha256").join(diff_id.hex())
    }

    /// A scratch folder for partial downloads and archive staging.
    pub fn tmp_dir(&self) -> PathBuf {
        self.root.join("tmp")
    }

    /// Unpacks the stored blob of `layer` unless its folder exists already. With `verify`, a blob
    /// whose layer is unpacked already is still read to the end and must decompress to the
    /// layer's diff-id: an image may not name a stored layer its own blob does not hold (a
    /// truncated blob, or another image's layer), which a store without that layer (a remote
    /// worker's) would refuse. `verify` is off only for blobs corral made itself from that layer.
    pub fn ensure_layer(&self, layer: &LayerRecord, verify: bool) -> Result<(), Error> {
        let target = self.layer_path(&layer.diff_id);
        let path = self.blob_path(&layer.blob);
        if target.is_dir() {
            if verify {
                let f = std::fs::File::open(&path).at(&path)?;
                let actual = unpack::diff_id_of(f, &self.limits)?;
                if actual != layer.diff_id {
                    return Err(Error::digest_mismatch(
                        format!("layer {} (uncompressed)", layer.blob),
                        &layer.diff_id,
                        &actual,
                    ));
                }
            }
            return Ok(());
        }
        unpack::room::check(self.root())?;
        let f = std::fs::File::open(&path).at(&path)?;
        unpack::unpack_layer(
            f,
            Some(&layer.media_type),
            &target,
            Some(&layer.diff_id),
            &self.limits,
        )
        .inspect_err(unpack::log_refusal)?;
        Ok(())
    }

    /// The ordered layer folders, Env and WorkingDir of `reference`: what a sandbox mounts, with
    /// a claim on them.
    /// The layer folders of `layers` (bottom first, as an image lists them) as an overlay's
    /// `lowerdir` wants them: top first, and a layer listed again (the same diff-id, as build
    /// steps `echo x > /a`, `rm /a`, `echo x > /a` make, or an archive that lists one twice)
    /// only where it is highest. overlayfs refuses a folder twice (ELOOP), and the lower copy
    /// shows nothing the higher one does not: its every entry is in the higher one.
    pub fn stack(&self, layers: &[LayerRecord]) -> Vec<PathBuf> {
        let mut seen = std::collections::HashSet::new();
        layers
            .iter()
            .rev()
            .filter(|l| seen.insert(&l.diff_id))
            .map(|l| self.layer_path(&l.diff_id))
            .collect()
    }

    pub fn rootfs(&self, reference: &str) -> Result<RootFs, Error> {
        // Resolved and claimed under `gc.lock`: no gc can run between reading the record and
        // holding its layers.
        let _writing = self.writer_lock()?;
        let (_, rec) = self.resolve(reference)?;
        let lower_dirs = self.stack(&rec.layers);
        let blobs = [Some(&rec.digest), Some(&rec.config), rec.index.as_ref()]
            .into_iter()
            .flatten()
            .chain(rec.layers.iter().map(|l| &l.blob))
            .map(|d| self.blob_path(d));
        let claim = ImageClaim::take(lower_dirs.iter().cloned().chain(blobs))?;
        Ok(RootFs {
            digest: rec.digest,
            lower_dirs,
            env: rec.env,
            working_dir: rec.working_dir,
            claim,
        })
    }
}
