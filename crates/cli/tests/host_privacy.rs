//! What corral keeps on the host is not for the host's other users: the data folder (the store
//! with every submission and result, uploads, suites with hidden tests, grader images) and the
//! folders a grading stages in the shared temporary folder (the submission, the hidden tests
//! mounted into the sandbox). Each test plays a local user without privileges (`nobody`) who
//! looks for them, and checks as root that what it looks for is really there.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const NOBODY: u32 = 65534;

/// `sh -c script` as an unprivileged user of the host (std drops root's groups with the uid).
fn as_nobody(script: &str) -> Output {
    let mut c = Command::new("/bin/sh");
    c.args(["-c", script]).uid(NOBODY).gid(NOBODY);
    c.output().expect("sh as nobody")
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

/// `corral serve` on `data` until it listens, then stopped: a server's first start makes the
/// data folder and its store (`corral token create` only uses a store that is there). Returns
/// its stderr up to then.
fn first_start(data: &Path) -> String {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(common::corral_bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--data"])
        .arg(data)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("corral serve");
    let mut log = String::new();
    for line in BufReader::new(child.stderr.take().unwrap()).lines() {
        let line = line.unwrap();
        log.push_str(&line);
        log.push('\n');
        if line.contains("listening on") {
            break;
        }
    }
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let _ = child.wait();
    assert!(
        log.contains("listening on"),
        "corral serve did not start: {log}"
    );
    log
}

/// A new data folder is made private; the store in it cannot be read by another user.
#[test]
fn another_user_cannot_read_the_data_folder() {
    let t = tempfile::tempdir().unwrap();
    std::fs::set_permissions(t.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let data = t.path().join("corral-data");
    first_start(&data);
    let db = data.join("corral.db");
    assert!(db.is_file(), "the store is there: {db:?}");
    let probe = as_nobody(&format!(
        "cat '{db}' >/dev/null && echo READ; ls '{d}' && echo LISTED; exit 0",
        db = db.display(),
        d = data.display()
    ));
    let said = String::from_utf8_lossy(&probe.stdout);
    assert!(!said.contains("READ") && !said.contains("LISTED"), "{said}");
    assert_eq!(mode(&data), 0o700);
    // The same probe on the parent, which is open, does see the folder: the probe works.
    let control = as_nobody(&format!("ls '{}'", t.path().display()));
    assert!(
        String::from_utf8_lossy(&control.stdout).contains("corral-data"),
        "{control:?}"
    );
}

/// A data folder left open (as corral made them before, with the umask's 0755) is closed to
/// other users at the next start, and the user is told; a group's rights go too (a group that
/// may write it could plant an admin token: 0775 used to become 0770).
#[test]
fn an_open_data_folder_is_closed_to_other_users() {
    let t = tempfile::tempdir().unwrap();
    std::fs::set_permissions(t.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let data = t.path().join("corral-data");
    std::fs::create_dir(&data).unwrap();
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
    let err = first_start(&data);
    assert_eq!(mode(&data), 0o700);
    assert!(err.contains("was open to other users"), "{err}");
    let probe = as_nobody(&format!(
        "cat '{}' >/dev/null && echo READ; exit 0",
        data.join("corral.db").display()
    ));
    assert!(
        !String::from_utf8_lossy(&probe.stdout).contains("READ"),
        "{probe:?}"
    );
}

/// While a submission is graded, the hidden tests and the submission staged in the temporary
/// folder cannot be found by another user (root finds them, so they are there to find).
#[test]
fn another_user_cannot_find_a_gradings_hidden_tests_in_the_temporary_folder() {
    let secret = common::marker("hidden");
    // The suite itself lives in a private folder: only corral's own copies are looked for.
    let own = tempfile::tempdir().unwrap();
    let suite_dir = own.path().join("suite");
    let sub = own.path().join("sub");
    std::fs::create_dir_all(&suite_dir).unwrap();
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::write(
        suite_dir.join("suite.yaml"),
        "name: privacy\nlanguage: python\ntimeout: 60s\nchecks:\n  - id: tests\n    \
         pytest:\n      hidden: [test_hidden.py]\n      test_timeout: 30s\n",
    )
    .unwrap();
    std::fs::write(
        suite_dir.join("test_hidden.py"),
        format!(
            "import time\nSECRET = '{secret}'\n\ndef test_slowly():\n    time.sleep(4)\n    \
             assert True\n"
        ),
    )
    .unwrap();
    std::fs::write(
        sub.join("calc.py"),
        format!("WHO = '{secret}_submission'\n"),
    )
    .unwrap();
    let check = Command::new(common::corral_bin())
        .args(["check", "--json"])
        .arg(suite_dir.join("suite.yaml"))
        .arg(&sub)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("corral check");
    let tmp = std::env::temp_dir();
    // Python files only: other things named corral-* in the temporary folder (a test's
    // PostgreSQL cluster, copies of the binary) made each pass so slow that the 4 s the
    // grading lasts fell between two of them.
    let grep = format!(
        "grep -rl --include='*.py' '{secret}' '{}'/corral-* 2>/dev/null; exit 0",
        tmp.display()
    );
    // Root's view: the grading has staged the hidden test (and the submission) by now.
    let deadline = Instant::now() + Duration::from_secs(30);
    let seen_by_root = loop {
        let out = Command::new("/bin/sh")
            .args(["-c", &grep])
            .output()
            .unwrap();
        let found = String::from_utf8_lossy(&out.stdout).into_owned();
        if found.contains("test_hidden.py") || Instant::now() > deadline {
            break found;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let seen_by_nobody = as_nobody(&grep);
    let done = check.wait_with_output().unwrap();
    assert!(
        seen_by_root.contains("test_hidden.py"),
        "the hidden test was never staged in {tmp:?} (root's grep found {seen_by_root:?}); \
         corral check: {} {}",
        String::from_utf8_lossy(&done.stdout),
        String::from_utf8_lossy(&done.stderr)
    );
    assert!(
        seen_by_nobody.stdout.is_empty(),
        "another user found corral's copies: {}",
        String::from_utf8_lossy(&seen_by_nobody.stdout)
    );
    let v: serde_json::Value = serde_json::from_slice(&done.stdout).expect("JSON");
    assert_eq!(v["results"]["tests"]["result"], true, "{v}");
}
