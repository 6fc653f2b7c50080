//! The last steps before a program runs: inside a forked child of the sandbox's PID 1, drop every
//! privilege, apply the limits and filters, and exec. Any failure is reported and the child exits
//! without running the program (fail closed).

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};

use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, SigmaskHow, Signal};
use serde::{Deserialize, Serialize};

use crate::protocol::{self, Rlimits, Setup};
use crate::spec::WORKDIR;

/// What the child tells PID 1 before exec.
#[derive(Debug, Serialize, Deserialize)]
pub enum ChildReport {
    /// The seccomp listener rides along as a descriptor.
    Listener,
    Error(String),
}

/// Everything the child needs, prepared by PID 1 before forking.
pub struct Plan {
    candidates: Vec<CString>,
    argv: Vec<CString>,
    envp: Vec<CString>,
    uid: u32,
    gid: u32,
    /// Rootless mode: become `uid` through a nested user namespace instead of setresuid.
    userns: bool,
    /// Stdio is a pty slave that becomes the program's controlling terminal.
    controlling_tty: bool,
    /// PID 1 exempted itself from the OOM killer; the program must not inherit that.
    oom_protected: bool,
    rlimits: Rlimits,
    landlock: bool,
    program: String,
}

impl Plan {
    pub fn new(
        setup: &Setup,
        argv: &[String],
        env: &[(String, String)],
        rlimits: &Rlimits,
        controlling_tty: bool,
        oom_protected: bool,
    ) -> Result<Plan, String> {
        let cstr = |s: &str| CString::new(s).map_err(|_| format!("{s:?} contains a NUL byte"));
        let program = argv.first().ok_or("empty command")?.clone();
        // execvp semantics with the sandbox's PATH, not ours.
        let candidates = if program.contains('/') {
            vec![cstr(&program)?]
        } else {
            let path = env
                .iter()
                .find(|(k, _)| k == "PATH")
                .map(|(_, v)| v.as_str())
                .unwrap_or(crate::spec::DEFAULT_PATH);
            path.split(':')
                .filter(|d| !d.is_empty())
                .map(|d| cstr(&format!("{d}/{program}")))
                .collect::<Result<_, _>>()?
        };
        Ok(Plan {
            candidates,
            argv: argv.iter().map(|a| cstr(a)).collect::<Result<_, _>>()?,
            envp: env
                .iter()
                .map(|(k, v)| cstr(&format!("{k}={v}")))
                .collect::<Result<_, _>>()?,
            uid: setup.uid,
            gid: setup.gid,
            userns: setup.userns.is_some(),
            controlling_tty,
            oom_protected,
            rlimits: rlimits.clone(),
            landlock: setup.landlock,
            program,
        })
    }
}

/// Runs in the forked child. `fds` are stdin, stdout, stderr.
pub fn child(
    plan: &Plan,
    filter: &corral_seccomp::CompiledFilter,
    landlock: Option<&landlock::RulesetCreated>,
    fds: &[OwnedFd],
    report: OwnedFd,
) -> ! {
    match prepare(plan, landlock, fds) {
        Ok(()) => {}
        Err(e) => fail(&report, e),
    }
    // From here on, the process is unprivileged and confined; install seccomp last so that our own
    // setup syscalls are not subject to it.
    let listener = match filter.install_with_listener() {
        Ok(fd) => fd,
        Err(errno) => fail(
            &report,
            format!(
                "installing the seccomp filter: {}",
                nix::errno::Errno::from_raw(errno)
            ),
        ),
    };
    if protocol::send(report.as_fd(), &ChildReport::Listener, &[listener]).is_err() {
        // SAFETY: _exit is always safe; PID 1 sees no listener and fails the run.
        unsafe { libc::_exit(126) };
    }
    // No descriptor but 0, 1, 2 may reach the program (the listener above would let it answer its
    // own seccomp notifications).
    // SAFETY: close_range on our own descriptor table; nothing else runs in this process.
    unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) };
    let mut argv: Vec<*const libc::c_char> = plan.argv.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let mut envp: Vec<*const libc::c_char> = plan.envp.iter().map(|a| a.as_ptr()).collect();
    envp.push(std::ptr::null());
    let mut last = libc::ENOENT;
    for path in &plan.candidates {
        // SAFETY: argv/envp are NUL-terminated arrays of pointers to live CStrings.
        unsafe { libc::execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr()) };
        let e = nix::errno::Errno::last_raw();
        // Like execvp: keep looking after "not here", remember "here but not runnable".
        if e != libc::ENOENT && e != libc::ENOTDIR {
            last = e;
            if e != libc::EACCES {
                break;
            }
        }
    }
    // The program could not be started: say so on its stderr like a shell, exit 127 / 126.
    let msg = format!(
        "corral: {}: {}\n",
        plan.program,
        nix::errno::Errno::from_raw(last).desc()
    );
    // SAFETY: write to fd 2 from a buffer we own.
    unsafe { libc::write(2, msg.as_ptr().cast(), msg.len()) };
    let code = if last == libc::ENOENT { 127 } else { 126 };
    // SAFETY: _exit never returns and is always safe.
    unsafe { libc::_exit(code) }
}

fn fail(report: &OwnedFd, error: String) -> ! {
    let _ = protocol::send(report.as_fd(), &ChildReport::Error(error), &[]);
    // SAFETY: _exit never returns and is always safe.
    unsafe { libc::_exit(126) }
}

fn check(what: &str, rc: libc::c_long) -> Result<(), String> {
    if rc < 0 {
        Err(format!("{what}: {}", std::io::Error::last_os_error()))
    } else {
        Ok(())
    }
}

fn prepare(
    plan: &Plan,
    landlock: Option<&landlock::RulesetCreated>,
    fds: &[OwnedFd],
) -> Result<(), String> {
    // PID 1 set every disposition to default at start except SIGPIPE, and blocks SIGCHLD.
    // SAFETY: installing SIG_DFL has no handler code that could run.
    let _ = unsafe {
        sigaction(
            Signal::SIGPIPE,
            &SigAction::new(SigHandler::SigDfl, SaFlags::empty(), SigSet::empty()),
        )
    };
    nix::sys::signal::sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None)
        .map_err(|e| format!("sigprocmask: {e}"))?;
    // PID 1 is exempt from the OOM killer; the program must not be.
    if plan.oom_protected {
        std::fs::write("/proc/self/oom_score_adj", b"0")
            .map_err(|e| format!("oom_score_adj: {e}"))?;
    }
    nix::unistd::setsid().map_err(|e| format!("setsid: {e}"))?;

    // The cgroup (joined by PID 1) is hidden behind a namespace of its own.
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWCGROUP)
        .map_err(|e| format!("unshare(CLONE_NEWCGROUP): {e}"))?;

    set_rlimit(
        libc::RLIMIT_NOFILE,
        plan.rlimits.nofile,
        plan.rlimits.nofile,
    )?;
    set_rlimit(libc::RLIMIT_FSIZE, plan.rlimits.fsize, plan.rlimits.fsize)?;
    set_rlimit(
        libc::RLIMIT_CPU,
        plan.rlimits.cpu_secs,
        plan.rlimits.cpu_secs + 1,
    )?;
    // RLIMIT_NPROC counts every process of the real uid on the host; in rootless mode that is the
    // caller's own uid, so the limit would count the caller's other processes too (pids cgroup
    // still applies).
    if !plan.userns {
        set_rlimit(libc::RLIMIT_NPROC, plan.rlimits.nproc, plan.rlimits.nproc)?;
    }
    set_rlimit(libc::RLIMIT_CORE, 0, 0)?;
    set_rlimit(libc::RLIMIT_MEMLOCK, 64 << 10, 64 << 10)?;
    set_rlimit(libc::RLIMIT_MSGQUEUE, 64 << 10, 64 << 10)?;

    for (i, fd) in fds[..3].iter().enumerate() {
        dup_to(fd.as_raw_fd(), i as RawFd)?;
    }
    if plan.controlling_tty {
        // SAFETY: TIOCSCTTY on fd 0, a pty slave we own; we lead a new session (setsid above).
        let rc = unsafe { libc::ioctl(0, libc::TIOCSCTTY, 0) };
        check("TIOCSCTTY", rc as libc::c_long)?;
    }
    nix::unistd::chdir(WORKDIR).map_err(|e| format!("chdir {WORKDIR}: {e}"))?;

    if plan.userns {
        enter_nested_user_namespace(plan.uid, plan.gid)?;
    } else {
        drop_privileges(plan.uid, plan.gid)?;
    }
    // SAFETY: prctl with integer arguments.
    let rc = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
    check("PR_SET_NO_NEW_PRIVS", rc as libc::c_long)?;
    match (landlock, plan.landlock) {
        (Some(ruleset), _) => crate::landlock::apply(ruleset)?,
        (None, true) if crate::landlock::kernel_abi() > 0 => {
            return Err("the Landlock ruleset is missing".into())
        }
        (None, _) => {}
    }
    Ok(())
}

fn dup_to(from: RawFd, to: RawFd) -> Result<(), String> {
    if from == to {
        // Clear close-on-exec, which dup2 would have cleared for us.
        // SAFETY: fcntl on a descriptor we own.
        return check("fcntl", unsafe { libc::fcntl(from, libc::F_SETFD, 0) }
            as libc::c_long);
    }
    // SAFETY: dup2 onto 0..2, which this process owns; the source is a live descriptor.
    check("dup2", unsafe { libc::dup2(from, to) } as libc::c_long)
}

fn set_rlimit(resource: libc::__rlimit_resource_t, soft: u64, hard: u64) -> Result<(), String> {
    let lim = libc::rlimit {
        rlim_cur: soft,
        rlim_max: hard.max(soft),
    };
    // SAFETY: setrlimit reads the struct we pass.
    check("setrlimit", unsafe { libc::setrlimit(resource, &lim) }
        as libc::c_long)
}

/// Rootless mode: the sandbox's namespaces belong to a user namespace where we are uid 0; the
/// program gets a nested one where it is `uid`, mapped to that 0, and so holds no capability over
/// anything (a uid other than 0 has none, and the bounding set is empty anyway).
fn enter_nested_user_namespace(uid: u32, gid: u32) -> Result<(), String> {
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWUSER)
        .map_err(|e| format!("unshare(CLONE_NEWUSER): {e}"))?;
    crate::init::map_ids(uid, 0, gid, 0)?;
    // A new user namespace starts with a full bounding set; empty it while we may.
    drop_bounding_set()?;
    // SAFETY: plain prctl with integer arguments.
    unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        )
    };
    // SAFETY: plain id-changing syscalls.
    check("setresgid", unsafe { libc::setresgid(gid, gid, gid) }
        as libc::c_long)?;
    // SAFETY: as above.
    check("setresuid", unsafe { libc::setresuid(uid, uid, uid) }
        as libc::c_long)?;
    // SAFETY: setuid(0) only tests whether we could become the namespace's root again; it must fail.
    if unsafe { libc::setuid(0) } == 0 {
        return Err("could regain uid 0 after dropping privileges".into());
    }
    Ok(())
}

/// Becomes the sandbox user with no capabilities left anywhere (effective, permitted, inheritable,
/// ambient; the bounding set is already empty) and no supplementary groups.
fn drop_privileges(uid: u32, gid: u32) -> Result<(), String> {
    // PID 1 emptied the bounding set once (see `drop_bounding_set`); this child inherited it.
    // SAFETY: prctl with integer arguments.
    unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        )
    };
    // SAFETY: setgroups with an empty list.
    check("setgroups", unsafe { libc::setgroups(0, std::ptr::null()) }
        as libc::c_long)?;
    // SAFETY: plain id-changing syscalls.
    check("setresgid", unsafe { libc::setresgid(gid, gid, gid) }
        as libc::c_long)?;
    // SAFETY: as above.
    check("setresuid", unsafe { libc::setresuid(uid, uid, uid) }
        as libc::c_long)?;
    // Leaving uid 0 clears the permitted and effective sets; prove it rather than trust it.
    // SAFETY: setuid(0) only tests whether we could regain root; it must fail.
    if unsafe { libc::setuid(0) } == 0 {
        return Err("could regain uid 0 after dropping privileges".into());
    }
    Ok(())
}

/// Brings up `lo` in the new network namespace, so programs can talk to themselves.
pub fn loopback_up() {
    // SAFETY: a plain datagram socket used only for the interface ioctl, closed at the end.
    let sock = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if sock < 0 {
        return;
    }
    // SAFETY: ifreq is plain data; zeroed is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (i, b) in b"lo".iter().enumerate() {
        req.ifr_name[i] = *b as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS / SIOCSIFFLAGS read and write the ifreq we own.
    unsafe {
        if libc::ioctl(sock, libc::SIOCGIFFLAGS, &mut req) == 0 {
            req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            libc::ioctl(sock, libc::SIOCSIFFLAGS, &req);
        }
        libc::close(sock);
    }
}

/// Empties the capability bounding set of the calling process (PID 1): no program it starts can
/// ever gain a capability through exec, whatever file capabilities or setuid bits it meets.
/// PID 1 keeps its own effective capabilities for building and resetting the sandbox.
pub fn drop_bounding_set() -> Result<(), String> {
    let last = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse::<libc::c_ulong>().ok())
        .unwrap_or(63);
    for cap in 0..=last {
        // SAFETY: prctl with integer arguments.
        let rc = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) };
        if rc != 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL) {
            return Err(format!(
                "dropping capability {cap} from the bounding set: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

/// Sets every signal disposition to the default except SIGPIPE (which PID 1 keeps ignored), so
/// nothing the host ignored (e.g. SIGHUP under nohup) is inherited by programs.
pub fn default_signals() {
    for sig in Signal::iterator() {
        if matches!(sig, Signal::SIGKILL | Signal::SIGSTOP | Signal::SIGPIPE) {
            continue;
        }
        // SAFETY: installing SIG_DFL has no handler code that could run.
        let _ = unsafe {
            sigaction(
                sig,
                &SigAction::new(SigHandler::SigDfl, SaFlags::empty(), SigSet::empty()),
            )
        };
    }
}
