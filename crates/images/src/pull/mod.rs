//! `corral env pull REF`: an image from an OCI distribution registry (OCI or Docker schema 2
//! manifests, indexes and manifest lists — this host's platform is picked — gzip or zstd layers).
//! Every blob is verified against its digest; a cut-off pull continues from its `.part` files.
//! Plain HTTP only when asked (`insecure`) or when the registry is listed as insecure (the
//! server configuration's `[images] insecure_registries`, or `CORRAL_INSECURE_REGISTRIES`,
//! comma-separated `host:port`).

pub mod auth;
mod client;
pub mod reference;
pub mod steady;

use std::path::PathBuf;

use crate::digest::Digest;
use crate::error::Error;
use crate::ingest::{ingest, BlobSource};
use crate::oci::{self, Descriptor, Document};
use crate::store::ImageName;
use crate::store::{ImageRecord, Store};
use client::Registry;
pub use reference::RemoteRef;

/// Told one line per blob downloaded (e.g. the CLI prints them on stderr).
pub type Progress = std::sync::Arc<dyn Fn(&str) + Send + Sync>;

#[derive(Clone, Default)]
pub struct PullOptions {
    pub insecure: bool,
    /// Registries (`host[:port]`) reached over plain HTTP without `insecure` (the configuration's
    /// list; `CORRAL_INSECURE_REGISTRIES` adds to it).
    pub insecure_registries: Vec<String>,
    /// A Docker `config.json`-format credentials file (see [`auth`]).
    pub auth_file: Option<PathBuf>,
    pub progress: Option<Progress>,
    /// How long a registry may send nothing, or next to nothing, before the pull fails
    /// (`None`: [`steady::STALL`], a minute).
    pub stall: Option<std::time::Duration>,
}

impl std::fmt::Debug for PullOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PullOptions")
            .field("insecure", &self.insecure)
            .field("insecure_registries", &self.insecure_registries)
            .field("auth_file", &self.auth_file)
            .field("progress", &self.progress.is_some())
            .field("stall", &self.stall)
            .finish()
    }
}

struct Remote<'a> {
    registry: &'a mut Registry,
    progress: Option<&'a Progress>,
}

impl BlobSource for Remote<'_> {
    fn fetch(&mut self, store: &Store, d: &Descriptor, what: &str) -> Result<(), Error> {
        if store.has_blob(&d.digest) {
            return Ok(());
        }
        // Kept per registry and repository: another registry's partial download (a hostile
        // one's garbage) is never continued.
        let part = store.tmp_dir().join(format!(
            "{}-{}.part",
            self.registry.source_key(),
            d.digest.hex()
        ));
        if let Some(p) = self.progress {
            let have = std::fs::metadata(&part).map_or(0, |m| m.len());
            let resume = if have > 0 {
                format!(", continuing after {have} bytes")
            } else {
                String::new()
            };
            p(&format!(
                "fetching {what} ({}): {} bytes{resume}",
                d.digest, d.size
            ));
        }
        self.registry.download(&d.digest, d.size, &part)?;
        store.adopt_blob(&part, &d.digest, what)
    }
}

/// Whether plain HTTP is allowed for `registry`.
fn insecure(registry: &str, opts: &PullOptions) -> bool {
    opts.insecure
        || opts
            .insecure_registries
            .iter()
            .any(|r| r.trim() == registry)
        || std::env::var("CORRAL_INSECURE_REGISTRIES")
            .is_ok_and(|l| l.split(',').any(|r| r.trim() == registry))
}

pub fn pull(store: &Store, reference: &str, opts: &PullOptions) -> Result<ImageRecord, Error> {
    let remote = RemoteRef::parse(reference)?;
    let file = auth::auth_file(opts.auth_file.as_deref());
    let creds = auth::credentials(&remote.registry, file.as_deref())?;
    let stall = opts.stall.unwrap_or(steady::STALL);
    let mut registry = Registry::new(&remote, insecure(&remote.registry, opts), creds, stall)?;
    let _writer = store.writer_lock()?;
    let (mut body, mut digest) = registry.manifest(&remote.reference())?;
    let mut index: Option<Digest> = None;
    for _ in 0..4 {
        match oci::parse_document(&body, "manifest")? {
            Document::Manifest(_) => {
                let name = remote.store_name();
                return ingest(
                    store,
                    &mut Remote {
                        registry: &mut registry,
                        progress: opts.progress.as_ref(),
                    },
                    &body,
                    index,
                    name.as_deref().map(ImageName::Given),
                    format!("pull {reference}"),
                );
            }
            Document::Index(idx) => {
                store.put_blob_bytes(&body, "index")?;
                index.get_or_insert(digest.clone());
                let d = oci::pick_platform(&idx)?;
                (body, digest) = registry.manifest(&d.digest.to_string())?;
            }
        }
    }
    Err(Error::BadManifest {
        what: "index".into(),
        reason: "indexes nested too deep".into(),
    })
}
