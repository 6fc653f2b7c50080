//! The warm sandbox pool (`corral run --batch FILE --parallel 1`): a sandbox that served one line
//! is reset and serves the next line of the same shape. Nothing the first line (the "attacker")
//! leaves behind may reach the next one (the "victim").
//!
//! Every scenario runs twice: through the pool, and with `--fresh` (a new sandbox per line). Both
//! must be clean. Each line reports which sandbox served it (`sbxid`: the never-reused unique id
//! of the sandbox's root mount), so the pool runs prove they really shared one sandbox and the
//! `--fresh` runs that they did not; and each attacker shows, with the same probe the victim
//! uses, that the state it planted was really there. So a check that finds nothing in the victim
//! means the reset removed it, not that the probe is blind.
//!
//! Helper programs live in `tests/pool/` (C compiled with the host's gcc, Python scripts); they
//! are bound read-only into every sandbox at `/srv/pooltest`.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{json, Value};

/// Where the helper programs appear inside the sandbox.
const TOOLS: &str = "/srv/pooltest";
/// Runs the line's command after printing which sandbox serves it (on stderr); `exec` keeps the
/// command as the run's first process.
const WRAP: &str = r#"/srv/pooltest/sbxid; exec "$0" "$@""#;
const PY: &str = "/usr/bin/python3";
const SCAN: &str = "/srv/pooltest/scan.py";
const BATCH_TIMEOUT: Duration = Duration::from_secs(300);

// ------------------------------------------------------------------ helpers

fn sources() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/pool")
}

fn chmod(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(p, fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("chmod {}: {e}", p.display()));
}

/// The helper programs, built once per test process into a folder any uid may read.
fn tools_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("pool-tools-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("create the tools folder");
        chmod(&dir, 0o755);
        for name in ["sbxid", "ipc", "daemon"] {
            let src = sources().join(format!("{name}.c"));
            let out = dir.join(name);
            common::gcc(&src, &out, &["-lrt"]);
            chmod(&out, 0o755);
        }
        for name in ["scan.py", "net.py"] {
            let dst = dir.join(name);
            fs::copy(sources().join(name), &dst).expect("copy a helper script");
            chmod(&dst, 0o644);
        }
        dir
    })
}

fn tools_bind() -> String {
    format!("{}:{TOOLS}", tools_dir().display())
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A token unique to this test process and call (letters, digits, '_').
fn marker(tag: &str) -> String {
    let n = COUNTER.fetch_add(1, Ordering::SeqCst);
    format!("poolmark_{tag}_{}_{n}", std::process::id())
}

/// A host temp folder that the sandbox user may read (and, with `mode`, write).
fn host_dir(mode: u32) -> tempfile::TempDir {
    let d = tempfile::Builder::new()
        .prefix("corral-pooltest-")
        .tempdir()
        .expect("create temp dir");
    chmod(d.path(), mode);
    d
}

/// A batch line running `argv` behind the sandbox-id probe, with the helpers bound in.
fn line(argv: &[&str]) -> Value {
    let mut full = vec!["/bin/sh", "-c", WRAP];
    full.extend_from_slice(argv);
    json!({"argv": full, "ro_bind": [tools_bind()]})
}

/// A batch line running a shell script (behind the probe).
fn sh(script: &str) -> Value {
    line(&["/bin/sh", "-c", script])
}

/// The victim that looks for everything at once (see `tests/pool/scan.py`).
fn scan() -> Value {
    line(&[PY, SCAN])
}

/// `v` with `key` set to `val`.
fn with(mut v: Value, key: &str, val: Value) -> Value {
    v[key] = val;
    v
}

/// Adds host binds to a line (keeping the helpers' bind).
fn with_ro_bind(mut v: Value, bind: &str) -> Value {
    v["ro_bind"].as_array_mut().unwrap().push(bind.into());
    v
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// `--parallel 1`: consecutive lines of one shape share a warm sandbox.
    Pool,
    /// `--parallel 1 --fresh`: a new sandbox per line.
    Fresh,
}

const MODES: [Mode; 2] = [Mode::Pool, Mode::Fresh];

impl Mode {
    fn flags(self) -> Vec<&'static str> {
        match self {
            Mode::Pool => vec!["--parallel", "1", "--pool-size", "1"],
            Mode::Fresh => vec!["--parallel", "1", "--fresh"],
        }
    }
}

/// One result line of a batch.
#[derive(Debug, Clone)]
struct Res {
    json: Value,
    /// The input line, for messages.
    input: String,
    /// 1-based line number.
    n: usize,
}

impl Res {
    fn status(&self) -> &str {
        self.json["status"].as_str().unwrap_or("<no status>")
    }
    fn stdout(&self) -> &str {
        self.json["stdout"].as_str().unwrap_or("")
    }
    fn stderr(&self) -> &str {
        self.json["stderr"].as_str().unwrap_or("")
    }
    fn lines(&self) -> Vec<&str> {
        self.stdout().lines().collect()
    }
    fn has(&self, l: &str) -> bool {
        self.lines().contains(&l)
    }
    fn int(&self, k: &str) -> Option<i64> {
        self.json[k].as_i64()
    }
    /// The sandbox that served this line (printed by `sbxid`, on stderr, or on stdout where a
    /// flood of output follows it).
    fn sbxid(&self) -> Option<u64> {
        self.stderr()
            .lines()
            .chain(self.stdout().lines())
            .find_map(|l| l.strip_prefix("SBXID "))
            .and_then(|s| s.trim().parse().ok())
    }
    /// The unique id of the mount `path` was on (printed by `sbxid PATH`, see [`MOUNT_IDS`]).
    fn mount_id(&self, path: &str) -> Option<u64> {
        let prefix = format!("MNTID {path} ");
        self.stderr()
            .lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .and_then(|s| s.trim().parse().ok())
    }
    /// The line and its result, for assertion messages.
    fn describe(&self) -> String {
        let mut j = self.json.clone();
        if let Some(o) = j.as_object_mut() {
            o.remove("script");
            for k in ["stdout", "stderr"] {
                if let Some(s) = o.get(k).and_then(|v| v.as_str()) {
                    if s.len() > 6000 {
                        let mut cut = 6000;
                        while !s.is_char_boundary(cut) {
                            cut -= 1;
                        }
                        let short = format!("{}...<{} bytes>", &s[..cut], s.len());
                        o.insert(k.into(), short.into());
                    }
                }
            }
        }
        let stdout = j["stdout"].as_str().unwrap_or("").to_string();
        if let Some(o) = j.as_object_mut() {
            o.remove("stdout");
        }
        format!(
            "line {}: {}\nresult: {}\nstdout:\n{}",
            self.n, self.input, j, stdout
        )
    }
}

/// Runs `corral run --batch` on these raw lines with `flags`; one parsed result per line.
fn run_batch_text(lines: &[String], flags: &[&str]) -> Vec<Res> {
    let dir = host_dir(0o755);
    let file = dir.path().join("batch.jsonl");
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    fs::write(&file, text).expect("write the batch file");
    let mut cmd = common::corral_cmd();
    cmd.arg("run").arg("--batch").arg(&file).args(flags);
    // Panics when corral outlives the timeout or a process of the batch outlives corral.
    let raw = common::run_command(cmd, BATCH_TIMEOUT);
    let status = raw.status;
    let stdout = String::from_utf8_lossy(&raw.stdout).to_string();
    let stderr = String::from_utf8_lossy(&raw.stderr).to_string();
    assert!(
        status.success(),
        "corral run --batch {flags:?} failed: {status}\nstderr: {stderr}\nstdout: {stdout}"
    );
    let res: Vec<Res> = stdout
        .lines()
        .enumerate()
        .map(|(i, l)| Res {
            json: serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("result line {} is not JSON ({e}): {l}", i + 1)),
            input: lines.get(i).cloned().unwrap_or_default(),
            n: i + 1,
        })
        .collect();
    assert_eq!(
        res.len(),
        lines.len(),
        "one result line per input line expected (flags {flags:?})\nstdout: {stdout}\nstderr: {stderr}"
    );
    res
}

fn run_batch(lines: &[Value], flags: &[&str]) -> Vec<Res> {
    let text: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    run_batch_text(&text, flags)
}

/// Pool: every line was served by one and the same sandbox (else the scenario proves nothing
/// about the reset). Fresh: every line had a sandbox of its own.
#[track_caller]
fn assert_served(mode: Mode, res: &[&Res]) {
    let ids: Vec<Option<u64>> = res.iter().map(|r| r.sbxid()).collect();
    for (r, id) in res.iter().zip(&ids) {
        assert!(
            id.is_some(),
            "[{mode:?}] the line did not report its sandbox (SBXID on stderr)\n{}",
            r.describe()
        );
    }
    let distinct: BTreeSet<u64> = ids.iter().flatten().copied().collect();
    match mode {
        Mode::Pool => assert_eq!(
            distinct.len(),
            1,
            "[Pool] consecutive lines of one shape were not served by one warm sandbox (ids {ids:?}), \
             so this scenario would not test the reset\n{}",
            res.iter().map(|r| r.describe()).collect::<Vec<_>>().join("\n")
        ),
        Mode::Fresh => assert_eq!(
            distinct.len(),
            res.len(),
            "[Fresh] --fresh reused a sandbox (ids {ids:?})"
        ),
    }
}

#[track_caller]
fn assert_status(mode: Mode, r: &Res, want: &str) {
    assert_eq!(
        r.status(),
        want,
        "[{mode:?}] unexpected status\n{}",
        r.describe()
    );
}

/// Runs `[attacker, victim]` through the pool and with `--fresh`; checks which sandboxes served
/// them. Returns (mode, attacker, victim) for both modes.
fn attack_then_look(attacker: &Value, victim: &Value) -> Vec<(Mode, Res, Res)> {
    MODES
        .iter()
        .map(|&mode| {
            let mut res = run_batch(&[attacker.clone(), victim.clone()], &mode.flags());
            let victim = res.pop().unwrap();
            let attacker = res.pop().unwrap();
            assert_served(mode, &[&attacker, &victim]);
            (mode, attacker, victim)
        })
        .collect()
}

/// Lines of `scan.py`'s output that mean an earlier run left something behind.
fn scan_findings(r: &Res) -> Vec<String> {
    let mut bad = Vec::new();
    for l in r.lines() {
        let mut w = l.split_whitespace();
        let (tag, a, b, c) = (w.next(), w.next(), w.next(), w.next());
        let finding = match tag {
            Some("FILE" | "UNREADABLE" | "SYSV" | "PROC" | "ENV" | "SOCK" | "SEEN" | "XATTR") => {
                true
            }
            Some("USED") => (b, c) != (Some("0"), Some("1")),
            Some("MODE") => {
                let want = if a == Some("/home/sandbox") {
                    "0o700"
                } else {
                    "0o1777"
                };
                b != Some(want)
            }
            Some("COUNT") => b != Some("0"),
            _ => false,
        };
        if finding {
            bad.push(l.to_string());
        }
    }
    bad
}

/// The victim's scan ran to its end and found nothing at all.
#[track_caller]
fn assert_clean(mode: Mode, victim: &Res) {
    assert_status(mode, victim, "ok");
    assert!(
        victim.has("SCAN DONE"),
        "[{mode:?}] the scan did not run to its end\n{}",
        victim.describe()
    );
    let bad = scan_findings(victim);
    assert!(
        bad.is_empty(),
        "[{mode:?}] LEAK: the next run found what an earlier run left behind:\n  {}\n{}",
        bad.join("\n  "),
        victim.describe()
    );
}

/// The attacker's own output has this line (its state really existed).
#[track_caller]
fn assert_planted(mode: Mode, attacker: &Res, want: &str) {
    assert!(
        attacker.lines().iter().any(|l| l.contains(want)),
        "[{mode:?}] the attacker's own probe does not show {want:?}: the check would be blind\n{}",
        attacker.describe()
    );
}

/// Every host process whose command line contains `needle` (killed, then reported).
#[track_caller]
fn assert_no_host_procs(needle: &str) {
    let me = std::process::id().to_string();
    let mut left = Vec::new();
    for e in fs::read_dir("/proc").unwrap().flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if !name.chars().all(|c| c.is_ascii_digit()) || name == me {
            continue;
        }
        let Ok(cmd) = fs::read(format!("/proc/{name}/cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains(needle) {
            if let Ok(pid) = name.parse::<i32>() {
                // SAFETY: kill(2) on a pid just found; at worst ESRCH.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            left.push(format!("{name}: {cmd}"));
        }
    }
    assert!(
        left.is_empty(),
        "processes of the batch outlived it on the host (now killed):\n{}",
        left.join("\n")
    );
}

// ------------------------------------------------------------------ files

/// Prints the unique id of each scratch folder's mount (stderr `MNTID <dir> <id>`): the same id
/// in the next run means the reset emptied that mount in place, a new one that it remounted.
const MOUNT_IDS: &str = "/srv/pooltest/sbxid /home/sandbox /tmp /dev/shm";

const SCRATCH_DIRS: [&str; 3] = ["/home/sandbox", "/tmp", "/dev/shm"];

/// Plants files in every scratch folder: plain, hidden, odd and "undeletable"-looking names,
/// read-only and unreadable folders, links, a FIFO, a socket (then [`LOCK_WORKDIR`] locks the
/// working directory itself).
const PLANT_FILES: &str = r#"
/srv/pooltest/sbxid /home/sandbox /tmp /dev/shm
cd /home/sandbox || exit 1
echo secret > left.txt
echo h > .hidden
mkdir -p .config/app && echo c > .config/app/token
echo i > immutable; echo i > .immutable; chattr +i immutable .immutable 2>/dev/null
echo n > .nfs0000000000abcd0001
mkdir lost+found && echo l > lost+found/#123
echo d > ...; echo s > ' leading space'; echo r > -rf
printf x > "$(printf 'new\nline')"
mkdir locked && echo l > locked/inside && chmod 000 locked
mkdir ro && echo r > ro/inside && chmod 555 ro
ln -s /etc/passwd link; ln left.txt hardlink; mkfifo fifo
head -c 1048576 /dev/zero > big
echo t > /tmp/tmp-left; echo t > /tmp/.tmp-hidden
mkdir /tmp/.X11-unix && echo x > /tmp/.X11-unix/X0 && chmod 000 /tmp/.X11-unix
echo v > /var/tmp/vartmp-left; echo v > /var/tmp/.vartmp-hidden; echo i > /var/tmp/immutable
echo s > /dev/shm/shm-left; echo s > /dev/shm/.shm-hidden; echo s > /dev/shm/sem.corral
head -c 2097152 /dev/zero > /dev/shm/.big
/usr/bin/python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind("/tmp/.sock")'
/usr/bin/python3 /srv/pooltest/scan.py
"#;

/// The attacker's last step: the working directory itself unreadable to its owner.
const LOCK_WORKDIR: &str = "chmod 000 /home/sandbox";

#[test]
fn files_in_scratch_folders_do_not_reach_the_next_run() {
    let victim = sh(r#"for d in /home/sandbox /tmp /var/tmp /dev/shm; do
  echo w > "$d/probe-write" && rm "$d/probe-write" && echo "WRITABLE $d"
done
/srv/pooltest/sbxid /home/sandbox /tmp /dev/shm
exec /usr/bin/python3 /srv/pooltest/scan.py"#);
    let attacker = sh(&format!("{PLANT_FILES}\n{LOCK_WORKDIR}"));
    for (mode, attacker, victim) in attack_then_look(&attacker, &victim) {
        assert_status(mode, &attacker, "ok");
        for want in [
            "'/home/sandbox/left.txt' file",
            "'/home/sandbox/.hidden' file",
            "'/home/sandbox/.config/app/token' file",
            "'/home/sandbox/immutable' file",
            "'/home/sandbox/.immutable' file",
            "'/home/sandbox/.nfs0000000000abcd0001' file",
            "'/home/sandbox/lost+found/#123' file",
            "'/home/sandbox/...' file",
            "'/home/sandbox/ leading space' file",
            "'/home/sandbox/-rf' file",
            "'/home/sandbox/new\\nline' file",
            "UNREADABLE '/home/sandbox/locked'",
            "'/home/sandbox/ro/inside' file",
            "'/home/sandbox/link' link",
            "'/home/sandbox/fifo' fifo",
            "'/tmp/.tmp-hidden' file",
            "UNREADABLE '/tmp/.X11-unix'",
            "'/tmp/.sock' socket",
            "'/var/tmp/vartmp-left' file",
            "'/var/tmp/.vartmp-hidden' file",
            "'/var/tmp/immutable' file",
            "'/dev/shm/.shm-hidden' file",
            "'/dev/shm/sem.corral' file",
            "'/dev/shm/.big' file",
        ] {
            assert_planted(mode, &attacker, want);
        }
        assert_clean(mode, &victim);
        for d in ["/home/sandbox", "/tmp", "/var/tmp", "/dev/shm"] {
            assert!(
                victim.has(&format!("WRITABLE {d}")),
                "[{mode:?}] the next run cannot write to {d}\n{}",
                victim.describe()
            );
        }
    }
}

/// In the pool, a reset that finds the scratch folders changed beyond what it can restore (here
/// the working directory locked) replaces them with fresh mounts; the last test showed the next
/// run clean, this one that the remount really happened.
#[test]
fn a_locked_working_directory_is_remounted_for_the_next_run() {
    let attacker = sh(&format!("{MOUNT_IDS}\n{LOCK_WORKDIR}"));
    let victim = sh(&format!("{MOUNT_IDS}\nexec {PY} {SCAN}"));
    let res = run_batch(&[attacker, victim], &Mode::Pool.flags());
    assert_served(Mode::Pool, &[&res[0], &res[1]]);
    assert_clean(Mode::Pool, &res[1]);
    let ids = |r: &Res| r.mount_id("/home/sandbox").expect("MNTID of /home/sandbox");
    assert_ne!(
        ids(&res[0]),
        ids(&res[1]),
        "a locked working directory was kept, not remounted\n{}",
        res[1].describe()
    );
}

/// Everything `PLANT_FILES` leaves behind (the working directory left as it was made) is removed
/// in place: the next run sees the same scratch mounts — the reset did not fall back to
/// remounting — and nothing in them.
/// The unique mount ids of scratch folder `d` the attacker's and the victim's runs reported.
fn both_mount_ids(attacker: &Res, victim: &Res, d: &str, when: &str) -> (u64, u64) {
    match (attacker.mount_id(d), victim.mount_id(d)) {
        (Some(a), Some(v)) => (a, v),
        _ => panic!("{when} no MNTID for {d}\n{}", victim.describe()),
    }
}

#[test]
fn scratch_folders_are_emptied_in_place_and_nothing_is_left() {
    let victim = sh(&format!("{MOUNT_IDS}\nexec {PY} {SCAN}"));
    for (mode, attacker, victim) in attack_then_look(&sh(PLANT_FILES), &victim) {
        assert_status(mode, &attacker, "ok");
        for want in [
            "'/home/sandbox/.config/app/token' file",
            "'/dev/shm/.big' file",
        ] {
            assert_planted(mode, &attacker, want);
        }
        assert_clean(mode, &victim);
        for d in SCRATCH_DIRS {
            let (a, v) = both_mount_ids(&attacker, &victim, d, &format!("[{mode:?}]"));
            match mode {
                Mode::Pool => assert_eq!(
                    a,
                    v,
                    "[Pool] {d} was remounted: the reset did not empty it in place\n{}",
                    victim.describe()
                ),
                Mode::Fresh => assert_ne!(a, v, "[Fresh] {d} was shared between sandboxes"),
            }
        }
    }
}

/// What the in-place reset does not take on — more entries than its budget, a deeper tree than
/// it walks, attributes on a scratch folder itself, its mode changed — makes it remount instead:
/// each attacker is followed by a clean run in the same sandbox, on a new mount where the reset
/// fell back and on the same one after a plain run.
#[test]
fn a_reset_remounts_what_it_will_not_empty_in_place() {
    let attackers = [
        ("5000 files", "cd /tmp && seq 5000 | xargs touch && ls | wc -l", "/tmp"),
        (
            "a tree 100 folders deep",
            "cd /home/sandbox && for i in $(seq 100); do mkdir d && cd d || exit 1; done && touch leaf",
            "/home/sandbox",
        ),
        (
            "an attribute on the working directory",
            "/usr/bin/python3 -c 'import os; os.setxattr(\"/home/sandbox\", \"user.left\", b\"x\")'",
            "/home/sandbox",
        ),
        ("the working directory's mode", "chmod 0711 /home/sandbox", "/home/sandbox"),
        ("a plain run", "echo left > /home/sandbox/f; echo left > /dev/shm/g", ""),
    ];
    let mut lines = Vec::new();
    for (_, script, _) in &attackers {
        lines.push(sh(&format!("{MOUNT_IDS}\n{script}")));
        lines.push(sh(&format!("{MOUNT_IDS}\nexec {PY} {SCAN}")));
    }
    let res = run_batch(&lines, &Mode::Pool.flags());
    assert_served(Mode::Pool, &res.iter().collect::<Vec<_>>());
    for ((what, _, remounted), pair) in attackers.iter().zip(res.chunks(2)) {
        let (attacker, victim) = (&pair[0], &pair[1]);
        assert_status(Mode::Pool, attacker, "ok");
        assert_clean(Mode::Pool, victim);
        for d in SCRATCH_DIRS {
            let (a, v) = both_mount_ids(attacker, victim, d, &format!("after {what}"));
            if !remounted.is_empty() && d == *remounted {
                assert_ne!(a, v, "after {what}, {d} was kept instead of remounted");
            } else if remounted.is_empty() {
                assert_eq!(
                    a, v,
                    "after {what}, {d} was remounted instead of emptied in place"
                );
            }
        }
    }
}

// ------------------------------------------------------------------ IPC

const IPC_KEY: &str = "5ca1ab1e";

#[test]
fn sysv_ipc_objects_do_not_reach_the_next_run() {
    let name = marker("sysv");
    let attacker = sh(&format!(
        "/srv/pooltest/ipc plant {IPC_KEY} {name}\n\
         ipcmk -M 8192 && ipcmk -Q && ipcmk -S 4\n\
         ipcs\n\
         exec /usr/bin/python3 /srv/pooltest/scan.py"
    ));
    let victim = sh(&format!(
        "/srv/pooltest/ipc look {IPC_KEY} {name}\n\
         ipcs\n\
         exec /usr/bin/python3 /srv/pooltest/scan.py"
    ));
    for (mode, attacker, victim) in attack_then_look(&attacker, &victim) {
        assert_status(mode, &attacker, "ok");
        for want in [
            format!("SEEN sysv-shm {name}"),
            format!("SEEN sysv-msg {name}"),
            "SEEN sysv-sem value=7".to_string(),
            "COUNT shm 2".to_string(),
            "COUNT msg 2".to_string(),
            "COUNT sem 2".to_string(),
            "SYSV shm".to_string(),
            "SYSV msg".to_string(),
            "SYSV sem".to_string(),
        ] {
            assert_planted(mode, &attacker, &want);
        }
        for want in [
            "GONE sysv-shm",
            "GONE sysv-msg",
            "GONE sysv-sem",
            "COUNT shm 0",
            "COUNT msg 0",
            "COUNT sem 0",
        ] {
            assert!(
                victim.has(want),
                "[{mode:?}] LEAK: the next run did not print {want:?}\n{}",
                victim.describe()
            );
        }
        let ipcs_entries: Vec<&str> = victim
            .lines()
            .into_iter()
            .filter(|l| l.starts_with("0x"))
            .collect();
        assert!(
            ipcs_entries.is_empty(),
            "[{mode:?}] LEAK: ipcs in the next run lists {ipcs_entries:?}\n{}",
            victim.describe()
        );
        assert_clean(mode, &victim);
    }
}

/// A bind inside a scratch folder (`/tmp`, `/dev/shm`, the working directory) reaches every line
/// of a batch: a reset makes those folders anew and the bind would be gone with the old ones, so
/// a sandbox holding one is not reused (each line gets a sandbox of its own).
#[test]
fn a_bind_inside_a_scratch_folder_reaches_every_run() {
    let dir = host_dir(0o755);
    let name = marker("scratchbind");
    fs::write(dir.path().join("data.txt"), format!("{name}\n")).expect("write the bound file");
    chmod(&dir.path().join("data.txt"), 0o644);
    for target in ["/tmp/bound", "/home/sandbox/bound"] {
        let bind = format!("{}:{target}", dir.path().display());
        let line = json!({"argv": ["/bin/cat", format!("{target}/data.txt")], "ro_bind": [bind]});
        let res = run_batch(&[line.clone(), line.clone(), line], &["--pool-size", "1"]);
        for r in &res {
            assert_eq!(
                r.json["stdout"].as_str(),
                Some(format!("{name}\n").as_str()),
                "a run after the first lost the bind at {target}\n{}",
                r.describe()
            );
        }
    }
}

/// POSIX message queues and POSIX shared memory (`shm_open`, a file in /dev/shm).
///
/// Inside the sandbox `mq_open(O_CREAT)` fails with EACCES: Landlock denies the internal mqueue
/// filesystem, which no rule names. So the attacker may not be able to create a queue at all; the
/// test accepts exactly that refusal (and nothing else) in place of a created queue, and the
/// victim must find none either way.
#[test]
fn posix_message_queues_and_shm_do_not_reach_the_next_run() {
    let name = marker("posix");
    let attacker = line(&["/srv/pooltest/ipc", "plant", IPC_KEY, &name]);
    let victim = line(&["/srv/pooltest/ipc", "look", IPC_KEY, &name]);
    for (mode, attacker, victim) in attack_then_look(&attacker, &victim) {
        assert_status(mode, &attacker, "ok");
        let created = attacker.has("PLANTED posix-mq");
        if created {
            assert_planted(mode, &attacker, "SEEN posix-mq messages=1");
        } else {
            assert!(
                attacker.has("FAILED posix-mq Permission denied"),
                "[{mode:?}] mq_open(O_CREAT) neither worked nor was refused with EACCES\n{}",
                attacker.describe()
            );
        }
        assert_planted(mode, &attacker, &format!("SEEN posix-shm {name}"));
        assert_status(mode, &victim, "ok");
        for l in victim.lines() {
            assert!(
                !l.starts_with("SEEN"),
                "[{mode:?}] LEAK: {l}\n{}",
                victim.describe()
            );
        }
        for want in ["GONE posix-mq", "GONE posix-shm"] {
            assert!(
                victim.lines().iter().any(|l| l.starts_with(want)),
                "[{mode:?}] LEAK: the next run did not print {want:?}\n{}",
                victim.describe()
            );
        }
    }
}

/// The reset keeps an IPC namespace nobody used (making one is not free) and replaces one that
/// holds anything. The namespace's identity is its `/proc/self/ns/ipc` link, compared between
/// consecutive runs of one sandbox. (POSIX message queues count too; where `mq_open` is refused,
/// as for a rootful sandbox here, `ipc plant` makes only its SysV and POSIX shm objects.)
#[test]
fn an_unused_ipc_namespace_is_kept_and_a_used_one_replaced() {
    let ns = "echo IPCNS $(readlink /proc/self/ns/ipc)";
    let name = marker("ipcns");
    let lines = [
        sh(ns),
        sh(ns),
        sh(&format!("{ns}; ipcmk -M 4096 >/dev/null && echo MADE")),
        sh(ns),
        sh(&format!("{ns}; /srv/pooltest/ipc plant {IPC_KEY} {name}")),
        sh(ns),
    ];
    let res = run_batch(&lines, &Mode::Pool.flags());
    assert_served(Mode::Pool, &res.iter().collect::<Vec<_>>());
    let id = |r: &Res| {
        r.lines()
            .iter()
            .find_map(|l| l.strip_prefix("IPCNS "))
            .map(str::to_string)
            .unwrap_or_else(|| panic!("no IPCNS line\n{}", r.describe()))
    };
    assert!(res[2].has("MADE"), "ipcmk failed\n{}", res[2].describe());
    assert!(
        res[4].has("PLANTED sysv-msg"),
        "ipc plant failed\n{}",
        res[4].describe()
    );
    // (earlier run, next run, the same namespace?, what went wrong otherwise)
    let expected = [
        (0, 1, true, "an unused IPC namespace was replaced"),
        (1, 2, true, "an unused IPC namespace was replaced"),
        (2, 3, false, "an IPC namespace holding SysV memory was kept"),
        (3, 4, true, "an unused IPC namespace was replaced"),
        (4, 5, false, "an IPC namespace holding IPC objects was kept"),
    ];
    for (a, b, same, wrong) in expected {
        assert_eq!(
            id(&res[a]) == id(&res[b]),
            same,
            "runs {a} and {b}: {wrong}"
        );
    }
}

/// Fresh sandboxes from the spawner enter network and IPC namespaces it made ahead for them
/// (`inside/spares.rs`): each must still be a namespace of its own — none is the host's, and none
/// is one an earlier sandbox used — and a sandbox with network must still get the host's. Six
/// fresh sandboxes: the first is started directly, the second forked at once, later ones (a run
/// apart) find their spares ready. Each leaves state behind in both namespaces (a System V message
/// queue; a UDP datagram sent, counted in `/proc/net/snmp`) and must find none: a namespace
/// handed out twice would show the earlier run's. (Comparing the namespaces' inode numbers across
/// sandboxes proves nothing once the first is gone: the kernel reuses a freed number.)
#[test]
fn every_fresh_sandbox_has_network_and_ipc_namespaces_of_its_own() {
    const STATE: &str = "echo STATE $(ipcs -q | grep -c '^0x') \
        $(awk '/^Udp:/ && $2 ~ /^[0-9]+$/ {print $5}' /proc/net/snmp)";
    let probe = |send: bool| {
        let send = if send {
            "python3 -c \"import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', 9))\"; "
        } else {
            ""
        };
        sh(&format!(
            "echo NS $(readlink /proc/self/ns/net) $(readlink /proc/self/ns/ipc); {STATE}; \
             ipcmk -Q >/dev/null; {send}{}",
            STATE.replace("STATE", "LEFT")
        ))
    };
    let mut lines: Vec<Value> = (0..6).map(|_| probe(true)).collect();
    lines.push(with(probe(false), "network", json!(true)));
    let res = run_batch(&lines, &Mode::Fresh.flags());
    assert_served(Mode::Fresh, &res.iter().collect::<Vec<_>>());
    let fields = |r: &Res, tag: &str| -> Vec<String> {
        r.lines()
            .iter()
            .find_map(|l| l.strip_prefix(tag).map(str::to_string))
            .unwrap_or_else(|| panic!("no {tag}line\n{}", r.describe()))
            .split_whitespace()
            .map(str::to_string)
            .collect()
    };
    let host = |kind: &str| fs::read_link(format!("/proc/self/ns/{kind}")).unwrap();
    let (host_net, host_ipc) = (host("net"), host("ipc"));
    for (i, r) in res.iter().enumerate() {
        let ns = fields(r, "NS ");
        let (net, ipc) = (Path::new(&ns[0]), Path::new(&ns[1]));
        assert_ne!(ipc, host_ipc, "sandbox {i} is in the host's IPC namespace");
        let (found, left) = (fields(r, "STATE "), fields(r, "LEFT "));
        assert_eq!(
            found[0],
            "0",
            "sandbox {i} found an earlier run's message queue\n{}",
            r.describe()
        );
        assert_eq!(
            left[0],
            "1",
            "sandbox {i} left no message queue\n{}",
            r.describe()
        );
        if i < 6 {
            assert_ne!(
                net, host_net,
                "sandbox {i} is in the host's network namespace"
            );
            assert_eq!(
                found[1],
                "0",
                "sandbox {i} found an earlier run's datagram\n{}",
                r.describe()
            );
            assert_eq!(
                left[1],
                "1",
                "sandbox {i} sent no datagram\n{}",
                r.describe()
            );
        } else {
            assert_eq!(net, host_net, "a sandbox with network is not on the host's");
        }
    }
}

/// Fresh sandboxes of a host root with no binds start in a root the spawner prepared ahead
/// (`inside/spares.rs`, `rootfs::prepare_host_root`) once it had a moment: the first sandbox is
/// started directly and the second forked at once (both build their root); later ones, a run
/// apart, find one ready (the debug line of each says which). A prepared root must be the root
/// PID 1 builds: the same mounts, each with the same source, flags, file system and options
/// (`/proc/self/mountinfo` less the kernel's numbering and the sandbox's uid), `/etc/passwd`
/// naming the sandbox's own uid, and the masked `/proc` files empty. A last sandbox with network
/// builds its root (its `/etc/resolv.conf` is the host's, which a prepared root cannot read).
#[test]
fn a_root_prepared_ahead_is_the_root_pid1_builds() {
    const PROBE: &str = "cat /proc/self/mountinfo; echo UID $(id -u); \
        echo PASSWD $(grep '^sandbox:' /etc/passwd | cut -d: -f3); \
        echo KALLSYMS $(wc -c < /proc/kallsyms); echo HOST $(cat /etc/hostname)";
    let mut lines: Vec<String> = (0..8)
        .map(|_| json!({"argv": ["/bin/sh", "-c", PROBE]}).to_string())
        .collect();
    lines.push(json!({"argv": ["cat", "/etc/resolv.conf"], "network": true}).to_string());
    let dir = host_dir(0o755);
    let file = dir.path().join("batch.jsonl");
    fs::write(&file, lines.join("\n") + "\n").expect("write the batch file");
    let mut cmd = common::corral_cmd();
    cmd.env("CORRAL_LOG", "debug")
        .arg("run")
        .arg("--batch")
        .arg(&file)
        .args(Mode::Fresh.flags());
    let raw = common::run_command(cmd, BATCH_TIMEOUT);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&raw.stdout),
        String::from_utf8_lossy(&raw.stderr),
    );
    assert!(raw.status.success(), "corral failed: {stderr}");
    let roots: Vec<bool> = stderr
        .lines()
        .filter(|l| l.contains("sandbox created"))
        .map(|l| l.contains("root=\"prepared ahead\""))
        .collect();
    assert_eq!(roots.len(), 9, "one sandbox per line expected:\n{stderr}");
    assert!(
        !roots[8],
        "a sandbox with network started in a prepared root"
    );
    assert!(
        !roots[0],
        "the first sandbox (no spawner yet) built its root"
    );
    assert!(
        roots.iter().any(|&p| p),
        "no sandbox started in a prepared root: {roots:?}"
    );
    // Each mount as `root mount-point options - type source super-options`, the workdir's owner
    // made generic; sorted (a prepared root's /proc is mounted first).
    let mounts = |out: &str| -> Vec<String> {
        let mut v: Vec<String> = out
            .lines()
            .filter(|l| l.contains(" - "))
            .map(|l| {
                let (left, right) = l.split_once(" - ").unwrap();
                let f: Vec<&str> = left.split_whitespace().collect();
                let generic = right
                    .split(',')
                    .map(|o| match o.split_once('=') {
                        Some(("uid" | "gid", _)) => "OWNER",
                        _ => o,
                    })
                    .collect::<Vec<_>>()
                    .join(",");
                format!("{} {} {} - {generic}", f[3], f[4], f[5])
            })
            .collect();
        v.sort();
        v
    };
    let mut results: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON result line"))
        .collect();
    assert_eq!(results.len(), 9, "{stdout}");
    let net = results.pop().unwrap();
    assert_eq!(net["status"], "ok", "{net}");
    assert_eq!(
        net["stdout"].as_str().unwrap_or(""),
        fs::read_to_string("/etc/resolv.conf").unwrap_or_default(),
        "a sandbox with network has the host's resolver"
    );
    let built = mounts(results[0]["stdout"].as_str().unwrap_or(""));
    assert!(
        built.len() > 20 && built.iter().any(|m| m.contains(" /etc/ssl ")),
        "no mounts read in the first sandbox: {built:?}"
    );
    for (i, (r, prepared)) in results.iter().zip(&roots).enumerate() {
        assert_eq!(r["status"], "ok", "line {i}: {r}");
        let out = r["stdout"].as_str().unwrap_or("");
        let field = |tag: &str| {
            out.lines()
                .find_map(|l| l.strip_prefix(tag))
                .unwrap_or_else(|| panic!("line {i}: no {tag}in {out}"))
                .trim()
                .to_string()
        };
        assert_eq!(
            mounts(out),
            built,
            "line {i} (root prepared ahead: {prepared}) has other mounts than a built root"
        );
        assert_eq!(field("PASSWD "), field("UID "), "line {i}: /etc/passwd");
        assert_eq!(field("KALLSYMS "), "0", "line {i}: /proc/kallsyms unmasked");
        assert_eq!(field("HOST "), "sandbox", "line {i}: /etc/hostname");
    }
}

// ------------------------------------------------------------------ processes

#[test]
fn daemons_do_not_survive_into_the_next_run() {
    let m = marker("daemon");
    let attacker = sh(&format!(
        r#"/srv/pooltest/daemon {m} /srv/pooltest-out/tick
( trap '' TERM HUP INT; exec setsid /bin/sh -c 'while :; do date +%s%N > /srv/pooltest-out/tick2.tmp; mv /srv/pooltest-out/tick2.tmp /srv/pooltest-out/tick2; sleep 0.02; done' {m} ) </dev/null >/dev/null 2>&1 &
( trap '' TERM HUP INT; exec setsid /bin/sleep 1000 ) </dev/null >/dev/null 2>&1 &
while [ ! -s /srv/pooltest-out/tick2 ]; do sleep 0.02; done
exec /usr/bin/python3 /srv/pooltest/scan.py"#
    ));
    let victim = sh(
        r#"t1=$(cat /srv/pooltest-out/tick); t2=$(cat /srv/pooltest-out/tick2)
sleep 0.5
echo "TICK $t1 $(cat /srv/pooltest-out/tick)"
echo "TICK2 $t2 $(cat /srv/pooltest-out/tick2)"
exec /usr/bin/python3 /srv/pooltest/scan.py"#,
    );
    // A folder of its own per mode: a daemon killed between truncating tick2.tmp and writing it
    // leaves an empty file owned by its uid, which the next mode's attacker (another uid) could
    // not overwrite, so its first `mv` would publish an empty tick.
    let mut outs = Vec::new();
    for mode in MODES {
        let out = host_dir(0o777);
        let out_bind = format!("{}:/srv/pooltest-out", out.path().display());
        let attacker = with(attacker.clone(), "bind", json!([out_bind]));
        let victim = with(victim.clone(), "bind", json!([out_bind]));
        let mut res = run_batch(&[attacker, victim], &mode.flags());
        let victim = res.pop().unwrap();
        let attacker = res.pop().unwrap();
        assert_served(mode, &[&attacker, &victim]);
        assert_status(mode, &attacker, "ok");
        assert_planted(mode, &attacker, "DAEMON RUNNING");
        let own: Vec<&str> = attacker
            .lines()
            .into_iter()
            .filter(|l| l.starts_with("PROC") && l.contains(&m))
            .collect();
        assert!(
            own.len() >= 3,
            "[{mode:?}] the attacker's scan should see its daemon, stopped child and shell loop\n{}",
            attacker.describe()
        );
        assert_planted(mode, &attacker, "/bin/sleep 1000");
        for tick in ["TICK", "TICK2"] {
            let l = victim
                .lines()
                .into_iter()
                .find(|l| l.starts_with(&format!("{tick} ")))
                .unwrap_or_else(|| panic!("[{mode:?}] no {tick} line\n{}", victim.describe()));
            let v: Vec<&str> = l.split_whitespace().collect();
            assert!(
                v.len() == 3 && v[1] == v[2] && !v[1].is_empty(),
                "[{mode:?}] LEAK: a daemon of the earlier run still updates its file during the next run: {l}\n{}",
                victim.describe()
            );
        }
        assert_clean(mode, &victim);
        assert!(
            victim.has("PID 2"),
            "[{mode:?}] the victim should be the run's first process\n{}",
            victim.describe()
        );
        outs.push(out);
    }
    // Nothing lives on after the batches either.
    assert_no_host_procs(&m);
    for out in &outs {
        let read = |f: &str| fs::read_to_string(out.path().join(f)).unwrap_or_default();
        let before = (read("tick"), read("tick2"));
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(
            before,
            (read("tick"), read("tick2")),
            "a daemon still writes its tick files after the batch ended"
        );
    }
}

#[test]
fn pid_numbering_restarts_for_the_next_run() {
    let attacker = sh(r#"i=0
while [ $i -lt 50 ]; do /bin/true; i=$((i+1)); done
echo "FIRST $$"
echo "LAST $(/bin/sh -c 'echo $$')""#);
    // Not behind the probe: the shell itself must be the run's first process, its child the
    // second; the probe runs last.
    let victim = json!({
        "argv": ["/bin/sh", "-c", "echo $$; /bin/sh -c 'echo $$'; /srv/pooltest/sbxid"],
        "ro_bind": [tools_bind()],
    });
    for (mode, attacker, victim) in attack_then_look(&attacker, &victim) {
        assert_status(mode, &attacker, "ok");
        let last: i64 = attacker
            .lines()
            .into_iter()
            .find_map(|l| l.strip_prefix("LAST "))
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or_else(|| panic!("[{mode:?}] no LAST pid\n{}", attacker.describe()));
        assert!(
            last > 50,
            "[{mode:?}] the attacker should have used up more than 50 pids\n{}",
            attacker.describe()
        );
        assert_status(mode, &victim, "ok");
        assert_eq!(
            victim.stdout(),
            "2\n3\n",
            "[{mode:?}] LEAK: PID numbering did not restart (the next run's first process must be 2, its child 3)\n{}",
            victim.describe()
        );
    }
}

// ------------------------------------------------------------------ environment and rlimits

/// Every run takes the first run's OOM score, the warm ones too: memory a program leaves in
/// tmpfs belongs to no process, so the cgroup's OOM killer then chooses by score, and it must take
/// the program, never PID 1 (see containment.rs `the_oom_killer_takes_the_program_not_the_sandbox`,
/// a first run). A warm sandbox starts its programs from PID 1's confined thread, whose Landlock
/// domain refused the score's write (`O_TRUNC` needs the truncate right): those runs kept PID 1's
/// score, and where PID 1 exempts itself (`-1000`) the refused `0` would have failed every one.
#[test]
fn warm_runs_take_the_first_runs_oom_score_and_the_oom_killer_takes_the_program() {
    let limits = json!({"memory": "32M", "disk": "512M", "wall_time": "20s"});
    let score = with(
        sh("echo SCORE $(cat /proc/self/oom_score_adj)"),
        "limits",
        limits.clone(),
    );
    let fill = with(
        sh("echo before-the-fill; sleep 0.2; exec head -c 100000000 /dev/zero > /dev/shm/fill"),
        "limits",
        limits,
    );
    for mode in MODES {
        let res = run_batch(&[score.clone(), score.clone(), fill.clone()], &mode.flags());
        // The filled run's probe may go with its output: its sandbox is the one the batch names.
        assert_served(mode, &[&res[0], &res[1]]);
        let sandbox = |r: &Res| r.json["sandbox"]["id"].clone();
        assert_eq!(
            sandbox(&res[1]) == sandbox(&res[2]),
            mode == Mode::Pool,
            "[{mode:?}] the filled run's sandbox\n{}",
            res[2].describe()
        );
        let scores: Vec<&str> = res[..2]
            .iter()
            .map(|r| {
                assert_status(mode, r, "ok");
                r.lines()
                    .into_iter()
                    .find_map(|l| l.strip_prefix("SCORE "))
                    .unwrap_or_else(|| panic!("[{mode:?}] no score\n{}", r.describe()))
            })
            .collect();
        assert!(
            scores[0] == "0" || scores[0] == "1000",
            "[{mode:?}] a program's OOM score is {}, neither the ordinary 0 nor the highest",
            scores[0]
        );
        assert_eq!(
            scores[0],
            scores[1],
            "[{mode:?}] the warm run's OOM score differs from the first run's\n{}",
            res[1].describe()
        );
        let filled = &res[2];
        assert_status(mode, filled, "memory_limit");
        assert!(
            filled.has("before-the-fill"),
            "[{mode:?}] the output printed before the OOM kill was lost\n{}",
            filled.describe()
        );
        assert!(
            filled.int("wall_time_ms").unwrap_or(0) >= 200,
            "[{mode:?}] the usage of the OOM-killed run was lost\n{}",
            filled.describe()
        );
    }
}

/// What a program's process is — ids, groups, capabilities, `no_new_privs`, seccomp, signal
/// mask and dispositions, CPUs, umask, every rlimit, OOM score, scheduling policy and nice —
/// is the same in a warm run as in the sandbox's first: the first run's process confines itself,
/// later ones start from PID 1's confined thread and inherit part of it (a difference there
/// once left warm runs without their OOM score, see above).
const PROCESS_PROBE: &str = r#"grep -E '^(Uid|Gid|Groups|FDSize|Sig(Blk|Ign|Cgt)|Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp|Seccomp_filters|Speculation.*|Cpus_allowed_list|Mems_allowed_list|THP_enabled|CoreDumping|TracerPid):' /proc/self/status
echo "UMASK $(umask)"
ulimit -a
echo "OOM $(cat /proc/self/oom_score_adj)"
grep -E '^policy' /proc/self/sched
echo "NICE $(nice)"
echo "CWD $(pwd)""#;

#[test]
fn a_warm_runs_process_is_the_first_runs() {
    let probe = sh(PROCESS_PROBE);
    let res = run_batch(&[probe.clone(), probe.clone(), probe], &Mode::Pool.flags());
    assert_served(Mode::Pool, &res.iter().collect::<Vec<_>>());
    for r in &res {
        assert_status(Mode::Pool, r, "ok");
        assert!(
            r.lines().len() >= 30 && r.stdout().contains("NoNewPrivs:\t1"),
            "the probe printed too little\n{}",
            r.describe()
        );
    }
    for warm in &res[1..] {
        let (first, later) = (res[0].lines(), warm.lines());
        let differ: Vec<String> = first
            .iter()
            .zip(&later)
            .filter(|(a, b)| a != b)
            .map(|(a, b)| format!("first: {a}\n later: {b}"))
            .collect();
        assert!(
            differ.is_empty() && first.len() == later.len(),
            "a warm run's process differs from the first run's:\n{}\n{}",
            differ.join("\n"),
            warm.describe()
        );
    }
}

#[test]
fn environment_does_not_reach_the_next_run() {
    let m = marker("env");
    let attacker = with(scan(), "env", json!({"SECRET": "x", "POOL_TOKEN": m}));
    for (mode, attacker, victim) in attack_then_look(&attacker, &scan()) {
        assert_status(mode, &attacker, "ok");
        assert_planted(mode, &attacker, "ENV SECRET=x");
        assert_planted(mode, &attacker, &format!("ENV POOL_TOKEN={m}"));
        assert_clean(mode, &victim);
        assert!(
            !victim.stdout().contains("SECRET") && !victim.stdout().contains(&m),
            "[{mode:?}] LEAK: the next run sees the earlier run's environment\n{}",
            victim.describe()
        );
    }
}

/// Prints the limits a program lives under and tries what they forbid.
const RLIMIT_PROBE: &str = r#"echo "ULIMIT_N $(ulimit -n)"
/usr/bin/python3 - <<'EOF'
import errno, os
try:
    with open("/tmp/two-megabytes", "wb") as f:
        f.write(b"x" * (2 << 20))
    print("WRITE 2M", os.path.getsize("/tmp/two-megabytes"))
except OSError as e:
    print("WRITE 2M", errno.errorcode.get(e.errno, e.errno))
os.remove("/tmp/two-megabytes")
fds = []
try:
    while len(fds) < 200:
        fds.append(os.open("/dev/null", os.O_RDONLY))
    print("OPENED 200")
except OSError as e:
    print("OPENED", len(fds), errno.errorcode.get(e.errno, e.errno))
EOF
exec /usr/bin/python3 /srv/pooltest/scan.py"#;

#[test]
fn rlimits_of_one_run_do_not_reach_the_next_run() {
    let attacker = with(
        sh(RLIMIT_PROBE),
        "limits",
        json!({"open_files": 16, "file_size": "1M"}),
    );
    for (mode, attacker, victim) in attack_then_look(&attacker, &sh(RLIMIT_PROBE)) {
        assert_status(mode, &attacker, "ok");
        for want in [
            "ULIMIT_N 16",
            "WRITE 2M EFBIG",
            "EMFILE",
            "RLIMIT nofile 16 16",
            "RLIMIT fsize 1048576 1048576",
        ] {
            assert_planted(mode, &attacker, want);
        }
        for want in [
            "ULIMIT_N 256",
            "WRITE 2M 2097152",
            "OPENED 200",
            "RLIMIT nofile 256 256",
            "RLIMIT fsize 67108864 67108864",
        ] {
            assert!(
                victim.has(want),
                "[{mode:?}] LEAK: the next run lacks {want:?} (an earlier run's rlimits stuck)\n{}",
                victim.describe()
            );
        }
        assert_eq!(victim.json["limits"]["open_files"], json!(256));
        assert_eq!(victim.json["limits"]["file_size"], json!("64M"));
        assert_clean(mode, &victim);
    }
}

// ------------------------------------------------------------------ accounting

/// ~100 MiB resident, then ~300 ms of CPU.
const HOG: &str = "import time\n\
b = b'x' * (100 << 20)\n\
t = time.process_time()\n\
while time.process_time() - t < 0.3:\n    pass\n\
print('HOGGED', len(b))";

#[test]
fn memory_and_cpu_are_accounted_per_run() {
    let attacker = line(&[PY, "-c", HOG]);
    let victim = line(&["/bin/true"]);
    for (mode, attacker, victim) in attack_then_look(&attacker, &victim) {
        assert_status(mode, &attacker, "ok");
        let (mem, cpu) = (
            attacker.int("memory_peak_bytes").unwrap_or(0),
            attacker.int("cpu_time_ms").unwrap_or(0),
        );
        assert!(
            mem >= 100 << 20 && cpu >= 250,
            "[{mode:?}] the attacker's own usage should show ~100 MiB and ~300 ms\n{}",
            attacker.describe()
        );
        assert_status(mode, &victim, "ok");
        let mem = victim.int("memory_peak_bytes").unwrap_or(i64::MAX);
        assert!(
            mem < 16 << 20,
            "[{mode:?}] LEAK: /bin/true reports a memory peak of {mem} bytes (the earlier run's)\n{}",
            victim.describe()
        );
        let cpu = victim.int("cpu_time_ms").unwrap_or(i64::MAX);
        assert!(
            cpu < 100,
            "[{mode:?}] LEAK: /bin/true reports {cpu} ms of CPU (the earlier run's)\n{}",
            victim.describe()
        );
    }
}

/// `pids_peak` is "the tree's peak" of one run, like the memory peak.
#[test]
fn pids_peak_is_accounted_per_run() {
    let attacker = line(&[
        PY,
        "-c",
        "import os, time\n\
         kids = []\n\
         for _ in range(30):\n    \
             pid = os.fork()\n    \
             if pid == 0:\n        time.sleep(0.5)\n        os._exit(0)\n    \
             kids.append(pid)\n\
         for k in kids:\n    os.waitpid(k, 0)\n\
         print('FORKED', len(kids))",
    ]);
    let victim = line(&["/bin/true"]);
    for (mode, attacker, victim) in attack_then_look(&attacker, &victim) {
        assert_status(mode, &attacker, "ok");
        assert_planted(mode, &attacker, "FORKED 30");
        let peak = attacker.int("pids_peak");
        assert!(
            peak.is_some_and(|p| p >= 31),
            "[{mode:?}] the attacker's pids_peak should show its 30 children\n{}",
            attacker.describe()
        );
        assert_status(mode, &victim, "ok");
        // /bin/true behind the probe: the shell, then sbxid, then true in its place. The kernel
        // cannot reset a cgroup's pids peak, so a reused sandbox reports none rather than the
        // earlier run's; a fresh one must report its own.
        let peak = victim.int("pids_peak");
        let ok = match mode {
            Mode::Pool => peak.is_none_or(|p| p <= 3),
            Mode::Fresh => peak.is_some_and(|p| p <= 3),
        };
        assert!(
            ok,
            "[{mode:?}] LEAK: /bin/true reports pids_peak {peak:?} (the earlier run's)\n{}",
            victim.describe()
        );
        assert_eq!(victim.json["pids_limit_hit"], json!(false));
    }
}

// ------------------------------------------------------------------ network

#[test]
fn network_state_does_not_reach_the_next_run() {
    let attacker = line(&[PY, "/srv/pooltest/net.py", "attack"]);
    let victim = line(&[PY, "/srv/pooltest/net.py", "look"]);
    for (mode, attacker, victim) in attack_then_look(&attacker, &victim) {
        assert_status(mode, &attacker, "ok");
        for want in ["TIME_WAIT 4444 1", "BIND 4444 EADDRINUSE"] {
            assert_planted(mode, &attacker, want);
        }
        let tcp: usize = attacker
            .lines()
            .into_iter()
            .find_map(|l| l.strip_prefix("ENTRIES tcp "))
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        assert!(
            tcp >= 4,
            "[{mode:?}] the attacker should see its own sockets\n{}",
            attacker.describe()
        );
        assert_status(mode, &victim, "ok");
        let socks: Vec<&str> = victim
            .lines()
            .into_iter()
            .filter(|l| l.starts_with("SOCK"))
            .collect();
        assert!(
            socks.is_empty(),
            "[{mode:?}] LEAK: the next run's network namespace has sockets:\n{}\n{}",
            socks.join("\n"),
            victim.describe()
        );
        for want in [
            "BIND 4444 OK",
            "LISTEN 4444 OK",
            "LOOPBACK 4444 OK",
            "BIND 4445 OK",
            "BIND UDP 4444 OK",
            "BIND ABSTRACT OK",
        ] {
            assert!(
                victim.has(want),
                "[{mode:?}] LEAK: the next run lacks {want:?}\n{}",
                victim.describe()
            );
        }
    }
}

/// A socket that carries no packet can still move the namespace's counters: a send with no route
/// counts in `OutNoRoutes` (IPv4 and IPv6) and nothing crosses `lo`. The reset must look at the
/// namespace after any run that made a network socket (PID 1 hears of each through the socket
/// watch) and give the next run one whose counters are as new.
#[test]
fn network_counters_do_not_reach_the_next_run() {
    const COUNTERS: &str = "\
        snmp = open('/proc/net/snmp').read().split('\\n')\n\
        ip = dict(zip(snmp[0].split()[1:], snmp[1].split()[1:]))\n\
        six = dict(l.split() for l in open('/proc/net/snmp6') if l.strip())\n\
        print('NOROUTES', ip['OutNoRoutes'], six['Ip6OutNoRoutes'])\n";
    let attacker = line(&[
        PY,
        "-c",
        &format!(
            "import socket\n\
             for fam, addr in [(socket.AF_INET, ('192.0.2.1', 9)), (socket.AF_INET6, ('2001:db8::1', 9))]:\n    \
                 s = socket.socket(fam, socket.SOCK_DGRAM)\n    \
                 try:\n        s.sendto(b'x', addr)\n    \
                 except OSError as e:\n        print('SENDTO', e.errno)\n\
             {COUNTERS}"
        ),
    ]);
    let victim = line(&[PY, "-c", COUNTERS]);
    for (mode, attacker, victim) in attack_then_look(&attacker, &victim) {
        assert_status(mode, &attacker, "ok");
        assert_planted(mode, &attacker, "SENDTO 101");
        assert!(
            !attacker.has("NOROUTES 0 0"),
            "[{mode:?}] the attacker's sends should count as unroutable\n{}",
            attacker.describe()
        );
        assert_status(mode, &victim, "ok");
        assert!(
            victim.has("NOROUTES 0 0"),
            "[{mode:?}] LEAK: the next run sees the earlier run's network counters\n{}",
            victim.describe()
        );
    }
}

// ------------------------------------------------------------------ limits

#[test]
fn a_limit_hit_does_not_affect_the_next_run() {
    let attacks: Vec<(&str, Value)> = vec![
        (
            "memory_limit",
            with(
                line(&[PY, "-c", "b = b'x' * (200 << 20)"]),
                "limits",
                json!({"memory": "64M"}),
            ),
        ),
        (
            "time_limit",
            with(
                line(&[PY, "-c", "while True: pass"]),
                "limits",
                json!({"cpu_time": "300ms"}),
            ),
        ),
        (
            "wall_time_limit",
            with(
                line(&["/bin/sleep", "30"]),
                "limits",
                json!({"wall_time": "300ms"}),
            ),
        ),
        (
            // The probe's line goes first into the same pipe as the flood (stdout and stderr
            // share one cap, and a flood on stdout could win the race against stderr).
            "output_limit",
            json!({
                "argv": ["/bin/sh", "-c", "/srv/pooltest/sbxid 2>&1; exec /usr/bin/yes"],
                "ro_bind": [tools_bind()],
                "limits": {"output": "4K"},
            }),
        ),
        (
            "blocked_syscall",
            line(&["/usr/bin/unshare", "-n", "/bin/true"]),
        ),
        (
            "pids",
            with(
                line(&[
                    PY,
                    "-c",
                    "import os, time\n\
                     n = 0\n\
                     try:\n    \
                         while True:\n        \
                             if os.fork() == 0:\n            time.sleep(30)\n            os._exit(0)\n        \
                             n += 1\n\
                     except OSError:\n    print('FORK REFUSED AFTER', n)",
                ]),
                "limits",
                json!({"pids": 8}),
            ),
        ),
        ("signaled", sh("kill -KILL $$")),
        ("nonzero_exit", sh("echo oops >&2; exit 3")),
    ];
    let victim_limits = json!({"cpu_time": "250ms", "wall_time": "5s", "memory": "32M", "output": "1K", "pids": 16});
    let mut lines = Vec::new();
    for (kind, attack) in &attacks {
        lines.push(attack.clone());
        let victim = with(
            with(
                line(&["/bin/cat"]),
                "stdin",
                json!(format!("after {kind}\n")),
            ),
            "limits",
            victim_limits.clone(),
        );
        lines.push(victim);
    }
    for mode in MODES {
        let res = run_batch(&lines, &mode.flags());
        assert_served(mode, &res.iter().collect::<Vec<_>>());
        for (i, (kind, _)) in attacks.iter().enumerate() {
            let (attacker, victim) = (&res[2 * i], &res[2 * i + 1]);
            match *kind {
                "pids" => {
                    assert_status(mode, attacker, "ok");
                    assert_eq!(attacker.json["pids_limit_hit"], json!(true));
                }
                "blocked_syscall" => {
                    assert_status(mode, attacker, "blocked_syscall");
                    assert_eq!(attacker.json["blocked_syscall"], json!("unshare"));
                }
                k => assert_status(mode, attacker, k),
            }
            let ctx = format!("[{mode:?}] after {kind}");
            assert_eq!(
                victim.status(),
                "ok",
                "{ctx}: LEAK: the next run's status inherits the earlier run's\n{}\nearlier: {}",
                victim.describe(),
                attacker.describe()
            );
            assert_eq!(
                victim.stdout(),
                format!("after {kind}\n"),
                "{ctx}: wrong output\n{}",
                victim.describe()
            );
            for (k, want) in [
                ("exit_code", json!(0)),
                ("signal", Value::Null),
                ("stdout_truncated", json!(false)),
                ("stderr_truncated", json!(false)),
                ("pids_limit_hit", json!(false)),
            ] {
                assert_eq!(
                    victim.json[k],
                    want,
                    "{ctx}: LEAK: {k} of the next run\n{}",
                    victim.describe()
                );
            }
            for k in ["reason", "blocked_syscall", "error"] {
                assert!(
                    victim.json.get(k).is_none(),
                    "{ctx}: LEAK: the next run reports {k}\n{}",
                    victim.describe()
                );
            }
            for (k, want) in victim_limits.as_object().unwrap() {
                assert_eq!(
                    &victim.json["limits"][k],
                    want,
                    "{ctx}: the next run's limits.{k} is not its own\n{}",
                    victim.describe()
                );
            }
            let mem = victim.int("memory_peak_bytes").unwrap_or(i64::MAX);
            assert!(
                mem < 16 << 20,
                "{ctx}: LEAK: memory_peak_bytes {mem}\n{}",
                victim.describe()
            );
        }
    }
}

// ------------------------------------------------------------------ many runs

#[test]
fn fifty_alternating_attackers_and_victims_are_all_clean() {
    let m = marker("fifty");
    let input = host_dir(0o755);
    fs::write(input.path().join("copied-in.txt"), "copied\n").unwrap();
    chmod(&input.path().join("copied-in.txt"), 0o644);
    let mut lines = Vec::new();
    for i in 0..25 {
        let name = format!("{m}_{i}");
        let attacker = sh(&format!(
            r#"echo a > /home/sandbox/.w{i}; echo a > /tmp/t{i}; echo a > /var/tmp/.v{i}; echo a > /dev/shm/s{i}
/srv/pooltest/ipc plant {IPC_KEY} {name} > /dev/null
ipcmk -M 4096 > /dev/null; ipcmk -Q > /dev/null; ipcmk -S 2 > /dev/null
( exec setsid /bin/sleep 1000 ) </dev/null >/dev/null 2>&1 &
j=0; while [ $j -lt 10 ]; do /bin/true; j=$((j+1)); done
exec /usr/bin/python3 /srv/pooltest/scan.py"#
        ));
        let attacker = with(attacker, "env", json!({"SECRET": name}));
        let attacker = with(attacker, "dir", json!(input.path()));
        let attacker = with(
            attacker,
            "limits",
            json!({"open_files": 32, "file_size": "1M"}),
        );
        let victim = sh(&format!(
            "/srv/pooltest/ipc look {IPC_KEY} {name}\nexec /usr/bin/python3 /srv/pooltest/scan.py"
        ));
        lines.push(attacker);
        lines.push(victim);
    }
    for mode in MODES {
        let res = run_batch(&lines, &mode.flags());
        assert_served(mode, &res.iter().collect::<Vec<_>>());
        for i in 0..25 {
            let (attacker, victim) = (&res[2 * i], &res[2 * i + 1]);
            assert_status(mode, attacker, "ok");
            for want in [
                format!("'/home/sandbox/.w{i}' file"),
                "'/home/sandbox/copied-in.txt' file".to_string(),
                format!("'/dev/shm/s{i}' file"),
                "SYSV shm".to_string(),
                "PROC".to_string(),
                format!("ENV SECRET={m}_{i}"),
                "RLIMIT nofile 32 32".to_string(),
            ] {
                assert_planted(mode, attacker, &want);
            }
            assert_clean(mode, victim);
            for want in [
                "PID 2",
                "RLIMIT nofile 256 256",
                "RLIMIT fsize 67108864 67108864",
            ] {
                assert!(
                    victim.has(want),
                    "[{mode:?}] LEAK: victim {} lacks {want:?}\n{}",
                    i + 1,
                    victim.describe()
                );
            }
        }
    }
    assert_no_host_procs(&m);
}

/// `--parallel 4`, 40 lines of five shapes: every result belongs to its own line, in input order,
/// and no sandbox serves a line of another shape.
#[test]
fn parallel_mixed_shapes_each_result_matches_its_own_line() {
    let m = marker("par");
    let data_a = host_dir(0o755);
    let data_b = host_dir(0o755);
    for (d, name) in [(&data_a, "data-a"), (&data_b, "data-b")] {
        let f = d.path().join("name");
        fs::write(&f, format!("{name}\n")).unwrap();
        chmod(&f, 0o644);
    }
    let host_ifaces = fs::read_to_string("/proc/net/dev")
        .unwrap()
        .lines()
        .filter(|l| l.contains(':'))
        .count();
    let inputs = host_dir(0o755);
    // shape -> (extra fields, expected DATA, DISK in KiB, NET interfaces)
    let shapes: Vec<(Value, &str, u64, usize)> = vec![
        (json!({}), "none", 65536, 1),
        (json!({"limits": {"disk": "8M"}}), "none", 8192, 1),
        (
            json!({"ro_bind": [format!("{}:/srv/data", data_a.path().display())]}),
            "data-a",
            65536,
            1,
        ),
        (
            json!({"ro_bind": [format!("{}:/srv/data", data_b.path().display())]}),
            "data-b",
            65536,
            1,
        ),
        (json!({"network": true}), "none", 65536, host_ifaces),
    ];
    let script = r#"read -r s
left=$(ls -A /tmp; ls -A /dev/shm; ls -A /home/sandbox | grep -v '^token.txt$')
echo "STDIN $s"
echo "ENV $TOKEN"
echo "ARG $1"
echo "FILE $(cat token.txt)"
echo "DATA $(cat /srv/data/name 2>/dev/null || echo none)"
echo "DISK $(df -k /tmp | awk 'NR==2 {print $2}')"
echo "NET $(grep -c : /proc/net/dev)"
echo "LEFT $(echo $left)"
echo "$s" > "/tmp/$s"; echo "$s" > "/dev/shm/$s"; echo "$s" > "/home/sandbox/out-$s""#;
    let mut lines = Vec::new();
    let mut expected = Vec::new();
    for i in 0..40 {
        let shape = (i / 3) % shapes.len();
        let tok = format!("{m}_{i}");
        let dir = inputs.path().join(format!("in{i}"));
        fs::create_dir(&dir).unwrap();
        chmod(&dir, 0o755);
        fs::write(dir.join("token.txt"), format!("{tok}\n")).unwrap();
        chmod(&dir.join("token.txt"), 0o644);
        let mut l = line(&["/bin/sh", "-c", script, "sh", &tok]);
        l["stdin"] = json!(format!("{tok}\n"));
        l["env"] = json!({ "TOKEN": tok });
        l["dir"] = json!(dir);
        l["limits"] = json!({"pids": 20 + i, "cpu_time": format!("{}ms", 2001 + i)});
        let (extra, data, disk, net) = &shapes[shape];
        for (k, v) in extra.as_object().unwrap() {
            match k.as_str() {
                "ro_bind" => l = with_ro_bind(l, v[0].as_str().unwrap()),
                "limits" => {
                    for (lk, lv) in v.as_object().unwrap() {
                        l["limits"][lk] = lv.clone();
                    }
                }
                _ => l[k] = v.clone(),
            }
        }
        lines.push(l);
        expected.push((
            shape,
            format!(
                "STDIN {tok}\nENV {tok}\nARG {tok}\nFILE {tok}\nDATA {data}\nDISK {disk}\nNET {net}\nLEFT \n"
            ),
            20 + i,
            format!("{}ms", 2001 + i),
        ));
    }
    for (mode, flags) in [
        (Mode::Pool, vec!["--parallel", "4"]),
        (Mode::Fresh, vec!["--parallel", "4", "--fresh"]),
    ] {
        let res = run_batch(&lines, &flags);
        let mut served: BTreeMap<u64, BTreeSet<usize>> = BTreeMap::new();
        for (r, (shape, out, pids, cpu)) in res.iter().zip(&expected) {
            assert_status(mode, r, "ok");
            assert_eq!(
                r.stdout(),
                out,
                "[{mode:?}] line {} got another line's result, a wrong shape, or leftovers\n{}",
                r.n,
                r.describe()
            );
            assert_eq!(r.json["limits"]["pids"], json!(pids), "{}", r.describe());
            assert_eq!(r.json["limits"]["cpu_time"], json!(cpu), "{}", r.describe());
            let id = r
                .sbxid()
                .unwrap_or_else(|| panic!("no SBXID\n{}", r.describe()));
            served.entry(id).or_default().insert(*shape);
        }
        for (id, shapes) in &served {
            assert_eq!(
                shapes.len(),
                1,
                "[{mode:?}] sandbox {id} served lines of different shapes {shapes:?}"
            );
        }
        if mode == Mode::Fresh {
            assert_eq!(served.len(), 40, "[Fresh] --fresh reused a sandbox");
        }
    }
}

#[test]
fn a_bad_line_yields_invalid_spec_for_that_line_only() {
    let good = |tok: &str| with(line(&["/bin/cat"]), "stdin", json!(tok)).to_string();
    let lines: Vec<String> = vec![
        good("one"),
        good("two"),
        r#"{"argv": ["/bin/echo", "x""#.to_string(),
        good("four"),
        r#"{"argv": ["/bin/echo"], "bogus": 1}"#.to_string(),
        good("six"),
        r#"{"argv": []}"#.to_string(),
        r#"{"argv": ["/bin/true"], "limits": {"memory": "lots"}}"#.to_string(),
        r#"{"argv": ["/bin/true"], "stdin": "a", "stdin_file": "b"}"#.to_string(),
        good("ten"),
        // (A blank line is skipped, not an invalid spec: correctness.rs batch_skips_blank_lines.)
        r#"{"argv": ["/bin/true"], "limits": ["1s"]}"#.to_string(),
        good("twelve"),
    ];
    let bad = [3usize, 5, 7, 8, 9, 11];
    let words = [
        "one", "two", "", "four", "", "six", "", "", "", "ten", "", "twelve",
    ];
    for mode in MODES {
        let res = run_batch_text(&lines, &mode.flags());
        let mut ok = Vec::new();
        for r in &res {
            if bad.contains(&r.n) {
                assert_status(mode, r, "invalid_spec");
                assert_eq!(r.json["line"], json!(r.n), "{}", r.describe());
                let err = r.json["error"].as_str().unwrap_or("");
                assert!(
                    err.contains(&format!("line {}", r.n)),
                    "[{mode:?}] the error should name the line\n{}",
                    r.describe()
                );
            } else {
                assert_status(mode, r, "ok");
                assert_eq!(r.stdout(), words[r.n - 1], "{}", r.describe());
                ok.push(r);
            }
        }
        assert_served(mode, &ok);
    }
}

/// The pool serves consecutive lines of one shape from one sandbox even after a line of another
/// shape (with `--parallel 1`, one idle sandbox of the old shape must not keep the new shape from
/// being pooled).
#[test]
fn same_shape_lines_after_a_shape_change_share_one_sandbox() {
    let a = line(&["/bin/true"]);
    let b = with(line(&["/bin/true"]), "limits", json!({"disk": "8M"}));
    let res = run_batch(
        &[a.clone(), b.clone(), b.clone(), b, a.clone(), a],
        &Mode::Pool.flags(),
    );
    for r in &res {
        assert_status(Mode::Pool, r, "ok");
    }
    assert_served(Mode::Pool, &[&res[1], &res[2], &res[3]]);
    assert_served(Mode::Pool, &[&res[4], &res[5]]);
}

/// Children of the calling thread (a sandbox's init is a child of the thread that built it).
fn my_children() -> Vec<String> {
    // SAFETY: gettid has no arguments and cannot fail.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) };
    fs::read_to_string(format!("/proc/self/task/{tid}/children"))
        .expect("this thread's children")
        .split_whitespace()
        .map(String::from)
        .collect()
}

/// Sandboxes a pool does not keep are torn down on its reaper thread, after the caller has its
/// result; dropping the pool waits for them: none of their inits is left, alive or unreaped.
#[test]
fn a_dropped_pool_leaves_no_sandbox_behind() {
    assert!(my_children().is_empty(), "children before the test");
    for config in [
        corral_sandbox::PoolConfig {
            fresh: true,
            ..Default::default()
        },
        corral_sandbox::PoolConfig {
            max_idle: 0,
            ..Default::default()
        },
    ] {
        let pool = corral_sandbox::Pool::new(common::image::host(), config.clone());
        for _ in 0..3 {
            let o = pool.run(
                &corral_sandbox::RunSpec::new(vec!["true".into()]),
                &mut corral_sandbox::NoSink,
            );
            assert_eq!(o.status.as_str(), "ok", "{config:?}: {o:?}");
        }
        drop(pool);
        assert_eq!(my_children(), Vec::<String>::new(), "{config:?}");
    }
}

/// A process's first sandbox has its init started from the binary; later ones are forked by the
/// spawner (a copy of that init started once). From inside, both must look the same: identity,
/// capabilities, seccomp, descriptors, environment, limits, mounts, cgroup, the signal state the
/// program starts with. Three fresh sandboxes in one batch: one started, two forked.
#[test]
fn a_forked_sandbox_init_looks_like_a_started_one() {
    // A sandbox's uid and its pipes' inode numbers are its own, and the pid `ls` gets races with
    // the `id` of the sed's command substitution; the rest must match.
    let probe = concat!(
        "{ grep -E '^(Uid|Gid|Groups|Cap|NoNewPrivs|Seccomp|Sig(Blk|Ign)|Threads)' /proc/self/status; ",
        "ls -l /proc/self/fd | tail -n +2 | awk '{print $9, $10, $11}'; ",
        "env | sort; ulimit -a; cat /proc/self/cgroup; ",
        "awk '{print $5, $6, $9}' /proc/self/mountinfo; ",
        "grep -E '^(Uid|Gid|Cap|NoNewPrivs|Seccomp|SigIgn|Threads)' /proc/1/status 2>&1; } | sed \"s/$(id -u)/UID/g; s/pipe:\\[[0-9]*\\]/pipe/; s#/proc/[0-9]*/fd#/proc/N/fd#\""
    );
    let lines: Vec<String> = (0..3)
        .map(|_| json!({"argv": ["/bin/sh", "-c", probe]}).to_string())
        .collect();
    let dir = host_dir(0o755);
    let file = dir.path().join("batch.jsonl");
    fs::write(&file, lines.join("\n") + "\n").unwrap();
    let mut cmd = common::corral_cmd();
    cmd.env("CORRAL_LOG", "corral_sandbox=debug")
        .args(["run", "--batch"])
        .arg(&file)
        .args(["--parallel", "1", "--fresh"]);
    let raw = common::run_command(cmd, BATCH_TIMEOUT);
    let stdout = String::from_utf8_lossy(&raw.stdout).to_string();
    let stderr = String::from_utf8_lossy(&raw.stderr).to_string();
    assert!(raw.status.success(), "{stderr}");
    if common::test_runtime().is_none() {
        // Else the comparison below could be between three started inits.
        assert_eq!(
            stderr.matches("forked by the spawner").count(),
            2,
            "the second and third sandboxes' inits come from the spawner\n{stderr}"
        );
    }
    let outs: Vec<String> = stdout
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            assert_eq!(v["status"], "ok", "{v}");
            v["stdout"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(outs.len(), 3);
    assert!(outs[0].contains("NoNewPrivs:\t1"), "{}", outs[0]);
    assert_eq!(
        outs[1], outs[0],
        "a forked init's sandbox differs from a started one's"
    );
    assert_eq!(
        outs[2], outs[0],
        "a forked init's sandbox differs from a started one's"
    );
}

/// A run alone in its process starts its program on the CPU the last one started on
/// (`placement`): a hint for the start only. Every program of a batch of programs big enough to
/// get it must still be free to use every CPU this process may use.
#[test]
fn a_program_started_on_the_last_cpu_may_still_use_every_cpu() {
    let allowed = |status: &str| {
        status
            .lines()
            .find(|l| l.starts_with("Cpus_allowed_list:"))
            .map(|l| format!("{}\n", l.trim_end()))
            .expect("a Cpus_allowed_list line")
    };
    let want = allowed(&fs::read_to_string("/proc/self/status").expect("this process's status"));
    // 8 MiB touched: well above what a program must use for the next to get the hint.
    let script = "b = bytearray(8 << 20); \
                  print([l for l in open('/proc/self/status') if l.startswith('Cpus_allowed_list:')][0], end='')";
    let lines: Vec<Value> = (0..8).map(|_| line(&[PY, "-c", script])).collect();
    let res = run_batch(&lines, &["--pool-size", "1"]);
    for r in &res {
        assert_eq!(r.status(), "ok", "{}", r.describe());
        assert_eq!(
            r.stdout(),
            want,
            "a program was left on fewer CPUs\n{}",
            r.describe()
        );
    }
}
