//! PID 1 of a built sandbox: serves the supervisor's requests — fork and exec a program
//! ([`crate::inside::child`]), forward what its seccomp listener reports, report its end and kill
//! everything it left behind, reset the sandbox between users.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};

use nix::poll::{poll, ppoll, PollFd, PollFlags, PollTimeout};
use nix::sched::{unshare, CloneFlags};
use nix::sys::signal::{kill, SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};
use nix::sys::time::TimeSpec;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{fork, ForkResult, Pid};

use crate::error::SandboxError;
use crate::inside::child::{self, ChildPlan};
use crate::inside::confined::{self, Confined};
use crate::inside::error::SetupError;
use crate::inside::scratch::Scratch;
use crate::inside::tracer::{self, Stop};
use crate::inside::tty_relay::Relay;
use crate::inside::vfork;
use crate::inside::wake_policy::WakePolicy;
use crate::inside::{gvisor, ipcns, landlock, netns, pty, rootfs, stdin_probe};
use crate::protocol::{self, ChildReport, Event, Request, Setup};

/// What PID 1 keeps from building the sandbox.
pub(crate) struct Built {
    /// `/proc/sys/kernel/ns_last_pid`, opened before `/proc/sys` became read-only (gVisor has none).
    pub last_pid: Option<std::fs::File>,
    /// Under gVisor: `pids.max` of gVisor's own pids cgroup, which PID 1 joined.
    pub pids_max: Option<std::fs::File>,
    /// PID 1 exempted itself from the OOM killer.
    pub oom_protected: bool,
    /// Whether the network namespace is as new (none with the host's network).
    pub net_baseline: Option<netns::Baseline>,
    pub landlock: Option<::landlock::RulesetCreated>,
    pub landlock_abi: Option<i32>,
    pub filter: corral_seccomp::CompiledFilter,
    /// Build mode: the user namespace each program joins as its root.
    pub build_userns: Option<OwnedFd>,
    /// The scratch mounts as they were fresh, when a reset may empty them in place.
    pub scratch: Option<Scratch>,
    /// A view of the IPC namespace, when a reset may keep one nobody used.
    pub ipc: Option<ipcns::Usage>,
}

/// Serves requests until the supervisor leaves or asks to exit.
pub(crate) fn serve(setup: &Setup, ctl: BorrowedFd<'_>, built: Built) -> Result<(), SandboxError> {
    let Built {
        last_pid,
        pids_max,
        oom_protected,
        mut net_baseline,
        mut landlock,
        landlock_abi,
        filter,
        build_userns,
        mut scratch,
        mut ipc,
    } = built;
    let mut mask = SigSet::empty();
    mask.add(Signal::SIGCHLD);
    mask.thread_block()
        .map_err(|e| SandboxError::io("blocking SIGCHLD", e.into()))?;
    let sigfd = SignalFd::with_flags(&mask, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK)
        .map_err(|e| SandboxError::io("signalfd", e.into()))?;

    // Batch from a run's end to the next request (see `wake_policy`).
    let mut policy = WakePolicy::new(!setup.gvisor);
    let mut current: Option<Running> = None;
    // Whether a run since the last reset may have changed the network namespace.
    let mut reached_network = false;
    // The program's process borrows PID 1's memory on this stack (see `vfork`); made at first use.
    let mut stack: Option<vfork::Stack> = None;
    // Whether the sandbox's own filter lets the child share PID 1's memory (8 calls through the
    // BPF interpreter): judged once, not for every run.
    let default_shares = vfork::allowed(&filter);
    // Runs with the sandbox's own filter start from a thread of PID 1 that already wears it (see
    // `confined`), where it may be used at all. Made at the first reset — a sandbox used once
    // (a fresh one) would only pay for it — and again after a reset that changed what it wears
    // or where its processes start (the namespaces, the Landlock rules' mounts).
    let mut preconfine = may_confine(setup, &filter, landlock.as_ref(), build_userns.as_ref())
        .zip(last_pid.as_ref());
    let mut confined: Option<Confined> = None;
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
        } else {
            // Keeps the relay's descriptors after index 2 (only their wake-up matters).
            fds.push(PollFd::new(ctl, PollFlags::empty()));
        }
        if let Some(relay) = current.as_ref().and_then(|r| r.relay.as_ref()) {
            fds.extend(relay.poll_fds());
        }
        // Until the running program's wall deadline (microsecond precision), else until told.
        let timeout = current
            .as_ref()
            .and_then(Running::wall_deadline)
            .map(|d| TimeSpec::from_duration(d.saturating_duration_since(Instant::now())));
        match ppoll(&mut fds, timeout, None) {
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(SandboxError::io("poll", e.into())),
        }
        let ready = |i: usize, fds: &[PollFd]| {
            fds.get(i)
                .and_then(|f| f.revents())
                .is_some_and(|r| !r.is_empty())
        };
        let ctl_ready = ready(0, &fds);
        let notif_ready = listener.is_some() && ready(2, &fds);
        let notif_events = fds.get(2).and_then(|f| f.revents()).filter(|_| notif_ready);
        // Every filtered process is gone (a failed receive without it is a notification whose
        // process died first: others may still raise theirs).
        let notif_hung_up = notif_events.is_some_and(|r| r.contains(PollFlags::POLLHUP));
        // Nothing left to receive either: the listener is done, without a receive that fails.
        // (It hangs up early in the last filtered process's exit, ~40 µs before SIGCHLD: a reap
        // tried at the hang-up found the program not dead yet, so PID 1 wakes twice at the end.)
        let notif_spent =
            notif_hung_up && notif_events.is_some_and(|r| !r.contains(PollFlags::POLLIN));
        let sig_ready = ready(1, &fds);
        drop(fds);
        if let Some(relay) = current.as_mut().and_then(|r| r.relay.as_mut()) {
            relay.pump();
        }
        if let Some(run) = current.as_mut() {
            if run.wall_deadline().is_some_and(|d| Instant::now() >= d) {
                // Killed and reaped here, at the limit: `Finished` says why.
                run.wall_killed = true;
                run.kill_all();
            }
        }

        if notif_ready {
            if let Some(run) = current.as_mut() {
                if notif_spent {
                    run.spent_listener = run.listener.take();
                } else {
                    run.on_notification(ctl, notif_hung_up);
                }
            }
        }
        if sig_ready {
            while sigfd.read_signal().ok().flatten().is_some() {}
            if let Some(run) = current.as_mut() {
                run.reap(ctl)?;
            } else {
                reap_all_nonblocking();
            }
        }
        if ctl_ready {
            policy.request_arrived();
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
                    seccomp,
                    pids,
                    wall_ns,
                    quiet_start,
                    cpu,
                } => {
                    if current.is_some() {
                        protocol::send(ctl, &Event::failed("a run is already in progress"), &[])?;
                        continue;
                    }
                    // Under gVisor the pids limit is enforced here or the run does not start.
                    if let Some(file) = &pids_max {
                        let limited = match pids {
                            Some(n) => gvisor::limit(file, n).map_err(|e| e.to_string()),
                            None => Err("no pids limit was given".to_string()),
                        };
                        if let Err(e) = limited {
                            let msg = format!("setting gVisor's pids limit: {e}");
                            protocol::send(ctl, &Event::failed(msg), &[])?;
                            continue;
                        }
                    }
                    // With a terminal, the program's stdio is the slave of a fresh pty; the
                    // master goes back to the supervisor, or under gVisor (which cannot send
                    // it) stays here, relayed to the supervisor's stdin and output pipes.
                    let (fds, master, relay) = match tty.map(pty::open).transpose() {
                        Ok(Some((master, mut slaves))) => {
                            let mut fds = fds.into_iter();
                            let (input, output) = if setup.gvisor {
                                (fds.next(), fds.next())
                            } else {
                                (None, None)
                            };
                            // A stderr pipe from the supervisor keeps errors apart from output.
                            if let Some(err) = fds.next() {
                                slaves[2] = err;
                            }
                            match (input, output) {
                                (Some(input), Some(output)) => {
                                    match Relay::new(master, input, output) {
                                        Ok(relay) => (slaves, None, Some(relay)),
                                        Err(e) => {
                                            let msg = format!("relaying the terminal: {e}");
                                            protocol::send(ctl, &Event::failed(msg), &[])?;
                                            continue;
                                        }
                                    }
                                }
                                _ if setup.gvisor => {
                                    let msg = "a terminal run under gVisor needs its stdin, output and stderr pipes";
                                    protocol::send(ctl, &Event::failed(msg), &[])?;
                                    continue;
                                }
                                _ => (slaves, Some(master), None),
                            }
                        }
                        Ok(None) => (fds, None, None),
                        Err(e) => {
                            protocol::send(ctl, &Event::failed(e), &[])?;
                            continue;
                        }
                    };
                    let terminal = master.is_some() || relay.is_some();
                    let plan = ChildPlan::new(
                        setup,
                        &argv,
                        &env,
                        &rlimits,
                        terminal,
                        oom_protected,
                        build_userns.as_ref().map(|ns| ns.as_raw_fd()),
                    );
                    // A stricter profile comes with the run; the sandbox's default otherwise.
                    let strict = match seccomp.map(corral_seccomp::CompiledFilter::from_bytes) {
                        Some(Ok(f)) => Some(f),
                        Some(Err(e)) => {
                            protocol::send(ctl, &Event::failed(e), &[])?;
                            continue;
                        }
                        None => None,
                    };
                    let filter = strict.as_ref().unwrap_or(&filter);
                    // PID 1 sleeps until the exec when the child shares its memory: only when no
                    // call before the exec needs PID 1 awake (and outside gVisor, where PID 1
                    // traces the child from its first step).
                    let share =
                        !setup.gvisor && strict.as_ref().map_or(default_shares, vfork::allowed);
                    if share && stack.is_none() {
                        stack = vfork::Stack::new().ok();
                    }
                    let stack = stack.as_mut().filter(|_| share);
                    // Runs with the sandbox's own filter start from PID 1's confined thread.
                    let from = confined
                        .as_ref()
                        .filter(|_| strict.is_none() && stack.is_some());
                    let started = plan.and_then(|mut plan| {
                        plan.preconfined = from.is_some();
                        start(
                            &plan,
                            filter,
                            landlock.as_ref(),
                            fds,
                            sigfd.as_fd(),
                            stack,
                            from.map(|c| (c, cpu)),
                        )
                    });
                    match started {
                        Ok(mut run) => {
                            run.wall_limit = wall_ns.map(Duration::from_nanos);
                            run.stdio_after_finished = !terminal && !setup.gvisor;
                            run.relay = relay.map(|mut r| {
                                r.set_program(run.pid);
                                r
                            });
                            let passed: Vec<_> = master.iter().map(|m| m.as_raw_fd()).collect();
                            if !quiet_start || !passed.is_empty() {
                                protocol::send(ctl, &Event::Started, &passed)?;
                            }
                            // A call reported while it was starting (see `start`).
                            if let Some(syscall) = run.blocked.clone() {
                                protocol::send(ctl, &Event::Blocked { syscall }, &[])?;
                            }
                            current = Some(run);
                        }
                        Err(e) => {
                            reap_all_nonblocking();
                            protocol::send(ctl, &Event::failed(e), &[])?;
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
                        protocol::send(ctl, &Event::failed("reset during a run"), &[])?;
                        continue;
                    }
                    // A sandbox that cannot be made as good as new must not be reused: exit.
                    let renewed = reset(
                        setup,
                        disk_bytes,
                        inodes,
                        last_pid.as_ref(),
                        (&mut net_baseline, std::mem::take(&mut reached_network)),
                        &mut scratch,
                        &mut ipc,
                    )?;
                    // New scratch mounts are new inodes: the Landlock rules must name them again.
                    if renewed.mounts && setup.landlock {
                        landlock = landlock::prepare(setup)?;
                    }
                    // Namespaces belong to a thread: the confined one still has the old ones,
                    // and its Landlock domain names the old mounts. A new one, before `Ready`
                    // tells the supervisor how many tasks PID 1 has.
                    if renewed.mounts || renewed.namespaces {
                        drop(confined.take());
                    }
                    if let (None, Some((pid_max, last_pid))) = (&confined, preconfine) {
                        confined = Confined::start(&filter, landlock.as_ref(), (last_pid, pid_max))
                            .map_err(|e| tracing::debug!(error = %e, "no confined thread"))
                            .ok();
                        // Not tried again once it failed: the programs' processes confine
                        // themselves, as they do where it may not be used.
                        if confined.is_none() {
                            preconfine = None;
                        }
                    }
                    send_ready(ctl, landlock_abi, setup.gvisor, tasks(&confined), false)?;
                }
                Request::Kill => {
                    if let Some(run) = current.as_mut() {
                        run.kill_all();
                    }
                }
                Request::Resize { cols, rows } => {
                    if let Some(relay) = current.as_ref().and_then(|r| r.relay.as_ref()) {
                        let _ = relay.resize(cols, rows);
                    }
                }
                Request::ProbeStdin => {
                    let waiting = current.is_some() && stdin_probe::any_waiting_on_stdin();
                    protocol::send(ctl, &Event::StdinWait { waiting }, &[])?;
                }
                Request::Exit => return Ok(()),
            }
        }
        if let Some(done) = current.as_mut().and_then(Running::finished) {
            // (`finished` answered, so there is a run.)
            if let Some(mut run) = current.take() {
                reached_network |= run.reached_network;
                // Every process of the run is dead. Output pipes hold all the run wrote: the
                // supervisor drains them at `Finished` (`Execution::drain_pipes`), so they are
                // closed after it and wake nobody. A terminal's streams end now instead (its
                // master reads end-of-file only once no slave is open), and what it still holds
                // goes out first; so do gVisor's, whose pipes go through its kernel.
                if !run.stdio_after_finished {
                    run.stdio.clear();
                }
                if let Some(relay) = run.relay.take() {
                    relay.drain(Instant::now() + RELAY_DRAIN);
                }
                protocol::send(ctl, &done, &[])?;
                // The listener goes last: closing it frees the run's seccomp program, whose
                // compiled image the kernel frees on a worker thread — after the event, not
                // between the program's exit and it.
                drop(run);
                policy.run_ended();
            }
        }
    }
}

/// PID 1's threads: itself and the confined one, if any.
fn tasks(confined: &Option<Confined>) -> u64 {
    1 + u64::from(confined.is_some())
}

/// Whether runs with the sandbox's own filter may start from PID 1's confined thread (see
/// [`confined`]): rootful, outside gVisor and build mode, and the filter letting every step of
/// the program's process through. Elsewhere each program's process confines itself, as before.
/// With the namespace's `pid_max` (the thread's PID goes near it).
fn may_confine(
    setup: &Setup,
    filter: &corral_seccomp::CompiledFilter,
    landlock: Option<&::landlock::RulesetCreated>,
    build_userns: Option<&OwnedFd>,
) -> Option<u64> {
    // (`confined::allowed` covers what `vfork::allowed` asks too.)
    let eligible = !setup.gvisor
        && setup.userns.is_none()
        && build_userns.is_none()
        && (landlock.is_some() || !setup.landlock)
        && confined::allowed(filter, setup.uid, setup.gid);
    if !eligible {
        return None;
    }
    std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
}

/// `forked_into_cgroup`: at the build, how PID 1 entered its cgroup (false after a reset).
pub(crate) fn send_ready(
    ctl: BorrowedFd<'_>,
    landlock_abi: Option<i32>,
    gvisor: bool,
    tasks: u64,
    forked_into_cgroup: bool,
) -> Result<(), SandboxError> {
    let ready = Event::Ready {
        landlock_abi,
        tasks,
        forked_into_cgroup,
    };
    // gVisor cannot send its descriptors out; the supervisor holds the (host) working directory.
    if gvisor {
        return protocol::send(ctl, &ready, &[]);
    }
    let work = nix::fcntl::open(
        crate::spec::WORKDIR,
        nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_DIRECTORY | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .map_err(|e| SandboxError::io("opening the working directory", e.into()))?;
    protocol::send(ctl, &ready, &[work.as_raw_fd()])
}

/// Everything a program could have left behind goes: processes (already dead), files in the
/// scratch mounts (emptied in place, or new mounts), SysV IPC and POSIX queues (a new IPC
/// namespace unless nobody used it), sockets and their lingering state (a new network namespace
/// unless nobody used it), and the PID counter. True when the scratch mounts were replaced.
fn reset(
    setup: &Setup,
    disk_bytes: u64,
    inodes: u64,
    last_pid: Option<&std::fs::File>,
    (net_baseline, reached_network): (&mut Option<netns::Baseline>, bool),
    scratch: &mut Option<Scratch>,
    ipc: &mut Option<ipcns::Usage>,
) -> Result<Renewed, SandboxError> {
    reap_all_nonblocking();
    // Not `kill(-1, 0)`: that walks every process of the host (O(host) per reset on a busy
    // server); a PID 1 with no child left is alone in its namespace (see `no_children`).
    if !no_children() {
        return Err(SandboxError::Init(
            "processes survived the run; refusing to reuse the sandbox".into(),
        ));
    }
    let (owner_uid, owner_gid) = setup.fs_owner();
    let emptied = scratch
        .as_ref()
        .is_some_and(|s| s.empty(disk_bytes, inodes).is_ok());
    if !emptied {
        if setup.gvisor {
            gvisor::reset_scratch(disk_bytes)?;
        } else {
            rootfs::reset_scratch(owner_uid, owner_gid, disk_bytes, inodes)?;
            // What the new mounts look like fresh (none: every later reset remounts too).
            *scratch = Scratch::capture(disk_bytes, inodes).ok();
        }
    }
    let mut flags = CloneFlags::empty();
    let renew_ipc = !ipc.as_mut().is_some_and(ipcns::Usage::unused);
    if renew_ipc {
        flags |= CloneFlags::CLONE_NEWIPC;
    }
    // A network namespace costs ~0.6 ms to replace; one nobody used is as good as new. Without a
    // network socket (the socket watch saw none) nothing in it can have changed.
    let renew_net = net_baseline
        .as_mut()
        .is_some_and(|b| b.must_renew(reached_network));
    if renew_net {
        flags |= CloneFlags::CLONE_NEWNET;
    }
    if !flags.is_empty() {
        unshare(flags).map_err(|e| SandboxError::io("fresh IPC/network namespaces", e.into()))?;
    }
    if renew_ipc && !setup.gvisor {
        *ipc = ipcns::Usage::capture();
    }
    if renew_net {
        netns::loopback_up();
        let watched = matches!(net_baseline, Some(netns::Baseline::Watched));
        *net_baseline = Some(netns::Baseline::new(watched));
    }
    use std::os::unix::fs::FileExt;
    if let Some(last_pid) = last_pid {
        last_pid
            .write_at(b"1", 0)
            .map_err(|e| SandboxError::io("restarting PID numbering", e))?;
    }
    Ok(Renewed {
        mounts: !emptied,
        namespaces: !flags.is_empty(),
    })
}

/// What a reset made anew.
struct Renewed {
    /// The scratch mounts.
    mounts: bool,
    /// The IPC or network namespace (PID 1's main thread's: a thread has its own).
    namespaces: bool,
}

/// A program running in this sandbox.
struct Running {
    pid: Pid,
    started: Instant,
    listener: Option<OwnedFd>,
    /// The listener once it hung up, no longer polled.
    spent_listener: Option<OwnedFd>,
    blocked: Option<String>,
    /// How the main program ended, once it has been reaped: (exit code, signal).
    ended: Option<(Option<i32>, Option<i32>)>,
    wall_ns: u64,
    /// Inside gVisor, where PID 1 traces the run's processes and a blocked call is a ptrace stop
    /// instead of a notification (see [`tracer`]).
    traced: bool,
    /// The wall-clock limit, counted from `started`.
    wall_limit: Option<Duration>,
    /// Killed at that limit.
    wall_killed: bool,
    /// Under gVisor, a terminal run's pty, relayed to the supervisor's pipes.
    relay: Option<Relay>,
    /// The run's program, when it watches sockets ([`corral_seccomp::CompiledFilter::with_socket_watch`]):
    /// a watched call is answered with the program's own verdict.
    watch: Option<corral_seccomp::CompiledFilter>,
    /// A process of the run made a network socket (or the run was not watched): the reset must
    /// look at the network namespace.
    reached_network: bool,
    /// The CPU the program's process started on (from the confined thread).
    cpu: Option<u32>,
    /// PID 1's copies of the program's standard streams. Held until the run ends, so the
    /// program's exit alone does not end the supervisor's output pipes (a wake-up of the
    /// supervisor before `Finished`); closed just before `Finished` or, see below, after it.
    stdio: Vec<OwnedFd>,
    /// The streams are the supervisor's pipes, natively: closed after `Finished`, which the
    /// supervisor drains them at (`Execution::drain_pipes`).
    stdio_after_finished: bool,
}

/// How long the end of a relayed terminal run waits for the supervisor to take its last output.
const RELAY_DRAIN: Duration = Duration::from_secs(2);

impl Running {
    /// When the program reaches its wall limit, while it still runs.
    fn wall_deadline(&self) -> Option<Instant> {
        if self.ended.is_some() || self.wall_killed {
            return None;
        }
        self.wall_limit.map(|l| self.started + l)
    }

    fn on_notification(&mut self, ctl: BorrowedFd<'_>, hung_up: bool) {
        let Some(l) = self.listener.as_ref() else {
            return;
        };
        match corral_seccomp::receive(l.as_fd()) {
            Ok(n) => {
                // A watched socket is answered as the program says, and noted for the reset.
                match self.watched_socket(&n) {
                    Some(Ok(())) => {
                        self.reached_network = true;
                        let _ = corral_seccomp::respond_continue(l.as_fd(), n.id);
                        return;
                    }
                    Some(Err(errno)) => {
                        let _ = corral_seccomp::respond_errno(l.as_fd(), n.id, errno);
                        return;
                    }
                    None => {}
                }
                // Kill first, answer second: the offending thread never returns to user space.
                // SIGKILL is queued for every process; the answer unblocks the thread into its death.
                let _ = kill(Pid::from_raw(-1), Signal::SIGKILL);
                let _ = corral_seccomp::respond_errno(l.as_fd(), n.id, libc::EPERM);
                self.report_blocked(ctl, n.syscall_name());
                self.kill_all();
            }
            // The notification's process died before it was received (ENOENT), or a signal
            // came (EINTR): the listener stays, for the calls of the others.
            Err(e) if !hung_up && matches!(e.raw_os_error(), Some(libc::ENOENT | libc::EINTR)) => {}
            // Every filtered process is gone; the listener has nothing more to say. Closed with
            // the run, after `Finished` (see `serve`).
            Err(_) => self.spent_listener = self.listener.take(),
        }
    }

    /// For a `socket(2)` the run's socket watch raised, what the program underneath says when
    /// it lets the call through (`Ok`) or fails it quietly (the errno); None for anything to
    /// report (including every call the watch did not raise).
    fn watched_socket(&self, n: &corral_seccomp::Notification) -> Option<Result<(), i32>> {
        let watch = self.watch.as_ref()?;
        if n.syscall_nr != libc::SYS_socket as i32 || n.arch != corral_seccomp::AUDIT_ARCH_NATIVE {
            return None;
        }
        match watch.policy_verdict(n.arch, n.syscall_nr, n.args) {
            corral_seccomp::Verdict::Allow => Some(Ok(())),
            corral_seccomp::Verdict::Errno(e) => Some(Err(e)),
            _ => None,
        }
    }

    /// The first blocked call of the run: the supervisor hears of it at once.
    fn report_blocked(&mut self, ctl: BorrowedFd<'_>, name: String) {
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

    /// Reaps what exited without blocking; under gVisor, deals with the traced processes' stops.
    fn reap(&mut self, ctl: BorrowedFd<'_>) -> Result<(), SandboxError> {
        loop {
            match waitpid(
                Pid::from_raw(-1),
                Some(WaitPidFlag::WNOHANG | WaitPidFlag::__WALL),
            ) {
                Ok(WaitStatus::StillAlive) | Err(nix::errno::Errno::ECHILD) => return Ok(()),
                Ok(s) if self.traced => match tracer::on_status(s) {
                    // A blocked call ends the whole run, as a notification does natively; the
                    // stopped call never runs (SIGKILL ends a ptrace stop).
                    Stop::Seccomp { nr, .. } => {
                        self.report_blocked(ctl, native_syscall_name(nr));
                        self.kill_all();
                    }
                    Stop::PassedThrough => {}
                    Stop::Ended => self.record(s),
                },
                Ok(s) => self.record(s),
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(SandboxError::io("waitpid", e.into())),
            }
        }
    }

    /// SIGKILLs every process in this PID namespace except PID 1, and reaps them all. A traced
    /// process in a stop dies there too: nothing is resumed.
    fn kill_all(&mut self) {
        // Nothing to kill, the usual end of a run: `kill(-1)` walks every process of the *host*
        // to find the namespace's, so it is skipped when there is nobody to find.
        if no_children() {
            return;
        }
        // kill(-1) from PID 1 reaches every other process of the namespace, stopped ones included.
        // Repeat while processes remain: a fork racing the first kill can leave a newborn behind.
        for _ in 0..1000 {
            let _ = kill(Pid::from_raw(-1), Signal::SIGKILL);
            loop {
                match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::__WALL)) {
                    // Under gVisor a traced process reports its stops here. One that stops after
                    // the kill was born of a fork the kill raced (gVisor finishes such a fork):
                    // it is killed in its stop, or this wait would never end.
                    Ok(
                        s @ (WaitStatus::Stopped(pid, _)
                        | WaitStatus::PtraceEvent(pid, ..)
                        | WaitStatus::PtraceSyscall(pid)),
                    ) => {
                        let _ = kill(pid, Signal::SIGKILL);
                        self.record(s);
                    }
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
            wall_limit: self.wall_killed,
            cpu: self.cpu,
        })
    }
}

/// Whether PID 1 has no child at all (running, stopped or a zombie). Then no other process is
/// left in the namespace: every process here descends from PID 1 (an orphan is handed to PID 1,
/// or to a subreaper that itself descends from it), so one without a child is alone.
fn no_children() -> bool {
    matches!(
        nix::sys::wait::waitid(
            nix::sys::wait::Id::All,
            WaitPidFlag::WEXITED
                | WaitPidFlag::WSTOPPED
                | WaitPidFlag::WNOHANG
                | WaitPidFlag::WNOWAIT
                | WaitPidFlag::__WALL,
        ),
        Err(nix::errno::Errno::ECHILD)
    )
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

/// The name of a call numbered `nr` in the native ABI (the only one gVisor runs).
fn native_syscall_name(nr: i64) -> String {
    match i32::try_from(nr) {
        Ok(nr) if nr >= 0 => corral_seccomp::syscall_name(nr, corral_seccomp::AUDIT_ARCH_NATIVE),
        _ => format!("syscall {nr}"),
    }
}

/// Forks the program's process and waits until it has exec'd (or failed to set up). Under gVisor
/// the process is traced first (see [`tracer`]); `sigfd` tells of its stops before its exec.
/// With `stack`, the child shares PID 1's memory until its exec (see [`vfork`]).
/// With `confined` (and `stack`), its process starts from PID 1's confined thread instead, on
/// the CPU given with it if it can.
fn start(
    plan: &ChildPlan,
    filter: &corral_seccomp::CompiledFilter,
    landlock: Option<&::landlock::RulesetCreated>,
    fds: Vec<OwnedFd>,
    sigfd: BorrowedFd<'_>,
    stack: Option<&mut vfork::Stack>,
    confined: Option<(&Confined, Option<u32>)>,
) -> Result<Running, SetupError> {
    if fds.len() < 3 {
        return Err(SetupError::MissingStdio(fds.len()));
    }
    let (mine, theirs) = socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .map_err(SetupError::Socketpair)?;
    let started = Instant::now();
    // A call the filter reports before the exec (under the confined thread, which `allowed`
    // rules out) ends the process that made it.
    let mut blocked = None;
    let mut started_on = None;
    let forked = match stack {
        Some(stack) => {
            let report = theirs.as_raw_fd();
            let ours = mine.as_raw_fd();
            let fds = &fds;
            let mut child = || -> isize {
                // As after a fork: PID 1's end of the report socket is not the child's (and its
                // slot counts against the run's RLIMIT_NOFILE in the steps below).
                // SAFETY: closes the child's own copy (no CLONE_FILES); PID 1's stays open.
                unsafe { libc::close(ours) };
                // SAFETY: the child's copy of the report socket's descriptor (its own table: no
                // CLONE_FILES); `child::run` never returns, so this is never dropped here.
                let report = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(report) };
                child::run(plan, filter, landlock, fds, report)
            };
            match confined {
                Some((confined, cpu)) => {
                    let thread = confined.tid().as_raw() as u32;
                    let on_report = |l: BorrowedFd<'_>| {
                        let Ok(n) = corral_seccomp::receive(l) else {
                            return;
                        };
                        // The thread's own call (a bug here, never seen): refused, not fatal.
                        if n.pid != thread {
                            let _ = kill(Pid::from_raw(n.pid as i32), Signal::SIGKILL);
                            blocked.get_or_insert_with(|| n.syscall_name());
                        }
                        let _ = corral_seccomp::respond_errno(l, n.id, libc::EPERM);
                    };
                    // SAFETY: this (main) thread only waits in `spawn` while the child runs, and
                    // `child::run` ends in execve or _exit.
                    match unsafe { confined.spawn(stack, &mut child, on_report, cpu) } {
                        Ok((child, cpu)) => {
                            started_on = cpu;
                            Ok(ForkResult::Parent { child })
                        }
                        Err(e) => return Err(e),
                    }
                }
                // SAFETY: no other thread of PID 1 runs meanwhile (the confined thread, if any,
                // waits for a job), and `child::run` ends in execve or _exit.
                None => unsafe { vfork::spawn(stack, &mut child) }
                    .map(|child| ForkResult::Parent { child }),
            }
        }
        // SAFETY: the child may allocate and run ordinary code: PID 1's only other thread, the
        // confined one if it exists, waits for a job holding no lock (and libc's malloc is
        // fork-safe regardless).
        None => unsafe { fork() },
    };
    match forked {
        Err(e) => Err(SetupError::Fork(e)),
        Ok(ForkResult::Child) => {
            drop(mine);
            child::run(plan, filter, landlock, &fds, theirs)
        }
        Ok(ForkResult::Parent { child }) => {
            drop(theirs);
            if plan.gvisor {
                // The child waits for this byte before its first step.
                let traced = tracer::seize(child)
                    .map_err(SetupError::Trace)
                    .and_then(|()| {
                        nix::unistd::write(&mine, b"t")
                            .map(drop)
                            .map_err(|e| SetupError::ChildReport(e.to_string()))
                    });
                if let Err(e) = traced {
                    let _ = kill(child, Signal::SIGKILL);
                    return Err(e);
                }
            }
            // The child sends its seccomp listener, or an error; end-of-file means it exec'd.
            // In between, an `execve` the filter reports (`no_spawn`) is the child's own exec of
            // the program: the child runs only corral's code until then, single-threaded, so it
            // is let through. Anything else reported is blocked as in a run.
            // The confined thread's listener serves every run; the run polls its own copy.
            let mut listener: Option<OwnedFd> = match confined {
                Some((c, _)) => Some(c.listener().try_clone_to_owned().map_err(SetupError::Dup)?),
                None => None,
            };
            let mut watch = true;
            let mut traced = false;
            // Under gVisor: ends (of the child, before its exec) seen while watching its stops.
            let mut ended = Vec::new();
            loop {
                if let Some(l) = listener.as_ref().filter(|_| watch) {
                    if !readable(mine.as_fd(), PollTimeout::NONE, Some(l.as_fd())) {
                        watch = pre_exec_notification(l.as_fd(), mine.as_fd(), child, &mut blocked);
                        continue;
                    }
                }
                if plan.gvisor && !readable(mine.as_fd(), PollTimeout::NONE, Some(sigfd)) {
                    pre_exec_stops(sigfd, mine.as_fd(), child, &mut blocked, &mut ended);
                    continue;
                }
                match protocol::recv::<ChildReport>(mine.as_fd()) {
                    Ok(None) => break,
                    Ok(Some((ChildReport::Listener, mut got))) => listener = got.pop(),
                    Ok(Some((ChildReport::Traced, _))) => traced = true,
                    Ok(Some((ChildReport::Error(e), _))) => {
                        let _ = kill(child, Signal::SIGKILL);
                        return Err(SetupError::Child(e));
                    }
                    Err(e) => {
                        let _ = kill(child, Signal::SIGKILL);
                        return Err(SetupError::ChildReport(e.to_string()));
                    }
                }
            }
            if listener.is_none() && !(traced && plan.gvisor) {
                // No listener means no seccomp filter; the child must have died before exec.
                let _ = kill(child, Signal::SIGKILL);
                return Err(SetupError::NoListener);
            }
            let mut run = Running {
                pid: child,
                started,
                listener,
                spent_listener: None,
                blocked,
                ended: None,
                wall_ns: 0,
                traced: plan.gvisor,
                wall_limit: None,
                wall_killed: false,
                relay: None,
                watch: filter.has_socket_watch().then(|| filter.clone()),
                reached_network: !filter.has_socket_watch(),
                cpu: started_on,
                stdio: fds,
                stdio_after_finished: false,
            };
            for status in ended {
                run.record(status);
            }
            Ok(run)
        }
    }
}

/// Whether `fd` has something to read (data or end-of-file) within `timeout`; with `other`, waits
/// for either and answers for `fd` only.
fn readable(fd: BorrowedFd<'_>, timeout: PollTimeout, other: Option<BorrowedFd<'_>>) -> bool {
    loop {
        let mut fds = vec![PollFd::new(fd, PollFlags::POLLIN)];
        if let Some(o) = other {
            fds.push(PollFd::new(o, PollFlags::POLLIN));
        }
        match poll(&mut fds, timeout) {
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return true, // let the caller's read find out what is wrong
            Ok(_) => return fds[0].revents().is_some_and(|r| !r.is_empty()),
        }
    }
}

/// Under gVisor, the stops of the program's process before its exec was seen to happen: like
/// [`pre_exec_notification`], its own `execve` goes on and any other reported call is blocked.
/// Ends seen meanwhile are kept in `ended` for the run to record.
fn pre_exec_stops(
    sigfd: BorrowedFd<'_>,
    report: BorrowedFd<'_>,
    child: Pid,
    blocked: &mut Option<String>,
    ended: &mut Vec<WaitStatus>,
) {
    // Drained first: a stop after the waits below signals again.
    let mut buf = [0u8; 128];
    while nix::unistd::read(sigfd, &mut buf).is_ok() {}
    while let Ok(status) = waitpid(
        Pid::from_raw(-1),
        Some(WaitPidFlag::WNOHANG | WaitPidFlag::__WALL),
    ) {
        if status == WaitStatus::StillAlive {
            return;
        }
        match tracer::on_status(status) {
            Stop::Seccomp { pid, nr } => {
                let exec_done = readable(report, PollTimeout::ZERO, None);
                if !exec_done && pid == child && nr == libc::SYS_execve {
                    tracer::resume(pid, None);
                } else {
                    blocked.get_or_insert_with(|| native_syscall_name(nr));
                    let _ = kill(Pid::from_raw(-1), Signal::SIGKILL);
                }
            }
            Stop::PassedThrough => {}
            Stop::Ended => ended.push(status),
        }
    }
}

/// A notification from the program's process before its exec was seen to happen: the process's
/// own `execve` continues; anything else — or an `execve` after the exec happened (the report
/// socket, closed on exec, already shows end-of-file) — is blocked, the process killed. False
/// when the listener has nothing more to say.
fn pre_exec_notification(
    listener: BorrowedFd<'_>,
    report: BorrowedFd<'_>,
    child: Pid,
    blocked: &mut Option<String>,
) -> bool {
    let n = match corral_seccomp::receive(listener) {
        Ok(n) => n,
        Err(e) => return matches!(e.raw_os_error(), Some(libc::EINTR) | Some(libc::ENOENT)),
    };
    // Checked after receiving: a program's call is made after its exec closed the socket.
    let exec_done = readable(report, PollTimeout::ZERO, None);
    let own_exec = !exec_done
        && n.pid == child.as_raw() as u32
        && n.arch == corral_seccomp::AUDIT_ARCH_NATIVE
        && i64::from(n.syscall_nr) == libc::SYS_execve;
    if own_exec {
        let _ = corral_seccomp::respond_continue(listener, n.id);
        return true;
    }
    blocked.get_or_insert_with(|| n.syscall_name());
    let _ = kill(Pid::from_raw(-1), Signal::SIGKILL);
    let _ = corral_seccomp::respond_errno(listener, n.id, libc::EPERM);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn running(wall_limit: Option<Duration>) -> Running {
        Running {
            pid: Pid::from_raw(2),
            started: Instant::now(),
            listener: None,
            spent_listener: None,
            blocked: None,
            ended: None,
            wall_ns: 0,
            traced: false,
            wall_limit,
            wall_killed: false,
            relay: None,
            watch: None,
            reached_network: true,
            cpu: None,
            stdio: Vec::new(),
            stdio_after_finished: false,
        }
    }

    /// PID 1 waits for a running program's wall deadline, counted from its own start, and only
    /// while the program runs and has not been killed for it yet.
    #[test]
    fn the_wall_deadline_is_the_start_plus_the_limit_while_the_program_runs() {
        let mut r = running(Some(Duration::from_millis(100)));
        assert_eq!(
            r.wall_deadline(),
            Some(r.started + Duration::from_millis(100))
        );
        r.wall_killed = true;
        assert_eq!(r.wall_deadline(), None);
        let mut r = running(Some(Duration::from_millis(100)));
        r.record(WaitStatus::Exited(Pid::from_raw(2), 0));
        assert_eq!(r.wall_deadline(), None);
        assert_eq!(running(None).wall_deadline(), None);
    }
}
