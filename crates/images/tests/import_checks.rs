//! What an import refuses even though the store could make an image of it: blobs that are not
//! what they claim (checked even when the store has their layer already), missing blobs and files.

mod common;

use std::path::Path;

use common::*;
use corral_images::{import, Error, Store};
use serde_json::{json, Value};

/// One layer of a hand-made layout: the blob as written, the size its descriptor claims, the
/// diff-id the config claims.
struct Layer {
    blob: Vec<u8>,
    size: usize,
    diff_id: String,
}

impl Layer {
    /// An honest gzip layer of `tar`.
    fn gz(tar: &[u8]) -> Layer {
        let blob = gzip(tar);
        Layer {
            size: blob.len(),
            blob,
            diff_id: sha(tar),
        }
    }
}

fn put(dir: &Path, b: &[u8]) -> String {
    let d = sha(b);
    std::fs::write(dir.join("blobs/sha256").join(&d[7..]), b).unwrap();
    d
}

/// An OCI layout at `dir` of `layers` and a config with `config` merged over the usual one.
fn layout(dir: &Path, layers: &[Layer], config: Value) -> std::path::PathBuf {
    std::fs::create_dir_all(dir.join("blobs/sha256")).unwrap();
    std::fs::write(dir.join("oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
    let descs: Vec<Value> = layers
        .iter()
        .map(|l| {
            json!({"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                   "digest": put(dir, &l.blob), "size": l.size})
        })
        .collect();
    let mut c = json!({
        "architecture": corral_images::oci::host_architecture(), "os": "linux",
        "config": {"Env": ["PATH=/usr/bin:/bin"]},
        "rootfs": {"type": "layers", "diff_ids": layers.iter().map(|l| l.diff_id.clone()).collect::<Vec<_>>()}
    });
    for (k, v) in config.as_object().unwrap() {
        c[k] = v.clone();
    }
    let c = serde_json::to_vec(&c).unwrap();
    let cd = put(dir, &c);
    let m = serde_json::to_vec(&json!({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cd, "size": c.len()},
        "layers": descs
    }))
    .unwrap();
    let md = put(dir, &m);
    let index = json!({"schemaVersion": 2, "manifests": [{
        "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": md, "size": m.len()}]});
    std::fs::write(dir.join("index.json"), index.to_string()).unwrap();
    dir.to_path_buf()
}

fn base_tar() -> Vec<u8> {
    tar(&[dir("bin/"), file("bin/hello", b"hello from the base\n")])
}

/// A store that already holds the base layer (imported honestly as `base:1`).
fn store_with_base(tmp: &Path) -> Store {
    let store = Store::open(&tmp.join("data")).unwrap();
    import(
        &store,
        &layout(&tmp.join("base"), &[Layer::gz(&base_tar())], json!({})),
        Some("base:1"),
    )
    .unwrap();
    store
}

#[test]
fn a_truncated_layer_blob_is_refused_even_when_its_layer_is_stored() {
    let tmp = scratch();
    let store = store_with_base(tmp.path());
    let honest = Layer::gz(&base_tar());
    let cut = honest.blob[..honest.blob.len() / 2].to_vec();
    let bad = Layer {
        size: cut.len(),
        blob: cut,
        diff_id: honest.diff_id.clone(),
    };
    let e = import(
        &store,
        &layout(&tmp.path().join("cut"), &[bad], json!({})),
        Some("b/cut"),
    )
    .unwrap_err();
    assert!(matches!(e, Error::LayerStream(_)), "{e}");
    assert!(store.resolve("b/cut").is_err());
    // A fresh store refuses it the same way.
    let fresh = Store::open(&tmp.path().join("fresh")).unwrap();
    assert!(import(&fresh, &tmp.path().join("cut"), None).is_err());
}

#[test]
fn a_layer_blob_cannot_borrow_another_stored_layer_by_its_diff_id() {
    let tmp = scratch();
    let store = store_with_base(tmp.path());
    let other = tar(&[file("other.txt", b"not the base\n")]);
    let mut borrow = Layer::gz(&other);
    borrow.diff_id = sha(&base_tar());
    let e = import(
        &store,
        &layout(&tmp.path().join("borrow"), &[borrow], json!({})),
        Some("b/borrow"),
    )
    .unwrap_err();
    assert!(
        matches!(&e, Error::DigestMismatch { expected, .. } if *expected == sha(&base_tar())),
        "{e}"
    );
    assert!(store.resolve("b/borrow").is_err());
}

#[test]
fn a_descriptor_size_that_lies_is_refused_even_when_the_blob_is_stored() {
    let tmp = scratch();
    let store = store_with_base(tmp.path());
    let mut lie = Layer::gz(&base_tar());
    lie.size = 5;
    let e = import(
        &store,
        &layout(&tmp.path().join("lie"), &[lie], json!({})),
        Some("b/lie"),
    )
    .unwrap_err();
    assert!(e.to_string().contains("5 bytes"), "{e}");
    assert!(store.resolve("b/lie").is_err());
}

#[test]
fn a_blob_missing_from_the_archive_is_named_even_when_the_store_has_it() {
    let tmp = scratch();
    let store = store_with_base(tmp.path());
    let honest = Layer::gz(&base_tar());
    let blob = sha(&honest.blob);
    let dir = layout(&tmp.path().join("missing"), &[honest], json!({}));
    std::fs::remove_file(dir.join("blobs/sha256").join(&blob[7..])).unwrap();
    let e = import(&store, &dir, Some("b/missing")).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("the archive has no blob {blob} for layer 1")
    );
    // The same in a fresh store, and from a tar of the layout (staged under the store).
    let fresh = Store::open(&tmp.path().join("fresh")).unwrap();
    let tar_path = tmp.path().join("missing.tar");
    let st = std::process::Command::new("tar")
        .arg("-cf")
        .arg(&tar_path)
        .arg("-C")
        .arg(&dir)
        .arg(".")
        .status()
        .unwrap();
    assert!(st.success());
    let e = import(&fresh, &tar_path, None).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("the archive has no blob {blob} for layer 1")
    );
    // An honest layout of the same layer still imports into the store that has it.
    import(
        &store,
        &layout(
            &tmp.path().join("again"),
            &[Layer::gz(&base_tar())],
            json!({"config": {"Env": ["A=1"]}}),
        ),
        Some("b/again"),
    )
    .unwrap();
}

#[test]
fn an_image_for_another_platform_is_refused_naming_both() {
    let tmp = scratch();
    let store = Store::open(&tmp.path().join("data")).unwrap();
    let host = corral_images::oci::host_architecture();
    let other = if host == "arm64" { "amd64" } else { "arm64" };
    let dir = layout(
        &tmp.path().join("arm"),
        &[Layer::gz(&base_tar())],
        json!({"architecture": other}),
    );
    let e = import(&store, &dir, Some("b/arm")).unwrap_err();
    assert!(matches!(e, Error::WrongPlatform { .. }), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains(&format!("linux/{other}")) && msg.contains(&format!("linux/{host}")),
        "{msg}"
    );
    let dir = layout(
        &tmp.path().join("win"),
        &[Layer::gz(&base_tar())],
        json!({"os": "windows"}),
    );
    let e = import(&store, &dir, Some("b/win")).unwrap_err();
    assert!(e.to_string().contains(&format!("windows/{host}")), "{e}");
    assert!(store.list().unwrap().is_empty());
    // The host's own platform imports.
    let dir = layout(&tmp.path().join("ok"), &[Layer::gz(&base_tar())], json!({}));
    import(&store, &dir, Some("b/ok")).unwrap();
}

#[test]
fn an_empty_archive_is_refused() {
    let tmp = scratch();
    let store = Store::open(&tmp.path().join("data")).unwrap();
    let empty = tmp.path().join("empty.tar");
    std::fs::write(&empty, b"").unwrap();
    let empty_tar = tmp.path().join("empty-tar.tar");
    std::fs::write(&empty_tar, [0u8; 10240]).unwrap();
    let empty_gz = tmp.path().join("empty.tar.gz");
    std::fs::write(&empty_gz, gzip(&[0u8; 1024])).unwrap();
    for p in [empty.as_path(), &empty_tar, &empty_gz] {
        let e = import(&store, p, Some("b/empty")).unwrap_err();
        assert!(matches!(e, Error::Unusable(_)), "{}: {e}", p.display());
        assert!(e.to_string().contains("holds no files"), "{e}");
    }
    // A device (or a FIFO) is refused before it is read: `/dev/zero` would never end.
    for dev in ["/dev/null", "/dev/zero"] {
        let e = import(&store, Path::new(dev), Some("b/empty")).unwrap_err();
        assert!(
            e.to_string()
                .contains("neither a regular file nor a folder"),
            "{dev}: {e}"
        );
    }
    assert!(store.list().unwrap().is_empty());
}

#[test]
fn an_image_without_layers_is_refused() {
    let tmp = scratch();
    let store = Store::open(&tmp.path().join("data")).unwrap();
    let e = import(
        &store,
        &layout(&tmp.path().join("none"), &[], json!({})),
        None,
    )
    .unwrap_err();
    assert!(e.to_string().contains("no layers"), "{e}");
    assert!(store.list().unwrap().is_empty());
}

#[test]
fn an_env_no_run_could_pass_is_refused() {
    let tmp = scratch();
    let store = Store::open(&tmp.path().join("data")).unwrap();
    let big = format!("BIG={}", "x".repeat(200 << 10));
    let many: Vec<String> = (0..10)
        .map(|i| format!("V{i}={}", "y".repeat(120 << 10)))
        .collect();
    for (i, (env, says)) in [
        (
            vec!["PATH=/bin".to_string(), "X=a\0b".to_string()],
            "Env entry 2 (X) has a NUL byte",
        ),
        (vec![big], "Env entry 1 (BIG) has 204804 bytes"),
        (many, "over the 1048576"),
    ]
    .into_iter()
    .enumerate()
    {
        let dir = layout(
            &tmp.path().join(format!("env{i}")),
            &[Layer::gz(&base_tar())],
            json!({"config": {"Env": env}}),
        );
        let e = import(&store, &dir, Some("b/env")).unwrap_err();
        assert!(matches!(e, Error::Unusable(_)), "{e}");
        assert!(e.to_string().contains(says), "{e}");
    }
    assert!(store.list().unwrap().is_empty());
    // A WorkingDir no program could start in (chdir takes at most PATH_MAX): refused, and the
    // message stays short.
    let dir = layout(
        &tmp.path().join("wd"),
        &[Layer::gz(&base_tar())],
        json!({"config": {"WorkingDir": format!("/{}", "a".repeat(100_000))}}),
    );
    let e = import(&store, &dir, Some("b/wd")).unwrap_err().to_string();
    assert!(e.contains("its WorkingDir (100001 bytes"), "{e}");
    assert!(e.len() < 1000, "{} bytes of error", e.len());
    // Variables up to the bounds import.
    let fits = vec![format!("OK={}", "z".repeat((128 << 10) - 5))];
    let dir = layout(
        &tmp.path().join("fits"),
        &[Layer::gz(&base_tar())],
        json!({"config": {"Env": fits}}),
    );
    import(&store, &dir, Some("b/fits")).unwrap();
}

/// Each layer is capped, but an image may have many: unpacking stops while the store's
/// filesystem still has 5% of its inodes (and space) free, saying so, rather than taking every
/// inode of the host's disk with a few megabytes of empty files.
#[test]
fn unpacking_stops_before_the_stores_disk_runs_out_of_inodes() {
    use nix::mount::{mount, umount2, MntFlags, MsFlags};
    let tmp = scratch();
    let small = tmp.path().join("small");
    std::fs::create_dir(&small).unwrap();
    mount(
        Some("tmpfs"),
        &small,
        Some("tmpfs"),
        MsFlags::empty(),
        Some("size=64m,nr_inodes=20000"),
    )
    .expect("a tmpfs of 20,000 inodes (the tests run as root)");
    struct Unmount<'a>(&'a Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = umount2(self.0, MntFlags::MNT_DETACH);
        }
    }
    let _unmount = Unmount(&small);
    let store = Store::open(&small.join("data")).unwrap();
    // 12,000 files: unpacked with room to spare; a second such layer stops once under 5% (1,000
    // inodes) are left, before the disk is full.
    let many = |tag: &str| {
        let names: Vec<String> = (0..12_000).map(|i| format!("{tag}/f{i}")).collect();
        let mut entries = vec![dir(&format!("{tag}/"))];
        entries.extend(names.iter().map(|n| file(n, b"")));
        tar(&entries)
    };
    let first = layout(&tmp.path().join("a"), &[Layer::gz(&many("a"))], json!({}));
    import(&store, &first, Some("t/a:1")).unwrap();
    let second = layout(&tmp.path().join("b"), &[Layer::gz(&many("b"))], json!({}));
    let e = import(&store, &second, Some("t/b:1")).unwrap_err();
    assert!(matches!(e, Error::NoRoom { .. }), "{e}");
    assert!(
        e.to_string().contains("inodes left on its filesystem"),
        "{e}"
    );
    assert!(store.resolve("t/b:1").is_err());
}
