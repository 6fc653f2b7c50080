//! Hostile cases that only an image root has: the image's system folders are read-only, its
//! layer folders on the host cannot be changed from inside, a setuid binary in a layer gives no
//! privilege, the image's `User: root` never applies, and a link in the image that names a host
//! path reaches only the image. (The whole containment suite also runs in the image:
//! `containment_image`.) Each attack prints ESCAPED when it works.

mod common;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use corral_sandbox::{ImageRoot, NoSink, Outcome, Root, RunSpec, Status};

use common::image::host;

fn run_in(root: ImageRoot, argv: &[&str]) -> Outcome {
    let mut spec = RunSpec::new(argv.iter().map(|s| s.to_string()).collect());
    spec.root = Root::Image(root);
    corral_sandbox::run_fresh(&host(), &spec, &mut NoSink)
}

fn sh(root: ImageRoot, script: &str) -> Outcome {
    run_in(root, &["/bin/sh", "-c", script])
}

/// Every file's size and mtime under `dir` (links not followed): what "unchanged" means.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, (u64, i64, u32)> {
    use std::os::unix::fs::MetadataExt;
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            if m.is_dir() {
                stack.push(p.clone());
            }
            out.insert(p, (m.size(), m.mtime(), m.mode()));
        }
    }
    out
}

#[test]
fn the_images_system_folders_and_layer_folders_cannot_be_changed() {
    let img = common::image::image_root();
    let layer = img.layers[0].clone();
    let before = snapshot(&layer.join("etc"));
    let usr_bin = std::fs::read_dir(layer.join("usr/bin")).unwrap().count();
    let o = sh(
        img,
        "for f in /usr/bin/corral_x /etc/corral_x /etc/passwd /etc/os-release /var/lib/dpkg/status \
                  /root/x /opt/x /srv/x /bin/sh /lib/x /boot/x /mnt/x /x; do \
           (echo pwned >> $f) 2>/dev/null && echo ESCAPED-write-$f; done; \
         mkdir /usr/corral_d 2>/dev/null && echo ESCAPED-mkdir; \
         ln -s /etc/shadow /etc/corral_l 2>/dev/null && echo ESCAPED-link; \
         rm -f /usr/bin/ls 2>/dev/null; [ -e /usr/bin/ls ] || echo ESCAPED-rm; \
         chmod 777 /usr/bin 2>/dev/null && echo ESCAPED-chmod; \
         touch -d 2001-01-01 /etc/hostname 2>/dev/null && echo ESCAPED-touch; \
         grep -o 'lowerdir=[^,]*' /proc/self/mountinfo; \
         for p in $(grep -o 'lowerdir=[^,]*' /proc/self/mountinfo | tr ':=' '  '); do \
           (echo pwned > $p/corral_x) 2>/dev/null && echo ESCAPED-layer-$p; done; \
         find / -xdev -writable ! -path '/home/*' ! -path '/tmp*' ! -path '/dev/*' 2>/dev/null | \
           grep -v '^/dev$' | grep -v '^/var/tmp$' | sed 's/^/WRITABLE /'; \
         echo done",
    );
    assert_eq!(o.status, Status::Ok, "{}", o.to_json());
    let out = o.stdout.text();
    assert!(!out.contains("ESCAPED"), "{out}");
    assert!(!out.contains("WRITABLE"), "{out}");
    assert!(out.ends_with("done\n"), "{out}");
    // The host's copy of the layer is exactly as it was.
    assert_eq!(snapshot(&layer.join("etc")), before);
    assert_eq!(
        std::fs::read_dir(layer.join("usr/bin")).unwrap().count(),
        usr_bin
    );
    assert!(layer.join("usr/bin/ls").is_file());
    assert!(!layer.join("usr/bin/corral_x").exists() && !layer.join("corral_x").exists());
}

/// A layer of the test's own making on top of the Debian one: what an unpacked hostile layer
/// could hold if the unpacker's own defences failed (it drops setuid bits; the mount is
/// `nosuid` anyway).
fn hostile_layer() -> (tempfile::TempDir, ImageRoot) {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let top = tmp.path().join("layer");
    std::fs::create_dir_all(top.join("probe")).unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let probe = top.join("probe/suid_probe");
    let res = Command::new("gcc")
        .args(["-O1", "-static", "-o"])
        .arg(&probe)
        .arg(common::programs_dir().join("suid_probe.c"))
        .output()
        .unwrap();
    assert!(
        res.status.success(),
        "{}",
        String::from_utf8_lossy(&res.stderr)
    );
    // Owned by root, setuid and setgid.
    std::fs::set_permissions(&probe, std::fs::Permissions::from_mode(0o6755)).unwrap();
    for (link, target) in [
        ("probe/shadow", "/etc/shadow"),
        ("probe/pid1root", "/proc/1/root"),
        ("probe/up", "../../../../../../../../etc"),
        ("probe/hostwork", "/work"),
    ] {
        std::os::unix::fs::symlink(target, top.join(link)).unwrap();
    }
    let mut root = common::image::image_root();
    root.layers.insert(0, top);
    (tmp, root)
}

#[test]
fn a_setuid_binary_in_an_image_gives_no_privilege() {
    let (_tmp, root) = hostile_layer();
    let o = run_in(root, &["/probe/suid_probe"]);
    assert_eq!(o.status, Status::Ok, "{}", o.to_json());
    let out = o.stdout.text();
    assert!(out.contains("BLOCKED"), "{out}");
    assert!(!out.contains("ESCAPED"), "{out}");
}

#[test]
fn links_in_an_image_reach_nothing_of_the_host() {
    let host_shadow = std::fs::read_to_string("/etc/shadow").unwrap();
    let (_tmp, root) = hostile_layer();
    let o = sh(
        root,
        "cat /probe/shadow 2>/dev/null; ls /probe/pid1root/ 2>/dev/null && echo ESCAPED-pid1; \
         cat /probe/up/shadow 2>/dev/null; ls /probe/hostwork/ 2>/dev/null && echo ESCAPED-work; \
         grep '^sandbox:' /probe/up/passwd | cut -d: -f1; echo done",
    );
    assert_eq!(o.status, Status::Ok, "{}", o.to_json());
    let out = o.stdout.text();
    assert!(!out.contains("ESCAPED"), "{out}");
    assert!(out.ends_with("done\n"), "{out}");
    // Nothing of the host's shadow file (root's line has its hash) came through.
    let root_line = host_shadow.lines().next().unwrap();
    assert!(!out.contains(root_line), "{out}");
    // The links resolve inside the sandbox: `../../../etc` is corral's /etc (its synthetic
    // passwd has the sandbox user), not the host's.
    assert!(
        out.contains("\nsandbox\ndone\n") || out.starts_with("sandbox\n"),
        "{out}"
    );
}

/// An OCI layout whose config says `User: root` and sets `Env`: the user is never applied; the
/// environment is, under the run's own variables, and its PATH replaces corral's.
#[test]
fn the_images_user_never_applies_and_its_env_does() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let data = tmp.path().join("data");
    let layout = tmp.path().join("layout");
    let config = serde_json::json!({"User": "root", "Env": ["PATH=/opt/corral/bin:/usr/bin:/bin",
        "IMAGE_VAR=from-image", "RUN_VAR=from-image", "HOME=/root"], "WorkingDir": "/opt"});
    corral_testkit::oci_layout_of_tar(&layout, &common::image::debian_tar(), Some(config));
    common::image::import(&data, "rootuser:1", &layout);

    let out = Command::new(env!("CARGO_BIN_EXE_corral"))
        .args(["run", "--json", "--image", "rootuser:1", "--data"])
        .arg(&data)
        .args(["--env", "RUN_VAR=from-run", "--"])
        .args([
            "/bin/sh",
            "-c",
            "id -u; id -g; echo $PATH; echo $IMAGE_VAR $RUN_VAR $HOME; pwd",
        ])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"], "ok", "{v}");
    let lines: Vec<String> = v["stdout"]
        .as_str()
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    assert_ne!(lines[0], "0", "the image's User: root applied: {v}");
    assert_ne!(lines[1], "0", "{v}");
    assert_eq!(lines[2], "/opt/corral/bin:/usr/bin:/bin");
    assert_eq!(lines[3], "from-image from-run /home/sandbox");
    // WorkingDir names where the image's own files live; runs start where their files are.
    assert_eq!(lines[4], "/home/sandbox");
}

/// The warm pool keeps sandboxes per image: a sandbox that served one image never serves
/// another (nor the host root), and one of the same image is reused.
#[test]
fn a_warm_pool_never_shares_a_sandbox_between_images() {
    let pool = corral_sandbox::Pool::new(
        host(),
        corral_sandbox::PoolConfig {
            max_idle: 4,
            ..Default::default()
        },
    );
    let debian = common::image::image_root();
    let (_tmp, other) = hostile_layer();
    let shape = |root: Root| {
        let mut spec = RunSpec::new(vec!["true".into()]);
        spec.root = root;
        corral_sandbox::SandboxConfig::for_spec(&spec)
    };
    let mut ids = Vec::new();
    for root in [
        Root::Image(debian.clone()),
        Root::Image(other.clone()),
        Root::Host,
        Root::Image(debian.clone()),
        Root::Image(other.clone()),
        Root::Host,
    ] {
        let mut lease = pool.lease(&shape(root.clone())).unwrap();
        let probe = if matches!(root, Root::Image(ref r) if r.layers.len() == 2) {
            "test -x /probe/suid_probe && echo OTHER"
        } else if matches!(root, Root::Image(_)) {
            "test -e /probe || grep -q bookworm /etc/os-release && echo DEBIAN"
        } else {
            "test -e /probe || echo HOST"
        };
        let mut spec = RunSpec::new(vec!["/bin/sh".into(), "-c".into(), probe.into()]);
        spec.root = root;
        let o = lease.sandbox().run(&spec, &mut NoSink);
        ids.push((lease.sandbox().id().to_string(), o.stdout.text()));
    }
    assert_eq!(
        ids.iter().map(|(_, o)| o.as_str()).collect::<Vec<_>>(),
        ["DEBIAN\n", "OTHER\n", "HOST\n", "DEBIAN\n", "OTHER\n", "HOST\n"]
    );
    let (a, b, c) = (&ids[0].0, &ids[1].0, &ids[2].0);
    assert!(a != b && b != c && a != c, "{ids:?}");
    // Warm reuse within one image.
    assert_eq!((&ids[3].0, &ids[4].0, &ids[5].0), (a, b, c), "{ids:?}");
}
