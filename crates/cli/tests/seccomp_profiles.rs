//! Stricter seccomp profiles on top of the default one, run through the real binary:
//! `no_spawn` stops new processes and programs (fork, vfork, posix_spawn, exec) and lets threads
//! run (C, Python, Go, Java), `no_sockets` stops every socket, an allow-list stops everything it
//! does not name, and a language's profile applies to runs of its program (`{run}`), never to its
//! compiler. Each blocked call is a `blocked_syscall` naming the call, and nothing is left on the
//! host.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::*;
use serde_json::Value;

const TIMEOUT: Duration = Duration::from_secs(120);

/// `corral run --json --dir DIR [--seccomp-profile P] -- ARGV`.
fn run_in(dir: &Path, profile: Option<&str>, argv: &[&str], extra: &[&str]) -> Outcome {
    let mut args = vec!["--dir", dir.to_str().unwrap()];
    if let Some(p) = profile {
        args.extend(["--seccomp-profile", p]);
    }
    args.extend(extra);
    args.push("--");
    args.extend(argv);
    run_json(&args, TIMEOUT)
}

#[track_caller]
fn assert_blocked(o: &Outcome, syscall: &str) {
    o.assert_status("blocked_syscall");
    assert_eq!(
        o.json["blocked_syscall"].as_str(),
        Some(syscall),
        "{}",
        o.describe()
    );
    o.assert_no_escape();
}

#[test]
fn no_spawn_stops_every_new_process_and_program_and_the_default_does_not() {
    let _g = shared();
    let w = workdir();
    compile("spawn", w.path());
    // fork() and posix_spawn() reach the kernel as clone (clone3 fails quietly first).
    for (way, syscall) in [
        ("fork", "clone"),
        ("vfork", "vfork"),
        ("spawn", "clone"),
        ("exec", "execve"),
    ] {
        let m = marker("nospawn");
        let o = run_in(w.path(), Some("no_spawn"), &["./spawn", &m, way], &[]);
        assert_blocked(&o, syscall);
        assert_no_host_procs(&m);
        let o = run_in(w.path(), None, &["./spawn", &m, way], &[]);
        o.assert_status("ok");
        assert!(o.stdout().contains("ESCAPED"), "{way}: {}", o.describe());
    }
    // The program itself is found on PATH (several exec attempts before it starts) and runs.
    let o = run_in(w.path(), Some("no_spawn"), &["echo", "started"], &[]);
    o.assert_status("ok");
    assert_eq!(o.stdout(), "started\n");
    assert_no_host_mount_mentions(w.path().to_str().unwrap());
}

#[test]
fn threads_run_under_no_spawn() {
    let _g = shared();
    let w = workdir();
    compile("spawn", w.path());
    let o = run_in(
        w.path(),
        Some("no_spawn+no_sockets"),
        &["./spawn", "m", "threads"],
        &[],
    );
    o.assert_status("ok");
    assert_eq!(o.stdout(), "THREADS: 4\n");

    let o = run_in(
        w.path(),
        Some("no_spawn+no_sockets"),
        &[
            "/usr/bin/python3",
            "-c",
            "import threading\nt = [threading.Thread(target=sum, args=([1, 2],)) for _ in range(4)]\n[x.start() for x in t]\n[x.join() for x in t]\nprint('threads', len(t))",
        ],
        &[],
    );
    o.assert_status("ok");
    assert_eq!(o.stdout(), "threads 4\n");

    // Go: goroutines locked to their own OS threads.
    let go = w.path().join("go");
    std::fs::create_dir(&go).unwrap();
    std::fs::write(
        go.join("main.go"),
        "package main\n\nimport (\n\t\"fmt\"\n\t\"runtime\"\n\t\"sync\"\n)\n\nfunc main() {\n\truntime.GOMAXPROCS(4)\n\tvar wg sync.WaitGroup\n\tfor i := 0; i < 6; i++ {\n\t\twg.Add(1)\n\t\tgo func() { defer wg.Done(); runtime.LockOSThread(); x := 0; for j := 0; j < 1000000; j++ { x += j }; _ = x }()\n\t}\n\twg.Wait()\n\tfmt.Println(\"go threads ok\")\n}\n",
    )
    .unwrap();
    let cache = tempdir();
    let built = Command::new("go")
        .args(["build", "-o", "main", "main.go"])
        .current_dir(&go)
        .env("GOCACHE", cache.path())
        .env("GOFLAGS", "-buildvcs=false")
        .output()
        .expect("go is installed by scripts/setup");
    assert!(built.status.success(), "{built:?}");
    make_world_readable(&go, 0o755);
    let o = run_in(&go, Some("no_spawn+no_sockets"), &["./main"], &[]);
    o.assert_status("ok");
    assert_eq!(o.stdout(), "go threads ok\n");

    // Java: the JVM's own threads and the program's.
    let java = w.path().join("java");
    std::fs::create_dir(&java).unwrap();
    std::fs::write(
        java.join("Main.java"),
        "public class Main { public static void main(String[] a) throws Exception {\n  Thread[] t = new Thread[4];\n  for (int i = 0; i < 4; i++) { t[i] = new Thread(() -> {}); t[i].start(); }\n  for (Thread x : t) x.join();\n  System.out.println(\"java threads ok\"); } }\n",
    )
    .unwrap();
    let built = Command::new("javac")
        .arg("Main.java")
        .current_dir(&java)
        .output()
        .expect("javac is installed by scripts/setup");
    assert!(built.status.success(), "{built:?}");
    make_world_readable(&java, 0o755);
    make_world_readable(&java.join("Main.class"), 0o644);
    let o = run_in(
        &java,
        Some("no_spawn"),
        &["java", "-cp", ".", "Main"],
        &["--memory", "512M", "--pids", "64"],
    );
    o.assert_status("ok");
    assert_eq!(o.stdout(), "java threads ok\n");
}

#[test]
fn no_sockets_stops_every_family() {
    let _g = shared();
    let w = workdir();
    compile("sockets", w.path());
    for (kind, syscall) in [
        ("unix", "socket"),
        ("inet", "socket"),
        ("inet6", "socket"),
        ("pair", "socketpair"),
    ] {
        let o = run_in(w.path(), Some("no_sockets"), &["./sockets", "m", kind], &[]);
        assert_blocked(&o, syscall);
        let o = run_in(w.path(), None, &["./sockets", "m", kind], &[]);
        o.assert_status("ok");
        assert!(o.stdout().contains("ESCAPED"), "{kind}: {}", o.describe());
    }
}

#[test]
fn an_allow_list_allows_what_it_names_and_stops_the_rest() {
    let _g = shared();
    let w = workdir();
    std::fs::write(
        w.path().join("uid.c"),
        "#include <stdio.h>\n#include <unistd.h>\nint main(int c, char **v) { printf(\"hello\\n\"); if (c > 1) printf(\"uid %d\\n\", (int)getuid()); return 0; }\n",
    )
    .unwrap();
    let built = Command::new("gcc")
        .args(["-O1", "-o", "uid", "uid.c"])
        .current_dir(w.path())
        .output()
        .unwrap();
    assert!(built.status.success(), "{built:?}");
    make_world_readable(&w.path().join("uid"), 0o755);
    let o = run_in(w.path(), Some("allow:getpid"), &["./uid"], &[]);
    o.assert_status("ok");
    assert_eq!(o.stdout(), "hello\n");
    let o = run_in(w.path(), Some("allow:getpid"), &["./uid", "x"], &[]);
    assert_blocked(&o, "getuid");
    let o = run_in(w.path(), Some("allow:getuid"), &["./uid", "x"], &[]);
    o.assert_status("ok");
    assert!(o.stdout().starts_with("hello\nuid "), "{}", o.describe());
}

#[test]
fn a_bad_profile_name_is_a_usage_error() {
    let mut cmd = corral_cmd();
    cmd.args(["run", "--seccomp-profile", "no_forks", "--", "true"]);
    let raw = run_command(cmd, TIMEOUT);
    assert_eq!(raw.status.code(), Some(2));
    let err = String::from_utf8_lossy(&raw.stderr);
    assert!(err.contains("unknown seccomp profile"), "{err}");
}

/// `corral check --json SUITE SUB` → the report.
fn check(suite: &Path, sub: &Path) -> Value {
    let mut cmd = corral_cmd();
    cmd.args(["check", "--json"]).arg(suite).arg(sub);
    let raw = run_command(cmd, TIMEOUT);
    serde_json::from_slice(&raw.stdout).unwrap_or_else(|e| {
        panic!(
            "corral check printed no JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&raw.stdout),
            String::from_utf8_lossy(&raw.stderr)
        )
    })
}

#[test]
fn a_languages_profile_applies_to_its_program_not_its_compiler_and_a_check_can_replace_it() {
    let _g = shared();
    let dir = workdir();
    let suite = dir.path().join("suite.yaml");
    std::fs::write(
        &suite,
        "name: forks\nlanguage: c\nchecks:\n\
         - id: compiles\n  steps: [{run: \"{compile}\"}, {exit: 0}]\n\
         - id: strict\n  depends: [compiles]\n  steps: [{run: \"{run} m fork\"}, {exit: 0}]\n\
         - id: relaxed\n  depends: [compiles]\n  seccomp: default\n  steps: [{run: \"{run} m fork\"}, {exit: 0}]\n\
         - id: threads\n  depends: [compiles]\n  steps: [{run: \"{run} m threads\"}, {stdout: \"THREADS: 4\"}, {exit: 0}]\n",
    )
    .unwrap();
    let sub = workdir();
    let mut src = std::fs::read_to_string(programs_dir().join("spawn.c")).unwrap();
    // The built-in C entry links no pthread library explicitly; glibc 2.34+ has it in libc.
    src.insert_str(0, "/* main.c */\n");
    std::fs::write(sub.path().join("main.c"), src).unwrap();
    let report = check(&suite, sub.path());
    let result = |id: &str| report["results"][id]["result"].as_bool();
    assert_eq!(result("compiles"), Some(true), "{report:#}");
    assert_eq!(result("strict"), Some(false), "{report:#}");
    let why = report["results"]["strict"].to_string();
    assert!(why.contains("blocked system call: clone"), "{report:#}");
    assert_eq!(result("relaxed"), Some(true), "{report:#}");
    assert_eq!(result("threads"), Some(true), "{report:#}");
}

/// What `tests/containment/netlink.c` prints for every kind, one after the other, in the
/// offline sandbox: without the grant, with `list_interfaces`.
const NETLINK_KINDS: &str =
    "for k in route getifaddrs audit uevent diag packet; do ./netlink m $k; done > out.txt";
const EAFNOSUPPORT: &str = "Address family not supported by protocol";

/// How a change to the sandbox's interfaces is refused: Linux's EPERM (no CAP_NET_ADMIN over its
/// namespace); gVisor's netstack answers the same missing capability with EACCES.
fn netlink_refusal() -> &'static str {
    if under_gvisor() {
        "Permission denied"
    } else {
        "Operation not permitted"
    }
}

fn netlink_expected(granted: bool) -> String {
    let mut s = if granted {
        // The socket opens and sees the sandbox's own namespace (only lo); every change is
        // refused (see netlink_refusal).
        let no = netlink_refusal();
        format!(
            "OPENED: route\nLINKS: lo\n\
             REFUSED: RTM_NEWADDR: {no}\n\
             REFUSED: RTM_NEWLINK dummy: {no}\n\
             REFUSED: RTM_NEWLINK lo down: {no}\n\
             IFADDRS: lo\n"
        )
    } else {
        format!("BLOCKED: route: {EAFNOSUPPORT}\nBLOCKED: getifaddrs: {EAFNOSUPPORT}\n")
    };
    for kind in ["audit", "uevent", "diag", "packet"] {
        s.push_str(&format!("BLOCKED: {kind}: {EAFNOSUPPORT}\n"));
    }
    s
}

/// The `list_interfaces` grant, given by a suite, a check or a language entry, in a real offline
/// sandbox: `socket(AF_NETLINK, *, NETLINK_ROUTE)` opens (getifaddrs works) and lists only `lo`;
/// adding an address or a link or taking `lo` down is refused by the kernel (EPERM); audit,
/// uevent and sock_diag netlink and `AF_PACKET` stay refused. Without it, and under a run's
/// `no_sockets` on top of it, netlink stays closed.
#[test]
fn the_list_interfaces_grant_opens_route_netlink_and_nothing_more() {
    let _g = shared();
    let dir = workdir();
    std::fs::write(dir.path().join("blocked.txt"), netlink_expected(false)).unwrap();
    std::fs::write(dir.path().join("granted.txt"), netlink_expected(true)).unwrap();
    let diff = |expected: &str| {
        format!("[{{run: \"{NETLINK_KINDS}\"}}, {{exit: 0}}, {{diff: {{actual: out.txt, expected: {expected}}}}}]")
    };
    let suite = dir.path().join("suite.yaml");
    std::fs::write(
        &suite,
        format!(
            "name: netlink\nchecks:\n\
             - id: default\n  steps: {blocked}\n\
             - id: granted\n  seccomp: {{grant: [list_interfaces]}}\n  steps: {granted}\n\
             - id: granted_no_spawn\n  seccomp: {{profile: no_spawn, grant: [list_interfaces]}}\n  steps: [{{run: [./netlink, m, route]}}, {{stdout: \"REFUSED: RTM_NEWLINK lo down: {no}\"}}, {{exit: 0}}]\n\
             - id: no_sockets_wins\n  seccomp: {{profile: no_sockets, grant: [list_interfaces]}}\n  steps: [{{run: [./netlink, m, route]}}, {{exit: 0}}]\n\
             - id: allow_list_wins\n  seccomp: {{profile: \"allow:geteuid\", grant: [list_interfaces]}}\n  steps: [{{run: [./netlink, m, route]}}, {{exit: 0}}]\n",
            blocked = diff("blocked.txt"),
            granted = diff("granted.txt"),
            no = netlink_refusal(),
        ),
    )
    .unwrap();
    let sub = workdir();
    compile("netlink", sub.path());
    let report = check(&suite, sub.path());
    let result = |id: &str| report["results"][id]["result"].as_bool();
    for id in ["default", "granted", "granted_no_spawn"] {
        assert_eq!(result(id), Some(true), "{id}: {report:#}");
    }
    for id in ["no_sockets_wins", "allow_list_wins"] {
        assert_eq!(result(id), Some(false), "{id}: {report:#}");
        let why = report["results"][id].to_string();
        assert!(
            why.contains("blocked system call: socket"),
            "{id}: {report:#}"
        );
    }

    // A language entry gives it to its program's runs; a check naming its own profile replaces it.
    let languages = dir.path().join("languages.toml");
    std::fs::write(
        &languages,
        "[languages.netlinkc]\nname = \"netlink probe\"\nsource = \"netlink.c\"\nrun = \"./netlink\"\n\
         seccomp = { grant = [\"list_interfaces\"] }\n",
    )
    .unwrap();
    let run_all = NETLINK_KINDS.replace("./netlink m $k", "{run} m $k");
    std::fs::write(
        &suite,
        format!(
            "name: netlink-language\nlanguage: netlinkc\nchecks:\n\
             - id: language\n  steps: [{{run: \"{run_all}\"}}, {{exit: 0}}, {{diff: {{actual: out.txt, expected: granted.txt}}}}]\n\
             - id: replaced\n  seccomp: default\n  steps: [{{run: \"{run_all}\"}}, {{exit: 0}}, {{diff: {{actual: out.txt, expected: blocked.txt}}}}]\n"
        ),
    )
    .unwrap();
    let mut cmd = corral_cmd();
    cmd.args(["check", "--json", "--languages"])
        .arg(&languages)
        .arg(&suite)
        .arg(sub.path());
    let raw = run_command(cmd, TIMEOUT);
    let report: Value = serde_json::from_slice(&raw.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&raw.stderr));
    });
    for id in ["language", "replaced"] {
        assert_eq!(
            report["results"][id]["result"].as_bool(),
            Some(true),
            "{id}: {report:#}"
        );
    }
    // `corral languages` shows the grant with the profile.
    let mut cmd = corral_cmd();
    cmd.args(["languages", "--json", "--languages"])
        .arg(&languages);
    let raw = run_command(cmd, TIMEOUT);
    let text = String::from_utf8_lossy(&raw.stdout);
    assert!(text.contains("default (grant: list_interfaces)"), "{text}");
}

#[test]
fn a_run_cannot_grant_itself_list_interfaces() {
    for name in ["list_interfaces", "no_spawn+grant:list_interfaces"] {
        let mut cmd = corral_cmd();
        cmd.args(["run", "--seccomp-profile", name, "--", "true"]);
        let raw = run_command(cmd, TIMEOUT);
        assert_eq!(raw.status.code(), Some(2), "{name}");
        let err = String::from_utf8_lossy(&raw.stderr);
        assert!(
            err.contains("is a grant, which only a language, suite or check can give"),
            "{err}"
        );
    }
}
