//! Build mode (what `corral env build` runs each step in): the image's layers with a writable upper
//! folder on the host, the program root of its own user namespace, network allowed. What it
//! changes lands in the upper folder in the unpacked-layer format (the image's uids, `0:0`
//! whiteouts); the image's layer folders and the host stay unchanged, and root inside reaches
//! nothing of the host.

mod common;

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;
use std::sync::Arc;

use corral_sandbox::{Host, ImageRoot, InitProgram, NoSink, Outcome, Root, RunSpec, Status};

fn host() -> Arc<Host> {
    Arc::new(
        Host::new(InitProgram {
            path: env!("CARGO_BIN_EXE_corral").into(),
            arg: corral_sandbox::INIT_ARG.into(),
        })
        .expect("a sandbox host (run as root)"),
    )
}

fn build_root(upper: &Path) -> ImageRoot {
    ImageRoot {
        upper: Some(upper.to_path_buf()),
        ..common::image::image_root()
    }
}

fn run(root: ImageRoot, script: &str) -> Outcome {
    let mut spec = RunSpec::new(vec!["/bin/sh".into(), "-c".into(), script.into()]);
    spec.root = Root::Image(root);
    corral_sandbox::run_fresh(&host(), &spec, &mut NoSink)
}

fn upper_dir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

#[test]
fn build_mode_changes_land_in_the_upper_folder_as_a_layer() {
    let tmp = upper_dir();
    let upper = tmp.path().join("upper");
    std::fs::create_dir(&upper).unwrap();
    let layer = common::image::image_root().layers[0].clone();
    let os_release = std::fs::read(layer.join("usr/lib/os-release")).unwrap();

    let o = run(
        build_root(&upper),
        "id -u; echo hi > /etc/x; rm /etc/os-release; mkdir -p /var/lib/corraltest; \
         chown 42:42 /var/lib/corraltest; rm -rf /etc/default; mkdir /etc/default; \
         echo $HOME $USER; pwd",
    );
    assert_eq!(o.status, Status::Ok, "{}", o.to_json());
    assert_eq!(o.stdout.text(), "0\n/root root\n/\n", "{}", o.to_json());

    // A new file, owned by the image's root (uid 0 on disk, not the leased host range).
    let x = upper.join("etc/x");
    assert_eq!(std::fs::read_to_string(&x).unwrap(), "hi\n");
    let md = std::fs::metadata(&x).unwrap();
    assert_eq!((md.uid(), md.gid()), (0, 0));
    // A deletion: overlayfs's whiteout, a 0:0 character device.
    let wh = std::fs::symlink_metadata(upper.join("etc/os-release")).unwrap();
    assert!(wh.file_type().is_char_device(), "{wh:?}");
    assert_eq!(wh.rdev(), 0);
    // chown inside stores the image's ids.
    let md = std::fs::metadata(upper.join("var/lib/corraltest")).unwrap();
    assert_eq!((md.uid(), md.gid()), (42, 42));
    // A folder replaced wholesale is opaque.
    let opaque = xattr(&upper.join("etc/default"), "trusted.overlay.opaque");
    assert_eq!(opaque.as_deref(), Some(&b"y"[..]));
    // Mount points never land in the upper folder; the layer itself is untouched.
    for p in [
        "proc",
        "dev",
        "tmp",
        "home/sandbox",
        "etc/resolv.conf",
        "etc/hosts",
    ] {
        assert!(
            std::fs::symlink_metadata(upper.join(p)).is_err(),
            "{p} leaked into the upper folder"
        );
    }
    assert_eq!(
        std::fs::read(layer.join("usr/lib/os-release")).unwrap(),
        os_release
    );
    assert!(layer.join("etc/os-release").exists());
    assert!(!layer.join("etc/x").exists());
}

/// `getxattr` without following links.
fn xattr(p: &Path, name: &str) -> Option<Vec<u8>> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
    let name = std::ffi::CString::new(name).unwrap();
    let mut buf = vec![0u8; 64];
    // SAFETY: lgetxattr into a buffer of the length we pass.
    let n = unsafe {
        libc::lgetxattr(
            path.as_ptr(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    (n >= 0).then(|| buf[..n as usize].to_vec())
}
