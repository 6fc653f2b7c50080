//! A real minimal Debian root (mmdebstrap --variant=minbase, from Debian's packages): imported as
//! a root-filesystem tar and as an OCI layout holding the same tar, it is the same layer.
//! The tar is built once and cached in /var/tmp (keyed by the mmdebstrap arguments).

mod common;

use std::path::Path;

use common::debian_root::debian_tar;
use corral_images::{import, Store};

fn sha_file(p: &Path) -> String {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    std::io::copy(&mut std::fs::File::open(p).unwrap(), &mut h).unwrap();
    format!("sha256:{}", hex::encode(h.finalize()))
}

#[test]
fn a_minbase_debian_root_imports_as_rootfs_and_as_oci_layout_with_one_layer() {
    let tar = debian_tar();
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let store = Store::open(&tmp.path().join("data")).unwrap();
    let r = import(&store, &tar, Some("debian:minbase")).unwrap();
    assert_eq!(r.layers.len(), 1);
    let layer = store.layer_path(&r.layers[0].diff_id);
    assert!(layer.join("etc/debian_version").is_file());
    assert!(layer.join("usr/bin/dpkg").is_file());
    assert!(
        std::fs::symlink_metadata(layer.join("bin"))
            .unwrap()
            .file_type()
            .is_symlink(),
        "merged /usr kept as links"
    );

    // The same tar as the (uncompressed) layer of a hand-written OCI layout.
    let layout = tmp.path().join("layout");
    std::fs::create_dir_all(layout.join("blobs/sha256")).unwrap();
    let diff_id = sha_file(&tar);
    let size = std::fs::metadata(&tar).unwrap().len();
    std::fs::hard_link(&tar, layout.join("blobs/sha256").join(&diff_id[7..]))
        .or_else(|_| {
            std::fs::copy(&tar, layout.join("blobs/sha256").join(&diff_id[7..])).map(|_| ())
        })
        .unwrap();
    let put = |b: &[u8]| {
        let d = format!(
            "sha256:{}",
            hex::encode(<sha2::Sha256 as sha2::Digest>::digest(b))
        );
        std::fs::write(layout.join("blobs/sha256").join(&d[7..]), b).unwrap();
        (d, b.len())
    };
    let config = serde_json::json!({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": [diff_id]}});
    let (cd, cs) = put(config.to_string().as_bytes());
    let manifest = serde_json::json!({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cd, "size": cs},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": diff_id, "size": size}]});
    let (md, ms) = put(manifest.to_string().as_bytes());
    std::fs::write(
        layout.join("oci-layout"),
        r#"{"imageLayoutVersion":"1.0.0"}"#,
    )
    .unwrap();
    let index = serde_json::json!({"schemaVersion": 2, "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": md, "size": ms}]});
    std::fs::write(layout.join("index.json"), index.to_string()).unwrap();
    let o = import(&store, &layout, Some("debian:oci")).unwrap();
    assert_eq!(o.layers[0].diff_id, r.layers[0].diff_id);
    assert_eq!(
        std::fs::read_dir(store.root().join("layers/sha256"))
            .unwrap()
            .count(),
        1,
        "stored once"
    );
}
