//! Verdict parity between the runtimes: the same programs, with the same limits, get the same
//! statuses and exit codes natively and under gVisor — normal ends, signals, CPU and wall
//! limits, output floods, fork bombs, memory bombs, blocked calls, no network.
//!
//! gVisor must be usable here: when `corral doctor` says it is not (no runsc, not root), this
//! test says so loudly and checks only that a gVisor run fails closed, never silently native.

mod common;

use common::*;

struct Case {
    name: &'static str,
    args: &'static [&'static str],
    status: &'static str,
    exit_code: Option<i64>,
}

const CASES: &[Case] = &[
    Case {
        name: "a normal end",
        args: &["--", "/bin/sh", "-c", "echo hi"],
        status: "ok",
        exit_code: Some(0),
    },
    Case {
        name: "an exit code",
        args: &["--", "/bin/sh", "-c", "exit 3"],
        status: "nonzero_exit",
        exit_code: Some(3),
    },
    Case {
        name: "a signal",
        args: &["--", "/bin/sh", "-c", "kill -SEGV $$"],
        status: "signaled",
        exit_code: None,
    },
    Case {
        name: "the CPU limit",
        args: &["--cpu-time", "1s", "--", "python3", "-c", "while True: pass"],
        status: "time_limit",
        exit_code: None,
    },
    Case {
        name: "the wall limit",
        args: &["--wall-time", "1s", "--", "/bin/sleep", "30"],
        status: "wall_time_limit",
        exit_code: None,
    },
    Case {
        name: "an output flood",
        args: &["--output", "10K", "--", "python3", "-c", "while True: print('x' * 1000)"],
        status: "output_limit",
        exit_code: None,
    },
    Case {
        name: "a fork bomb",
        args: &[
            "--pids",
            "16",
            "--",
            "python3",
            "-c",
            "import os, time\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n            time.sleep(5); os._exit(0)\n        n += 1\nexcept OSError:\n    print('stopped at', n)",
        ],
        status: "ok",
        exit_code: Some(0),
    },
    Case {
        name: "a memory bomb",
        args: &["--memory", "32M", "--", "python3", "-c", "x = bytearray(200 << 20)"],
        status: "memory_limit",
        exit_code: None,
    },
    Case {
        name: "a blocked call (ptrace)",
        args: &[
            "--",
            "python3",
            "-c",
            "import ctypes; ctypes.CDLL(None).syscall(101, 0, 0, 0, 0); print('ran')",
        ],
        status: "blocked_syscall",
        exit_code: None,
    },
    Case {
        name: "no network",
        args: &[
            "--",
            "python3",
            "-c",
            "import socket; socket.create_connection(('1.1.1.1', 80), timeout=3)",
        ],
        status: "nonzero_exit",
        exit_code: Some(1),
    },
];

/// What `corral doctor --json` says about gVisor: usable, and why not.
fn gvisor_usable() -> (bool, String) {
    let out = corral_cmd()
        .args(["doctor", "--json"])
        .output()
        .expect("corral doctor runs");
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("corral doctor --json prints JSON");
    let g = &v["runtimes"]["gvisor"];
    (
        g["usable"].as_bool().unwrap_or(false),
        g["detail"].as_str().unwrap_or("").to_string(),
    )
}

fn run_in(runtime: &str, case: &Case) -> Outcome {
    let mut args = vec!["--runtime", runtime];
    args.extend(case.args);
    run_json(&args, secs(120))
}

#[test]
fn the_same_programs_get_the_same_verdicts_natively_and_under_gvisor() {
    let (usable, why) = gvisor_usable();
    if !usable {
        eprintln!("\n!!! gVisor is UNUSABLE on this host ({why}): parity not checked, only that gVisor runs fail closed !!!\n");
        let o = run_in("gvisor", &CASES[0]);
        assert_eq!(o.status(), "sandbox_error", "{}", o.describe());
        assert_eq!(o.json["runtime"], "gvisor", "{}", o.describe());
        return;
    }
    let mut differences = Vec::new();
    for case in CASES {
        let native = run_in("native", case);
        let gvisor = run_in("gvisor", case);
        assert_eq!(native.json["runtime"], "native", "{}", native.describe());
        assert_eq!(gvisor.json["runtime"], "gvisor", "{}", gvisor.describe());
        for (runtime, o) in [("native", &native), ("gvisor", &gvisor)] {
            let exit = o.json["exit_code"].as_i64();
            if o.status() != case.status || exit != case.exit_code {
                differences.push(format!(
                    "{}: {runtime} gave {} / exit {exit:?}, expected {} / exit {:?}\n{}",
                    case.name,
                    o.status(),
                    case.status,
                    case.exit_code,
                    o.describe()
                ));
            }
        }
        if case.name == "a fork bomb" {
            assert_eq!(
                native.json["stdout"], gvisor.json["stdout"],
                "the pids limit stops a fork bomb at the same count"
            );
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n\n"));
}

/// A gVisor run says so, and a run in a gVisor sandbox is not native: the kernel answers as gVisor.
#[test]
fn a_gvisor_run_really_runs_in_gvisor() {
    let (usable, why) = gvisor_usable();
    if !usable {
        eprintln!("\n!!! gVisor is UNUSABLE on this host ({why}) !!!\n");
        return;
    }
    let o = run_json(
        &[
            "--runtime",
            "gvisor",
            "--",
            "/bin/sh",
            "-c",
            "cat /proc/version; id -u",
        ],
        secs(120),
    );
    assert_eq!(o.status(), "ok", "{}", o.describe());
    let out = o.json["stdout"].as_str().unwrap_or("");
    assert!(out.contains("gVisor") || out.contains("4.4.0"), "{out}");
    let uid: u32 = out
        .lines()
        .last()
        .unwrap_or("")
        .trim()
        .parse()
        .expect("a uid");
    assert!(
        uid >= 60_000,
        "the program runs as a sandbox uid, got {uid}"
    );
}

/// One lease of a gVisor sandbox serves one submission: its runs share the working directory
/// (compile, then test). The next lease never gets that sandbox back, however clean a reset
/// would be: it gets another, which the pool started while the first was in use.
#[test]
fn a_gvisor_sandbox_serves_one_lease_and_is_never_reused() {
    use corral_sandbox::{
        run_in, Host, InitProgram, NoSink, Pool, PoolConfig, RunSpec, Runtime, SandboxConfig,
    };
    let (usable, why) = gvisor_usable();
    if !usable {
        eprintln!("\n!!! gVisor is UNUSABLE on this host ({why}) !!!\n");
        return;
    }
    let host = std::sync::Arc::new(
        Host::new(InitProgram {
            path: std::path::PathBuf::from(env!("CARGO_BIN_EXE_corral")),
            arg: corral_sandbox::INIT_ARG.into(),
        })
        .expect("this host must support sandboxes (see corral doctor)"),
    );
    let pool = Pool::new(host, PoolConfig::default());
    let sh = |code: &str| {
        let mut s = RunSpec::new(vec!["/bin/sh".into(), "-c".into(), code.into()]);
        s.runtime = Runtime::Gvisor;
        s
    };
    let shape = SandboxConfig::for_spec(&sh("true"));
    let mut lease = pool.lease(&shape).expect("a gVisor sandbox");
    let first_id = lease.sandbox().id().to_string();
    let o = run_in(
        lease.sandbox(),
        &sh("echo compiled > a.out; echo x > /tmp/t"),
        &mut NoSink,
    );
    assert_eq!(o.status.as_str(), "ok", "{o:?}");
    assert_eq!(o.runtime, Runtime::Gvisor);
    let o = run_in(lease.sandbox(), &sh("cat a.out"), &mut NoSink);
    assert_eq!(
        o.stdout.text(),
        "compiled\n",
        "runs of one lease share the working directory: {o:?}"
    );
    drop(lease);

    let mut next = pool.lease(&shape).expect("another gVisor sandbox");
    assert_ne!(
        next.sandbox().id(),
        first_id,
        "a used gVisor sandbox was leased again"
    );
    assert_eq!(
        next.sandbox().leases(),
        0,
        "the next lease gets a sandbox nobody used"
    );
    let o = run_in(next.sandbox(), &sh("cat a.out /tmp/t"), &mut NoSink);
    assert_eq!(o.status.as_str(), "nonzero_exit", "{o:?}");
    assert!(!o.stdout.text().contains("compiled"), "{o:?}");
}
