//! How `GET /images` and the image endpoints describe one image (its own module: the build jobs
//! of [`super::image_builds`] carry one, and `AppState` holds those jobs).

/// One image as `GET /images` lists it.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
#[schema(example = json!({"names": ["python:3.12-slim"], "digest": "sha256:4c3f0ef8d6e9b1a2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a", "size": 41234567, "created": "2024-10-01T12:00:00Z", "platform": "linux/amd64", "source": "pull python:3.12-slim"}))]
pub struct ImageInfo {
    /// Every name pointing at it (none: reachable by digest only).
    pub names: Vec<String>,
    /// The image manifest's digest: what results record.
    pub digest: String,
    /// Bytes of its blobs.
    pub size: u64,
    /// The configuration's `created`, when it has one.
    pub created: Option<String>,
    pub platform: String,
    /// Where it came from (`pull REF`, `import FILE`).
    pub source: String,
}

impl ImageInfo {
    pub fn of(names: Vec<String>, r: corral_images::ImageRecord) -> ImageInfo {
        ImageInfo {
            names,
            digest: r.digest.to_string(),
            size: r.size,
            created: r.created,
            platform: r.platform,
            source: r.source,
        }
    }
}
