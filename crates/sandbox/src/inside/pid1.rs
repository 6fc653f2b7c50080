//! PID 1 of a built sandbox: serves the supervisor's requests — start a program
//! ([`crate::inside::start`]), follow it while it runs ([`crate::inside::running`]: what its
//! seccomp listener reports, its end, everything it left behind killed), reset the sandbox
//! between users.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};

use nix::poll::{ppoll, PollFd, PollFlags};
use nix::sched::{unshare, CloneFlags};
use nix::sys::signal::{kill, SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::time::TimeSpec;
use nix::unistd::Pid;

use crate::error::SandboxError;
use crate::inside::child::ChildPlan;
use crate::inside::confined::{self, Confined};
use crate::inside::running::{no_children, reap_all_nonblocking, Running, RELAY_DRAIN};
use crate::inside::scratch::Scratch;
use crate::inside::start::start;
use crate::inside::tty_relay::Relay;
use crate::inside::vfork;
use crate::inside::wake_policy::WakePolicy;
use crate::inside::{gvisor, ipcns, landlock, netns, pty, rootfs, stdin_probe};
use crate::protocol::{self, Event, Request, Setup};

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
                    let tasks = tasks(&confined);
                    send_ready(ctl, landlock_abi, setup.gvisor, tasks, HowBuilt::default())?;
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

/// How the sandbox was built, told to the supervisor with its first `Ready` (for its log; a
/// reset's `Ready` says nothing of it).
#[derive(Default, Clone, Copy)]
pub(crate) struct HowBuilt {
    /// PID 1 was forked into its cgroup (`inside::fork_into`) rather than joining it by a write.
    pub(crate) forked_into_cgroup: bool,
    /// The root was prepared ahead by the spawner (`inside::spares`) and finished by PID 1.
    pub(crate) root_prepared: bool,
}

/// Tells the supervisor the sandbox is ready, with the working directory (`O_PATH`).
pub(crate) fn send_ready(
    ctl: BorrowedFd<'_>,
    landlock_abi: Option<i32>,
    gvisor: bool,
    tasks: u64,
    build: HowBuilt,
) -> Result<(), SandboxError> {
    let ready = Event::Ready {
        landlock_abi,
        tasks,
        forked_into_cgroup: build.forked_into_cgroup,
        root_prepared: build.root_prepared,
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
    // What a run left in flight outlives it until the kernel's unix garbage collector runs, and
    // may hold any file the next run can reach by name (see `netns::UnixSockets`).
    if net_baseline
        .as_ref()
        .is_some_and(netns::Baseline::sockets_left)
    {
        return Err(SandboxError::Init(
            "a unix socket outlived the run (left in flight); refusing to reuse the sandbox".into(),
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
        let watched = net_baseline.as_ref().is_some_and(netns::Baseline::watched);
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
