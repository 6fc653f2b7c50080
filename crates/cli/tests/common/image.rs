//! The test image: a minimal Debian bookworm root (`mmdebstrap --variant=minbase
//! --include=python3`, Debian's packages — the host's Debian 12, so host-compiled hostile programs
//! find the same glibc), built once and cached in /var/tmp, imported once per build folder into a
//! data folder that every test binary shares (under a lock).
//!
//! A test binary whose name ends in `_image` (`containment_image`, `correctness_image`) runs its
//! suite with every sandbox in this image: [`root_args`] is what `corral run` gets.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The image's name in the test data folder.
pub const NAME: &str = "corral-test/debian:bookworm";

/// The cached root-filesystem tar (Debian minbase with python3).
pub fn debian_tar() -> PathBuf {
    corral_testkit::debian_tar(&["python3"])
}

/// The data folder holding [`NAME`] (imported on first use).
pub fn data_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let tar = debian_tar();
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("image-test-data");
        std::fs::create_dir_all(&dir).unwrap();
        let _lock = corral_testkit::lock(&dir.with_extension("lock"));
        let store = corral_images::Store::open(&dir).unwrap();
        if store.rootfs(NAME).is_ok() {
            return dir;
        }
        import(&dir, NAME, &tar);
        dir
    })
}

/// Writes the folder `root` as the root-filesystem tar `tar` (with the host's `tar`).
pub fn tar_folder(root: &Path, tar: &Path) {
    corral_testkit::succeed(
        Command::new("tar")
            .arg("-C")
            .arg(root)
            .arg("-cf")
            .arg(tar)
            .arg("."),
    );
}

/// `corral env --data DATA import --name NAME TAR` (an image tar or layout), which must succeed.
pub fn import(data: &Path, name: &str, tar: &Path) {
    corral_testkit::succeed(
        Command::new(env!("CARGO_BIN_EXE_corral"))
            .env_remove("CORRAL_DATA")
            .args(["env", "--data"])
            .arg(data)
            .args(["import", "--name", name])
            .arg(tar),
    );
}

/// Whether this test binary runs its suite in the image (its name ends in `_image`).
pub fn image_mode() -> bool {
    static MODE: OnceLock<bool> = OnceLock::new();
    *MODE.get_or_init(|| super::binary_name_ends_with("_image"))
}

/// The `corral run` flags that put a sandbox in the image (none on the host root).
pub fn root_args() -> Vec<String> {
    if image_mode() {
        vec![
            "--image".into(),
            NAME.into(),
            "--data".into(),
            data_dir().display().to_string(),
        ]
    } else {
        Vec::new()
    }
}

/// The image as the sandbox library takes it (for tests that drive the library directly).
pub fn image_root() -> corral_sandbox::ImageRoot {
    let store = corral_images::Store::open(data_dir()).unwrap();
    corral_checks::image_root::resolve(&store, NAME).unwrap()
}

/// In image mode, the names the image itself has in its folder `path` (absolute inside the
/// sandbox): what a listing may show besides corral's own entries. Empty on the host root.
pub fn entries(path: &str) -> Vec<String> {
    if !image_mode() {
        return Vec::new();
    }
    let mut names = Vec::new();
    for layer in image_root().layers {
        let dir = layer.join(path.trim_start_matches('/'));
        // Only real folders of the layer: a link there would name a host path here.
        if std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
            for e in std::fs::read_dir(dir).unwrap().flatten() {
                names.push(e.file_name().to_string_lossy().into_owned());
            }
        }
    }
    names
}

/// A sandbox host for tests that drive the library, with the built `corral` as init.
pub fn host() -> std::sync::Arc<corral_sandbox::Host> {
    std::sync::Arc::new(
        corral_sandbox::Host::new(corral_sandbox::InitProgram {
            path: env!("CARGO_BIN_EXE_corral").into(),
            arg: corral_sandbox::INIT_ARG.into(),
        })
        .expect("a sandbox host (run as root)"),
    )
}

/// Imports the test root into the image store of `data` (a test's own data folder) as [`NAME`].
pub fn import_into(data: &Path) {
    let out = Command::new(env!("CARGO_BIN_EXE_corral"))
        .args(["env", "--data"])
        .arg(data)
        .args(["import", "--name", NAME])
        .arg(debian_tar())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "importing the test image: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
