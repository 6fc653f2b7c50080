//! `corral worker`'s images: before judging a job, each image it names that this worker's store
//! lacks is fetched from the API node by digest (`GET /worker/images/{ref}`, then
//! `GET /worker/blobs/{digest}` for the manifest, config and layers), every blob checked against
//! its digest here, assembled as an OCI image layout and imported into the worker's own store
//! (which checks them all again and unpacks the layers by its own rules). A blob download cut
//! off mid-way continues with a Range request. The worker needs no registry credentials: its
//! worker token is enough.

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
        // One fetch at a time in this worker: jobs judged side by side may need the same image,
        // and its partial blobs are one file each.
        static FETCHING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
        let _one = FETCHING.lock().await;
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

/// Consecutive attempts of one blob that may end cut off before the fetch fails.
const ATTEMPTS: u32 = 5;

/// How one attempt at a blob ended when it did not end with all of it.
enum Stop {
    /// The connection broke (or timed out) mid-blob: what arrived is kept; ask for the rest.
    Cut(anyhow::Error),
    /// Asking again cannot help (the server refused, the blob is too large, a local error).
    Fatal(anyhow::Error),
}

/// Downloads one blob into `dest`, at most `max` bytes, and checks it against `digest`.
///
/// The bytes go to `DATA/images/tmp/worker-blobs/HEX.partial` first, kept across attempts and
/// jobs: a download cut off mid-blob continues from where it stopped (`Range: bytes=N-`), up to
/// [`ATTEMPTS`] times in a row without completing. Only the whole blob's digest is trusted: a
/// mismatch deletes the partial file, so a bad prefix is never resumed twice.
async fn download(
    remote: &Remote<'_>,
    store: &Store,
    digest: &Digest,
    max: u64,
    dest: &Path,
) -> anyhow::Result<()> {
    let dir = store.tmp_dir().join("worker-blobs");
    std::fs::create_dir_all(&dir).with_context(|| dir.display().to_string())?;
    let part = dir.join(format!("{}.partial", digest.hex()));
    let mut attempt = 0;
    loop {
        attempt += 1;
        let have = std::fs::metadata(&part).map(|m| m.len()).unwrap_or(0);
        match download_from(remote, digest, max, &part, have).await {
            Ok(()) => break,
            Err(Stop::Fatal(e)) => {
                let _ = std::fs::remove_file(&part);
                return Err(e);
            }
            Err(Stop::Cut(e)) if attempt >= ATTEMPTS => {
                return Err(e.context(format!(
                    "blob {digest}: cut off {ATTEMPTS} times in a row; what arrived is kept and the next job continues it"
                )));
            }
            Err(Stop::Cut(e)) => {
                let now = std::fs::metadata(&part).map(|m| m.len()).unwrap_or(0);
                tracing::warn!(blob = %digest, bytes = now, error = %crate::errors::chain(&e), "blob download cut off; resuming");
                tokio::time::sleep(std::time::Duration::from_millis(200 * u64::from(attempt)))
                    .await;
            }
        }
    }
    let got = file_digest(&part)?;
    if &got != digest {
        let _ = std::fs::remove_file(&part);
        bail!("blob {digest}: the bytes received hash to {got} (altered or cut off on the way)");
    }
    std::fs::rename(&part, dest)
        .or_else(|_| std::fs::copy(&part, dest).map(|_| ()))
        .with_context(|| dest.display().to_string())?;
    let _ = std::fs::remove_file(&part);
    Ok(())
}

/// One attempt: asks for the blob from byte `have` on and appends what comes to `part`.
async fn download_from(
    remote: &Remote<'_>,
    digest: &Digest,
    max: u64,
    part: &Path,
    have: u64,
) -> Result<(), Stop> {
    let fatal = |e: anyhow::Error| Stop::Fatal(e);
    let mut req = remote
        .http
        .get(format!("{}/worker/blobs/{digest}", remote.server))
        .bearer_auth(remote.token);
    if have > 0 {
        req = req.header(reqwest::header::RANGE, format!("bytes={have}-"));
    }
    let mut r = req
        .send()
        .await
        .map_err(|e| Stop::Cut(anyhow::Error::new(e).context(format!("blob {digest}"))))?;
    let local =
        |e: std::io::Error| fatal(anyhow::Error::new(e).context(part.display().to_string()));
    let mut total = match r.status() {
        StatusCode::PARTIAL_CONTENT => {
            let starts_at = r
                .headers()
                .get(reqwest::header::CONTENT_RANGE)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("bytes "))
                .and_then(|v| v.split('-').next())
                .and_then(|v| v.parse::<u64>().ok());
            if starts_at != Some(have) {
                return Err(fatal(anyhow::anyhow!(
                    "blob {digest}: the server sent another range than bytes {have}-"
                )));
            }
            have
        }
        // The whole blob (the server ignored the range, or none was asked): start over.
        StatusCode::OK => {
            if have > 0 {
                std::fs::remove_file(part).map_err(local)?;
            }
            0
        }
        // What is kept is longer than the blob: not a prefix of it.
        StatusCode::RANGE_NOT_SATISFIABLE => {
            let _ = std::fs::remove_file(part);
            return Err(Stop::Cut(anyhow::anyhow!(
                "blob {digest}: the {have} bytes kept are more than the blob"
            )));
        }
        s => {
            return Err(fatal(anyhow::anyhow!(
                "blob {digest}: the server answered {s}"
            )))
        }
    };
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(part)
        .map_err(local)?;
    loop {
        match r.chunk().await {
            Ok(Some(chunk)) => {
                total += chunk.len() as u64;
                if total > max {
                    return Err(fatal(anyhow::anyhow!(
                        "blob {digest} is larger than its {max} bytes"
                    )));
                }
                f.write_all(&chunk).map_err(local)?;
            }
            Ok(None) => break,
            Err(e) => {
                let _ = f.sync_all();
                return Err(Stop::Cut(
                    anyhow::Error::new(e).context(format!("blob {digest} after {total} bytes")),
                ));
            }
        }
    }
    f.sync_all().map_err(local)?;
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
    download(remote, store, digest, MAX_MANIFEST, &blob(digest)).await?;
    let manifest_bytes = std::fs::read(blob(digest))?;
    let m: Manifest = serde_json::from_slice(&manifest_bytes).context("the manifest")?;
    for d in std::iter::once(&m.config).chain(&m.layers) {
        let dd = Digest::parse(&d.digest)?;
        if !blob(&dd).exists() {
            download(remote, store, &dd, d.size, &blob(&dd)).await?;
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
