//! Real-kernel tests: they create cgroups on this host (which needs root) and run processes in
//! them. Written for the development machine, which selects cgroup v1 (its cgroup2 mount only
//! carries hugetlb), but they only use the public interface and pass on v2 hosts as well.
//!
//! A host without usable cgroups makes them FAIL, loudly: silently skipping would hide a broken
//! sandbox. Set CORRAL_TEST_NO_CGROUPS=1 to skip them deliberately.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use corral_cgroups::{detect, probe, Cgroup, Limits, Manager, Version};

const MIB: u64 = 1024 * 1024;
const PYTHON: &str = "/usr/bin/python3";

/// The manager, or `None` when the tests were deliberately disabled.
fn manager() -> Option<Box<dyn Manager>> {
    if std::env::var("CORRAL_TEST_NO_CGROUPS").is_ok_and(|v| v == "1") {
        eprintln!("CORRAL_TEST_NO_CGROUPS=1: skipping real-kernel cgroup test");
        return None;
    }
    assert!(
        nix::unistd::geteuid().is_root(),
        "real-kernel cgroup tests need root (set CORRAL_TEST_NO_CGROUPS=1 to skip them)"
    );
    match detect() {
        Ok(m) => Some(m),
        Err(e) => panic!(
            "this host offers no usable cgroups: {e}\n\
             (set CORRAL_TEST_NO_CGROUPS=1 to skip the real-kernel tests)"
        ),
    }
}

/// A name unique across concurrently running test processes and tests.
fn name(test: &str) -> String {
    format!("test-{}-{test}", std::process::id())
}

/// Spawns `cmd` so that the child joins `cg` before exec, the way the sandbox does.
fn spawn_in(cg: &dyn Cgroup, cmd: &mut Command) -> Child {
    let fds = cg.procs_files().expect("procs_files");
    let raw: Vec<RawFd> = fds.iter().map(|f| f.as_raw_fd()).collect();
    // Runs in the forked child before exec: only a loop over an existing vector and write(2),
    // which is async-signal-safe.
    let join = move || {
        for &fd in &raw {
            // SAFETY: `fd` is open (inherited from the parent, where `fds` keeps it open until
            // `spawn` returns) and the buffer is a 1-byte static.
            let n = unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) };
            if n != 1 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    };
    // SAFETY: `join` is async-signal-safe (see above) and touches no state shared with the
    // parent.
    unsafe {
        cmd.pre_exec(join);
    }
    let child = cmd.spawn().expect("spawn");
    drop(fds);
    child
}

fn wait_until(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn this_host_detection_matches_probe() {
    let Some(m) = manager() else { return };
    let p = probe().expect("probe");
    assert_eq!(p.selected, Some(m.version()), "{p:#?}");
    // Hybrid hosts like the development VM: a cgroup2 mount without memory must not be chosen.
    if let Some(v2) = &p.v2 {
        if !v2.controllers.iter().any(|c| c == "memory")
            && std::env::var("CORRAL_CGROUP_VERSION").is_err()
        {
            assert_eq!(m.version(), Version::V1);
        }
    }
    let d = m.describe();
    eprintln!("{d:#?}");
    assert!(d
        .iter()
        .any(|(k, v)| k == "cgroup version" && *v == m.version().to_string()));
}

#[test]
fn cpu_time_is_accounted() {
    let Some(m) = manager() else { return };
    let cg = m
        .create(
            &name("cpu"),
            &Limits {
                memory_bytes: Some(64 * MIB),
                pids: Some(16),
            },
        )
        .expect("create");
    assert!(cg.cpu_time().unwrap() < Duration::from_millis(50));
    // Burn 250 ms of CPU (not wall) time, so a busy machine cannot make the test flaky.
    let mut child = spawn_in(
        cg.as_ref(),
        Command::new(PYTHON).args([
            "-c",
            "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.25: pass",
        ]),
    );
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let cpu = cg.cpu_time().unwrap();
    assert!(cpu >= Duration::from_millis(150), "cpu_time {cpu:?}");
    assert!(cpu < Duration::from_secs(10), "cpu_time {cpu:?}");
    let u = cg.usage().unwrap();
    assert!(u.cpu_time >= cpu);
    assert!(!u.oom_killed && !u.pids_limit_hit, "{u:?}");
    assert!(u.memory_peak_bytes > 0, "{u:?}");
    cg.destroy().unwrap();
}

#[test]
fn memory_limit_oom_kills() {
    let Some(m) = manager() else { return };
    let cg = m
        .create(
            &name("mem"),
            &Limits {
                memory_bytes: Some(64 * MIB),
                pids: Some(16),
            },
        )
        .expect("create");
    // 200 MiB, every page written (a bare bytearray would only map zero pages).
    let mut child = spawn_in(
        cg.as_ref(),
        Command::new(PYTHON)
            .args(["-c", "b = b'\\x01' * (200 * 1024 * 1024)\nprint(len(b))"])
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    );
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
    let u = cg.usage().unwrap();
    assert!(u.oom_killed, "{u:?}");
    assert!(u.memory_limit_hit, "{u:?}");
    assert!(
        u.memory_peak_bytes >= 48 * MIB && u.memory_peak_bytes <= 65 * MIB,
        "peak {} MiB",
        u.memory_peak_bytes / MIB
    );
    cg.destroy().unwrap();
}

#[test]
fn pids_limit_is_enforced_and_reported() {
    let Some(m) = manager() else { return };
    let cg = m
        .create(
            &name("pids"),
            &Limits {
                memory_bytes: Some(64 * MIB),
                pids: Some(16),
            },
        )
        .expect("create");
    let mut child = spawn_in(
        cg.as_ref(),
        Command::new("/bin/sh")
            .args(["-c", "for i in $(seq 40); do sleep 1 & done; wait"])
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    );
    let _ = child.wait().unwrap();
    let u = cg.usage().unwrap();
    assert!(u.pids_limit_hit, "{u:?}");
    match m.version() {
        Version::V1 => assert_eq!(u.pids_peak, None),
        Version::V2 => {
            if let Some(peak) = u.pids_peak {
                assert!(peak <= 16, "{u:?}");
            }
        }
    }
    cg.destroy().unwrap();
}

#[test]
fn kill_all_empties_the_cgroup_and_destroy_leaves_nothing() {
    let Some(m) = manager() else { return };
    let cg = m
        .create(
            &name("kill"),
            &Limits {
                memory_bytes: Some(64 * MIB),
                pids: Some(16),
            },
        )
        .expect("create");
    let mut child = spawn_in(
        cg.as_ref(),
        Command::new("/bin/sh").args(["-c", "sleep 100 & sleep 100 & wait"]),
    );
    let pid = child.id() as i32;
    wait_until("3 processes in the cgroup", Duration::from_secs(5), || {
        cg.pids().unwrap().len() >= 3
    });
    assert!(cg.pids().unwrap().contains(&pid));
    cg.kill_all().unwrap();
    assert_eq!(cg.pids().unwrap(), Vec::<i32>::new());
    assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGKILL));

    let paths = cg.paths();
    assert!(!paths.is_empty() && paths.iter().all(|p| p.is_dir()));
    cg.destroy().unwrap();
    for p in &paths {
        assert!(!p.exists(), "{} left behind", p.display());
    }
}

#[test]
fn kill_all_wins_against_a_forking_loop() {
    let Some(m) = manager() else { return };
    let cg = m
        .create(
            &name("forker"),
            &Limits {
                memory_bytes: Some(64 * MIB),
                pids: Some(16),
            },
        )
        .expect("create");
    let mut child = spawn_in(
        cg.as_ref(),
        Command::new("/bin/sh")
            .args(["-c", "while :; do sleep 10 & done"])
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    );
    wait_until("the pids limit to be hit", Duration::from_secs(5), || {
        cg.usage().unwrap().pids_limit_hit
    });
    cg.kill_all().unwrap();
    assert_eq!(cg.pids().unwrap(), Vec::<i32>::new());
    let _ = child.wait();
    let paths = cg.paths();
    cg.destroy().unwrap();
    assert!(paths.iter().all(|p| !p.exists()));
}

#[test]
fn destroy_kills_what_is_still_running() {
    let Some(m) = manager() else { return };
    let cg = m
        .create(&name("destroy"), &Limits::default())
        .expect("create");
    let mut child = spawn_in(cg.as_ref(), Command::new("/bin/sleep").arg("100"));
    let paths = cg.paths();
    wait_until("the child to join", Duration::from_secs(5), || {
        !cg.pids().unwrap().is_empty()
    });
    cg.destroy().unwrap();
    assert!(paths.iter().all(|p| !p.exists()));
    assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGKILL));
}

#[test]
fn duplicate_names_are_refused() {
    let Some(m) = manager() else { return };
    let n = name("dup");
    let cg = m.create(&n, &Limits::default()).expect("create");
    let e = m
        .create(&n, &Limits::default())
        .err()
        .expect("second create must fail");
    assert!(e.to_string().contains("already exists"), "{e}");
    cg.destroy().unwrap();
}
