//! `corral worker`'s images: before judging a job, each image it names that this worker's store
//! lacks is fetched from the API node by digest (`GET /worker/images/{ref}`, then
//! `GET /worker/blobs/{digest}` for the manifest, config and layers), every blob checked against
//! its digest here, assembled as an OCI image layout and imported into the worker's own store
//! (which checks them all again and unpacks the layers by its own rules). The worker needs no
//! registry credentials: its worker token is enough.

use std::io::Write;
use std::path::Path;

use anyhow::{bail, ensure, Context};
use corral_images::{Digest, Store};
use corral_judge::{ImageDoc, JobSpec};
use reqwest::StatusCode;
use serde::Deserialize;

/// How the worker reaches the API node.
pub struct Remote<'a> {
    pub http: &'a reqwest::Client,
    pub server: &'a str,
    pub token: &'a str,
}

/// The largest manifest accepted (they are a few KiB).
const MAX_MANIFEST: u64 = 4 << 20;

#[derive(Deserialize)]
struct Descriptor {
    digest: String,
    size: u64,
}

#[derive(Deserialize)]
struct Manifest {
    #[serde(rename = "mediaType", default)]
    media_type: Option<String>,
    config: Descriptor,
    layers: Vec<Descriptor>,
}

/// Pins every image the job names to a digest (the server's pin, else asked now) and makes sure
/// this worker's store has it.
pub async fn ensure_images(
    remote: &Remote<'_>,
    store: &Store,
    spec: &mut JobSpec,
    needed: Vec<String>,
) -> anyhow::Result<()> {
    for reference in needed {
        let digest = match spec.image_digests.get(&reference) {
            Some(d) => d.clone(),
            None => {
                let doc = resolve(remote, &reference).await?;
                spec.image_digests
                    .insert(reference.clone(), doc.digest.clone());
                doc.digest
            }
        };
        ensure!(
            corral_judge::job::is_digest(&digest),
            "the server pinned {reference:?} to {digest:?}, which is not a digest"
        );
        let d = Digest::parse(&digest)?;
        if store.record(&d)?.is_some() {
            continue;
        }
        fetch(remote, store, &d, &reference)
            .await
            .with_context(|| format!("fetching image {reference:?} ({digest}) from the server"))?;
    }
    Ok(())
}

async fn resolve(remote: &Remote<'_>, reference: &str) -> anyhow::Result<ImageDoc> {
    let r = remote
        .http
        .get(format!("{}/worker/images/{reference}", remote.server))
        .bearer_auth(remote.token)
        .send()
        .await?;
    match r.status() {
        StatusCode::OK => Ok(r.json().await?),
        StatusCode::NOT_FOUND => bail!("the server has no image {reference:?}"),
        s => bail!("resolving image {reference:?}: the server answered {s}"),
    }
}

/// Downloads one blob into `dest`, at most `max` bytes, and checks it against `digest`.
async fn download(
    remote: &Remote<'_>,
    digest: &Digest,
    max: u64,
    dest: &Path,
) -> anyhow::Result<()> {
    let mut r = remote
        .http
        .get(format!("{}/worker/blobs/{digest}", remote.server))
        .bearer_auth(remote.token)
        .send()
        .await?;
    ensure!(
        r.status() == StatusCode::OK,
        "blob {digest}: the server answered {}",
        r.status()
    );
    let mut f = std::fs::File::create(dest).with_context(|| dest.display().to_string())?;
    let mut total = 0u64;
    while let Some(chunk) = r.chunk().await? {
        total += chunk.len() as u64;
        ensure!(total <= max, "blob {digest} is larger than its {max} bytes");
        f.write_all(&chunk)?;
    }
    f.sync_all()?;
    drop(f);
    let got = file_digest(dest)?;
    ensure!(
        &got == digest,
        "blob {digest}: the bytes received hash to {got} (altered or cut off on the way)"
    );
    Ok(())
}

fn file_digest(path: &Path) -> anyhow::Result<Digest> {
    let mut h = corral_images::digest::HashingReader::new(std::fs::File::open(path)?);
    std::io::copy(&mut h, &mut std::io::sink())?;
    Ok(h.finish().0)
}

/// Fetches the image `digest` into an OCI layout beside the store and imports it, named after
/// `reference` when that is a name.
async fn fetch(
    remote: &Remote<'_>,
    store: &Store,
    digest: &Digest,
    reference: &str,
) -> anyhow::Result<()> {
    let layout = tempfile::Builder::new()
        .prefix("fetch-")
        .tempdir_in(store.tmp_dir())?;
    let blobs = layout.path().join("blobs/sha256");
    std::fs::create_dir_all(&blobs)?;
    let blob = |d: &Digest| blobs.join(d.hex());
    download(remote, digest, MAX_MANIFEST, &blob(digest)).await?;
    let manifest_bytes = std::fs::read(blob(digest))?;
    let m: Manifest = serde_json::from_slice(&manifest_bytes).context("the manifest")?;
    for d in std::iter::once(&m.config).chain(&m.layers) {
        let dd = Digest::parse(&d.digest)?;
        if !blob(&dd).exists() {
            download(remote, &dd, d.size, &blob(&dd)).await?;
        }
    }
    std::fs::write(
        layout.path().join("oci-layout"),
        br#"{"imageLayoutVersion":"1.0.0"}"#,
    )?;
    let index = serde_json::json!({
        "schemaVersion": 2,
        "manifests": [{
            "mediaType": m.media_type.unwrap_or_else(|| "application/vnd.oci.image.manifest.v1+json".into()),
            "digest": digest.to_string(),
            "size": manifest_bytes.len(),
        }],
    });
    std::fs::write(layout.path().join("index.json"), index.to_string())?;
    let name = name_of(reference);
    let (store2, dir, want) = (store.clone(), layout.path().to_path_buf(), digest.clone());
    let rec =
        tokio::task::spawn_blocking(move || corral_images::import(&store2, &dir, name.as_deref()))
            .await??;
    ensure!(
        rec.digest == want,
        "imported {} where {want} was asked for",
        rec.digest
    );
    tracing::info!(image = %reference, digest = %want, "image fetched from the server");
    Ok(())
}

/// The name part of a reference (`NAME[:TAG]` or `NAME@sha256:…`); none for a bare digest.
fn name_of(reference: &str) -> Option<String> {
    match corral_images::store::Ref::parse(reference).ok()? {
        corral_images::store::Ref::Name(n) => Some(n),
        corral_images::store::Ref::Digest(n, _) => n,
        corral_images::store::Ref::Prefix(_) => None,
    }
}
