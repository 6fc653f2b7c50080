//! `corral doctor`: what this host offers and what isolation corral can give on it.

use serde::Serialize;

/// One line of the report.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub ok: bool,
    /// Needed for full isolation; a missing required feature makes corral refuse to run.
    pub required: bool,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub checks: Vec<Check>,
}

impl Report {
    /// True when every required feature is present.
    pub fn ready(&self) -> bool {
        self.checks.iter().all(|c| c.ok || !c.required)
    }

    /// A one-phrase summary of the isolation level.
    pub fn level(&self) -> &'static str {
        if !self.ready() {
            "none: corral will refuse to run programs here"
        } else if self.checks.iter().all(|c| c.ok) {
            "full: namespaces, pivot_root, cgroups, seccomp with notification, Landlock"
        } else {
            "strong: every required layer is present; optional layers are missing (see above)"
        }
    }
}

fn check(name: &'static str, required: bool, result: Result<String, String>) -> Check {
    match result {
        Ok(detail) => Check {
            name,
            ok: true,
            required,
            detail,
        },
        Err(detail) => Check {
            name,
            ok: false,
            required,
            detail,
        },
    }
}

/// Probes the running kernel. Does not create anything persistent.
pub fn probe() -> Report {
    let mut checks = Vec::new();
    let root = nix::unistd::geteuid().is_root();
    checks.push(check(
        "privileges",
        true,
        if root {
            Ok("running as root: namespaces and cgroups are set up directly".into())
        } else {
            let userns = std::fs::read_to_string("/proc/sys/user/max_user_namespaces")
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
                .unwrap_or(0);
            if userns > 0 {
                Ok("rootless: sandboxes live in user namespaces owned by this user (needs a writable cgroup subtree, see cgroups)".into())
            } else {
                Err("not root and user namespaces are disabled: run as root or enable user.max_user_namespaces".into())
            }
        },
    ));
    checks.push(check(
        "kernel",
        false,
        Ok(nix::sys::utsname::uname()
            .map(|u| {
                format!(
                    "{} {}",
                    u.sysname().to_string_lossy(),
                    u.release().to_string_lossy()
                )
            })
            .unwrap_or_default()),
    ));
    let ns: Vec<&str> = ["mnt", "pid", "ipc", "uts", "net", "cgroup", "user"]
        .into_iter()
        .filter(|n| std::path::Path::new(&format!("/proc/self/ns/{n}")).exists())
        .collect();
    checks.push(check(
        "namespaces",
        true,
        if ns.len() >= 6 {
            Ok(ns.join(" "))
        } else {
            Err(format!("only {} available", ns.join(" ")))
        },
    ));
    let userns = std::fs::read_to_string("/proc/sys/user/max_user_namespaces")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok());
    checks.push(check(
        "user namespaces",
        false,
        match userns {
            Some(n) if n > 0 => Ok(format!("max_user_namespaces = {n}")),
            _ => Err("disabled (needed only for rootless mode)".into()),
        },
    ));
    checks.push(check(
        "cgroups",
        true,
        match corral_cgroups::probe() {
            Ok(p) => describe_cgroups(&p),
            Err(e) => Err(e.to_string()),
        },
    ));
    // v1 charges TCP socket buffers to a memory cgroup only through memory.kmem.tcp (see
    // corral_cgroups' V1Cgroup); without it they escape the memory limit. v2 charges them always.
    if let Ok(p) = corral_cgroups::probe() {
        if p.selected == Some(corral_cgroups::Version::V1) {
            let charged =
                p.v1.iter()
                    .filter(|h| h.controllers.iter().any(|c| c == "memory"))
                    .any(|h| {
                        h.mount_point
                            .join("memory.kmem.tcp.limit_in_bytes")
                            .exists()
                    });
            checks.push(check(
                "socket buffers",
                false,
                if charged {
                    Ok("TCP buffers count against the memory limit (cgroup v1 memory.kmem.tcp)".into())
                } else {
                    Err("NOT charged: this kernel's cgroup v1 has no memory.kmem.tcp, so a run's TCP buffers escape its memory limit (use cgroup v2)".into())
                },
            ));
        }
    }
    checks.push(check("seccomp", true, seccomp_status()));
    let abi = crate::inside::landlock::kernel_abi();
    checks.push(check(
        "landlock",
        false,
        if abi > 0 {
            Ok(format!("ABI {abi}{}", if abi >= 6 { " (filesystem + signal and abstract-socket scoping)" } else { " (filesystem; no abstract-socket scoping, so runs with --network get no socket(AF_UNIX))" }))
        } else {
            Err("not available (kernel built without it or not in the lsm= list); mount namespaces still confine files".into())
        },
    ));
    let fss = std::fs::read_to_string("/proc/filesystems").unwrap_or_default();
    checks.push(check(
        "tmpfs",
        true,
        if fss.contains("\ttmpfs") {
            Ok("available".into())
        } else {
            Err("tmpfs is missing".into())
        },
    ));
    checks.push(check(
        "overlayfs",
        false,
        if fss.contains("\toverlay") {
            Ok("available (runs in container images: --image)".into())
        } else {
            Err(
                "not available: runs in container images (--image) fail; the host root works"
                    .into(),
            )
        },
    ));
    checks.push(check("idmapped mounts", false, idmapped_mounts_status()));
    checks.push(check("openat2", true, openat2_status()));
    checks.push(check("gvisor", false, gvisor_status()));
    checks.push(check("pidfd", false, pidfd_status()));
    checks.push(check("clone3", false, clone3_status()));
    checks.push(check(
        "cpu clock",
        false,
        match crate::cpu_clock::available() {
            Ok(()) => Ok("perf task clock: CPU limits are checked against each sandbox's exact CPU time".into()),
            Err(why) => Err(format!("no perf events ({why}; perf_event_paranoid above 2, or a seccomp profile refusing perf_event_open): CPU limits are checked against the cgroup's counter and can overshoot by a scheduler tick (1-10 ms)")),
        },
    ));
    checks.push(check(
        "core dumps",
        false,
        core_pattern_status(
            &std::fs::read_to_string("/proc/sys/kernel/core_pattern").unwrap_or_default(),
        ),
    ));
    Report { checks }
}

/// Where a crash's core dump goes (`kernel.core_pattern`), which no namespace changes: a file is
/// never written (RLIMIT_CORE 0 refuses it), but a pipe or socket handler is the host's own
/// program, started outside every sandbox limit for each crash — the kernel ignores RLIMIT_CORE
/// for it (only the value 1 stops it, and a program may lower its own soft limit to 0).
fn core_pattern_status(pattern: &str) -> Result<String, String> {
    let pattern = pattern.trim();
    match pattern.chars().next() {
        Some('|') | Some('@') => Err(format!(
            "kernel.core_pattern hands core dumps to {pattern:?}: each crash of a sandboxed program starts \
             that handler on the host, outside the sandbox's limits (RLIMIT_CORE does not stop a handler); \
             a judging host should use a file pattern (e.g. sysctl kernel.core_pattern=core)"
        )),
        _ => Ok(format!(
            "written to files ({pattern:?}): none for sandboxed programs (RLIMIT_CORE is 0)"
        )),
    }
}

/// Build mode (`corral env build`) and root mode (graders run as root in their image) stack
/// idmapped layers under overlayfs: Linux 5.19+.
fn idmapped_mounts_status() -> Result<String, String> {
    let (major, minor) = kernel_version();
    if (major, minor) >= (5, 19) {
        Ok("available (image builds and graders run as root: root in a user namespace over idmapped layers)".into())
    } else {
        Err(format!(
            "Linux {major}.{minor} has no idmapped overlayfs layers (5.19+): image builds (corral env build) and graders as root in their image fail (set `root: false`); runs work"
        ))
    }
}

/// Whether `runsc` is there and which platform corral starts it with (a real gVisor sandbox is
/// then built by the CLI's smoke test).
fn gvisor_status() -> Result<String, String> {
    let runsc = crate::gvisor::find_runsc()?;
    if !nix::unistd::geteuid().is_root() {
        return Err(format!(
            "{} found, but the gVisor runtime needs root",
            runsc.version
        ));
    }
    let kvm = match (runsc.platform, crate::gvisor::kvm_usable()) {
        (crate::gvisor::Platform::Kvm, _) => "",
        (_, true) => " (/dev/kvm is usable: CORRAL_GVISOR_PLATFORM=kvm selects it)",
        (_, false) => " (no usable /dev/kvm)",
    };
    Ok(format!(
        "{} at {}, platform {}{kvm}",
        runsc.version,
        runsc.path.display(),
        runsc.platform.as_str()
    ))
}

/// What each runtime enforces on this host, and where (for `corral doctor`).
pub fn runtime_enforcement(report: &Report, gvisor_usable: bool) -> Vec<(&'static str, String)> {
    let ok = |name: &str| report.checks.iter().any(|c| c.name == name && c.ok);
    let landlock = if ok("landlock") {
        "Landlock"
    } else {
        "no Landlock (kernel lacks it)"
    };
    vec![
        (
            "native",
            format!(
                "host kernel; namespaces, pivot_root, cgroups (memory, pids, CPU), seccomp with the syscall named, {landlock}, an unprivileged uid"
            ),
        ),
        (
            "gvisor",
            if ok("gvisor") && gvisor_usable {
                "gVisor's kernel between the program and the host's; the root runsc builds from corral's bundle (read-only system folders or an image's layers, curated /etc, tmpfs scratch; gVisor's file server reaches nothing else: this replaces Landlock, which gVisor lacks); corral's init inside: seccomp with the syscall named (init traces the run), gVisor's pids cgroup, an unprivileged uid; memory and CPU by the host cgroup around runsc (figures include gVisor's own work; a program's own CPU clock runs fast on the ptrace platform); no pids_peak; FIFOs and sockets in the working directory stay in gVisor (copy-out does not list them); /proc/1/environ readable but empty; terminal runs relayed by init (^D at a line's start does not end input in gVisor 2022's pty)".to_string()
            } else {
                "UNUSABLE here (see the gvisor lines): runs that ask for it fail, never fall back to native".to_string()
            },
        ),
    ]
}

fn describe_cgroups(p: &corral_cgroups::Probe) -> Result<String, String> {
    let v1: Vec<String> =
        p.v1.iter()
            .flat_map(|h| {
                h.controllers
                    .iter()
                    .filter(|c| !c.starts_with("name="))
                    .cloned()
            })
            .collect();
    let v2 =
        p.v2.as_ref()
            .map(|h| h.controllers.join(" "))
            .unwrap_or_else(|| "not mounted".into());
    let mounted = format!(
        "v1 controllers: [{}]; v2 controllers: [{}]",
        v1.join(" "),
        v2
    );
    match (p.selected, &p.problem) {
        (Some(v), _) => Ok(format!("using {v} — {mounted}")),
        (None, Some(problem)) => Err(format!("{problem} — {mounted}")),
        (None, None) => Err(format!("no usable hierarchy — {mounted}")),
    }
}

fn seccomp_status() -> Result<String, String> {
    let status = std::fs::read_to_string("/proc/self/status").map_err(|e| e.to_string())?;
    if !status.lines().any(|l| l.starts_with("Seccomp:")) {
        return Err("the kernel has no seccomp".into());
    }
    let mut sizes = [0u16; 3];
    // SAFETY: SECCOMP_GET_NOTIF_SIZES writes three u16 into the array we own.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            3u32, /* SECCOMP_GET_NOTIF_SIZES */
            0u32,
            sizes.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return Err("seccomp user notification (Linux 5.0+) is missing; blocked syscalls could not be reported".into());
    }
    match corral_seccomp::CompiledFilter::compile(&corral_seccomp::Profile::default_profile()) {
        Ok(f) => Ok(format!(
            "filter with user notification; default profile compiles to {} instructions",
            f.as_bytes().len() / 8
        )),
        Err(e) => Err(format!("compiling the default profile failed: {e}")),
    }
}

fn openat2_status() -> Result<String, String> {
    use nix::fcntl::{openat2, OFlag, OpenHow, ResolveFlag};
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_BENEATH);
    openat2(nix::fcntl::AT_FDCWD, ".", how)
        .map(|_| "available (host-side file access never follows sandbox links)".to_string())
        .map_err(|e| format!("unavailable ({e}); needs Linux 5.6+"))
}

fn pidfd_status() -> Result<String, String> {
    // SAFETY: pidfd_open on our own pid returns a descriptor we close at once.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, std::process::id(), 0) };
    if fd < 0 {
        return Err(format!("unavailable ({})", std::io::Error::last_os_error()));
    }
    // SAFETY: closing the descriptor we just got.
    unsafe { libc::close(fd as i32) };
    Ok("available".into())
}

/// clone3, and with it (5.7+) `CLONE_INTO_CGROUP`: on cgroup v2 each new sandbox's PID 1 is
/// forked straight into its cgroup (`inside::fork_into`); without it PID 1 writes
/// `cgroup.procs`, which can wait for an RCU grace period.
fn clone3_status() -> Result<String, String> {
    const SLOW_JOIN: &str = "on cgroup v2 each new sandbox's PID 1 joins its cgroup by writing cgroup.procs, which can wait milliseconds for an RCU grace period";
    // A zero-sized argument is rejected with EINVAL when clone3 exists, ENOSYS when not.
    // SAFETY: clone3 with a null pointer and size 0 cannot create a process.
    let rc = unsafe { libc::syscall(libc::SYS_clone3, std::ptr::null::<u8>(), 0usize) };
    let err = std::io::Error::last_os_error();
    if rc < 0 && err.raw_os_error() == Some(libc::ENOSYS) {
        return Err(format!("unavailable: {SLOW_JOIN}"));
    }
    if kernel_version() >= (5, 7) {
        Ok("available, with CLONE_INTO_CGROUP: on cgroup v2 each new sandbox's PID 1 is forked straight into its cgroup".into())
    } else {
        Ok(format!(
            "available, but no CLONE_INTO_CGROUP before Linux 5.7: {SLOW_JOIN}"
        ))
    }
}

/// The running kernel's (major, minor), (0, 0) when unknown.
pub(crate) fn kernel_version() -> (u32, u32) {
    let release = nix::sys::utsname::uname()
        .map(|u| u.release().to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut parts = release
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|p| p.parse::<u32>().ok());
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A handler the kernel starts for each crash is flagged; a file pattern, which RLIMIT_CORE 0
    /// turns off, is not.
    #[test]
    fn a_core_dump_handler_is_flagged() {
        for handler in [
            "|/usr/lib/systemd/systemd-coredump %P %u %g %s %t %c %h\n",
            "|/usr/share/apport/apport -p%p -s%s -c%c -d%d -P%P -u%u -g%g -- %E",
            "@/run/coredump.socket",
        ] {
            let e = core_pattern_status(handler).unwrap_err();
            assert!(e.contains("outside the sandbox's limits"), "{e}");
        }
        for file in ["core\n", "/var/crash/core.%e.%p", ""] {
            assert!(core_pattern_status(file).is_ok(), "{file:?}");
        }
    }
}
