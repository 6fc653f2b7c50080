//! Build mode (what `corral env build` runs each step in): the image's layers with a writable upper
//! folder on the host, the program root of its own user namespace, network allowed. What it
//! changes lands in the upper folder in the unpacked-layer format (the image's uids, `0:0`
//! whiteouts); the image's layer folders and the host stay unchanged, and root inside reaches
//! nothing of the host.

mod common;

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use corral_sandbox::{ImageRoot, NoSink, Outcome, Root, RunSpec, Status};

use common::image::host;
use common::xattr;

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

/// The point of build mode: a package manager installs as root — apt drops to its `_apt` user
/// for downloads (setgroups, setresuid inside the namespace), dpkg chowns — over the network,
/// and the package lands in the upper folder.
#[test]
fn apt_get_installs_a_package_with_its_sandbox_user_and_the_network() {
    let tmp = upper_dir();
    let upper = tmp.path().join("upper");
    std::fs::create_dir(&upper).unwrap();
    let mut spec = RunSpec::new(vec![
        "/bin/sh".into(),
        "-c".into(),
        "apt-get update -q && apt-get install -y -q --no-install-recommends hello && hello".into(),
    ]);
    spec.root = Root::Image(build_root(&upper));
    spec.limits.wall_time = corral_sandbox::Millis(std::time::Duration::from_secs(240));
    spec.limits.cpu_time = corral_sandbox::Millis(std::time::Duration::from_secs(120));
    spec.limits.memory = corral_sandbox::Size(1 << 30);
    spec.limits.output = corral_sandbox::Size(8 << 20);
    let o = corral_sandbox::run_fresh(&host(), &spec, &mut NoSink);
    assert_eq!(o.status, Status::Ok, "{}", o.to_json());
    assert!(
        o.stdout.text().ends_with("Hello, world!\n"),
        "{}",
        o.to_json()
    );
    // apt could become _apt (a failed drop prints "...performed unsandboxed as root...").
    assert!(
        !o.stderr.text().contains("unsandboxed"),
        "{}",
        o.stderr.text()
    );
    let hello = std::fs::metadata(upper.join("usr/bin/hello")).unwrap();
    assert_eq!((hello.uid(), hello.gid()), (0, 0));
    // The same image without build mode has no network (and no hello).
    let mut spec = RunSpec::new(vec![
        "/usr/bin/python3".into(),
        "-c".into(),
        "import socket\ntry:\n socket.create_connection(('deb.debian.org', 80), timeout=5); print('ESCAPED')\nexcept OSError as e: print('BLOCKED', e)".into(),
    ]);
    spec.root = Root::Image(common::image::image_root());
    let o = corral_sandbox::run_fresh(&host(), &spec, &mut NoSink);
    assert_eq!(o.status, Status::Ok, "{}", o.to_json());
    assert!(o.stdout.text().starts_with("BLOCKED"), "{}", o.to_json());
}

/// Root of the build namespace is root of nothing else: no mounts (seccomp), no writable
/// `/proc/sys`, no host process, no id outside its range, no capability over the host's files.
#[test]
fn root_inside_a_build_cannot_touch_the_host() {
    let tmp = upper_dir();
    let upper = tmp.path().join("upper");
    std::fs::create_dir(&upper).unwrap();
    let probe = |script: &str| run(build_root(&upper), script);

    let o = probe("mount -t tmpfs none /mnt; echo ESCAPED");
    assert_eq!(o.status, Status::BlockedSyscall, "{}", o.to_json());
    assert_eq!(o.blocked_syscall.as_deref(), Some("mount"));

    let o = probe(
        "echo evil > /proc/sys/kernel/domainname && echo ESCAPED-sysctl; \
         echo 1 > /proc/sysrq-trigger && echo ESCAPED-sysrq; \
         ls /proc/1/root/ >/dev/null 2>&1 && echo ESCAPED-pid1-root; \
         cat /proc/1/environ >/dev/null 2>&1 && echo ESCAPED-pid1-environ; \
         touch /tmp/f && chown 70000 /tmp/f && echo ESCAPED-chown-outside-range; \
         grep -q '^0 ' /proc/self/uid_map && awk '$1 == 0 && $2 == 0 {print \"ESCAPED-host-root-map\"}' /proc/self/uid_map; \
         grep CapEff /proc/self/status; echo done",
    );
    assert_eq!(o.status, Status::Ok, "{}", o.to_json());
    let out = o.stdout.text();
    assert!(!out.contains("ESCAPED"), "{out}");
    assert!(out.ends_with("done\n"), "{out}");
    // Nothing the attempts did reached the upper folder beyond the scratch /tmp (a tmpfs).
    assert!(std::fs::symlink_metadata(upper.join("tmp/f")).is_err());
}

/// A build step may create new top-level folders (`mkdir /app`, what Dockerfiles do all the
/// time) and they land in its layer; a run in the same image (no upper folder) still cannot
/// create anything outside its working folder, `/tmp` and `/dev/shm`.
#[test]
fn a_build_creates_new_top_level_folders_a_run_cannot() {
    let tmp = upper_dir();
    let upper = tmp.path().join("upper");
    std::fs::create_dir(&upper).unwrap();
    let o = run(
        build_root(&upper),
        "mkdir /app && echo hi > /app/f && cat /app/f && touch /toplevel-file && \
         ln -s app /app-link && mkdir -p /srv2/a/b && rmdir /srv2/a/b && echo built",
    );
    assert_eq!(o.status, Status::Ok, "{}", o.to_json());
    assert_eq!(o.stdout.text(), "hi\nbuilt\n", "{}", o.to_json());
    assert_eq!(
        std::fs::read_to_string(upper.join("app/f")).unwrap(),
        "hi\n"
    );
    assert!(upper.join("toplevel-file").is_file());
    assert_eq!(
        std::fs::read_link(upper.join("app-link")).unwrap(),
        Path::new("app")
    );
    assert!(upper.join("srv2/a").is_dir());

    let o = run(
        common::image::image_root(),
        "mkdir /app 2>/dev/null && echo ESCAPED-mkdir; touch /toplevel-file 2>/dev/null && echo ESCAPED-touch; \
         mkdir /opt/x 2>/dev/null && echo ESCAPED-opt; echo done",
    );
    assert_eq!(o.status, Status::Ok, "{}", o.to_json());
    assert_eq!(o.stdout.text(), "done\n", "{}", o.to_json());
}
