//! A plain root-filesystem tar (what `mmdebstrap`/`debootstrap` write), plain, gzip or zstd:
//! stored as the blob of a one-layer image with a written config (linux, this host's
//! architecture, the usual PATH, no `created` so the same tar always gives the same digest).

use std::path::Path;

use super::folder::Folder;
use crate::error::Error;
use crate::error::IoContext;
use crate::ingest::ingest;
use crate::oci::{self, Descriptor, ImageConfig, Manifest, RootFs, RunConfig};
use crate::store::{ImageName, ImageRecord, Store};
use crate::unpack::{log_refusal, unpack_layer};

const PATH: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

pub(super) fn import(
    store: &Store,
    path: &Path,
    name: Option<&str>,
    source: String,
) -> Result<ImageRecord, Error> {
    let f = std::fs::File::open(path).at(path)?;
    let size = f.metadata().at(path)?.len();
    let blob = store.put_blob(f, None, u64::MAX, &path.display().to_string())?;
    // The diff-id is known only once the tar is read: unpack beside the layers, then move.
    let scratch = tempfile::Builder::new()
        .prefix("rootfs-")
        .tempdir_in(store.tmp_dir())
        .at(store.tmp_dir())?;
    let staged = scratch.path().join("layer");
    let f = std::fs::File::open(store.blob_path(&blob)).at(store.blob_path(&blob))?;
    let unpacked = unpack_layer(f, None, &staged, None, store.limits()).inspect_err(log_refusal)?;
    if unpacked.entries == 0 {
        return Err(Error::Unusable(format!(
            "{} holds no files (an empty file or tar: a download cut off?)",
            path.file_name()
                .map_or(String::new(), |n| n.to_string_lossy().into_owned())
        )));
    }
    let target = store.layer_path(&unpacked.diff_id);
    if !target.is_dir() && std::fs::rename(&staged, &target).is_err() && !target.is_dir() {
        return Err(Error::Io {
            path: target,
            source: std::io::Error::other("cannot move the unpacked layer into place"),
        });
    }
    let config = ImageConfig {
        created: None,
        variant: None,
        architecture: oci::host_architecture().into(),
        os: "linux".into(),
        config: Some(RunConfig {
            env: Some(vec![PATH.into()]),
            ..RunConfig::default()
        }),
        rootfs: RootFs {
            kind: "layers".into(),
            diff_ids: vec![unpacked.diff_id.clone()],
        },
    };
    let config = serde_json::to_vec(&config).expect("config serialises");
    let config_digest = store.put_blob_bytes(&config, "config")?;
    let layer = Descriptor::new(
        crate::unpack::media_type::oci_media_type(unpacked.compression),
        blob,
        size,
    );
    let manifest = Manifest::written(&config, config_digest.clone(), vec![layer.clone()]);
    // Both blobs were stored from this tar, and the layer unpacked from it just now.
    let mut folder = Folder::new(path.parent().unwrap_or(Path::new(".")));
    folder.stored(layer.digest.clone());
    folder.stored(config_digest.clone());
    folder.vouch(layer.digest.clone(), unpacked.diff_id.clone());
    ingest(
        store,
        &mut folder,
        &manifest,
        None,
        name.map(ImageName::Given),
        source,
    )
}
