//! Import of every form gives the same digest-addressed layers; store operations on the result.

mod common;

use std::path::Path;
use std::process::Command;

use common::*;
use corral_images::{import, Store};

fn layers() -> Vec<Vec<u8>> {
    two_layers("hello", b"#!/bin/sh\necho hi\n")
}

fn diff_ids(store: &Store, reference: &str) -> Vec<String> {
    let (_, r) = store.resolve(reference).unwrap();
    r.layers.iter().map(|l| l.diff_id.to_string()).collect()
}

fn tar_folder(dir: &Path, out: &Path) {
    let st = Command::new("tar")
        .arg("-cf")
        .arg(out)
        .arg("-C")
        .arg(dir)
        .arg(".")
        .status()
        .unwrap();
    assert!(st.success());
}

/// What `look` reads in the overlay of `root`'s layers, mounted read-only at `at` (unmounted
/// after).
fn in_overlay<T>(root: &corral_images::RootFs, at: &Path, look: impl FnOnce(&Path) -> T) -> T {
    let lower: Vec<String> = root
        .lower_dirs
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    std::fs::create_dir(at).unwrap();
    let st = Command::new("mount")
        .args(["-t", "overlay", "overlay", "-o"])
        .arg(format!("ro,lowerdir={}", lower.join(":")))
        .arg(at)
        .status()
        .unwrap();
    assert!(st.success(), "overlay mount of the stored layers");
    let seen = look(at);
    let _ = Command::new("umount").arg(at).status();
    seen
}

#[test]
fn every_import_form_gives_the_same_layers() {
    let tmp = scratch();
    let store = Store::open(&tmp.path().join("data")).unwrap();
    let expected: Vec<String> = layers().iter().map(|l| sha(l)).collect();

    // OCI folder (gzip layers), written by hand.
    let layout = tmp.path().join("layout");
    let manifest = oci_layout(&layout, &layers(), "gzip", "v1");
    let r = import(&store, &layout, Some("course/base:v1")).unwrap();
    assert_eq!(
        r.digest.to_string(),
        manifest,
        "a layout keeps its manifest digest"
    );
    assert_eq!(diff_ids(&store, "course/base:v1"), expected);
    assert_eq!(r.env, ["PATH=/usr/bin:/bin", "LANG=C.UTF-8"]);
    assert_eq!(r.working_dir.as_deref(), Some("/work"));
    assert_eq!(r.user.as_deref(), Some("1000"));

    // OCI tar (the same folder as a tar): the very same image.
    let oci_tar = tmp.path().join("oci.tar");
    tar_folder(&layout, &oci_tar);
    let r2 = import(&store, &oci_tar, Some("course/base:oci-tar")).unwrap();
    assert_eq!(r2.digest, r.digest);
    // Compressed (`docker save | gzip`, zstd): the same image, not a root filesystem of
    // `index.json` and `blobs/` that no program could run in.
    let bytes = std::fs::read(&oci_tar).unwrap();
    for (i, packed) in [gzip(&bytes), zstd(&bytes)].into_iter().enumerate() {
        let p = tmp.path().join(format!("oci-{i}.tar.z"));
        std::fs::write(&p, packed).unwrap();
        let r3 = import(&store, &p, Some(&format!("course/base:packed{i}"))).unwrap();
        assert_eq!(r3.digest, r.digest, "compressed archive {i}");
    }
    // xz and bzip2 (which `docker load` takes too): said, not read as a tar of garbage.
    for (magic, kind) in [
        (&b"\xfd7zXZ\x00rest"[..], "xz"),
        (&b"BZh91AY&SY"[..], "bzip2"),
    ] {
        let p = tmp.path().join(format!("image.tar.{kind}"));
        std::fs::write(&p, magic).unwrap();
        let e = import(&store, &p, Some("t/x:1")).unwrap_err().to_string();
        assert!(
            e.contains(&format!("{kind}-compressed: decompress it first")),
            "{e}"
        );
    }
    // A device or a FIFO is no archive: refused at once, not read for ever.
    let e = import(&store, Path::new("/dev/zero"), Some("t/zero:1"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("neither a regular file nor a folder"), "{e}");

    // zstd layers: other blobs, the same diff-ids.
    let zlayout = tmp.path().join("zlayout");
    oci_layout(&zlayout, &layers(), "zstd", "v1");
    import(&store, &zlayout, Some("course/base:zstd")).unwrap();
    assert_eq!(diff_ids(&store, "course/base:zstd"), expected);

    // skopeo's oci-archive and docker-archive of the same layout.
    for (dest, name) in [
        ("oci-archive", "skopeo-oci"),
        ("docker-archive", "skopeo-docker"),
    ] {
        let out = tmp.path().join(format!("{name}.tar"));
        let dest_ref = if dest == "docker-archive" {
            format!("{dest}:{}:example.org/skopeo:v1", out.display())
        } else {
            format!("{dest}:{}:v1", out.display())
        };
        let st = Command::new("skopeo")
            .args(["--insecure-policy", "copy", "-q"])
            .arg(format!("oci:{}:v1", layout.display()))
            .arg(&dest_ref)
            .status()
            .expect("skopeo (scripts/setup installs it)");
        assert!(st.success(), "skopeo copy to {dest}");
        let r = import(&store, &out, Some(&format!("course/base:{name}"))).unwrap();
        assert_eq!(
            diff_ids(&store, &format!("course/base:{name}")),
            expected,
            "{dest}"
        );
        assert_eq!(
            r.env,
            ["PATH=/usr/bin:/bin", "LANG=C.UTF-8"],
            "{dest} keeps the config"
        );
    }

    // A docker-archive's own name is used when no --name is given.
    let (names, _) = (store.list().unwrap(), ());
    assert!(names
        .iter()
        .any(|l| l.names.iter().any(|n| n == "course/base:skopeo-docker")));

    // A plain rootfs tar (plain, gzip, zstd) of the first layer: a one-layer image, same diff-id.
    let base = &layers()[0];
    for (i, bytes) in [base.clone(), gzip(base), zstd(base)]
        .into_iter()
        .enumerate()
    {
        let p = tmp.path().join(format!("rootfs{i}.tar"));
        std::fs::write(&p, bytes).unwrap();
        let r = import(&store, &p, Some(&format!("rootfs:{i}"))).unwrap();
        assert_eq!(
            diff_ids(&store, &format!("rootfs:{i}")),
            [expected[0].clone()]
        );
        assert!(r.env.iter().any(|e| e.starts_with("PATH=")));
    }
    // Plain rootfs tar imported twice: the same digest (the written config has no time in it).
    let again = import(&store, &tmp.path().join("rootfs0.tar"), None).unwrap();
    assert_eq!(again.digest, store.resolve("rootfs:0").unwrap().1.digest);

    // Each layer is stored once, however many images share it.
    let layer_dirs = std::fs::read_dir(store.root().join("layers/sha256"))
        .unwrap()
        .count();
    assert_eq!(layer_dirs, 2);
}

#[test]
fn store_operations_list_tag_remove_gc_and_rootfs() {
    let tmp = scratch();
    let store = Store::open(&tmp.path().join("data")).unwrap();
    let layout = tmp.path().join("layout");
    let manifest = oci_layout(&layout, &layers(), "", "v1");
    import(&store, &layout, Some("a/img")).unwrap();
    // Every form of REF.
    let hex = &manifest[7..];
    for reference in [
        "a/img",
        "a/img:latest",
        &manifest,
        &format!("a/img@{manifest}"),
        &hex[..12],
    ] {
        assert_eq!(
            store.resolve(reference).unwrap().1.digest.to_string(),
            manifest,
            "{reference}"
        );
    }
    assert!(
        store.resolve(&hex[..11]).is_err(),
        "a prefix needs 12 digits"
    );
    assert!(store
        .resolve("nope")
        .unwrap_err()
        .to_string()
        .contains("no image"));
    // Hex alone is a digest prefix, never a name: no name may look like one.
    let e = store.tag("a/img", "abcdef012345").unwrap_err().to_string();
    assert!(e.contains("12 or more hex digits alone"), "{e}");
    assert!(store.resolve("abcdef012345").is_err());

    let root = store.rootfs("a/img").unwrap();
    assert_eq!(root.lower_dirs.len(), 2);
    assert!(
        root.lower_dirs[0].join("etc/motd").is_file(),
        "top layer first"
    );
    assert!(root.lower_dirs[1].join("bin/hello").is_file());
    assert_eq!(root.working_dir.as_deref(), Some("/work"));
    // Its claim would keep the layers from the gc below, as a live sandbox's does.
    drop(root);

    store.tag("a/img", "b/other:1").unwrap();
    let listed = store.list().unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].names, ["a/img:latest", "b/other:1"]);

    let du = store.disk_usage().unwrap();
    assert_eq!((du.images, du.layers), (1, 2));
    assert!(du.blob_bytes > 0 && du.layer_bytes > 0);

    // Removing one name keeps the image; removing the last removes it; gc frees its parts.
    let (removed, gone) = store.remove("a/img").unwrap();
    assert_eq!((removed, gone), (vec!["a/img:latest".to_string()], None));
    assert_eq!(store.gc().unwrap().layers_removed, 0, "still referenced");
    let (_, gone) = store.remove("b/other:1").unwrap();
    assert_eq!(gone.unwrap().to_string(), manifest);
    let gc = store.gc().unwrap();
    assert_eq!((gc.layers_removed, gc.blobs_removed), (2, 4));
    assert!(std::fs::read_dir(store.root().join("layers/sha256"))
        .unwrap()
        .next()
        .is_none());
}

#[test]
fn a_tampered_blob_in_a_layout_is_refused() {
    let tmp = scratch();
    let store = Store::open(&tmp.path().join("data")).unwrap();
    let layout = tmp.path().join("layout");
    oci_layout(&layout, &layers(), "gzip", "v1");
    let blob = layout
        .join("blobs/sha256")
        .join(&sha(&gzip(&layers()[0]))[7..]);
    let mut b = std::fs::read(&blob).unwrap();
    let n = b.len();
    b[n - 10] ^= 0xff;
    std::fs::write(&blob, b).unwrap();
    let e = import(&store, &layout, Some("x")).unwrap_err().to_string();
    assert!(e.contains("digest mismatch"), "{e}");
    assert!(store.list().unwrap().is_empty());
}

#[test]
fn stored_layers_stack_with_overlayfs_whiteouts_and_opaque_folders_applied() {
    let tmp = scratch();
    let store = Store::open(&tmp.path().join("data")).unwrap();
    let layout = tmp.path().join("layout");
    let mut l = layers();
    l.push(tar(&[
        dir("bin/"),
        file("bin/.wh..wh..opq", b""),
        file("bin/only", b"new\n"),
    ]));
    oci_layout(&layout, &l, "gzip", "v1");
    import(&store, &layout, Some("stack")).unwrap();
    let root = store.rootfs("stack").unwrap();
    let seen = in_overlay(&root, &tmp.path().join("merged"), |merged| {
        (
            merged.join("etc/os-release").exists(),
            std::fs::read_to_string(merged.join("etc/motd")).ok(),
            merged.join("bin/hello").exists(),
            std::fs::read_to_string(merged.join("bin/only")).ok(),
        )
    });
    assert_eq!(
        seen,
        (
            false,
            Some("welcome\n".to_string()),
            false,
            Some("new\n".to_string())
        ),
        "whiteout hides etc/os-release; the opaque bin/ hides the lower bin/hello"
    );
}

#[test]
fn concurrent_imports_of_one_image_share_its_layers() {
    let tmp = scratch();
    let data = tmp.path().join("data");
    let layout = tmp.path().join("layout");
    oci_layout(&layout, &layers(), "gzip", "v1");
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let (data, layout) = (data.clone(), layout.clone());
            std::thread::spawn(move || {
                let store = Store::open(&data).unwrap();
                import(&store, &layout, Some(&format!("same:{i}")))
                    .unwrap()
                    .digest
            })
        })
        .collect();
    let digests: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert!(digests.windows(2).all(|w| w[0] == w[1]));
    let store = Store::open(&data).unwrap();
    let listed = store.list().unwrap();
    assert_eq!((listed.len(), listed[0].names.len()), (1, 4));
    let entries: Vec<_> = std::fs::read_dir(store.root().join("layers/sha256"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(entries.len(), 2, "two layers, no leftovers: {entries:?}");
}

/// An OCI layout of `layers` whose index records `name` (`io.containerd.image.name`).
fn layout_named(dir: &Path, layers: &[Vec<u8>], name: &str) -> String {
    let manifest = oci_layout(dir, layers, "gzip", "v1");
    let path = dir.join("index.json");
    let mut index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    index["manifests"][0]["annotations"]["io.containerd.image.name"] = name.into();
    std::fs::write(&path, serde_json::to_vec(&index).unwrap()).unwrap();
    manifest
}

/// A docker-archive folder of one uncompressed layer whose `RepoTags` records `name`.
fn docker_archive_named(dir: &Path, layer: &[u8], name: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("layer.tar"), layer).unwrap();
    let config = serde_json::json!({
        "architecture": "amd64", "os": "linux",
        "config": {"Env": ["PATH=/usr/bin:/bin"], "Cmd": ["sh"]},
        "rootfs": {"type": "layers", "diff_ids": [sha(layer)]}
    });
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    let manifest = serde_json::json!([
        {"Config": "config.json", "RepoTags": [name], "Layers": ["layer.tar"]}
    ]);
    std::fs::write(dir.join("manifest.json"), manifest.to_string()).unwrap();
}

#[test]
fn an_archive_may_not_take_a_name_from_another_image_unless_the_name_is_given() {
    let tmp = scratch();
    let store = Store::open(&tmp.path().join("data")).unwrap();
    let digest_of = |r: &str| store.resolve(r).unwrap().1.digest.to_string();

    // A name no image has: the archive's own is taken, and taken again by the same image.
    let good = tmp.path().join("good");
    let good_digest = layout_named(&good, &layers(), "deb:12");
    import(&store, &good, None).unwrap();
    assert_eq!(digest_of("deb:12"), good_digest);
    import(&store, &good, None).unwrap();

    // Another image naming itself deb:12 (an OCI layout, a docker-archive): refused, said how to
    // name it, and deb:12 is untouched.
    let evil = tmp.path().join("evil");
    let evil_digest = layout_named(&evil, &two_layers("evil", b"evil"), "deb:12");
    let evil_docker = tmp.path().join("evil-docker");
    docker_archive_named(&evil_docker, &two_layers("evil", b"evil")[0], "deb:12");
    for archive in [&evil, &evil_docker] {
        let e = import(&store, archive, None).unwrap_err().to_string();
        assert!(
            e.contains("\"deb:12\", which names another image already") && e.contains("--name"),
            "{e}"
        );
        assert_eq!(digest_of("deb:12"), good_digest);
    }

    // A name given explicitly still replaces, as documented.
    import(&store, &evil, Some("deb:12")).unwrap();
    assert_eq!(digest_of("deb:12"), evil_digest);
}

/// An archive that names itself after another image's digest (its short form, as `corral env
/// ls` prints it, or the whole hex) takes over nothing: a name of hex alone is no name, and hex
/// (`sha256:` or not) always names by digest.
#[test]
fn an_archive_named_like_a_digest_takes_over_no_image() {
    let tmp = scratch();
    let store = Store::open(&tmp.path().join("data")).unwrap();
    let good = tmp.path().join("good");
    let good_digest = layout_named(&good, &layers(), "deb:12");
    import(&store, &good, None).unwrap();
    let hex = good_digest.strip_prefix("sha256:").unwrap().to_string();
    for (i, name) in [format!("{}:latest", &hex[..12]), hex.clone()]
        .iter()
        .enumerate()
    {
        let evil = tmp.path().join(format!("evil-{i}"));
        docker_archive_named(&evil, &two_layers("evil", b"evil")[0], name);
        import(&store, &evil, None).unwrap();
        for reference in [
            &hex[..12],
            &format!("sha256:{}", &hex[..12]),
            &hex,
            &good_digest,
        ] {
            let (by, record) = store.resolve(reference).unwrap();
            assert_eq!(
                record.digest.to_string(),
                good_digest,
                "{reference} after {name}"
            );
            assert_eq!(by, None, "{reference}");
        }
    }
    // Nor may one be given.
    let e = import(&store, &good, Some(&hex[..16]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("12 or more hex digits alone"), "{e}");
}

/// An image of more layers than a sandbox's overlay can stack is refused when imported, saying
/// so (it used to import and then fail every run with a bare EINVAL); one layer listed many
/// times, within the bound, imports once and stacks as listed.
#[test]
fn too_many_layers_are_refused_and_a_repeated_layer_is_one_layer() {
    let tmp = scratch();
    let store = Store::open(&tmp.path().join("data")).unwrap();
    let one = layers()[0].clone();
    let many = tmp.path().join("many");
    oci_layout(
        &many,
        &vec![one.clone(); corral_images::MAX_LAYERS + 1],
        "gzip",
        "v1",
    );
    let e = import(&store, &many, Some("t/many:1"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&format!(
            "it has {} layers, over the {}",
            corral_images::MAX_LAYERS + 1,
            corral_images::MAX_LAYERS
        )),
        "{e}"
    );
    assert!(store.resolve("t/many:1").is_err());
    let repeated = tmp.path().join("repeated");
    oci_layout(
        &repeated,
        &vec![one.clone(); corral_images::MAX_LAYERS],
        "gzip",
        "v1",
    );
    import(&store, &repeated, Some("t/rep:1")).unwrap();
    let (_, r) = store.resolve("t/rep:1").unwrap();
    assert_eq!(r.layers.len(), corral_images::MAX_LAYERS);
    assert_eq!(store.rootfs("t/rep:1").unwrap().lower_dirs.len(), 1);

    // A, then B deleting A's file, then A again (`echo x >/a; rm /a; echo x >/a`): overlayfs
    // refuses one folder twice, so A stacks once, where it is highest, and shows the same.
    let b = tar(&[dir("etc/"), file("etc/.wh.os-release", b"")]);
    let aba = tmp.path().join("aba");
    oci_layout(&aba, &[one.clone(), b, one], "gzip", "v1");
    import(&store, &aba, Some("t/aba:1")).unwrap();
    let root = store.rootfs("t/aba:1").unwrap();
    assert_eq!(root.lower_dirs.len(), 2);
    let back = in_overlay(&root, &tmp.path().join("aba-merged"), |merged| {
        std::fs::read_to_string(merged.join("etc/os-release")).ok()
    });
    assert_eq!(
        back.as_deref(),
        Some("ID=corraltest\n"),
        "the top A's file is back"
    );
}

#[test]
fn a_folder_import_follows_no_symbolic_link() {
    let tmp = scratch();
    let store = Store::open(&tmp.path().join("data")).unwrap();
    let outside = tmp.path().join("outside");
    std::fs::create_dir(&outside).unwrap();

    // A layout whose layer blob is a link to a file elsewhere (with the right bytes even).
    let layout = tmp.path().join("layout");
    oci_layout(&layout, &layers(), "gzip", "v1");
    let blob = layout
        .join("blobs/sha256")
        .join(&sha(&gzip(&layers()[0]))[7..]);
    std::fs::rename(&blob, outside.join("layer")).unwrap();
    std::os::unix::fs::symlink(outside.join("layer"), &blob).unwrap();
    let e = import(&store, &layout, Some("t/link:1"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("has no blob"), "{e}");

    // A layout whose blobs folder is a link.
    let layout = tmp.path().join("layout2");
    oci_layout(&layout, &layers(), "gzip", "v1");
    std::fs::rename(layout.join("blobs"), outside.join("blobs")).unwrap();
    std::os::unix::fs::symlink(outside.join("blobs"), layout.join("blobs")).unwrap();
    let e = import(&store, &layout, Some("t/link:2"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("has no blob"), "{e}");

    // A layout whose index.json is a link.
    let layout = tmp.path().join("layout3");
    oci_layout(&layout, &layers(), "gzip", "v1");
    std::fs::rename(layout.join("index.json"), outside.join("index.json")).unwrap();
    std::os::unix::fs::symlink(outside.join("index.json"), layout.join("index.json")).unwrap();
    let e = import(&store, &layout, Some("t/link:3"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("no file \"index.json\""), "{e}");

    // A docker-archive folder whose layer is a link.
    let docker = tmp.path().join("docker");
    docker_archive_named(&docker, &layers()[0], "t/link:4");
    std::fs::rename(docker.join("layer.tar"), outside.join("layer.tar")).unwrap();
    std::os::unix::fs::symlink(outside.join("layer.tar"), docker.join("layer.tar")).unwrap();
    let e = import(&store, &docker, None).unwrap_err().to_string();
    assert!(e.contains("no file \"layer.tar\" for layer 1"), "{e}");
    assert!(store.list().unwrap().is_empty());
}
