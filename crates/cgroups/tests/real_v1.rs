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

use corral_cgroups::{detect, probe, Cgroup, Error, Limits, Manager, Version};

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
        .create(&name("cpu"), &limits(64 * MIB, 16))
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
        .create(&name("mem"), &limits(64 * MIB, 16))
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
        .create(&name("pids"), &limits(64 * MIB, 16))
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
    // pids.peak: v2, and v1 on recent kernels (this 6.18 host has it).
    let pids_dir = cg
        .paths()
        .into_iter()
        .find(|p| p.join("pids.max").exists())
        .unwrap();
    assert_eq!(
        u.pids_peak.is_some(),
        pids_dir.join("pids.peak").exists(),
        "{u:?}"
    );
    if let Some(peak) = u.pids_peak {
        assert!((2..=16).contains(&peak), "{u:?}");
    }
    cg.destroy().unwrap();
}

#[test]
fn kill_all_empties_the_cgroup_and_destroy_leaves_nothing() {
    let Some(m) = manager() else { return };
    let cg = m
        .create(&name("kill"), &limits(64 * MIB, 16))
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
        .create(&name("forker"), &limits(64 * MIB, 16))
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

fn limits(memory: u64, pids: u64) -> Limits {
    Limits {
        memory_bytes: Some(memory),
        pids: Some(pids),
    }
}

/// A long-lived process in `cg`, standing in for a sandbox's PID 1: runs come and go around it.
fn spawn_init(cg: &dyn Cgroup) -> Child {
    let child = spawn_in(cg, Command::new("/bin/sleep").arg("30"));
    let pid = child.id() as i32;
    wait_until("the init to join", Duration::from_secs(5), || {
        cg.pids().unwrap().contains(&pid)
    });
    child
}

/// Runs `cmd` in `cg` to completion.
fn run_in(cg: &dyn Cgroup, cmd: &mut Command) -> std::process::ExitStatus {
    spawn_in(cg, cmd.stdout(Stdio::null()).stderr(Stdio::null()))
        .wait()
        .unwrap()
}

/// Reads one control file of the cgroup (the first of its directories that has it).
fn control(cg: &dyn Cgroup, file: &str) -> String {
    let dir = cg
        .paths()
        .into_iter()
        .find(|p| p.join(file).exists())
        .unwrap_or_else(|| panic!("no {file} in {:?}", cg.paths()));
    std::fs::read_to_string(dir.join(file))
        .unwrap()
        .trim()
        .to_owned()
}

/// The memory limit as the kernel shows it, plus the memsw one where it exists (v1).
fn memory_limits(m: &dyn Manager, cg: &dyn Cgroup) -> (String, Option<String>) {
    match m.version() {
        Version::V1 => {
            let memsw = cg
                .paths()
                .into_iter()
                .map(|p| p.join("memory.memsw.limit_in_bytes"))
                .find(|p| p.exists())
                .map(|p| std::fs::read_to_string(p).unwrap().trim().to_owned());
            (control(cg, "memory.limit_in_bytes"), memsw)
        }
        Version::V2 => (control(cg, "memory.max"), None),
    }
}

#[test]
fn runs_in_a_long_lived_cgroup_are_measured_separately() {
    let Some(m) = manager() else { return };
    let cg = m
        .create(&name("runs"), &limits(256 * MIB, 64))
        .expect("create");
    let mut init = spawn_init(cg.as_ref());
    assert!(cg.pids_current().unwrap() >= 1);

    // Run 1: 100 MiB written, then ~300 ms of CPU.
    cg.set_limits(&limits(256 * MIB, 64)).unwrap();
    let b1 = cg.begin_run().expect("begin_run 1");
    assert!(b1.resident_bytes < 64 * MIB, "{b1:?}");
    let status = run_in(
        cg.as_ref(),
        Command::new(PYTHON).args([
            "-c",
            "import time\nb = b'\\x01' * (100 * 1024 * 1024)\nt = time.process_time()\n\
             while time.process_time() - t < 0.3: pass\nprint(len(b))",
        ]),
    );
    assert!(status.success(), "{status:?}");
    let cpu1 = cg.cpu_time_since(&b1).unwrap();
    let u1 = cg.usage_since(&b1).unwrap();
    eprintln!("run 1: {u1:?}, baseline {b1:?}");
    assert!(cpu1 >= Duration::from_millis(200), "{cpu1:?}");
    assert!(u1.cpu_time >= cpu1, "{u1:?}");
    assert!(u1.memory_peak_bytes >= 90 * MIB, "{u1:?}");
    assert!(
        !u1.oom_killed && !u1.memory_limit_hit && !u1.pids_limit_hit,
        "{u1:?}"
    );

    // Run 2: next to nothing. The peak and CPU counters were reset (or snapshotted).
    let b2 = cg.begin_run().expect("begin_run 2");
    assert!(b2.resident_bytes < 64 * MIB, "{b2:?}");
    let status = run_in(cg.as_ref(), &mut Command::new("/bin/true"));
    assert!(status.success(), "{status:?}");
    let u2 = cg.usage_since(&b2).unwrap();
    eprintln!("run 2: {u2:?}, baseline {b2:?}");
    assert!(u2.cpu_time < Duration::from_millis(100), "{u2:?}");
    assert!(cg.cpu_time_since(&b2).unwrap() < Duration::from_millis(100));
    if !b2.peak_is_lifetime {
        assert!(u2.memory_peak_bytes < 50 * MIB, "{u2:?}");
    }
    assert!(
        !u2.oom_killed && !u2.memory_limit_hit && !u2.pids_limit_hit,
        "{u2:?}"
    );

    // The init lived through both runs.
    assert!(cg.pids().unwrap().contains(&(init.id() as i32)));
    assert!(cg.memory_current().unwrap() > 0);
    cg.destroy().unwrap();
    assert_eq!(init.wait().unwrap().signal(), Some(libc::SIGKILL));
}

#[test]
fn an_oom_kill_counts_for_its_run_only() {
    let Some(m) = manager() else { return };
    let cg = m
        .create(&name("oomrun"), &limits(256 * MIB, 64))
        .expect("create");
    let mut init = spawn_init(cg.as_ref());

    // Run 1 gets 64 MiB and wants 200.
    cg.set_limits(&limits(64 * MIB, 64)).unwrap();
    let b1 = cg.begin_run().unwrap();
    let status = run_in(
        cg.as_ref(),
        Command::new(PYTHON).args(["-c", "b = b'\\x01' * (200 * 1024 * 1024)\nprint(len(b))"]),
    );
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
    let u1 = cg.usage_since(&b1).unwrap();
    eprintln!("run 1: {u1:?}");
    assert!(u1.oom_killed && u1.memory_limit_hit, "{u1:?}");
    if !b1.peak_is_lifetime {
        assert!(u1.memory_peak_bytes <= 65 * MIB, "{u1:?}");
    }

    // Run 2, same cgroup, fits easily: nothing is reported.
    let b2 = cg.begin_run().unwrap();
    let status = run_in(cg.as_ref(), Command::new(PYTHON).args(["-c", "pass"]));
    assert!(status.success(), "{status:?}");
    let u2 = cg.usage_since(&b2).unwrap();
    eprintln!("run 2: {u2:?}");
    assert!(!u2.oom_killed && !u2.memory_limit_hit, "{u2:?}");
    // The lifetime view still has the kill.
    assert!(cg.usage().unwrap().oom_killed);

    // v1's OOM killer picked the big process; v2 with memory.oom.group=1 takes the whole
    // cgroup down, init included.
    if m.version() == Version::V1 {
        assert!(cg.pids().unwrap().contains(&(init.id() as i32)));
    }
    cg.destroy().unwrap();
    let _ = init.wait();
}

#[test]
fn set_limits_raises_and_lowers_a_live_cgroup() {
    let Some(m) = manager() else { return };
    let cg = m
        .create(&name("limits"), &limits(64 * MIB, 16))
        .expect("create");
    let mut init = spawn_init(cg.as_ref());
    let both = |v: u64| match m.version() {
        Version::V1 => (v.to_string(), Some(v.to_string())),
        Version::V2 => (v.to_string(), None),
    };
    let expect = |v: u64| {
        let mut e = both(v);
        // No memsw file without swap accounting.
        let (_, memsw) = memory_limits(m.as_ref(), cg.as_ref());
        if memsw.is_none() {
            e.1 = None;
        }
        e
    };

    cg.set_limits(&limits(128 * MIB, 32)).unwrap();
    assert_eq!(memory_limits(m.as_ref(), cg.as_ref()), expect(128 * MIB));
    assert_eq!(control(cg.as_ref(), "pids.max"), "32");
    cg.set_limits(&limits(32 * MIB, 8)).unwrap();
    assert_eq!(memory_limits(m.as_ref(), cg.as_ref()), expect(32 * MIB));
    assert_eq!(control(cg.as_ref(), "pids.max"), "8");
    cg.set_limits(&Limits::default()).unwrap();
    let (mem, _) = memory_limits(m.as_ref(), cg.as_ref());
    match m.version() {
        Version::V1 => assert!(mem.parse::<u64>().unwrap() > 1 << 60, "{mem}"),
        Version::V2 => assert_eq!(mem, "max"),
    }
    assert_eq!(control(cg.as_ref(), "pids.max"), "max");
    cg.set_limits(&limits(96 * MIB, 16)).unwrap();
    assert_eq!(memory_limits(m.as_ref(), cg.as_ref()), expect(96 * MIB));

    // A process holds 44 MiB of anonymous memory (no swap to push it to): a 16 MiB limit
    // cannot be met and is refused, leaving the old one in place and the process alive. The
    // checks below ask for 40 MiB: the refused write makes the kernel reclaim the cgroup's page
    // cache and drain its per-CPU precharges first, so the usage it reports afterwards can be
    // a little below what was charged before. The holder says when all 44 MiB are written:
    // waiting only for 40 MiB charged (page cache counted) let the write come while it was
    // still filling them, and the usage after the reclaim was 39.95 and 39.97 MiB.
    let mut holder = spawn_in(
        cg.as_ref(),
        Command::new(PYTHON)
            .args([
                "-c",
                "import time\nb = b'\\x01' * (44 * 1024 * 1024)\nprint('held', flush=True)\n\
                 time.sleep(30)",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null()),
    );
    let mut said = String::new();
    io::BufRead::read_line(
        &mut io::BufReader::new(holder.stdout.take().expect("piped")),
        &mut said,
    )
    .unwrap();
    assert_eq!(
        said.trim(),
        "held",
        "the holder did not allocate its memory"
    );
    wait_until("40 MiB charged", Duration::from_secs(10), || {
        cg.memory_current().unwrap() >= 40 * MIB
    });
    assert!(cg.pids_current().unwrap() >= 2);
    let e = cg.set_limits(&limits(16 * MIB, 16)).unwrap_err();
    eprintln!("{e}");
    assert!(
        matches!(e, Error::MemoryLimitBelowUsage { limit, usage, .. }
            if limit == 16 * MIB && usage >= 40 * MIB),
        "{e:?}"
    );
    assert_eq!(memory_limits(m.as_ref(), cg.as_ref()), expect(96 * MIB));
    assert!(
        holder.try_wait().unwrap().is_none(),
        "the holder was killed"
    );
    let usage = cg.usage().unwrap();
    assert!(!usage.oom_killed, "{usage:?}");

    cg.destroy().unwrap();
    let _ = holder.wait();
    let _ = init.wait();
}
