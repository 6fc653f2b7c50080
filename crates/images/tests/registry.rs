//! Pulls from a real registry (Debian's `docker-registry`, the CNCF distribution registry) started
//! on loopback by the test; images made offline and pushed with `skopeo` as OCI and as Docker
//! schema 2, gzip and zstd layers.

mod common;

use std::path::PathBuf;

use common::registry::*;
use common::*;
use corral_images::{pull, PullOptions, Store};
use corral_testkit::registry::{start_registry, Registry};

fn layers() -> Vec<Vec<u8>> {
    two_layers("noise", &noise(300_000))
}

/// Incompressible bytes, so a gzip'd layer stays large enough to be cut in half.
fn noise(n: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn insecure() -> PullOptions {
    PullOptions {
        insecure: true,
        auth_file: Some(PathBuf::from("/nonexistent")),
        progress: None,
        insecure_registries: Vec::new(),
        stall: None,
    }
}

fn registry_blob(reg: &Registry, digest: &str) -> PathBuf {
    let hex = &digest[7..];
    reg.root
        .join("docker/registry/v2/blobs/sha256")
        .join(&hex[..2])
        .join(hex)
        .join("data")
}

#[test]
fn pulls_oci_and_docker_images_by_tag_and_digest_and_refuses_tampering() {
    let tmp = scratch();
    let reg = start_registry(tmp.path(), "");
    let expected: Vec<String> = layers().iter().map(|l| sha(l)).collect();
    let gz = tmp.path().join("gz");
    let manifest = oci_layout(&gz, &layers(), "gzip", "v1");
    let zs = tmp.path().join("zs");
    oci_layout(&zs, &layers(), "zstd", "v1");
    skopeo_push(&gz, &format!("{}/course/oci:v1", reg.addr), &[]);
    skopeo_push(
        &gz,
        &format!("{}/course/docker:v1", reg.addr),
        &["--format", "v2s2"],
    );
    skopeo_push(&zs, &format!("{}/course/zstd:v1", reg.addr), &[]);

    let store = Store::open(&tmp.path().join("data")).unwrap();
    // Without --insecure, plain HTTP is not tried.
    let e = pull(
        &store,
        &format!("{}/course/oci:v1", reg.addr),
        &PullOptions::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("https://"), "{e}");

    let r = pull(&store, &format!("{}/course/oci:v1", reg.addr), &insecure()).unwrap();
    assert_eq!(
        r.digest.to_string(),
        manifest,
        "the OCI manifest is stored as pushed"
    );
    assert_eq!(
        r.layers
            .iter()
            .map(|l| l.diff_id.to_string())
            .collect::<Vec<_>>(),
        expected
    );
    assert_eq!(r.working_dir.as_deref(), Some("/work"));
    let root = store
        .rootfs(&format!("{}/course/oci:v1", reg.addr))
        .unwrap();
    assert!(root.lower_dirs[1].join("etc/os-release").is_file());

    let d = pull(
        &store,
        &format!("{}/course/docker:v1", reg.addr),
        &insecure(),
    )
    .unwrap();
    assert_ne!(
        d.digest, r.digest,
        "a Docker schema 2 manifest is another document"
    );
    assert!(
        d.layers[0].media_type.contains("docker"),
        "{:?}",
        d.layers[0].media_type
    );
    assert_eq!(
        d.layers
            .iter()
            .map(|l| l.diff_id.to_string())
            .collect::<Vec<_>>(),
        expected
    );

    let z = pull(&store, &format!("{}/course/zstd:v1", reg.addr), &insecure()).unwrap();
    assert!(z.layers[0].media_type.ends_with("zstd"));
    assert_eq!(
        z.layers
            .iter()
            .map(|l| l.diff_id.to_string())
            .collect::<Vec<_>>(),
        expected
    );
    assert_eq!(
        std::fs::read_dir(store.root().join("layers/sha256"))
            .unwrap()
            .count(),
        2,
        "layers shared"
    );

    // By digest, into a fresh store.
    let store2 = Store::open(&tmp.path().join("data2")).unwrap();
    let by_digest = pull(
        &store2,
        &format!("{}/course/oci@{manifest}", reg.addr),
        &insecure(),
    )
    .unwrap();
    assert_eq!(by_digest.digest.to_string(), manifest);
    assert_eq!(
        store2
            .resolve(&format!("{}/course/oci@{manifest}", reg.addr))
            .unwrap()
            .1
            .digest
            .to_string(),
        manifest
    );

    // A tampered layer blob in the registry is refused, and nothing is recorded.
    let gz_layer = sha(&gzip(&layers()[0]));
    let path = registry_blob(&reg, &gz_layer);
    let mut bytes = std::fs::read(&path).unwrap();
    let n = bytes.len();
    bytes[n / 2] ^= 0xff;
    std::fs::write(&path, bytes).unwrap();
    let store3 = Store::open(&tmp.path().join("data3")).unwrap();
    let e = pull(&store3, &format!("{}/course/oci:v1", reg.addr), &insecure())
        .unwrap_err()
        .to_string();
    assert!(e.contains("digest mismatch"), "{e}");
    assert!(store3.list().unwrap().is_empty());
    assert!(!store3
        .layer_path(&corral_images::Digest::parse(&expected[0]).unwrap())
        .exists());
}

#[test]
fn pulls_through_an_oci_index_and_a_docker_manifest_list_picking_this_platform() {
    let tmp = scratch();
    let reg = start_registry(tmp.path(), "");
    let layout = tmp.path().join("multi");
    oci_layout(&layout, &layers(), "gzip", "v1");
    let (index, amd) = make_multi_platform(&layout, "v1");
    skopeo_push(&layout, &format!("{}/multi/oci:v1", reg.addr), &["--all"]);
    skopeo_push(
        &layout,
        &format!("{}/multi/docker:v1", reg.addr),
        &["--all", "--format", "v2s2"],
    );
    let store = Store::open(&tmp.path().join("data")).unwrap();

    let r = pull(&store, &format!("{}/multi/oci:v1", reg.addr), &insecure()).unwrap();
    assert_eq!(r.platform, "linux/amd64");
    assert_eq!(r.digest.to_string(), amd);
    assert_eq!(r.index.as_ref().map(|d| d.to_string()), Some(index.clone()));
    // By the index's digest: the same image, and the index digest names it in the store.
    let by_index = pull(
        &store,
        &format!("{}/multi/oci@{index}", reg.addr),
        &insecure(),
    )
    .unwrap();
    assert_eq!(by_index.digest.to_string(), amd);
    assert_eq!(store.resolve(&index).unwrap().1.digest.to_string(), amd);

    let d = pull(
        &store,
        &format!("{}/multi/docker:v1", reg.addr),
        &insecure(),
    )
    .unwrap();
    assert_eq!(d.platform, "linux/amd64");
    assert!(d.index.is_some(), "a Docker manifest list was followed");
}

#[test]
fn a_cut_off_pull_continues_from_its_part_file() {
    let tmp = scratch();
    let reg = start_registry(tmp.path(), "");
    let layout = tmp.path().join("layout");
    oci_layout(&layout, &layers(), "gzip", "v1");
    skopeo_push(&layout, &format!("{}/resume/img:v1", reg.addr), &[]);
    let store = Store::open(&tmp.path().join("data")).unwrap();
    let layer = &layers()[0];
    let big = &gzip(layer);
    // Partial files are kept per registry and repository.
    let part_of = |repository: &str| {
        let source = sha(format!("{}/{repository}", reg.addr).as_bytes());
        store
            .tmp_dir()
            .join(format!("{}-{}.part", &source[7..19], &sha(big)[7..]))
    };
    let part = part_of("resume/img");

    // A wrong first half: if the pull continued with Range (as it must), the result is refused
    // and the part file deleted; were the blob fetched whole, this would pass.
    let mut wrong = big[..big.len() / 2].to_vec();
    wrong[600] ^= 0xff;
    std::fs::write(&part, &wrong).unwrap();
    let reference = format!("{}/resume/img:v1", reg.addr);
    let e = pull(&store, &reference, &insecure())
        .unwrap_err()
        .to_string();
    assert!(e.contains("digest mismatch"), "{e}");
    assert!(!part.exists());

    // Another repository's (another registry's) wrong half is not continued: the pull starts
    // afresh and succeeds.
    let store2 = Store::open(&tmp.path().join("data2")).unwrap();
    let elsewhere = store2
        .tmp_dir()
        .join(part_of("other/img").file_name().unwrap());
    std::fs::write(&elsewhere, &wrong).unwrap();
    pull(&store2, &reference, &insecure()).unwrap();
    assert!(
        elsewhere.exists(),
        "another source's part file is left alone"
    );

    // The right first half: the pull completes it.
    std::fs::write(&part, &big[..big.len() / 2]).unwrap();
    let r = pull(&store, &reference, &insecure()).unwrap();
    assert_eq!(r.layers[0].diff_id.to_string(), sha(layer));
    assert!(!part.exists());
}

/// A token server for the registry's `auth: token`: checks Basic credentials, answers with a JWT
/// (RS256, signed by `openssl`, the certificate in its `x5c` header) granting the asked scope.
#[test]
fn pulls_with_bearer_token_auth_and_credentials_from_a_config_file() {
    let tmp = scratch();
    let tokens = start_token_server(tmp.path(), "staff", "s3cret");
    let auth = token_auth_config(&tokens, tmp.path());
    let reg = start_registry(tmp.path(), &auth);
    let layout = tmp.path().join("layout");
    let manifest = oci_layout(&layout, &layers(), "gzip", "v1");
    skopeo_push(
        &layout,
        &format!("{}/private/img:v1", reg.addr),
        &["--dest-creds", "staff:s3cret"],
    );
    // Pulled through the token server's port, so the realm is on the registry's own host:port
    // (Basic credentials go over plain HTTP to no other realm).
    tokens.front(&reg.addr);
    let reference = format!("{}/private/img:v1", tokens.addr);
    let store = Store::open(&tmp.path().join("data")).unwrap();

    // No credentials: refused by the token server, and said so.
    let e = pull(&store, &reference, &insecure())
        .unwrap_err()
        .to_string();
    assert!(e.contains("credentials"), "{e}");

    // Wrong credentials in the file: refused.
    use base64::Engine;
    let file = tmp.path().join("auth.json");
    let write = |user: &str, pw: &str| {
        let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pw}"));
        std::fs::write(
            &file,
            serde_json::json!({"auths": {tokens.addr.clone(): {"auth": auth}}}).to_string(),
        )
        .unwrap();
    };
    write("staff", "wrong");
    let opts = PullOptions {
        insecure: true,
        auth_file: Some(file.clone()),
        progress: None,
        insecure_registries: Vec::new(),
        stall: None,
    };
    assert!(pull(&store, &reference, &opts).is_err());

    // The right ones: the image.
    write("staff", "s3cret");
    let r = pull(&store, &reference, &opts).unwrap();
    assert_eq!(r.digest.to_string(), manifest);
}
