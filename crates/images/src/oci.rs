//! The few OCI / Docker schema 2 JSON documents an image is made of (image-spec v1.1), with only
//! the fields corral reads. Small serde types rather than the `oci-spec` crate: Docker's media
//! types and the registries' variations need tolerant parsing, and nothing else is needed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::digest::Digest;
use crate::error::Error;

pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
pub const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";

/// Manifests and configs are small; anything bigger is refused before parsing.
pub const MAX_DOCUMENT: u64 = 4 << 20;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    pub digest: Digest,
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<Platform>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

impl Descriptor {
    pub fn new(media_type: &str, digest: Digest, size: u64) -> Descriptor {
        Descriptor {
            media_type: Some(media_type.into()),
            digest,
            size,
            platform: None,
            annotations: None,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Platform {
    pub architecture: String,
    pub os: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
}

/// An index or a Docker manifest list.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Index {
    pub manifests: Vec<Descriptor>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub schema_version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    pub config: Descriptor,
    pub layers: Vec<Descriptor>,
}

impl Manifest {
    /// An OCI manifest written by corral (for archives and root filesystems that have none), as
    /// the bytes that are stored and hashed.
    pub fn written(config: &[u8], config_digest: Digest, layers: Vec<Descriptor>) -> Vec<u8> {
        let m = Manifest {
            schema_version: 2,
            media_type: Some(OCI_MANIFEST.into()),
            config: Descriptor::new(OCI_CONFIG, config_digest, config.len() as u64),
            layers,
        };
        serde_json::to_vec(&m).expect("manifests serialise")
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ImageConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
    #[serde(default)]
    pub architecture: String,
    #[serde(default)]
    pub os: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<RunConfig>,
    pub rootfs: RootFs,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RunConfig {
    #[serde(rename = "Env", default, skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<String>>,
    #[serde(
        rename = "WorkingDir",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub working_dir: Option<String>,
    #[serde(rename = "Cmd", default, skip_serializing_if = "Option::is_none")]
    pub cmd: Option<Vec<String>>,
    #[serde(
        rename = "Entrypoint",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub entrypoint: Option<Vec<String>>,
    #[serde(rename = "User", default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RootFs {
    #[serde(rename = "type")]
    pub kind: String,
    pub diff_ids: Vec<Digest>,
}

/// What a manifest-ish document turned out to be.
pub enum Document {
    Index(Index),
    Manifest(Manifest),
}

/// Parses a manifest or an index, by its media type or (when absent) by its shape.
pub fn parse_document(bytes: &[u8], what: &str) -> Result<Document, Error> {
    let bad = |reason: String| Error::BadManifest {
        what: what.to_string(),
        reason,
    };
    let v: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| bad(e.to_string()))?;
    let mt = v.get("mediaType").and_then(|m| m.as_str()).unwrap_or("");
    let is_index =
        mt == OCI_INDEX || mt == DOCKER_LIST || (mt.is_empty() && v.get("manifests").is_some());
    if is_index {
        return serde_json::from_value(v)
            .map(Document::Index)
            .map_err(|e| bad(e.to_string()));
    }
    if !(mt.is_empty() || mt == OCI_MANIFEST || mt == DOCKER_MANIFEST) {
        return Err(Error::UnsupportedMediaType(crate::digest::excerpt(mt)));
    }
    if v.get("schemaVersion").and_then(|s| s.as_u64()) != Some(2) {
        return Err(bad(
            "only schemaVersion 2 manifests are supported (Docker schema 1 is not)".into(),
        ));
    }
    serde_json::from_value(v)
        .map(Document::Manifest)
        .map_err(|e| bad(e.to_string()))
}

/// This host's platform in OCI terms (`amd64`, `arm64`, …).
pub fn host_architecture() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

/// The index entry for this host's platform (linux/ARCH); entries without a platform also fit.
pub fn pick_platform(index: &Index) -> Result<&Descriptor, Error> {
    let arch = host_architecture();
    index
        .manifests
        .iter()
        .filter(|d| {
            d.media_type
                .as_deref()
                .is_none_or(|m| m == OCI_MANIFEST || m == DOCKER_MANIFEST)
        })
        .find(|d| {
            d.platform
                .as_ref()
                .is_none_or(|p| p.os == "linux" && p.architecture == arch)
        })
        .ok_or_else(|| Error::NoPlatform(format!("linux/{arch}")))
}
