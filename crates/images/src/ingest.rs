//! The one path every image takes into the store, whatever its source: manifest → config →
//! layers, each blob verified against its digest, each layer unpacked once (by diff-id).

use crate::digest::{excerpt, Digest};
use crate::error::Error;
use crate::oci::{self, Descriptor, Document, ImageConfig, MAX_DOCUMENT};
use crate::store::ImageName;
use crate::store::{ImageRecord, LayerRecord, Store};
use crate::unpack::media_type;
use corral_archive::decompress::Compression;
use corral_sandbox::{MAX_ARG_BYTES, MAX_COMMAND_BYTES};

/// Where blobs come from: a folder, a staged archive, a registry.
pub(crate) trait BlobSource {
    /// Puts the blob `d` into the store, verified against its digest (a no-op if present).
    fn fetch(&mut self, store: &Store, d: &Descriptor, what: &str) -> Result<(), Error>;

    /// Whether the source made `layer`'s blob itself from the tar of its diff-id (a build step,
    /// a root-filesystem tar just unpacked), so it need not be read again when the layer is
    /// unpacked already. Anything an archive or a registry supplies is checked.
    fn vouches(&self, _layer: &LayerRecord) -> bool {
        false
    }
}

/// Stores the image whose manifest is `manifest` (bytes exactly as published) and names it.
pub(crate) fn ingest(
    store: &Store,
    src: &mut dyn BlobSource,
    manifest: &[u8],
    index: Option<Digest>,
    name: Option<ImageName<'_>>,
    source: String,
) -> Result<ImageRecord, Error> {
    let digest = store.put_blob_bytes(manifest, "manifest")?;
    let m = match oci::parse_document(manifest, "manifest")? {
        Document::Manifest(m) => m,
        Document::Index(_) => {
            return Err(Error::BadManifest {
                what: "manifest".into(),
                reason: "an index where an image manifest was expected".into(),
            })
        }
    };
    if m.config.size > MAX_DOCUMENT {
        return Err(Error::BadManifest {
            what: "config".into(),
            reason: format!(
                "{} bytes, over the {MAX_DOCUMENT}-byte limit",
                m.config.size
            ),
        });
    }
    // Before anything is fetched: a stated size is what a download may write to disk.
    let max = store.limits().max_bytes;
    for (i, d) in m.layers.iter().enumerate() {
        if d.size > max {
            return Err(Error::BadManifest {
                what: format!("layer {} ({})", i + 1, d.digest),
                reason: format!(
                    "{} bytes, over the {max}-byte limit on a layer blob",
                    d.size
                ),
            });
        }
    }
    src.fetch(store, &m.config, "config")?;
    store.check_blob_size(&m.config.digest, m.config.size, "config")?;
    let config_bytes = store.read_document(&m.config.digest)?;
    let config: ImageConfig =
        serde_json::from_slice(&config_bytes).map_err(|e| Error::BadManifest {
            what: format!("config {}", m.config.digest),
            reason: e.to_string(),
        })?;
    check_runnable(&config, m.layers.len())?;
    if config.rootfs.diff_ids.len() != m.layers.len() {
        return Err(Error::BadManifest {
            what: format!("config {}", m.config.digest),
            reason: format!(
                "{} diff_ids for {} layers",
                config.rootfs.diff_ids.len(),
                m.layers.len()
            ),
        });
    }
    let mut layers = Vec::new();
    // A layer listed again (the same blob and diff-id) was fetched and checked already: an
    // image listing one blob thousands of times must not cost thousands of decompressions.
    let mut done = std::collections::HashSet::new();
    for (i, (d, diff_id)) in m.layers.iter().zip(&config.rootfs.diff_ids).enumerate() {
        media_type::check_media_type(d.media_type.as_deref())?;
        let layer = LayerRecord {
            blob: d.digest.clone(),
            media_type: d
                .media_type
                .clone()
                .unwrap_or_else(|| media_type::oci_media_type(Compression::Gzip).into()),
            size: d.size,
            diff_id: diff_id.clone(),
        };
        if done.insert((d.digest.clone(), diff_id.clone())) {
            let what = format!("layer {}", i + 1);
            src.fetch(store, d, &what)?;
            store.check_blob_size(&d.digest, d.size, &what)?;
            store.ensure_layer(&layer, !src.vouches(&layer))?;
        }
        layers.push(layer);
    }
    let run = config.config.clone().unwrap_or_default();
    let record = ImageRecord {
        digest,
        index,
        config: m.config.digest.clone(),
        size: m.config.size + manifest.len() as u64 + m.layers.iter().map(|l| l.size).sum::<u64>(),
        layers,
        env: run.env.unwrap_or_default(),
        working_dir: run.working_dir.filter(|w| !w.is_empty()),
        cmd: run.cmd,
        entrypoint: run.entrypoint,
        user: run.user.filter(|u| !u.is_empty()),
        platform: format!("{}/{}", config.os, config.architecture),
        created: config.created,
        source: excerpt(&source),
    };
    store.save_image_as(&record, name)?;
    Ok(record)
}

/// The most layers an image may have: a sandbox mounts them as one overlay, and its options
/// (a `/proc/self/fd/N` per layer) must fit in the page `mount(2)` copies; ~230 would.
pub const MAX_LAYERS: usize = 128;

/// Refuses, before any layer is read, an image whose programs could never run here: another
/// platform (every run would fail with "Exec format error"), no layers (no root to mount), or an
/// `Env` that no run could pass to `execve` — the bounds every request's command and environment
/// are held to (a NUL byte, a variable over 128 KiB, over 1 MiB in all).
fn check_runnable(config: &ImageConfig, layers: usize) -> Result<(), Error> {
    let host = format!("linux/{}", oci::host_architecture());
    let mut image = format!("{}/{}", config.os, config.architecture);
    if let Some(v) = config.variant.as_deref().filter(|v| !v.is_empty()) {
        image = format!("{image}/{v}");
    }
    if config.os != "linux" || config.architecture != oci::host_architecture() {
        let image = if config.os.is_empty() || config.architecture.is_empty() {
            format!("{image:?} (its config names no platform)")
        } else {
            excerpt(&image)
        };
        return Err(Error::WrongPlatform { image, host });
    }
    if layers == 0 {
        return Err(Error::Unusable(
            "it has no layers (no root filesystem to run in)".into(),
        ));
    }
    if layers > MAX_LAYERS {
        return Err(Error::Unusable(format!(
            "it has {layers} layers, over the {MAX_LAYERS} a sandbox's root stacks (the overlay mount's options must fit in one page; Docker stops at 125): rebuild it with fewer layers, or flatten it (`docker export` of a container, imported as a root-filesystem tar)"
        )));
    }
    let run = config.config.clone().unwrap_or_default();
    // chdir(2) takes at most PATH_MAX; a longer one would fail every run, and fill its errors.
    if let Some(w) = run.working_dir.as_deref() {
        if w.len() >= 4096 || w.contains('\0') {
            return Err(Error::Unusable(format!(
                "its WorkingDir ({} bytes: {}) is no path a program can start in",
                w.len(),
                excerpt(w)
            )));
        }
    }
    let mut total = 0usize;
    for (i, e) in run.env.iter().flatten().enumerate() {
        let name = excerpt(e.split('=').next().unwrap_or(""));
        if e.contains('\0') {
            return Err(Error::Unusable(format!(
                "Env entry {} ({name}) has a NUL byte",
                i + 1
            )));
        }
        if e.len() > MAX_ARG_BYTES {
            return Err(Error::Unusable(format!(
                "Env entry {} ({name}) has {} bytes, over the {MAX_ARG_BYTES} a variable may have",
                i + 1,
                e.len()
            )));
        }
        total += e.len() + 1;
    }
    if total > MAX_COMMAND_BYTES {
        return Err(Error::Unusable(format!(
            "its Env has {total} bytes, over the {MAX_COMMAND_BYTES} a command and its environment may have in all"
        )));
    }
    if run.working_dir.as_deref().is_some_and(|w| w.contains('\0')) {
        return Err(Error::Unusable("its WorkingDir has a NUL byte".into()));
    }
    Ok(())
}
