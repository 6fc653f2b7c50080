//! Shared helpers for the containment and correctness integration tests.
//!
//! Every test runs the real `corral` binary (`CARGO_BIN_EXE_corral`) with
//! `run --json`, parses the one JSON object it prints and inspects the host
//! afterwards.  Hostile programs live in `tests/containment/` at the workspace
//! root; C programs are compiled with the host's gcc into the test's own
//! temporary directory, which is then handed to the sandbox with `--dir`.
#![allow(dead_code)]

pub mod image;

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Tests that only look at their own run take this lock shared; the tests
/// that check global host state (mounts, cgroup directories) take it
/// exclusively, so no other sandbox of this test binary runs meanwhile.
static HOST_LOCK: RwLock<()> = RwLock::new(());

/// The tests that check host state wait for the other test processes that make sandboxes beside
/// them too: scripts/test runs a side lane (the graders' image tests, the benchmark's and the API
/// fuzzer's smoke runs) beside the workspace's tests, and the side lane holds this file's lock
/// shared while it makes sandboxes ([`beside_the_host_state_tests`], `flock -s` in scripts/test).
pub fn host_lock_file() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("host-state.lock")
}

pub fn shared() -> RwLockReadGuard<'static, ()> {
    HOST_LOCK.read().unwrap_or_else(|e| e.into_inner())
}

/// Held while a test looks at the whole host's state: the other test processes' sandboxes
/// first (the file's lock, which this binary's other tests go on running without), then this
/// binary's.
pub struct Exclusive {
    _in_process: RwLockWriteGuard<'static, ()>,
    _across_processes: std::fs::File,
}

pub fn exclusive() -> Exclusive {
    let across = corral_testkit::lock_fair(&host_lock_file());
    Exclusive {
        _in_process: HOST_LOCK.write().unwrap_or_else(|e| e.into_inner()),
        _across_processes: across,
    }
}

/// For a test of the side lane (see [`host_lock_file`]): its sandboxes wait while a test that
/// checks host state runs in another process.
pub fn beside_the_host_state_tests() -> std::fs::File {
    corral_testkit::lock_shared_fair(&host_lock_file())
}

/// The hostile programs' folder.
pub fn programs_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/containment")
}

pub fn corral_bin() -> &'static str {
    env!("CARGO_BIN_EXE_corral")
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A marker unique to this test process and call, usable in argv and file
/// names (letters, digits and '_' only).
pub fn marker(tag: &str) -> String {
    let n = COUNTER.fetch_add(1, Ordering::SeqCst);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("corralmark_{tag}_{}_{n}_{nanos}", std::process::id())
}

/// A fresh host temporary directory (removed on drop).
pub fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("corral-test-")
        .tempdir()
        .expect("create temp dir")
}

/// Compile `tests/containment/<name>.c` into `<dir>/<name>` with the host gcc.
pub fn compile(name: &str, dir: &Path) -> PathBuf {
    let out = dir.join(name);
    gcc(
        &programs_dir().join(format!("{name}.c")),
        &out,
        &["-lpthread", "-lrt"],
    );
    make_world_readable(&out, 0o755);
    out
}

/// Compile the C program `src` into `out` with the host gcc, linking `libs`.
pub fn gcc(src: &Path, out: &Path, libs: &[&str]) {
    let res = Command::new("gcc")
        .args(["-O1", "-Wall", "-o"])
        .arg(out)
        .arg(src)
        .args(libs)
        .output()
        .expect("gcc must be installed on the host to build the hostile programs");
    assert!(
        res.status.success(),
        "compiling {} failed:\n{}",
        src.display(),
        String::from_utf8_lossy(&res.stderr)
    );
}

/// Copy `tests/containment/<name>` (a script) into `dir`.
pub fn copy_program(name: &str, dir: &Path) -> PathBuf {
    let src = programs_dir().join(name);
    let dst = dir.join(name);
    fs::copy(&src, &dst).unwrap_or_else(|e| panic!("copy {}: {e}", src.display()));
    make_world_readable(&dst, 0o755);
    dst
}

pub fn make_world_readable(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(p, fs::Permissions::from_mode(mode)).unwrap();
}

/// A working-dir folder for `--dir`: a temp dir whose mode lets any uid read
/// it (the sandbox user is unprivileged).
pub fn workdir() -> tempfile::TempDir {
    let d = tempdir();
    make_world_readable(d.path(), 0o755);
    d
}

/// What one `corral` invocation produced.
#[derive(Debug)]
pub struct Raw {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub elapsed: Duration,
}

/// Run a prepared command (stdout/stderr piped by this function) with a hard
/// timeout.  Panics if corral does not exit in time (after killing it), or if
/// after its exit some other process still holds its stdout/stderr open
/// (a process escaped the run's cleanup).
pub fn run_command(mut cmd: Command, timeout: Duration) -> Raw {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = cmd.spawn().expect("spawn corral");
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel::<(u8, Vec<u8>)>();
    let tx2 = tx.clone();
    std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = out.read_to_end(&mut b);
        let _ = tx.send((1, b));
    });
    std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = err.read_to_end(&mut b);
        let _ = tx2.send((2, b));
    });
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait corral") {
            break st;
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "corral did not finish within {timeout:?} (killed it); command: {:?}",
                cmd
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let elapsed = start.elapsed();
    let mut stdout = None;
    let mut stderr = None;
    let drain_deadline = Instant::now() + Duration::from_secs(10);
    while stdout.is_none() || stderr.is_none() {
        let left = drain_deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((1, b)) => stdout = Some(b),
            Ok((_, b)) => stderr = Some(b),
            Err(_) => panic!(
                "corral exited ({status}) but its stdout/stderr stayed open for 10 s: \
                 some process outlived the run and holds them. command: {cmd:?}"
            ),
        }
    }
    Raw {
        status,
        stdout: stdout.unwrap(),
        stderr: stderr.unwrap(),
        elapsed,
    }
}

/// A base `corral run` command with an empty environment except PATH (tests
/// add what they need).
pub fn corral_cmd() -> Command {
    let mut c = Command::new(corral_bin());
    c.stdin(Stdio::null());
    // The same suites run under each runtime: CORRAL_TEST_RUNTIME=gvisor makes every `corral
    // run` of the test use gVisor (through the CLI's CORRAL_RUNTIME default).
    if let Some(rt) = test_runtime() {
        c.env("CORRAL_RUNTIME", rt);
    }
    c
}

/// The runtime the suites run under, when not the native default: `gvisor` for a test binary
/// whose name ends in `_gvisor` (`containment_gvisor`, `correctness_gvisor`) or `_gvisor_image`
/// (`containment_gvisor_image`: gVisor in the test image's root), else `CORRAL_TEST_RUNTIME`.
pub fn test_runtime() -> Option<String> {
    if binary_name_ends_with("_gvisor") || binary_name_ends_with("_gvisor_image") {
        return Some("gvisor".into());
    }
    std::env::var("CORRAL_TEST_RUNTIME")
        .ok()
        .filter(|r| !r.is_empty() && r != "native")
}

/// Whether this test binary's name (cargo names them NAME-HASH) ends in `suffix`.
pub fn binary_name_ends_with(suffix: &str) -> bool {
    let exe = std::env::current_exe().unwrap();
    let name = exe.file_name().unwrap().to_string_lossy().into_owned();
    name.rsplit_once('-')
        .is_some_and(|(stem, _)| stem.ends_with(suffix))
}

/// Whether this test binary runs its programs under gVisor.
pub fn under_gvisor() -> bool {
    test_runtime().as_deref() == Some("gvisor")
}

/// The parsed result of `corral run --json ...`.
#[derive(Debug)]
pub struct Outcome {
    pub json: Value,
    pub raw: Raw,
}

impl Outcome {
    pub fn status(&self) -> &str {
        self.json["status"].as_str().unwrap_or("<missing status>")
    }
    pub fn stdout(&self) -> &str {
        self.json["stdout"].as_str().unwrap_or("")
    }
    pub fn stderr(&self) -> &str {
        self.json["stderr"].as_str().unwrap_or("")
    }
    pub fn int(&self, k: &str) -> Option<i64> {
        self.json[k].as_i64()
    }
    pub fn lines(&self) -> Vec<&str> {
        self.stdout().lines().collect()
    }
    /// A short description for assertion messages.
    pub fn describe(&self) -> String {
        let mut j = self.json.clone();
        for k in ["stdout", "stderr", "script"] {
            if let Some(s) = j[k].as_str() {
                if s.len() > 3000 {
                    let mut cut = 3000;
                    while !s.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    j[k] = Value::String(format!("{}...<{} bytes>", &s[..cut], s.len()));
                }
            }
        }
        for k in ["stdout_base64", "stderr_base64"] {
            if let Some(s) = j[k].as_str() {
                if s.len() > 200 {
                    j[k] = Value::String(format!("<{} base64 chars>", s.len()));
                }
            }
        }
        let stderr = String::from_utf8_lossy(&self.raw.stderr);
        let stderr: String = stderr.chars().take(2000).collect();
        format!(
            "corral exit: {}, elapsed {:?}\njson: {}\ncorral stderr: {}",
            self.raw.status,
            self.raw.elapsed,
            serde_json::to_string_pretty(&j).unwrap(),
            stderr
        )
    }
    /// Fails the test, saying `what` and describing the outcome, unless `ok`.
    #[track_caller]
    pub fn ensure(&self, ok: bool, what: impl std::fmt::Display) {
        assert!(ok, "{what}\n{}", self.describe());
    }
    /// The first line of stdout that starts with `prefix`; fails the test, saying `what` and
    /// describing the outcome, when there is none.
    #[track_caller]
    pub fn line_starting(&self, prefix: &str, what: &str) -> String {
        self.lines()
            .into_iter()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("{what}\n{}", self.describe()))
            .to_string()
    }
    #[track_caller]
    pub fn assert_status(&self, want: &str) {
        assert_eq!(
            self.status(),
            want,
            "unexpected status\n{}",
            self.describe()
        );
    }
    #[track_caller]
    pub fn assert_status_in(&self, want: &[&str]) {
        assert!(
            want.contains(&self.status()),
            "status {:?} not one of {want:?}\n{}",
            self.status(),
            self.describe()
        );
    }
    /// The JSON `limits.<k>` as a plain number (pids, open_files), accepting
    /// an integer or a numeric string.
    pub fn limit(&self, k: &str) -> Option<i64> {
        let v = &self.json["limits"][k];
        v.as_i64()
            .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
    }
    /// `limits.<k>` as bytes: an integer, or a string such as "64M" (binary units).
    pub fn limit_bytes(&self, k: &str) -> Option<i64> {
        let v = &self.json["limits"][k];
        if let Some(n) = v.as_i64() {
            return Some(n);
        }
        let s = v.as_str()?.trim();
        let (num, mult) = match s.chars().last()? {
            'K' | 'k' => (&s[..s.len() - 1], 1i64 << 10),
            'M' | 'm' => (&s[..s.len() - 1], 1 << 20),
            'G' | 'g' => (&s[..s.len() - 1], 1 << 30),
            'T' | 't' => (&s[..s.len() - 1], 1 << 40),
            _ => (s, 1),
        };
        num.trim().parse::<i64>().ok().map(|n| n * mult)
    }
    /// `limits.<k>` as milliseconds: an integer (taken as ms), or a string
    /// such as "100ms", "2s", "1m".
    pub fn limit_ms(&self, k: &str) -> Option<i64> {
        let v = &self.json["limits"][k];
        if let Some(n) = v.as_i64() {
            return Some(n);
        }
        let s = v.as_str()?.trim();
        if let Some(n) = s.strip_suffix("ms") {
            return n.trim().parse().ok();
        }
        if let Some(n) = s.strip_suffix('s') {
            return n
                .trim()
                .parse::<f64>()
                .ok()
                .map(|x| (x * 1000.0).round() as i64);
        }
        if let Some(n) = s.strip_suffix('m') {
            return n
                .trim()
                .parse::<f64>()
                .ok()
                .map(|x| (x * 60000.0).round() as i64);
        }
        s.parse::<f64>().ok().map(|x| (x * 1000.0).round() as i64)
    }
    #[track_caller]
    pub fn assert_no_escape(&self) {
        let text = format!("{}\n{}", self.stdout(), self.stderr());
        assert!(
            !text.contains("ESCAPED"),
            "the hostile program reports an escape\n{}",
            self.describe()
        );
    }
}

/// With `CORRAL_TEST_WARM=1` (a step of `scripts/test`), every `corral run --json` of these tests
/// takes the path of a reused sandbox's runs (`corral run --warm`: the program's process started
/// from PID 1's confined thread) instead of a new sandbox's first run: the hostile programs meet
/// both.
pub fn warm_path() -> bool {
    std::env::var("CORRAL_TEST_WARM").is_ok_and(|v| v == "1")
}

/// Run `corral run --json <args>` and parse its JSON.  Panics with a clear
/// message if corral exits non-zero or prints something that is not one JSON
/// object.
pub fn run_json_with(mut cmd: Command, args: &[&str], timeout: Duration) -> Outcome {
    cmd.arg("run").arg("--json").args(image::root_args());
    if warm_path() && !args.contains(&"--fresh") {
        cmd.arg("--warm");
    }
    cmd.args(args);
    let raw = run_command(cmd, timeout);
    let text = String::from_utf8_lossy(&raw.stdout).to_string();
    let json: Value = match serde_json::from_str(text.trim()) {
        Ok(v) => v,
        Err(e) => panic!(
            "corral run --json did not print one JSON object ({e}); exit {}; args {args:?}\n\
             stdout: {}\nstderr: {}",
            raw.status,
            text.chars().take(3000).collect::<String>(),
            String::from_utf8_lossy(&raw.stderr)
                .chars()
                .take(3000)
                .collect::<String>()
        ),
    };
    let out = Outcome { json, raw };
    if out.status() != "sandbox_error" {
        assert!(
            out.raw.status.success(),
            "corral --json must exit 0 when the sandbox did its job\n{}",
            out.describe()
        );
    }
    out
}

pub fn run_json(args: &[&str], timeout: Duration) -> Outcome {
    run_json_with(corral_cmd(), args, timeout)
}

/// Every host process whose cmdline contains `needle`, as (pid, cmdline).
pub fn host_procs_with(needle: &str) -> Vec<(i32, String)> {
    let me = std::process::id() as i32;
    let mut found = Vec::new();
    let Ok(rd) = fs::read_dir("/proc") else {
        return found;
    };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(cmd) = fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains(needle) {
            found.push((pid, cmd));
        }
    }
    found
}

/// Assert that no host process carries `marker` in its cmdline.  Leftovers are
/// SIGKILLed (so a failing test does not leave them running) and reported. Under gVisor the
/// program's processes are gVisor's (their command lines carry no marker): there, no gVisor
/// sandbox may outlive its run either.
#[track_caller]
pub fn assert_no_host_procs(marker: &str) {
    if under_gvisor() {
        assert_no_leaked_gvisor_sandboxes();
    }
    let left = host_procs_with(marker);
    if !left.is_empty() {
        let mut desc = String::new();
        for (pid, cmd) in &left {
            let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
            let state = status
                .lines()
                .filter(|l| l.starts_with("State") || l.starts_with("Uid") || l.starts_with("PPid"))
                .collect::<Vec<_>>()
                .join(", ");
            desc.push_str(&format!("  pid {pid}: {cmd} ({state})\n"));
            // SAFETY: kill(2) on a pid we just found; worst case ESRCH.
            unsafe {
                libc::kill(*pid, libc::SIGKILL);
            }
        }
        panic!("processes of the run outlived it on the host (now killed):\n{desc}");
    }
}

/// A gVisor sandbox's folder on the host, from a runsc process's `--root=.../state`.
fn gvisor_sandbox_dir(cmdline: &str) -> Option<PathBuf> {
    let root = cmdline
        .split(' ')
        .find_map(|a| a.strip_prefix("--root=/run/corral/gvisor/"))?;
    let dir = Path::new("/run/corral/gvisor").join(root);
    Some(dir.parent()?.to_path_buf())
}

/// Every runsc process (runsc, its Sentry, its file server) whose sandbox's folder is gone —
/// corral removes it when the sandbox ends — is a sandbox that outlived its run. One that is
/// still there after a grace period (another test's sandbox may be between the two) is killed
/// and reported.
#[track_caller]
pub fn assert_no_leaked_gvisor_sandboxes() {
    let leaked = || -> Vec<(i32, String)> {
        host_procs_with("--root=/run/corral/gvisor/")
            .into_iter()
            .filter(|(_, cmd)| gvisor_sandbox_dir(cmd).is_some_and(|d| !d.exists()))
            .collect()
    };
    if leaked().is_empty() {
        return;
    }
    std::thread::sleep(Duration::from_secs(3));
    let left = leaked();
    if left.is_empty() {
        return;
    }
    let mut desc = String::new();
    for (pid, cmd) in &left {
        desc.push_str(&format!("  pid {pid}: {cmd}\n"));
        // SAFETY: kill(2) on a pid we just found; worst case ESRCH.
        unsafe {
            libc::kill(*pid, libc::SIGKILL);
        }
    }
    panic!("gVisor sandboxes outlived their runs on the host (now killed):\n{desc}");
}

/// Under gVisor, the host processes of the sandbox of a live corral run whose command line
/// carries `marker`: gVisor's kernel (`runsc-sandbox`, whose stub processes run the program),
/// found below that corral process.
pub fn gvisor_sandbox_procs(marker: &str) -> Vec<i32> {
    let supervisors: Vec<i32> = host_procs_with(marker)
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    host_procs_with("runsc-sandbox")
        .into_iter()
        .filter(|(_, cmd)| cmd.starts_with("runsc-sandbox"))
        .map(|(pid, _)| pid)
        .filter(|&pid| {
            let mut cur = pid;
            for _ in 0..16 {
                match ppid_of(cur) {
                    Some(pp) if pp > 1 => {
                        if supervisors.contains(&pp) {
                            return true;
                        }
                        cur = pp;
                    }
                    _ => return false,
                }
            }
            false
        })
        .collect()
}

/// The host's mount table lines (mount point + source), for before/after
/// comparisons.
pub fn host_mounts() -> BTreeSet<String> {
    fs::read_to_string("/proc/self/mountinfo")
        .expect("read /proc/self/mountinfo")
        .lines()
        .map(|l| {
            // drop the mount id / parent id, which are not interesting
            l.split_whitespace().skip(2).collect::<Vec<_>>().join(" ")
        })
        .collect()
}

/// Assert that no host mount mentions `needle` (e.g. a test's temp dir).
#[track_caller]
pub fn assert_no_host_mount_mentions(needle: &str) {
    let bad: Vec<String> = host_mounts()
        .into_iter()
        .filter(|l| l.contains(needle))
        .collect();
    assert!(
        bad.is_empty(),
        "host mount table mentions {needle} after the run:\n{}",
        bad.join("\n")
    );
}

/// All directories whose name contains "corral" under the cgroup hierarchies
/// (depth-limited), with their child directories.
pub fn corral_cgroup_dirs() -> Vec<(PathBuf, Vec<PathBuf>)> {
    fn walk(dir: &Path, depth: usize, out: &mut Vec<(PathBuf, Vec<PathBuf>)>) {
        if depth == 0 {
            return;
        }
        let Ok(rd) = fs::read_dir(dir) else { return };
        for e in rd.flatten() {
            let Ok(ft) = e.file_type() else { continue };
            if !ft.is_dir() {
                continue;
            }
            let p = e.path();
            if e.file_name().to_string_lossy().contains("corral") {
                let kids: Vec<PathBuf> = fs::read_dir(&p)
                    .map(|rd| {
                        rd.flatten()
                            .filter(|k| k.file_type().map(|t| t.is_dir()).unwrap_or(false))
                            .map(|k| k.path())
                            .collect()
                    })
                    .unwrap_or_default();
                out.push((p, kids));
            } else {
                walk(&p, depth - 1, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(Path::new("/sys/fs/cgroup"), 5, &mut out);
    out
}

/// Describe a cgroup directory's processes (for failure messages).
pub fn describe_cgroup(dir: &Path) -> String {
    let procs = fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
    let mut s = format!("{}:", dir.display());
    for pid in procs.split_whitespace() {
        let cmd = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        s.push_str(&format!(
            " [{pid}: {}]",
            String::from_utf8_lossy(&cmd).replace('\0', " ")
        ));
    }
    s
}

/// The pids in a cgroup directory.
pub fn cgroup_pids(dir: &Path) -> Vec<i32> {
    fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

fn ppid_of(pid: i32) -> Option<i32> {
    let st = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    st.lines()
        .find(|l| l.starts_with("PPid:"))
        .and_then(|l| l[5..].trim().parse().ok())
}

/// True when some process of the cgroup descends from a live `corral`
/// supervisor process (not a sandbox init) that is not a descendant of this
/// test process: a concurrent corral run of someone else.  After this test
/// waited for all its own corral processes, a cgroup of ours can only hold
/// orphans (whose ancestry reaches pid 1 without a corral supervisor).
pub fn cgroup_held_by_live_foreign_corral(dir: &Path) -> bool {
    let me = std::process::id() as i32;
    for pid in cgroup_pids(dir) {
        let mut cur = pid;
        let mut supervisor = false;
        for _ in 0..64 {
            let Some(pp) = ppid_of(cur) else { break };
            if pp <= 1 {
                break;
            }
            if pp == me {
                return false;
            }
            let cmd = fs::read(format!("/proc/{pp}/cmdline")).unwrap_or_default();
            let cmd = String::from_utf8_lossy(&cmd);
            let argv0 = cmd.split('\0').next().unwrap_or("");
            if argv0.ends_with("corral") && !cmd.contains("__sandbox-init") {
                supervisor = true;
            }
            cur = pp;
        }
        if supervisor {
            return true;
        }
    }
    false
}

/// The cgroup paths (controller list -> path) of a host process.
pub fn proc_cgroups(pid: i32) -> Vec<(String, String)> {
    fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let mut it = l.splitn(3, ':');
            let _id = it.next()?;
            let ctrl = it.next()?.to_string();
            let path = it.next()?.to_string();
            Some((ctrl, path))
        })
        .collect()
}

/// The mount point of a cgroup v1 controller (e.g. "memory") or of the
/// unified hierarchy (ctrl "").
pub fn cgroup_mount(ctrl: &str) -> Option<PathBuf> {
    let info = fs::read_to_string("/proc/self/mountinfo").ok()?;
    for l in info.lines() {
        let (pre, post) = l.split_once(" - ")?;
        let mut post_it = post.split_whitespace();
        let fstype = post_it.next()?;
        let _src = post_it.next()?;
        let opts = post_it.next().unwrap_or("");
        let mp = pre.split_whitespace().nth(4)?;
        if ctrl.is_empty() && fstype == "cgroup2" {
            return Some(PathBuf::from(mp));
        }
        if fstype == "cgroup" && !ctrl.is_empty() && opts.split(',').any(|o| o == ctrl) {
            return Some(PathBuf::from(mp));
        }
    }
    None
}

/// Minimal standard base64 decoder (the JSON's *_base64 fields).
pub fn b64decode(s: &str) -> Vec<u8> {
    fn val(c: u8) -> u32 {
        match c {
            b'A'..=b'Z' => (c - b'A') as u32,
            b'a'..=b'z' => (c - b'a' + 26) as u32,
            b'0'..=b'9' => (c - b'0' + 52) as u32,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => panic!("invalid base64 character {:?}", c as char),
        }
    }
    let clean: Vec<u8> = s
        .bytes()
        .filter(|c| !c.is_ascii_whitespace() && *c != b'=')
        .collect();
    let mut out = Vec::with_capacity(clean.len() * 3 / 4);
    for chunk in clean.chunks(4) {
        let mut acc = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            acc |= val(c) << (18 - 6 * i);
        }
        out.push((acc >> 16) as u8);
        if chunk.len() > 2 {
            out.push((acc >> 8) as u8);
        }
        if chunk.len() > 3 {
            out.push(acc as u8);
        }
    }
    out
}

/// Start a host process whose cmdline carries `marker`: `sh -c 'sleep 60; :' marker`.
pub fn spawn_host_sleeper(marker: &str) -> std::process::Child {
    Command::new("/bin/sh")
        .args(["-c", "sleep 60; :"])
        .arg(marker)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn host sleeper")
}

pub fn os(s: &str) -> &OsStr {
    OsStr::new(s)
}

pub const PY: &str = "/usr/bin/python3";
pub const SH: &str = "/bin/sh";
pub fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// The extended attribute `name` of `p` (not following a link), if set.
pub fn xattr(p: &Path, name: &str) -> Option<Vec<u8>> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
    let name = std::ffi::CString::new(name).unwrap();
    let mut buf = [0u8; 64];
    // SAFETY: both strings are NUL-terminated and the buffer's length is passed.
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
