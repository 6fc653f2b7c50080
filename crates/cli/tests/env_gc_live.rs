//! `corral env gc` never deletes the layers of an image a live sandbox uses: an image whose last
//! name is removed while a sandbox runs in it keeps its layers and blobs through a gc (which
//! says it kept them), its program still reads its files, and a gc after the sandbox is gone
//! removes them. The claim is the supervisor's: no process in the sandbox holds it.

mod common;

use std::collections::BTreeSet;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use corral_sandbox::{
    ImageRoot, NoSink, Pool, PoolConfig, Root, RootClaim, RunSpec, SandboxConfig, Status,
};

const WORDS: &str = "read before the gc\n";
/// Looked up only after the gc: overlayfs may still answer for what it looked up before.
const LATER: &str = "read after the gc\n";

/// A busybox image with `/data/words.txt`, `/data/later.txt` and a `/shared` mount point,
/// imported as `name`.
fn busybox_image(t: &Path, data: &Path, name: &str) {
    let root = t.join("root");
    for dir in ["bin", "etc", "data", "shared"] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    std::fs::copy("/bin/busybox", root.join("bin/busybox")).expect("busybox-static installed");
    for applet in ["sh", "cat", "ls"] {
        std::os::unix::fs::symlink("busybox", root.join("bin").join(applet)).unwrap();
    }
    std::fs::write(root.join("data/words.txt"), WORDS).unwrap();
    std::fs::write(root.join("data/later.txt"), LATER).unwrap();
    let tar = t.join("root.tar");
    common::image::tar_folder(&root, &tar);
    common::image::import(data, name, &tar);
}

/// `corral env --data DATA ARGS…`, which must succeed; its stdout.
fn env(data: &Path, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_corral"))
        .env_remove("CORRAL_DATA")
        .arg("env")
        .arg("--data")
        .arg(data)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "corral env {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The image's layer folders, as `corral env inspect` names them.
fn layer_dirs(data: &Path, name: &str) -> Vec<PathBuf> {
    let v: serde_json::Value = serde_json::from_str(&env(data, &["inspect", name])).unwrap();
    v["layer_dirs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| PathBuf::from(l.as_str().unwrap()))
        .collect()
}

fn blob_count(data: &Path) -> usize {
    std::fs::read_dir(data.join("images/blobs/sha256"))
        .unwrap()
        .count()
}

/// The host processes with a descriptor open on `path`.
fn holders(path: &Path) -> BTreeSet<u32> {
    let mut pids = BTreeSet::new();
    for p in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = p.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        if fds
            .flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l == path))
        {
            pids.insert(pid);
        }
    }
    pids
}

/// Waits (10 s at most) until exactly `expected` hold `path`, and says who did otherwise. A
/// process forked by another test of this binary holds every descriptor until its `exec`
/// closes them; one that inherited the claim for good (a sandbox's init) never lets go.
fn assert_holders(path: &Path, expected: BTreeSet<u32>) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = holders(path);
        if now == expected {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "holders of {}: {now:?}, expected {expected:?}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn gc_keeps_the_layers_of_a_removed_image_while_a_run_uses_them() {
    let t = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let data = t.path().join("data");
    busybox_image(t.path(), &data, "test/live:1");
    let layers = layer_dirs(&data, "test/live:1");
    assert_eq!(layers.len(), 1);
    let blobs = blob_count(&data);
    // The run says when it is under way, then waits for a line on a fifo before it reads a file
    // it has not looked up yet (the old gc's deletion showed there: "No such file or directory").
    let shared = t.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let go = shared.join("go");
    corral_testkit::succeed(Command::new("mkfifo").arg(&go));
    std::fs::set_permissions(&go, std::fs::Permissions::from_mode(0o666)).unwrap();
    let mut run = Command::new(env!("CARGO_BIN_EXE_corral"))
        .env_remove("CORRAL_DATA")
        .args(["run", "--json", "--wall-time", "120s", "--image", "test/live:1"])
        .arg("--data")
        .arg(&data)
        .arg("--bind")
        .arg(format!("{}:/shared", shared.display()))
        .args([
            "--",
            "/bin/sh",
            "-c",
            "cat /data/words.txt && echo > /shared/ready && read x < /shared/go && cat /data/later.txt && ls /data",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !shared.join("ready").exists() {
        if let Some(status) = run.try_wait().unwrap() {
            let out = run.wait_with_output().unwrap();
            panic!(
                "the run ended before it was ready ({status}): {} {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert!(Instant::now() < deadline, "the run never got ready");
        std::thread::sleep(Duration::from_millis(20));
    }

    // The claim is held by the supervisor (`corral run` itself) alone: not by the sandbox's
    // init or program, which inherit nothing of it.
    assert_holders(&layers[0], BTreeSet::from([run.id()]));

    env(&data, &["rm", "test/live:1"]);
    let gc = env(&data, &["gc"]);
    assert!(gc.starts_with("removed 0 layers, 0 blobs"), "{gc}");
    assert!(
        gc.contains(&format!("kept 1 layers and {blobs} blobs")),
        "{gc}"
    );
    assert_eq!(
        std::fs::read_to_string(layers[0].join("data/words.txt")).unwrap(),
        WORDS,
        "the layer is still there"
    );
    assert_eq!(blob_count(&data), blobs, "the image's blobs too");

    // Opened read-write, the fifo never blocks us; held open until the run ends, so its line
    // is there whenever the program opens it.
    let mut fifo = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&go)
        .unwrap();
    fifo.write_all(b"go\n").unwrap();
    let out = run.wait_with_output().unwrap();
    drop(fifo);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(v["status"], "ok", "{v}");
    assert_eq!(
        v["stdout"],
        format!("{WORDS}{LATER}later.txt\nwords.txt\n"),
        "the program read its files after the gc: {v}"
    );

    // The sandbox is gone: the next gc removes what it kept.
    assert_holders(&layers[0], BTreeSet::new());
    let gc = env(&data, &["gc"]);
    assert!(
        gc.starts_with(&format!("removed 1 layers, {blobs} blobs")),
        "{gc}"
    );
    assert!(!gc.contains("kept"), "{gc}");
    assert!(!layers[0].exists());
    assert_eq!(blob_count(&data), 0);
}

/// A warm sandbox in a pool (what `corral serve` and workers keep between runs) holds its
/// image's layers while it lives, whoever resolved the image, and lets go when it is dropped.
#[test]
fn a_pooled_sandbox_holds_its_images_layers_until_it_is_dropped() {
    let t = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let data = t.path().join("data");
    busybox_image(t.path(), &data, "test/pooled:1");
    let store = corral_images::Store::open(&data).unwrap();
    let root = corral_checks::image_root::resolve(&store, "test/pooled:1").unwrap();
    assert!(root.claim.is_held());
    let layer = root.layers[0].clone();
    let mut spec = RunSpec::new(vec!["/bin/cat".into(), "/data/words.txt".into()]);
    spec.root = Root::Image(root.clone());
    let pool = Pool::new(common::image::host(), PoolConfig::default());
    pool.prewarm(&SandboxConfig::for_spec(&spec), 1).unwrap();
    // From here only the pooled sandbox holds a claim: the same root without one is the same
    // shape (the image will have no name left to resolve it by).
    let unclaimed = ImageRoot {
        claim: RootClaim::default(),
        ..root.clone()
    };
    drop(root);
    spec.root = Root::Image(unclaimed);
    let mine = std::process::id();
    assert_holders(&layer, BTreeSet::from([mine]));

    env(&data, &["rm", "test/pooled:1"]);
    let gc = env(&data, &["gc"]);
    assert!(gc.contains("kept 1 layers"), "{gc}");
    assert!(layer.join("data/words.txt").is_file());
    assert_eq!(pool.idle(), 1);
    let o = {
        let mut lease = pool.lease(&SandboxConfig::for_spec(&spec)).unwrap();
        assert_eq!(pool.idle(), 0, "the warm sandbox was leased");
        lease.sandbox().run(&spec, &mut NoSink)
    };
    assert_eq!(
        (o.status, o.stdout.text()),
        (Status::Ok, WORDS.to_string()),
        "{}",
        o.to_json()
    );

    drop(pool);
    assert_holders(&layer, BTreeSet::new()); // released with the sandbox
    let gc = env(&data, &["gc"]);
    assert!(gc.starts_with("removed 1 layers"), "{gc}");
    assert!(!layer.exists());
}
