//! The real minimal Debian root that image tests run in, and an OCI layout around it.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Where built test roots are cached across builds and test runs.
const CACHE: &str = "/var/tmp/corral-test-cache";

/// A minimal Debian bookworm root (`mmdebstrap --variant=minbase`, Debian's packages) with the
/// `include`d packages, as a root-filesystem tar: built on first use (needs Debian's mirror) and
/// cached in /var/tmp/corral-test-cache, keyed by the packages. Concurrent test processes wait for
/// one build.
pub fn debian_tar(include: &[&str]) -> PathBuf {
    let cache = Path::new(CACHE);
    std::fs::create_dir_all(cache).unwrap();
    let key: String = include.iter().map(|p| format!("-{p}")).collect();
    let path = cache.join(format!("mmdebstrap-minbase{key}-bookworm.tar"));
    let _lock = crate::file_lock::lock(&cache.join(format!("mmdebstrap{key}.lock")));
    if !path.is_file() {
        let partial = cache.join(format!("partial{key}-{}.tar", std::process::id()));
        let st = Command::new("mmdebstrap")
            .args(["--quiet", "--variant=minbase"])
            .args(include.iter().map(|p| format!("--include={p}")))
            .arg("bookworm")
            .arg(&partial)
            .status()
            .expect("mmdebstrap (scripts/setup installs it)");
        assert!(
            st.success(),
            "mmdebstrap failed (it needs Debian's package mirror)"
        );
        std::fs::rename(&partial, &path).unwrap();
    }
    path
}

/// `sha256:HEX` of a file's bytes.
pub fn sha256_file(p: &Path) -> String {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    std::io::copy(&mut std::fs::File::open(p).unwrap(), &mut h).unwrap();
    format!("sha256:{}", hex::encode(h.finalize()))
}

/// Writes an OCI image layout at `layout` whose one layer is the uncompressed tar `tar` (linked,
/// not copied, where it can be). `config` is the image config's `config` object (user, env,
/// working folder), if any. Returns the layer's digest (its diff id).
pub fn oci_layout_of_tar(layout: &Path, tar: &Path, config: Option<serde_json::Value>) -> String {
    oci_layout_of_tars(layout, &[tar], config).remove(0)
}

/// [`oci_layout_of_tar`] with several layers, bottom first. Returns their digests.
pub fn oci_layout_of_tars(
    layout: &Path,
    tars: &[&Path],
    config: Option<serde_json::Value>,
) -> Vec<String> {
    let blobs = layout.join("blobs/sha256");
    std::fs::create_dir_all(&blobs).unwrap();
    let put = |b: &[u8]| {
        use sha2::Digest;
        let d = format!("sha256:{}", hex::encode(sha2::Sha256::digest(b)));
        std::fs::write(blobs.join(&d[7..]), b).unwrap();
        (d, b.len())
    };
    let mut diff_ids = Vec::new();
    let mut layers = Vec::new();
    for tar in tars {
        let diff_id = sha256_file(tar);
        let size = std::fs::metadata(tar).unwrap().len();
        std::fs::hard_link(tar, blobs.join(&diff_id[7..]))
            .or_else(|_| std::fs::copy(tar, blobs.join(&diff_id[7..])).map(drop))
            .unwrap();
        layers.push(serde_json::json!({"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": diff_id, "size": size}));
        diff_ids.push(diff_id);
    }
    let mut image = serde_json::json!({"architecture": "amd64", "os": "linux",
        "rootfs": {"type": "layers", "diff_ids": diff_ids}});
    if let Some(config) = config {
        image["config"] = config;
    }
    let (cd, cs) = put(image.to_string().as_bytes());
    let manifest = serde_json::json!({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cd, "size": cs},
        "layers": layers});
    let (md, ms) = put(manifest.to_string().as_bytes());
    std::fs::write(
        layout.join("oci-layout"),
        r#"{"imageLayoutVersion":"1.0.0"}"#,
    )
    .unwrap();
    let index = serde_json::json!({"schemaVersion": 2, "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": md, "size": ms}]});
    std::fs::write(layout.join("index.json"), index.to_string()).unwrap();
    diff_ids
}
