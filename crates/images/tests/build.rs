//! Builds with a real overlayfs: each `run` step mounts the image's layers read-only under an
//! empty upper folder and runs the command chrooted there (as root, in a private mount
//! namespace: the tests' own commands, not hostile ones — the hostile builds go through corral's
//! build sandbox in crates/cli/tests). What overlayfs itself wrote (whiteouts, opaque folders,
//! hardlinks) becomes the layers under test; the cache, gc and `copy` rules are checked on top.

mod common;

use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use corral_images::build::{self, BuildFile, Changes, Event, RunRequest, StepOutcome, StepRunner};
use corral_images::changes::{layer_from_changes, IdMap};
use corral_images::{import, Store};

/// Runs a step chrooted in an overlay of the request's layers; counts the runs.
#[derive(Default)]
struct OverlayChroot {
    runs: usize,
}

impl StepRunner for OverlayChroot {
    fn run(
        &mut self,
        req: RunRequest<'_>,
        output: &mut dyn FnMut(&[u8]),
    ) -> Result<StepOutcome, String> {
        self.runs += 1;
        let dirs: Vec<PathBuf> = ["upper", "work", "merged"]
            .iter()
            .map(|d| req.scratch.join(d))
            .collect();
        for d in &dirs {
            std::fs::create_dir(d).unwrap();
        }
        let lower: Vec<String> = req
            .lower_dirs
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        let env: Vec<(String, String)> = req
            .env
            .iter()
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        let out = Command::new("/usr/bin/unshare")
            .args(["--mount", "--propagation", "private", "--", "/bin/sh", "-c"])
            .arg(
                "/bin/mount -t overlay overlay -o \"lowerdir=$1,upperdir=$2,workdir=$3,redirect_dir=off,metacopy=off\" \"$4\" \
                 && root=\"$4\" && shift 4 && exec /usr/sbin/chroot \"$root\" \"$@\"",
            )
            .arg("sh")
            .arg(lower.join(":"))
            .args(&dirs)
            .args(&req.argv)
            .env_clear()
            .envs(env)
            .output()
            .map_err(|e| e.to_string())?;
        output(&out.stdout);
        output(&out.stderr);
        if !out.status.success() {
            return Ok(StepOutcome::Failed(format!("exit status {}", out.status)));
        }
        Ok(StepOutcome::Succeeded(Changes {
            upper: dirs[0].clone(),
            ids: IdMap::IDENTITY,
            keep: Box::new(()),
        }))
    }
}

/// A tiny root: static busybox and its links, a file to delete and a folder to replace.
fn busybox_store(tmp: &Path) -> Store {
    let root = tmp.join("rootfs");
    for d in ["bin", "etc", "opt/old", "tmp"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::fs::set_permissions(root.join("tmp"), std::fs::Permissions::from_mode(0o1777)).unwrap();
    std::fs::copy("/bin/busybox", root.join("bin/busybox")).unwrap();
    for app in [
        "sh", "echo", "mkdir", "rm", "ln", "cat", "true", "false", "env", "ls", "touch", "chmod",
        "mount", "pwd",
    ] {
        std::os::unix::fs::symlink("busybox", root.join("bin").join(app)).unwrap();
    }
    std::fs::write(root.join("bin/rmme"), "doomed").unwrap();
    std::fs::write(root.join("opt/old/oldfile"), "old").unwrap();
    let tar = tmp.join("rootfs.tar");
    let st = Command::new("tar")
        .args(["--numeric-owner", "-C"])
        .arg(&root)
        .arg("-cf")
        .arg(&tar)
        .arg(".")
        .status()
        .unwrap();
    assert!(st.success());
    let store = Store::open(&tmp.join("data")).unwrap();
    import(&store, &tar, Some("busybox:test")).unwrap();
    store
}

fn write_file(dir: &Path, text: &str) -> PathBuf {
    let p = dir.join("build.yaml");
    std::fs::write(&p, text).unwrap();
    p
}

fn run_build(
    store: &Store,
    path: &Path,
    runner: &mut OverlayChroot,
) -> Result<build::BuildReport, build::BuildError> {
    let file = BuildFile::load(path)?;
    build::build(store, &file, None, runner, &mut |_| {})
}

/// The merged view of an image, mounted read-only; unmounted on drop.
struct Mounted {
    dir: tempfile::TempDir,
}

impl Mounted {
    fn new(store: &Store, reference: &str) -> Mounted {
        let rootfs = store.rootfs(reference).unwrap();
        let dir = common::scratch();
        let lower: Vec<String> = rootfs
            .lower_dirs
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        // A single layer cannot be an overlay without an upper: add an empty one on top.
        let empty = dir.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        let merged = dir.path().join("m");
        std::fs::create_dir(&merged).unwrap();
        let st = Command::new("mount")
            .args(["-t", "overlay", "overlay", "-o"])
            .arg(format!(
                "ro,lowerdir={}:{}",
                empty.display(),
                lower.join(":")
            ))
            .arg(&merged)
            .status()
            .unwrap();
        assert!(st.success());
        Mounted { dir }
    }
    fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join("m").join(p)
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg(self.dir.path().join("m"))
            .status();
    }
}

#[test]
fn run_steps_become_layers_with_whiteouts_opaque_folders_and_hardlinks() {
    let tmp = common::scratch();
    let store = busybox_store(tmp.path());
    let path = write_file(
        tmp.path(),
        "from: busybox:test\nname: built:1\nsteps:\n  - run: mkdir -p /data/sub && echo hi > /data/sub/f && ln /data/sub/f /data/sub/hard && rm /bin/rmme && rm -rf /opt/old && mkdir /opt/old && echo new > /opt/old/new\n  - env: {GREETING: hello}\n  - run: echo \"$GREETING\" > /data/greeting\n",
    );
    let mut runner = OverlayChroot::default();
    let file = BuildFile::load(&path).unwrap();
    let mut events = Vec::new();
    let r = build::build(&store, &file, None, &mut runner, &mut |e| match e {
        Event::Start { step, total, .. } => events.push(format!("start {step}/{total}")),
        Event::Output(b) => events.push(format!("output {}", String::from_utf8_lossy(b))),
        Event::Done(r) => events.push(format!("done {} cached={}", r.step, r.cached)),
    })
    .unwrap();
    assert_eq!((r.ran, r.cached, runner.runs), (3, 0, 2));
    assert_eq!(events.first().map(String::as_str), Some("start 1/3"));
    assert!(
        events.contains(&"done 3 cached=false".to_string()),
        "{events:?}"
    );
    assert_eq!(r.name.as_deref(), Some("built:1"));
    let (_, rec) = store.resolve("built:1").unwrap();
    assert_eq!(rec.digest, r.digest);
    assert_eq!(rec.layers.len(), 3, "base + two run steps (env adds none)");
    assert!(
        rec.env.contains(&"GREETING=hello".to_string()),
        "{:?}",
        rec.env
    );

    // The first step's layer, as unpacked by the store: overlayfs's format again.
    let layer = store.layer_path(&rec.layers[1].diff_id);
    let wh = std::fs::symlink_metadata(layer.join("bin/rmme")).unwrap();
    assert!(
        wh.file_type().is_char_device() && wh.rdev() == 0,
        "whiteout"
    );
    let f = std::fs::metadata(layer.join("data/sub/f")).unwrap();
    let h = std::fs::metadata(layer.join("data/sub/hard")).unwrap();
    assert_eq!(f.ino(), h.ino(), "a hardlink stays one");

    // Its blob: an OCI tar with `.wh.` names.
    let blob = std::fs::File::open(store.blob_path(&rec.layers[1].blob)).unwrap();
    let mut names = Vec::new();
    let mut ar = tar::Archive::new(flate2::read::GzDecoder::new(blob));
    for e in ar.entries().unwrap() {
        names.push(e.unwrap().path().unwrap().display().to_string());
    }
    assert!(names.contains(&"bin/.wh.rmme".to_string()), "{names:?}");
    assert!(
        names.contains(&"opt/old/.wh..wh..opq".to_string()),
        "{names:?}"
    );
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "entries sorted");

    // The merged image: the deleted file and the replaced folder's old content are gone.
    let m = Mounted::new(&store, "built:1");
    assert!(!m.path("bin/rmme").exists());
    assert!(!m.path("opt/old/oldfile").exists());
    assert_eq!(
        std::fs::read_to_string(m.path("opt/old/new")).unwrap(),
        "new\n"
    );
    assert_eq!(
        std::fs::read_to_string(m.path("data/greeting")).unwrap(),
        "hello\n"
    );
    assert!(m.path("bin/busybox").is_file());
}

#[test]
fn the_same_changes_give_the_same_layer_digests() {
    let tmp = common::scratch();
    let upper = tmp.path().join("upper");
    std::fs::create_dir_all(upper.join("a/b")).unwrap();
    std::fs::write(upper.join("a/b/f"), "x").unwrap();
    std::os::unix::fs::symlink("/etc/passwd", upper.join("a/link")).unwrap();
    let one = Store::open(&tmp.path().join("one")).unwrap();
    let two = Store::open(&tmp.path().join("two")).unwrap();
    let l1 = layer_from_changes(&one, &upper, IdMap::IDENTITY, None)
        .unwrap()
        .unwrap();
    let l2 = layer_from_changes(&two, &upper, IdMap::IDENTITY, None)
        .unwrap()
        .unwrap();
    assert_eq!(l1.layer, l2.layer);
    // Owners shifted back from a build's user namespace.
    std::os::unix::fs::lchown(upper.join("a/b/f"), Some(200_123), Some(200_007)).unwrap();
    let shifted = IdMap {
        uid_base: 200_000,
        gid_base: 200_000,
        count: 65536,
    };
    let l3 = layer_from_changes(&one, &upper, shifted, None)
        .unwrap()
        .unwrap();
    let m = std::fs::metadata(one.layer_path(&l3.layer.diff_id).join("a/b/f")).unwrap();
    assert_eq!((m.uid(), m.gid()), (123, 7));
    // No change at all: no layer.
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    assert!(layer_from_changes(&one, &empty, IdMap::IDENTITY, None)
        .unwrap()
        .is_none());
}

/// A step's changes are held to its disk limit at their apparent sizes: a sparse file (free on
/// the step's tmpfs) that would unpack to gigabytes of zeros on the host's disk is refused,
/// named; the same files within the limit make a layer.
#[test]
fn sparse_files_count_at_their_full_size_against_a_steps_disk_limit() {
    let tmp = common::scratch();
    let upper = tmp.path().join("upper");
    std::fs::create_dir_all(upper.join("var/log")).unwrap();
    std::fs::write(upper.join("small"), "x").unwrap();
    let lastlog = std::fs::File::create(upper.join("var/log/lastlog")).unwrap();
    lastlog.set_len(1 << 30).unwrap();
    let store = Store::open(&tmp.path().join("data")).unwrap();
    let e = layer_from_changes(&store, &upper, IdMap::IDENTITY, Some(64 << 20))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("over its disk limit of 67108864")
            && e.contains("/var/log/lastlog of 1073741824 bytes"),
        "{e}"
    );
    lastlog.set_len(1 << 20).unwrap();
    assert!(
        layer_from_changes(&store, &upper, IdMap::IDENTITY, Some(64 << 20))
            .unwrap()
            .is_some()
    );
}

#[test]
fn an_unchanged_build_runs_nothing_and_a_changed_copy_reruns_from_there() {
    let tmp = common::scratch();
    let store = busybox_store(tmp.path());
    std::fs::create_dir_all(tmp.path().join("files/sub")).unwrap();
    std::fs::write(tmp.path().join("files/data.txt"), "one").unwrap();
    std::fs::write(tmp.path().join("files/sub/x"), "x").unwrap();
    std::fs::write(tmp.path().join("script.sh"), "echo script").unwrap();
    let path = write_file(
        tmp.path(),
        "from: busybox:test\nsteps:\n  - run: echo first > /first\n  - copy: {src: files, dst: /opt/course}\n  - copy: {src: script.sh, dst: /tmp/}\n  - workdir: /opt/course\n  - run: cat /opt/course/data.txt > /copied\n",
    );
    let mut runner = OverlayChroot::default();
    let first = run_build(&store, &path, &mut runner).unwrap();
    assert_eq!((first.ran, first.cached), (5, 0));
    let again = run_build(&store, &path, &mut runner).unwrap();
    assert_eq!((again.ran, again.cached), (0, 5), "{:#?}", again.steps);
    assert!(again.steps.iter().all(|s| s.cached));
    assert_eq!(
        again.digest, first.digest,
        "an unchanged build is the same image"
    );
    assert_eq!(runner.runs, 2, "the second build ran no step");

    // The copy into /tmp kept /tmp's mode; the copied file has the fixed mtime.
    let m = Mounted::new(&store, &first.digest.to_string());
    assert_eq!(
        std::fs::metadata(m.path("tmp")).unwrap().mode() & 0o7777,
        0o1777
    );
    assert_eq!(
        std::fs::read_to_string(m.path("tmp/script.sh")).unwrap(),
        "echo script"
    );
    assert_eq!(
        std::fs::read_to_string(m.path("opt/course/sub/x")).unwrap(),
        "x"
    );
    assert_eq!(std::fs::read_to_string(m.path("copied")).unwrap(), "one");
    drop(m);
    let (_, rec) = store.resolve(&first.digest.to_string()).unwrap();
    assert_eq!(rec.working_dir.as_deref(), Some("/opt/course"));

    // A changed copied file: steps 1 cached, 2.. rerun.
    std::fs::write(tmp.path().join("files/data.txt"), "two").unwrap();
    let changed = run_build(&store, &path, &mut runner).unwrap();
    let cached: Vec<bool> = changed.steps.iter().map(|s| s.cached).collect();
    assert_eq!(cached, [true, false, false, false, false]);
    assert_ne!(changed.digest, first.digest);
    let m = Mounted::new(&store, &changed.digest.to_string());
    assert_eq!(std::fs::read_to_string(m.path("copied")).unwrap(), "two");
}

#[test]
fn gc_keeps_the_cache_of_images_and_drops_the_rest() {
    let tmp = common::scratch();
    let store = busybox_store(tmp.path());
    let path = write_file(
        tmp.path(),
        "from: busybox:test\nname: keep\nsteps:\n  - run: echo a > /a\n",
    );
    let mut runner = OverlayChroot::default();
    run_build(&store, &path, &mut runner).unwrap();
    let gc = store.gc().unwrap();
    assert_eq!(gc.cache_entries_removed, 0);
    let r = run_build(&store, &path, &mut runner).unwrap();
    assert_eq!(r.ran, 0, "cache survives gc while an image uses it");
    store.remove("keep").unwrap();
    let gc = store.gc().unwrap();
    assert_eq!(gc.cache_entries_removed, 1);
    assert_eq!(gc.layers_removed, 1);
    let r = run_build(&store, &path, &mut runner).unwrap();
    assert_eq!(r.ran, 1, "nothing left to reuse");
}

#[test]
fn gc_clears_what_a_killed_build_left_mounted() {
    let tmp = common::scratch();
    let store = Store::open(&tmp.path().join("data")).unwrap();
    let disk = store.tmp_dir().join("build-killed/disk");
    std::fs::create_dir_all(&disk).unwrap();
    let st = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "corral-build"])
        .arg(&disk)
        .status()
        .unwrap();
    assert!(st.success());
    std::fs::create_dir(disk.join("upper")).unwrap();
    std::fs::write(disk.join("upper/half-written"), "x").unwrap();
    store.gc().unwrap();
    assert!(!store.tmp_dir().join("build-killed").exists());
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mounts.contains(&*disk.to_string_lossy()), "still mounted");
}

#[test]
fn a_failed_step_names_nothing_and_says_which_step() {
    let tmp = common::scratch();
    let store = busybox_store(tmp.path());
    let path = write_file(
        tmp.path(),
        "from: busybox:test\nname: never\nsteps:\n  - run: echo ok > /ok\n  - run: exit 3\n",
    );
    let e = run_build(&store, &path, &mut OverlayChroot::default()).unwrap_err();
    let msg = e.to_string();
    assert!(msg.starts_with("step 2/2 failed: exit status"), "{msg}");
    assert!(msg.contains('3'), "{msg}");
    assert!(store.resolve("never").is_err(), "no half-built image named");
    assert_eq!(store.list().unwrap().len(), 1, "only the base image");
}

#[test]
fn copy_sources_stay_inside_the_build_folder() {
    let tmp = common::scratch();
    let store = busybox_store(tmp.path());
    let dir = tmp.path().join("course");
    std::fs::create_dir_all(dir.join("inside")).unwrap();
    std::fs::write(dir.join("inside/ok"), "ok").unwrap();
    std::fs::write(tmp.path().join("secret"), "secret").unwrap();
    std::os::unix::fs::symlink("../secret", dir.join("out-link")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", dir.join("abs-link")).unwrap();
    std::os::unix::fs::symlink("../../secret", dir.join("inside/rel-out")).unwrap();
    let try_copy = |src: &str| {
        let p = dir.join("build.yaml");
        std::fs::write(
            &p,
            format!("from: busybox:test\nsteps:\n  - copy: {{src: '{src}', dst: /x}}\n"),
        )
        .unwrap();
        BuildFile::load(&p)
            .and_then(|f| {
                build::build(&store, &f, None, &mut OverlayChroot::default(), &mut |_| {})
            })
            .map(|r| r.digest)
            .map_err(|e| e.to_string())
    };
    for (src, want) in [
        ("../secret", "'..'"),
        ("/etc/passwd", "relative"),
        ("inside/../../secret", "'..'"),
        ("out-link", "leaves the build file's folder"),
        ("abs-link", "leaves the build file's folder"),
        ("nothing-here", "not in the build file's folder"),
        ("inside/rel-out", "leaves the build file's folder"),
    ] {
        let e = try_copy(src).expect_err(src);
        assert!(e.contains(want), "{src}: {e}");
    }
    // A link inside a copied folder is copied as a link, never followed.
    let d = try_copy("inside").unwrap();
    let m = Mounted::new(&store, &d.to_string());
    assert_eq!(
        std::fs::read_link(m.path("x/rel-out")).unwrap(),
        Path::new("../../secret")
    );
    assert_eq!(std::fs::read_to_string(m.path("x/ok")).unwrap(), "ok");
}
