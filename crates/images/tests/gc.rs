//! `Store::gc` and the claims live sandboxes hold (`Store::rootfs`): what a claim holds is kept,
//! counted, and removed by a gc after its last clone is gone. Through the real sandbox:
//! crates/cli/tests/env_gc_live.rs.

use std::path::Path;

use corral_images::Store;

/// Imports a one-file root filesystem tar as `name`.
fn image(store: &Store, dir: &Path, name: &str) {
    let tar = dir.join(format!("{}.tar", name.replace(['/', ':'], "_")));
    let mut b = tar::Builder::new(std::fs::File::create(&tar).unwrap());
    let body = name.as_bytes();
    let mut h = tar::Header::new_gnu();
    h.set_mode(0o644);
    h.set_size(body.len() as u64);
    b.append_data(&mut h, "name.txt", body).unwrap();
    b.finish().unwrap();
    corral_images::import(store, &tar, Some(name)).unwrap();
}

/// The descriptors of this process open on `path`.
fn fds_on(path: &Path) -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter(|e| std::fs::read_link(e.path()).is_ok_and(|l| l == path))
        .count()
}

#[test]
fn gc_keeps_what_a_claim_holds_until_its_last_clone_goes() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(&tmp.path().join("data")).unwrap();
    image(&store, tmp.path(), "t/used:1");
    image(&store, tmp.path(), "t/idle:1");
    let used = store.rootfs("t/used:1").unwrap();
    let layer = used.lower_dirs[0].clone();
    // Manifest, config, one layer blob and the layer folder.
    assert_eq!(used.claim.len(), 4);
    // A second claim of the image in this process shares the first one's descriptors.
    let again = store.rootfs("t/used:1").unwrap();
    assert_eq!(fds_on(&layer), 1);
    drop(again);

    store.remove("t/used:1").unwrap();
    store.remove("t/idle:1").unwrap();
    let gc = store.gc().unwrap();
    assert_eq!((gc.layers_removed, gc.blobs_removed), (1, 3), "{gc:?}");
    assert_eq!((gc.layers_in_use, gc.blobs_in_use), (1, 3), "{gc:?}");
    assert_eq!(
        std::fs::read_to_string(layer.join("name.txt")).unwrap(),
        "t/used:1"
    );

    // A clone (a sandbox's copy of its root) holds it on its own.
    let clone = used.claim.clone();
    drop(used);
    let gc = store.gc().unwrap();
    assert_eq!((gc.layers_removed, gc.layers_in_use), (0, 1), "{gc:?}");
    assert_eq!(fds_on(&layer), 1);

    drop(clone);
    assert_eq!(fds_on(&layer), 0, "released with its last clone");
    let gc = store.gc().unwrap();
    assert_eq!((gc.layers_removed, gc.blobs_removed), (1, 3), "{gc:?}");
    assert_eq!((gc.layers_in_use, gc.blobs_in_use), (0, 0), "{gc:?}");
    assert!(!layer.exists());
    let left = |sub: &str| std::fs::read_dir(store.root().join(sub)).unwrap().count();
    assert_eq!((left("layers/sha256"), left("blobs/sha256")), (0, 0));
}

#[test]
fn gc_removes_the_part_files_of_cut_off_pulls() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(&tmp.path().join("data")).unwrap();
    let part = store.tmp_dir().join(format!("{}.part", "ab".repeat(32)));
    std::fs::write(&part, vec![7u8; 100_000]).unwrap();
    let gc = store.gc().unwrap();
    assert!(!part.exists());
    assert!(gc.bytes_freed >= 100_000, "{gc:?}");
}

#[test]
fn a_layer_removal_cut_off_leaves_nothing_under_the_layers_name() {
    use nix::mount::{mount, umount2, MntFlags, MsFlags};
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(&tmp.path().join("data")).unwrap();
    image(&store, tmp.path(), "t/img:1");
    let layer = store.rootfs("t/img:1").unwrap().lower_dirs[0].clone();
    let name = layer.file_name().unwrap().to_string_lossy().into_owned();
    let removing = layer.with_file_name(format!(".removing-{name}"));
    store.remove("t/img:1").unwrap();

    // A folder in the layer that cannot be removed (a mount point: EBUSY) cuts gc's removal off
    // partway, as a gc killed mid-delete would.
    let stuck = layer.join("stuck");
    std::fs::create_dir(&stuck).unwrap();
    if let Err(e) = mount(
        Some("tmpfs"),
        &stuck,
        Some("tmpfs"),
        MsFlags::empty(),
        None::<&str>,
    ) {
        eprintln!("skipped: cannot mount a tmpfs ({e}): needs root");
        return;
    }
    let gc = store.gc();
    for p in [&stuck, &removing.join("stuck")] {
        let _ = umount2(p, MntFlags::MNT_DETACH);
    }
    assert!(gc.is_err(), "{gc:?}");
    assert!(!layer.exists(), "a half-removed layer kept its name");

    // Imported again, the layer is unpacked afresh; the next gc removes the leftover.
    image(&store, tmp.path(), "t/img:1");
    let again = store.rootfs("t/img:1").unwrap();
    assert_eq!(
        std::fs::read_to_string(again.lower_dirs[0].join("name.txt")).unwrap(),
        "t/img:1"
    );
    assert!(!again.lower_dirs[0].join("stuck").exists());
    drop(again);
    store.gc().unwrap();
    assert!(!removing.exists());
    assert!(layer.join("name.txt").exists());
}

/// Run as a user who is not root (when the test runs as root it runs itself again as `nobody`,
/// uid 65534, in a folder of that user's).
#[test]
fn gc_removes_read_only_folders_of_a_layer_as_a_user_who_is_not_root() {
    use std::os::unix::process::CommandExt;
    if let Some(dir) = std::env::var_os("CORRAL_TEST_GC_DIR") {
        return read_only_layer_is_removed(Path::new(&dir));
    }
    let tmp = tempfile::tempdir().unwrap();
    if !nix::unistd::Uid::effective().is_root() {
        return read_only_layer_is_removed(tmp.path());
    }
    let nobody = nix::unistd::Uid::from_raw(65534);
    let nogroup = nix::unistd::Gid::from_raw(65534);
    nix::unistd::chown(tmp.path(), Some(nobody), Some(nogroup)).unwrap();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "gc_removes_read_only_folders_of_a_layer_as_a_user_who_is_not_root",
            "--test-threads=1",
        ])
        .env("CORRAL_TEST_GC_DIR", tmp.path())
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("1 passed"),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn read_only_layer_is_removed(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    assert!(!nix::unistd::Uid::effective().is_root());
    let store = Store::open(&dir.join("data")).unwrap();
    let tar = dir.join("ro.tar");
    let mut b = tar::Builder::new(std::fs::File::create(&tar).unwrap());
    let mut h = tar::Header::new_gnu();
    h.set_mode(0o644);
    h.set_size(2);
    b.append_data(&mut h, "ro/deep/f", &b"hi"[..]).unwrap();
    b.finish().unwrap();
    drop(b);
    corral_images::import(&store, &tar, Some("t/ro:1")).unwrap();
    let layer = store.rootfs("t/ro:1").unwrap().lower_dirs[0].clone();
    for d in ["ro/deep", "ro"] {
        std::fs::set_permissions(layer.join(d), std::fs::Permissions::from_mode(0o555)).unwrap();
    }
    store.remove("t/ro:1").unwrap();
    let gc = store.gc().unwrap();
    assert_eq!(gc.layers_removed, 1, "{gc:?}");
    assert!(!layer.exists());
    let left = std::fs::read_dir(layer.parent().unwrap()).unwrap().count();
    assert_eq!(left, 0, "no leftover");
}
