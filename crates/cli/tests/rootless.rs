//! Rootless mode: corral run by an unprivileged user, with sandboxes in user namespaces it owns.
//!
//! The test (root) delegates a cgroup subtree to `nobody` the way an operator would on cgroup v1
//! (a folder per controller, chowned to the user) and names it with CORRAL_CGROUP_PARENT; on v2 it
//! chowns the folder and its control files likewise and starts the user's process inside it (v2
//! lets a user move processes only between cgroups below one it may write, which is what
//! `systemd-run --user -p Delegate=yes` arranges). Then it runs the real binary as `nobody`.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::xattr;

const NOBODY: u32 = 65534;

/// A copy of the corral binary that `nobody` can execute (the build tree may be under /root).
///
/// One copy shared by every test: a copy made while another test thread forks leaves its write
/// descriptor in that child until the child execs, and exec of the copy then fails with "Text
/// file busy" (ETXTBSY). Every test takes the copy before it starts a process, so no thread forks
/// while the `OnceLock` is writing it.
struct Binary {
    path: PathBuf,
}

fn binary() -> &'static Binary {
    static COPY: std::sync::OnceLock<Binary> = std::sync::OnceLock::new();
    COPY.get_or_init(|| {
        // The folder outlives the test process (statics are never dropped): remove copies left
        // by earlier runs whose process is gone.
        if let Ok(entries) = std::fs::read_dir("/tmp") {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if let Some(pid) = name.strip_prefix("corral-rootless-bin-") {
                    if !Path::new("/proc").join(pid).exists() {
                        let _ = std::fs::remove_dir_all(e.path());
                    }
                }
            }
        }
        let dir = PathBuf::from(format!("/tmp/corral-rootless-bin-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = dir.join("corral");
        std::fs::copy(env!("CARGO_BIN_EXE_corral"), &path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        Binary { path }
    })
}

/// A cgroup subtree delegated to `nobody`, removed at the end.
struct Delegated {
    name: String,
    dirs: Vec<PathBuf>,
    /// The delegated folder in the cgroup v2 hierarchy, where the user's process must start.
    v2: Option<PathBuf>,
}

fn cgroup_mounts() -> Vec<(PathBuf, String)> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    text.lines()
        .filter_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            let mut post = post.split_whitespace();
            let fstype = post.next()?;
            let opts = post.nth(1).unwrap_or("");
            let mount_point = pre.split_whitespace().nth(4)?;
            match fstype {
                "cgroup" => Some((PathBuf::from(mount_point), opts.to_string())),
                "cgroup2" => Some((PathBuf::from(mount_point), "cgroup2".to_string())),
                _ => None,
            }
        })
        .collect()
}

fn delegate(tag: &str) -> Delegated {
    let name = format!("corral-rootless-{}-{tag}", std::process::id());
    let mut dirs = Vec::new();
    let mut v2 = None;
    for (mount, opts) in cgroup_mounts() {
        let wanted = opts == "cgroup2"
            || ["memory", "pids", "cpuacct"]
                .iter()
                .any(|c| opts.split(',').any(|o| o == *c));
        if !wanted {
            continue;
        }
        let dir = mount.join(&name);
        if std::fs::create_dir(&dir).is_err() {
            continue; // e.g. a v2 mount without the controllers we need
        }
        chown_tree(&dir);
        // The hierarchy corral will use is v2 when the unified mount carries the controllers
        // (a hybrid host's cgroup2 mount carries none).
        let controllers =
            std::fs::read_to_string(mount.join("cgroup.controllers")).unwrap_or_default();
        if opts == "cgroup2" && controllers.split_whitespace().any(|c| c == "memory") {
            v2 = Some(dir.clone());
        }
        dirs.push(dir);
    }
    assert!(
        !dirs.is_empty(),
        "could not create a delegated cgroup subtree for the test"
    );
    Delegated { name, dirs, v2 }
}

fn chown_tree(dir: &Path) {
    std::os::unix::fs::chown(dir, Some(NOBODY), Some(NOBODY)).unwrap();
    for e in std::fs::read_dir(dir).unwrap() {
        let _ = std::os::unix::fs::chown(e.unwrap().path(), Some(NOBODY), Some(NOBODY));
    }
}

impl Drop for Delegated {
    fn drop(&mut self) {
        // corral's own (empty) cgroups below it first: corral, corral-supervisor, …
        fn remove(d: &Path) {
            if let Ok(entries) = std::fs::read_dir(d) {
                for e in entries.flatten() {
                    if e.path().is_dir() {
                        remove(&e.path());
                    }
                }
            }
            let _ = std::fs::remove_dir(d);
        }
        for d in &self.dirs {
            remove(d);
        }
    }
}

fn as_nobody(bin: &Path, cgroup: Option<&Delegated>, args: &[&str]) -> Output {
    as_nobody_with(bin, cgroup, &[], args)
}

/// [`as_nobody`] with these environment variables added.
fn as_nobody_with(
    bin: &Path,
    cgroup: Option<&Delegated>,
    env: &[(&str, &str)],
    args: &[&str],
) -> Output {
    let mut c = match cgroup.and_then(|d| d.v2.as_ref()) {
        // cgroup v2: as root, join a leaf of the delegated folder (the one corral itself moves to,
        // so that the folder may enable controllers for its children), then become `nobody`.
        Some(dir) => {
            let mut c = Command::new("/bin/sh");
            c.arg("-c")
                .arg(
                    r#"d="$0/corral-supervisor" && mkdir -p "$d" && chown 65534:65534 "$d" "$d/cgroup.procs" "$d/cgroup.threads" && echo $$ > "$d/cgroup.procs" && exec setpriv --reuid=65534 --regid=65534 --clear-groups "$@""#,
                )
                .arg(dir)
                .arg(bin);
            c
        }
        None => {
            let mut c = Command::new(bin);
            c.uid(NOBODY).gid(NOBODY);
            c
        }
    };
    c.args(args)
        .current_dir("/tmp")
        .env_clear()
        .env("PATH", "/usr/bin:/bin");
    if let Some(d) = cgroup {
        c.env("CORRAL_CGROUP_PARENT", format!("/{}", d.name));
    }
    c.envs(env.iter().copied());
    c.output().unwrap()
}

fn json(out: &Output) -> serde_json::Value {
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim()).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {text}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn an_unprivileged_user_gets_a_full_sandbox() {
    let bin = binary();
    let cg = delegate("full");
    let out = as_nobody(
        &bin.path,
        Some(&cg),
        &[
            "run",
            "--json",
            "--",
            "/bin/sh",
            "-c",
            "id -u; grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status; ls /; cat /etc/shadow /root 2>&1; ls /proc | grep -c '^[0-9]'",
        ],
    );
    let v = json(&out);
    assert_eq!(v["status"], "ok", "{v}");
    let stdout = v["stdout"].as_str().unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines[0], "1000",
        "the program runs as the sandbox user: {stdout}"
    );
    assert!(stdout.contains("CapEff:\t0000000000000000"), "{stdout}");
    assert!(stdout.contains("CapBnd:\t0000000000000000"), "{stdout}");
    assert!(stdout.contains("NoNewPrivs:\t1"), "{stdout}");
    assert!(stdout.contains("Seccomp:\t2"), "{stdout}");
    assert!(
        !stdout
            .lines()
            .any(|l| l == "root" || l == "srv" || l == "work"),
        "host folders visible: {stdout}"
    );
    assert!(
        stdout.contains("cat: /etc/shadow: No such file or directory"),
        "{stdout}"
    );
    assert!(
        stdout.contains("cat: /root: No such file or directory"),
        "{stdout}"
    );
    // Only the run's own processes are visible: sh, ls and grep at most.
    let visible: u32 = lines.last().unwrap().parse().unwrap();
    assert!(
        (1..=3).contains(&visible),
        "{visible} processes visible: {stdout}"
    );
}

/// In a delegated cgroup v2 subtree the unprivileged user's sandboxes get PID 1 forked straight
/// into their cgroup too (the keeper's credentials own the subtree); on v1, `tasks` is written.
#[test]
fn rootless_pid1_enters_its_cgroup_at_fork_on_cgroup_v2() {
    let bin = binary();
    let cg = delegate("fork");
    let out = as_nobody_with(
        &bin.path,
        Some(&cg),
        &[("CORRAL_LOG", "debug")],
        &["run", "--json", "--", "/bin/true"],
    );
    let v = json(&out);
    assert_eq!(v["status"], "ok", "{v}");
    let err = String::from_utf8_lossy(&out.stderr);
    let line = err
        .lines()
        .find(|l| l.contains("sandbox created"))
        .unwrap_or_else(|| panic!("no 'sandbox created' line in:\n{err}"));
    let expected = if cg.v2.is_some() {
        "cgroup_join=\"at fork\""
    } else {
        "cgroup_join=\"write\""
    };
    assert!(line.contains(expected), "expected {expected} in: {line}");
}

#[test]
fn rootless_limits_and_seccomp_hold() {
    let bin = binary();
    let cg = delegate("limits");
    let mem = json(&as_nobody(
        &bin.path,
        Some(&cg),
        &[
            "run",
            "--json",
            "--memory",
            "32M",
            "--",
            "/usr/bin/python3",
            "-c",
            "x = bytearray(200 << 20)",
        ],
    ));
    assert_eq!(mem["status"], "memory_limit", "{mem}");
    let wall = json(&as_nobody(
        &bin.path,
        Some(&cg),
        &["run", "--json", "--wall-time", "200ms", "--", "sleep", "5"],
    ));
    assert_eq!(wall["status"], "wall_time_limit", "{wall}");
    let blocked = json(&as_nobody(
        &bin.path,
        Some(&cg),
        &["run", "--json", "--", "unshare", "-U", "true"],
    ));
    assert_eq!(blocked["status"], "blocked_syscall", "{blocked}");
    assert_eq!(blocked["blocked_syscall"], "unshare", "{blocked}");
    // A stricter profile: the program itself starts (found on PATH), what it starts is stopped.
    let strict = |argv: &[&str]| {
        let mut args = vec![
            "run",
            "--json",
            "--seccomp-profile",
            "no_spawn+no_sockets",
            "--",
        ];
        args.extend(argv);
        json(&as_nobody(&bin.path, Some(&cg), &args))
    };
    let started = strict(&["echo", "started"]);
    assert_eq!(started["stdout"], "started\n", "{started}");
    let forked = strict(&["/bin/sh", "-c", "true | true"]);
    assert_eq!(forked["blocked_syscall"], "clone", "{forked}");
    let threads = strict(&[
        "/usr/bin/python3",
        "-c",
        "import threading; t = threading.Thread(target=print, args=('thread',)); t.start(); t.join()",
    ]);
    assert_eq!(threads["stdout"], "thread\n", "{threads}");
    let bomb = json(&as_nobody(
        &bin.path,
        Some(&cg),
        &[
            "run",
            "--json",
            "--pids",
            "16",
            "--wall-time",
            "2s",
            "--",
            "/bin/bash",
            "-c",
            "f(){ f|f& }; f; sleep 1",
        ],
    ));
    assert_eq!(bomb["pids_limit_hit"], true, "{bomb}");
    // Nothing is left in the delegated subtree: every sandbox cgroup was removed. (On v2 the
    // test's own leaf, where it started corral, stays: it is the user's session, not a sandbox's.)
    for d in &cg.dirs {
        let children: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.path().is_dir())
            .filter(|e| cg.v2.as_ref() != Some(d) || e.file_name() != "corral-supervisor")
            .collect();
        assert!(
            children.is_empty(),
            "leftover cgroups in {}: {children:?}",
            d.display()
        );
    }
}

#[test]
fn rootless_pool_resets_between_runs() {
    let bin = binary();
    let cg = delegate("pool");
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let specs = dir.path().join("specs.jsonl");
    std::fs::write(
        &specs,
        concat!(
            r#"{"argv": ["/bin/sh", "-c", "echo secret > left; echo tmp > /tmp/left; ipcmk -M 4096 >/dev/null; echo $$"]}"#,
            "\n",
            r#"{"argv": ["/bin/sh", "-c", "ls -A; ls -A /tmp; ipcs -m | grep -c 0x; echo $$"]}"#,
            "\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&specs, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = as_nobody(
        &bin.path,
        Some(&cg),
        &[
            "run",
            "--batch",
            specs.to_str().unwrap(),
            "--pool-size",
            "1",
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines.len(),
        2,
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        lines[0]["sandbox"]["id"], lines[1]["sandbox"]["id"],
        "both lines must share one sandbox"
    );
    assert_eq!(lines[0]["stdout"], "2\n", "{}", lines[0]);
    assert_eq!(
        lines[1]["stdout"], "0\n2\n",
        "a reset sandbox must be empty: {}",
        lines[1]
    );
}

/// The user's own data folder (as a rootless deployment has), its images those of root's store
/// at `shared` (records copied; the layers, owned by root and read-only to the user, bound from
/// root's store: its data folder is private, 0700, so a link into it would not resolve for the
/// user). The bind goes away before the folder is removed.
fn own_data_folder(shared: &Path) -> OwnData {
    let mine = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let images = mine.path().join("images");
    for sub in ["records/sha256", "layers/sha256", "blobs/sha256", "tmp"] {
        std::fs::create_dir_all(images.join(sub)).unwrap();
    }
    std::fs::copy(shared.join("names.json"), images.join("names.json")).unwrap();
    for e in std::fs::read_dir(shared.join("records/sha256")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), images.join("records/sha256").join(e.file_name())).unwrap();
    }
    let status = Command::new("chown")
        .args(["-R", "-h", "65534:65534"])
        .arg(mine.path())
        .status()
        .unwrap();
    assert!(status.success());
    let layers = images.join("layers/sha256");
    let status = Command::new("mount")
        .args(["--bind", "-o", "ro"])
        .arg(shared.join("layers/sha256"))
        .arg(&layers)
        .status()
        .unwrap();
    assert!(status.success());
    OwnData {
        dir: Some(mine),
        layers,
    }
}

/// [`own_data_folder`]'s folder: unbinds root's layers, then removes it (or, should the unbind
/// fail, leaves it rather than remove root's layers through the bind).
struct OwnData {
    dir: Option<tempfile::TempDir>,
    layers: std::path::PathBuf,
}

impl OwnData {
    fn path(&self) -> &Path {
        self.dir.as_ref().expect("until dropped").path()
    }
}

impl Drop for OwnData {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.layers).status();
        let dev = |p: &Path| std::os::unix::fs::MetadataExt::dev(&std::fs::metadata(p).unwrap());
        if dev(&self.layers) != dev(self.layers.parent().unwrap()) {
            std::mem::forget(self.dir.take());
        }
    }
}

/// An image root without root: overlayfs in the sandbox's user namespace (Linux 5.11+), the
/// image's files (owned by the host's root, unmapped there) read-only, the same confinement.
#[test]
fn rootless_runs_in_an_image_root() {
    let bin = binary();
    let cg = delegate("image");
    let mine = own_data_folder(&common::image::data_dir().join("images"));
    let data = mine.path().to_str().unwrap().to_string();
    let out = as_nobody(
        &bin.path,
        Some(&cg),
        &[
            "run",
            "--json",
            "--image",
            common::image::NAME,
            "--data",
            &data,
            "--",
            "/bin/sh",
            "-c",
            "id -u; cat /etc/debian_version; grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status; \
             (echo x > /etc/x) 2>/dev/null && echo ESCAPED-etc; (echo x > /usr/x) 2>/dev/null && echo ESCAPED-usr; \
             echo ok > f && cat f",
        ],
    );
    let v = json(&out);
    assert_eq!(v["status"], "ok", "{v}");
    assert_eq!(v["image"]["name"], common::image::NAME);
    let stdout = v["stdout"].as_str().unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], "1000", "{stdout}");
    assert!(lines[1].starts_with("12."), "{stdout}");
    assert!(stdout.contains("CapEff:\t0000000000000000"), "{stdout}");
    assert!(stdout.contains("NoNewPrivs:\t1"), "{stdout}");
    assert!(stdout.contains("Seccomp:\t2"), "{stdout}");
    assert!(!stdout.contains("ESCAPED"), "{stdout}");
    assert!(stdout.ends_with("ok\n"), "{stdout}");
}

#[test]
fn rootless_without_a_writable_cgroup_fails_closed() {
    let bin = binary();
    let out = as_nobody(&bin.path, None, &["run", "--json", "--", "/bin/true"]);
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    let v = json(&out);
    assert_eq!(v["status"], "sandbox_error");
    let err = v["error"].as_str().unwrap();
    assert!(
        err.contains("rootless mode needs a cgroup subtree"),
        "{err}"
    );
}

/// A later layer's opaque folder and whiteout hide the lower layers' files in a rootless run as
/// in root's: the rootless overlay (`userxattr`) reads only `user.overlay.*`, so unpacking marks
/// opaque folders with `user.overlay.opaque` as well as `trusted.overlay.opaque`.
#[test]
fn rootless_runs_see_upper_layers_opaque_folders_and_whiteouts() {
    let bin = binary();
    let cg = delegate("opaque");
    // Root's store: the test image with two layers on top, the second replacing /opt/d (an opaque
    // folder) and deleting /opt/e/x (a whiteout) — written by hand (not `corral env build`, whose
    // idmapped mounts some filesystems lack, e.g. the cgroup v2 guest's 9p root).
    let root_data = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    std::fs::set_permissions(root_data.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let work = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let layer_tar = |name: &str, files: &[&str]| {
        let dir = work.path().join(name);
        for f in files {
            let path = dir.join(f);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, b"").unwrap();
        }
        let tar = work.path().join(format!("{name}.tar"));
        let status = Command::new("tar")
            .args(["--numeric-owner", "--owner=0", "--group=0", "-cf"])
            .arg(&tar)
            .arg("-C")
            .arg(&dir)
            .arg("opt")
            .status()
            .unwrap();
        assert!(status.success(), "tar {name}");
        tar
    };
    let lower = layer_tar("lower", &["opt/d/a", "opt/d/b", "opt/e/x", "opt/e/y"]);
    let upper = layer_tar("upper", &["opt/d/.wh..wh..opq", "opt/d/c", "opt/e/.wh.x"]);
    let layout = work.path().join("layout");
    let base = common::image::debian_tar();
    let digests =
        corral_testkit::debian::oci_layout_of_tars(&layout, &[&base, &lower, &upper], None);
    let imported = Command::new(env!("CARGO_BIN_EXE_corral"))
        .args(["env", "--data"])
        .arg(root_data.path())
        .arg("import")
        .arg(&layout)
        .args(["--name", "course/opaque:1"])
        .output()
        .unwrap();
    assert!(
        imported.status.success(),
        "import: {}",
        String::from_utf8_lossy(&imported.stderr)
    );
    let top = &digests[2];
    let layer = root_data
        .path()
        .join("images/layers/sha256")
        .join(top.trim_start_matches("sha256:"));
    assert_eq!(
        xattr(&layer.join("opt/d"), "user.overlay.opaque").as_deref(),
        Some(&b"y"[..]),
        "the unpacked opaque folder has no user.overlay.opaque"
    );
    let script = "ls /opt/d; echo --; ls /opt/e";
    let want = "c\n--\ny\n";
    // Root's run (the trusted.* overlay).
    let out = Command::new(env!("CARGO_BIN_EXE_corral"))
        .args(["run", "--json", "--image", "course/opaque:1", "--data"])
        .arg(root_data.path())
        .args(["--", "/bin/sh", "-c", script])
        .output()
        .unwrap();
    let v = json(&out);
    assert_eq!(
        (v["status"].as_str(), v["stdout"].as_str()),
        (Some("ok"), Some(want)),
        "{v}"
    );
    // The rootless run sees the same tree.
    let mine = own_data_folder(&root_data.path().join("images"));
    let data = mine.path().to_str().unwrap().to_string();
    let out = as_nobody(
        &bin.path,
        Some(&cg),
        &[
            "run",
            "--json",
            "--image",
            "course/opaque:1",
            "--data",
            &data,
            "--",
            "/bin/sh",
            "-c",
            script,
        ],
    );
    let v = json(&out);
    assert_eq!(
        (v["status"].as_str(), v["stdout"].as_str()),
        (Some("ok"), Some(want)),
        "{v}"
    );
}
