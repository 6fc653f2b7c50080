//! The sandbox's init: the only code of ours that runs inside a sandbox.
//!
//! The supervisor starts it by re-executing the corral binary (`corral __sandbox-init`) with the
//! control socket as fd 3, so it begins single-threaded and owns nothing of the caller's state.
//! It unshares the namespaces, forks PID 1 of the new PID namespace (the "keeper" parent just waits
//! for it), builds the root, and then serves requests: fork + exec a program, report its end, and
//! kill everything it left behind. When PID 1 exits the kernel kills every process in the namespace.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::time::Instant;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sched::{unshare, CloneFlags};
use nix::sys::signal::{kill, SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{fork, ForkResult, Pid};

use crate::error::SandboxError;
use crate::exec;
use crate::protocol::{self, Event, Request, Setup};

/// The hidden subcommand the supervisor runs.
pub const INIT_ARG: &str = "__sandbox-init";
/// The control socket's number in init.
pub const CONTROL_FD: RawFd = 3;

/// Entry point of `corral __sandbox-init`. Never returns.
pub fn main() -> ! {
    // SAFETY: the supervisor passes the control socket as fd 3 and nothing else in this fresh
    // process has taken ownership of it.
    let ctl = unsafe { OwnedFd::from_raw_fd(CONTROL_FD) };
    let code = match run(ctl) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("corral init: {e}");
            1
        }
    };
    std::process::exit(code)
}

fn run(ctl: OwnedFd) -> Result<(), SandboxError> {
    let Some((setup, cgroup_procs)) = protocol::recv::<Setup>(ctl.as_fd())? else {
        return Ok(());
    };
    if let Some((uid, gid)) = setup.userns {
        if let Err(e) = enter_user_namespace(uid, gid) {
            let error = format!("user namespace: {e}");
            protocol::send(
                ctl.as_fd(),
                &Event::Failed {
                    error: error.clone(),
                },
                &[],
            )?;
            return Err(SandboxError::Init(error));
        }
    }
    let mut flags = CloneFlags::CLONE_NEWNS
        | CloneFlags::CLONE_NEWPID
        | CloneFlags::CLONE_NEWIPC
        | CloneFlags::CLONE_NEWUTS;
    if !setup.network {
        flags |= CloneFlags::CLONE_NEWNET;
    }
    if let Err(e) = unshare(flags) {
        let error = format!("unshare({flags:?}): {e}");
        protocol::send(
            ctl.as_fd(),
            &Event::Failed {
                error: error.clone(),
            },
            &[],
        )?;
        return Err(SandboxError::Init(error));
    }
    // SAFETY: this process is single-threaded (a fresh exec that started no threads), so the child
    // may run arbitrary code.
    match unsafe { fork() }.map_err(|e| SandboxError::io("fork of PID 1", e.into()))? {
        ForkResult::Parent { child } => keeper(child, ctl),
        ForkResult::Child => {
            // If the keeper dies, PID 1 dies, and with it the namespace.
            // SAFETY: plain prctl with integer arguments.
            unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
            let code = match join_cgroup(&cgroup_procs).and_then(|()| pid1(&setup, ctl.as_fd())) {
                Ok(()) => 0,
                Err(e) => {
                    let _ = protocol::send(
                        ctl.as_fd(),
                        &Event::Failed {
                            error: e.to_string(),
                        },
                        &[],
                    );
                    1
                }
            };
            std::process::exit(code)
        }
    }
}

/// Rootless mode: a user namespace in which the caller's uid is 0, with every capability over the
/// namespaces created next — and none over anything of the host.
fn enter_user_namespace(uid: u32, gid: u32) -> Result<(), String> {
    unshare(CloneFlags::CLONE_NEWUSER).map_err(|e| format!("unshare(CLONE_NEWUSER): {e}"))?;
    map_ids(0, uid, 0, gid)
}

/// Writes this process's uid/gid maps: `inside` maps to `outside` (one id each). Writing
/// `setgroups` first is what lets an unprivileged process map its own gid.
pub(crate) fn map_ids(
    inside_uid: u32,
    outside_uid: u32,
    inside_gid: u32,
    outside_gid: u32,
) -> Result<(), String> {
    let w = |file: &str, text: String| {
        std::fs::write(format!("/proc/self/{file}"), text)
            .map_err(|e| format!("writing /proc/self/{file}: {e}"))
    };
    w("setgroups", "deny".into())?;
    w("uid_map", format!("{inside_uid} {outside_uid} 1"))?;
    w("gid_map", format!("{inside_gid} {outside_gid} 1"))
}

/// PID 1 enters the sandbox's cgroup before anything else; every program inherits it.
fn join_cgroup(procs: &[OwnedFd]) -> Result<(), SandboxError> {
    for f in procs {
        nix::unistd::write(f, b"0")
            .map_err(|e| SandboxError::io("joining the sandbox cgroup", e.into()))?;
    }
    Ok(())
}

/// The parent outside the PID namespace only waits, so the supervisor sees one child to reap.
fn keeper(child: Pid, ctl: OwnedFd) -> Result<(), SandboxError> {
    drop(ctl);
    loop {
        match waitpid(child, None) {
            Ok(WaitStatus::Exited(_, c)) => std::process::exit(c),
            Ok(WaitStatus::Signaled(..)) => std::process::exit(1),
            Ok(_) => continue,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => std::process::exit(1),
        }
    }
}

fn pid1(setup: &Setup, ctl: BorrowedFd<'_>) -> Result<(), SandboxError> {
    let _ = nix::unistd::sethostname(&setup.hostname);
    // Kept open from before /proc/sys becomes read-only: a reset restarts PID numbering with it,
    // so a run cannot count how many processes the previous one made.
    let last_pid = std::fs::OpenOptions::new()
        .write(true)
        .open("/proc/sys/kernel/ns_last_pid")
        .map_err(|e| SandboxError::io("opening ns_last_pid", e))?;
    if !setup.network {
        exec::loopback_up();
    }
    crate::rootfs::build(setup)?;
    exec::default_signals();
    exec::drop_bounding_set().map_err(SandboxError::Init)?;
    // The OOM killer should pick a program, never PID 1 (best effort: needs CAP_SYS_RESOURCE).
    let oom_protected = std::fs::write("/proc/self/oom_score_adj", b"-1000").is_ok();
    // What a network namespace nobody has used looks like (see `network_fingerprint`).
    let mut net_baseline = if setup.network {
        None
    } else {
        network_fingerprint()
    };
    let mut landlock = if setup.landlock {
        crate::landlock::prepare(&setup.mounts).map_err(SandboxError::Init)?
    } else {
        None
    };
    let filter = corral_seccomp::CompiledFilter::from_bytes(setup.seccomp.clone())?;
    let landlock_abi = setup.landlock.then(crate::landlock::kernel_abi);
    send_ready(ctl, landlock_abi)?;

    let mut mask = SigSet::empty();
    mask.add(Signal::SIGCHLD);
    mask.thread_block()
        .map_err(|e| SandboxError::io("blocking SIGCHLD", e.into()))?;
    let sigfd = SignalFd::with_flags(&mask, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK)
        .map_err(|e| SandboxError::io("signalfd", e.into()))?;

    let mut current: Option<Running> = None;
    loop {
        let listener = current
            .as_ref()
            .and_then(|r| r.listener.as_ref().map(|l| l.as_fd()));
        let mut fds = vec![
            PollFd::new(ctl, PollFlags::POLLIN),
            PollFd::new(sigfd.as_fd(), PollFlags::POLLIN),
        ];
        if let Some(l) = listener {
            fds.push(PollFd::new(l, PollFlags::POLLIN));
        }
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(SandboxError::io("poll", e.into())),
        }
        let ready = |i: usize, fds: &[PollFd]| {
            fds.get(i)
                .and_then(|f| f.revents())
                .is_some_and(|r| !r.is_empty())
        };
        let (ctl_ready, sig_ready, notif_ready) = (ready(0, &fds), ready(1, &fds), ready(2, &fds));
        drop(fds);

        if notif_ready {
            if let Some(run) = current.as_mut() {
                run.on_notification(ctl);
            }
        }
        if sig_ready {
            while sigfd.read_signal().ok().flatten().is_some() {}
            if let Some(run) = current.as_mut() {
                run.reap()?;
            } else {
                reap_all_nonblocking();
            }
        }
        if ctl_ready {
            let Some((req, fds)) = protocol::recv::<Request>(ctl)? else {
                // The supervisor is gone: end the sandbox.
                return Ok(());
            };
            match req {
                Request::Run {
                    argv,
                    env,
                    rlimits,
                    tty,
                } => {
                    if current.is_some() {
                        protocol::send(
                            ctl,
                            &Event::Failed {
                                error: "a run is already in progress".into(),
                            },
                            &[],
                        )?;
                        continue;
                    }
                    // With a terminal, the program's stdio is the slave of a fresh pty; the
                    // master goes back to the supervisor.
                    let (fds, master) = match tty.map(crate::pty::open).transpose() {
                        Ok(Some((master, mut slaves))) => {
                            // A stderr pipe from the supervisor keeps errors apart from output.
                            if let Some(err) = fds.into_iter().next() {
                                slaves[2] = err;
                            }
                            (slaves, Some(master))
                        }
                        Ok(None) => (fds, None),
                        Err(error) => {
                            protocol::send(ctl, &Event::Failed { error }, &[])?;
                            continue;
                        }
                    };
                    let plan = exec::Plan::new(
                        setup,
                        &argv,
                        &env,
                        &rlimits,
                        master.is_some(),
                        oom_protected,
                    );
                    match plan.and_then(|plan| start(&plan, &filter, landlock.as_ref(), fds)) {
                        Ok(run) => {
                            let passed: Vec<_> = master.iter().map(|m| m.as_raw_fd()).collect();
                            protocol::send(ctl, &Event::Started, &passed)?;
                            current = Some(run);
                        }
                        Err(error) => {
                            reap_all_nonblocking();
                            protocol::send(ctl, &Event::Failed { error }, &[])?;
                        }
                    }
                }
                Request::Signal { signal } => {
                    if let (Some(run), Ok(sig)) = (current.as_ref(), Signal::try_from(signal)) {
                        // The program leads its own process group (setsid), like a shell job.
                        let _ = kill(Pid::from_raw(-run.pid.as_raw()), sig);
                    }
                }
                Request::Reset { disk_bytes, inodes } => {
                    if current.is_some() {
                        protocol::send(
                            ctl,
                            &Event::Failed {
                                error: "reset during a run".into(),
                            },
                            &[],
                        )?;
                        continue;
                    }
                    // A sandbox that cannot be made as good as new must not be reused: exit.
                    reset(setup, disk_bytes, inodes, &last_pid, &mut net_baseline)?;
                    // The scratch mounts are new inodes: the Landlock rules must name them again.
                    if setup.landlock {
                        landlock =
                            crate::landlock::prepare(&setup.mounts).map_err(SandboxError::Init)?;
                    }
                    send_ready(ctl, landlock_abi)?;
                }
                Request::Kill => {
                    if let Some(run) = current.as_mut() {
                        run.kill_all();
                    }
                }
                Request::ProbeStdin => {
                    let waiting = current.is_some() && crate::stdin_probe::any_waiting_on_stdin();
                    protocol::send(ctl, &Event::StdinWait { waiting }, &[])?;
                }
                Request::Exit => return Ok(()),
            }
        }
        if let Some(done) = current.as_mut().and_then(Running::finished) {
            current = None;
            protocol::send(ctl, &done, &[])?;
        }
    }
}

fn send_ready(ctl: BorrowedFd<'_>, landlock_abi: Option<i32>) -> Result<(), SandboxError> {
    let work = nix::fcntl::open(
        crate::spec::WORKDIR,
        nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_DIRECTORY | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .map_err(|e| SandboxError::io("opening the working directory", e.into()))?;
    protocol::send(ctl, &Event::Ready { landlock_abi }, &[work.as_raw_fd()])
}

/// Everything a program could have left behind goes: processes (already dead), files in the
/// scratch mounts, SysV IPC and POSIX queues (new IPC namespace), sockets and their lingering
/// state (new network namespace), and the PID counter.
fn reset(
    setup: &Setup,
    disk_bytes: u64,
    inodes: u64,
    last_pid: &std::fs::File,
    net_baseline: &mut Option<Vec<u8>>,
) -> Result<(), SandboxError> {
    reap_all_nonblocking();
    if kill(Pid::from_raw(-1), None).is_ok() {
        return Err(SandboxError::Init(
            "processes survived the run; refusing to reuse the sandbox".into(),
        ));
    }
    let (owner_uid, owner_gid) = setup.fs_owner();
    crate::rootfs::reset_scratch(owner_uid, owner_gid, disk_bytes, inodes)?;
    let mut flags = CloneFlags::CLONE_NEWIPC;
    // A network namespace costs ~0.6 ms to replace; one nobody used is as good as new.
    let renew_net =
        !setup.network && (net_baseline.is_none() || network_fingerprint() != *net_baseline);
    if renew_net {
        flags |= CloneFlags::CLONE_NEWNET;
    }
    unshare(flags).map_err(|e| SandboxError::io("fresh IPC/network namespaces", e.into()))?;
    if renew_net {
        exec::loopback_up();
        *net_baseline = network_fingerprint();
    }
    use std::os::unix::fs::FileExt;
    last_pid
        .write_at(b"1", 0)
        .map_err(|e| SandboxError::io("restarting PID numbering", e))?;
    Ok(())
}

/// The network namespace's observable state: its interfaces' counters and its protocol
/// statistics (all per namespace, and cheap to read — unlike `/proc/net/tcp`, which walks the
/// host's whole connection table). A namespace whose fingerprint has not moved since it was made
/// has carried no packet and failed no send: nothing in it can tell one run from the next
/// (sockets die with their processes; addresses, routes and sysctls need CAP_NET_ADMIN).
fn network_fingerprint() -> Option<Vec<u8>> {
    let mut all = Vec::new();
    for f in [
        "/proc/net/dev",
        "/proc/net/snmp",
        "/proc/net/snmp6",
        "/proc/net/netstat",
    ] {
        all.extend(std::fs::read(f).ok()?);
    }
    Some(all)
}

/// A program running in this sandbox.
struct Running {
    pid: Pid,
    started: Instant,
    listener: Option<OwnedFd>,
    blocked: Option<String>,
    /// How the main program ended, once it has been reaped: (exit code, signal).
    ended: Option<(Option<i32>, Option<i32>)>,
    wall_ns: u64,
}

impl Running {
    fn on_notification(&mut self, ctl: BorrowedFd<'_>) {
        let Some(l) = self.listener.as_ref() else {
            return;
        };
        match corral_seccomp::receive(l.as_fd()) {
            Ok(n) => {
                let name = corral_seccomp::syscall_name(n.syscall_nr, n.arch);
                if self.blocked.is_none() {
                    let _ = protocol::send(
                        ctl,
                        &Event::Blocked {
                            syscall: name.clone(),
                        },
                        &[],
                    );
                    self.blocked = Some(name);
                }
                // Kill first, answer second: the offending thread never returns to user space.
                // SIGKILL is queued for every process; the answer unblocks the thread into its death.
                let _ = kill(Pid::from_raw(-1), Signal::SIGKILL);
                let _ = corral_seccomp::respond_errno(l.as_fd(), n.id, libc::EPERM);
                self.kill_all();
            }
            // Every filtered process is gone; the listener has nothing more to say.
            Err(_) => self.listener = None,
        }
    }

    fn record(&mut self, status: WaitStatus) {
        let ended = match status {
            WaitStatus::Exited(pid, code) if pid == self.pid => (Some(code), None),
            WaitStatus::Signaled(pid, sig, _) if pid == self.pid => (None, Some(sig as i32)),
            _ => return,
        };
        if self.ended.is_none() {
            self.wall_ns = self.started.elapsed().as_nanos() as u64;
            self.ended = Some(ended);
        }
    }

    /// Reaps what exited without blocking.
    fn reap(&mut self) -> Result<(), SandboxError> {
        loop {
            match waitpid(
                Pid::from_raw(-1),
                Some(WaitPidFlag::WNOHANG | WaitPidFlag::__WALL),
            ) {
                Ok(WaitStatus::StillAlive) | Err(nix::errno::Errno::ECHILD) => return Ok(()),
                Ok(s) => self.record(s),
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(SandboxError::io("waitpid", e.into())),
            }
        }
    }

    /// SIGKILLs every process in this PID namespace except PID 1, and reaps them all.
    fn kill_all(&mut self) {
        // kill(-1) from PID 1 reaches every other process of the namespace, stopped ones included.
        // Repeat while processes remain: a fork racing the first kill can leave a newborn behind.
        for _ in 0..1000 {
            let _ = kill(Pid::from_raw(-1), Signal::SIGKILL);
            loop {
                match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::__WALL)) {
                    Ok(s) => self.record(s),
                    Err(nix::errno::Errno::EINTR) => continue,
                    Err(_) => break,
                }
            }
            if kill(Pid::from_raw(-1), None).is_err() {
                return;
            }
        }
    }

    /// Once the main program has ended: everything it started dies too, then `Finished`.
    fn finished(&mut self) -> Option<Event> {
        let (exit_code, signal) = self.ended?;
        // Whatever the program started — daemons, stopped children, orphans — dies with it.
        self.kill_all();
        Some(Event::Finished {
            exit_code,
            signal,
            wall_ns: self.wall_ns,
        })
    }
}

fn reap_all_nonblocking() {
    while let Ok(s) = waitpid(
        Pid::from_raw(-1),
        Some(WaitPidFlag::WNOHANG | WaitPidFlag::__WALL),
    ) {
        if s == WaitStatus::StillAlive {
            break;
        }
    }
}

/// Forks the program's process and waits until it has exec'd (or failed to set up).
fn start(
    plan: &exec::Plan,
    filter: &corral_seccomp::CompiledFilter,
    landlock: Option<&landlock::RulesetCreated>,
    fds: Vec<OwnedFd>,
) -> Result<Running, String> {
    if fds.len() < 3 {
        return Err(format!(
            "expected at least 3 descriptors, got {}",
            fds.len()
        ));
    }
    let (mine, theirs) = socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .map_err(|e| format!("socketpair: {e}"))?;
    let started = Instant::now();
    // SAFETY: PID 1 is single-threaded, so the child may allocate and run ordinary code.
    match unsafe { fork() } {
        Err(e) => Err(format!("fork: {e}")),
        Ok(ForkResult::Child) => {
            drop(mine);
            exec::child(plan, filter, landlock, &fds, theirs)
        }
        Ok(ForkResult::Parent { child }) => {
            drop(theirs);
            drop(fds);
            // The child sends its seccomp listener, or an error; end-of-file means it exec'd.
            let mut listener = None;
            loop {
                match protocol::recv::<exec::ChildReport>(mine.as_fd()) {
                    Ok(None) => break,
                    Ok(Some((exec::ChildReport::Listener, mut got))) => listener = got.pop(),
                    Ok(Some((exec::ChildReport::Error(e), _))) => {
                        let _ = kill(child, Signal::SIGKILL);
                        return Err(e);
                    }
                    Err(e) => {
                        let _ = kill(child, Signal::SIGKILL);
                        return Err(format!("reading the child's report: {e}"));
                    }
                }
            }
            if listener.is_none() {
                // No listener means no seccomp filter; the child must have died before exec.
                let _ = kill(child, Signal::SIGKILL);
                return Err(
                    "the program's process ended before its seccomp filter was installed".into(),
                );
            }
            Ok(Running {
                pid: child,
                started,
                listener,
                blocked: None,
                ended: None,
                wall_ns: 0,
            })
        }
    }
}
