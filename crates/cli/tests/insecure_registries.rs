//! Plain-HTTP registries named in the configuration file: a real registry (Debian's
//! `docker-registry`) on loopback without TLS, a one-layer image pushed with `skopeo`. A server
//! whose `[images] insecure_registries` lists it pulls from it (`POST /images`); one whose
//! configuration does not is refused (HTTPS only) with the URL it tried; `corral env pull
//! --config FILE` reads the same list; a malformed entry stops the server at start.

mod server_support;

use std::path::Path;
use std::process::{Command, Stdio};

use corral_testkit::registry::start_registry;
use reqwest::StatusCode;
use serde_json::json;
use server_support::*;

/// Writes an OCI layout of one uncompressed layer holding `hello.txt`.
fn oci_layout(dir: &Path) {
    let blobs = dir.join("blobs/sha256");
    std::fs::create_dir_all(&blobs).unwrap();
    let put = |b: &[u8]| {
        let hex = corral_store::sha256_hex(b);
        std::fs::write(blobs.join(&hex), b).unwrap();
        format!("sha256:{hex}")
    };
    let mut tar = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(6);
    h.set_mode(0o644);
    h.set_cksum();
    tar.append_data(&mut h, "hello.txt", &b"hello\n"[..])
        .unwrap();
    let layer = tar.into_inner().unwrap();
    let layer_digest = put(&layer);
    let config = serde_json::to_vec(&json!({
        "architecture": "amd64", "os": "linux",
        "rootfs": {"type": "layers", "diff_ids": [layer_digest]}
    }))
    .unwrap();
    let config_digest = put(&config);
    let manifest = serde_json::to_vec(&json!({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest, "size": config.len()},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layer_digest, "size": layer.len()}]
    }))
    .unwrap();
    let manifest_digest = put(&manifest);
    std::fs::write(dir.join("oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
    std::fs::write(
        dir.join("index.json"),
        serde_json::to_vec(&json!({"schemaVersion": 2, "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": manifest_digest,
            "size": manifest.len(), "annotations": {"org.opencontainers.image.ref.name": "v1"}}]}))
        .unwrap(),
    )
    .unwrap();
}

#[test]
fn registries_listed_as_insecure_in_the_config_are_pulled_over_plain_http() {
    let tmp = tempfile::tempdir().unwrap();
    let reg = start_registry(tmp.path(), "");
    let layout = tmp.path().join("layout");
    oci_layout(&layout);
    let out = Command::new("skopeo")
        .args(["--insecure-policy", "copy", "-q", "--dest-tls-verify=false"])
        .arg(format!("oci:{}:v1", layout.display()))
        .arg(format!("docker://{}/course/hello:v1", reg.addr))
        .stderr(Stdio::piped())
        .output()
        .expect("skopeo (scripts/setup installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reference = format!("{}/course/hello:v1", reg.addr);
    let insecure_config = format!("[images]\ninsecure_registries = [\"{}\"]\n", reg.addr);

    // Not listed: HTTPS only, and the error says which URL was tried.
    let plain = Server::start("", &[]);
    rt().block_on(async {
        let (st, e) = plain
            .post(&plain.admin, "/images", json!({"pull": reference}))
            .await;
        assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{e}");
        assert!(e["message"].as_str().unwrap().contains("https://"), "{e}");
    });
    drop(plain);

    // Listed: pulled over plain HTTP.
    let s = Server::start(&insecure_config, &[]);
    rt().block_on(async {
        let (st, img) = s
            .post(&s.admin, "/images", json!({"pull": reference}))
            .await;
        assert_eq!(st, StatusCode::CREATED, "{img}\n{}", s.log());
        assert_eq!(img["names"], json!([reference]), "{img}");
    });

    // `corral env pull --config` reads the same list (no --insecure).
    let cfg = tmp.path().join("corral.toml");
    std::fs::write(&cfg, &insecure_config).unwrap();
    let data = tmp.path().join("data");
    let pull = |config: Option<&Path>| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_corral"));
        c.env_remove("CORRAL_INSECURE_REGISTRIES")
            .args(["env", "--data"])
            .arg(&data);
        if let Some(f) = config {
            c.arg("--config").arg(f);
        }
        c.args(["pull", &reference]).output().unwrap()
    };
    let out = pull(None);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("https://"));
    let out = pull(Some(&cfg));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A malformed entry is a configuration error naming it.
    let bad = tmp.path().join("bad.toml");
    std::fs::write(
        &bad,
        "[images]\ninsecure_registries = [\"http://registry.lab:5000\"]\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_corral"))
        .arg("serve")
        .arg("--config")
        .arg(&bad)
        .arg("--data")
        .arg(tmp.path().join("bad-data"))
        .args(["--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("insecure_registries") && err.contains("http://registry.lab:5000"),
        "{err}"
    );
}
