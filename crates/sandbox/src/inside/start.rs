//! Starting a run's program: its process forked (or started sharing PID 1's memory, from the
//! confined thread where it can) and watched until its exec — the report socket, the listener,
//! under gVisor its stops.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::time::Instant;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{kill, Signal};
use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{fork, ForkResult, Pid};

use crate::inside::child::{self, ChildPlan};
use crate::inside::confined::Confined;
use crate::inside::error::SetupError;
use crate::inside::running::{self, native_syscall_name, Running};
use crate::inside::tracer::{self, Stop};
use crate::inside::vfork;
use crate::protocol::{self, ChildReport};

/// Forks the program's process and waits until it has exec'd (or failed to set up). Under gVisor
/// the process is traced first (see [`tracer`]); `sigfd` tells of its stops before its exec.
/// With `stack`, the child shares PID 1's memory until its exec (see [`vfork`]).
/// With `confined` (and `stack`), its process starts from PID 1's confined thread instead, on
/// the CPU given with it if it can.
pub(super) fn start(
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
    // The program made a network socket before PID 1 heard of its exec (see `on_report`).
    let mut reached_network = false;
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
                        // The process may have exec'd, and the program made its first calls,
                        // before the confined thread said so. The steps before the exec make no
                        // socket(2): one the watch raised is the program's, answered as in the
                        // run (`Running::on_notification`) — before, it was killed and reported.
                        if let Some(answer) = running::watched_socket(filter, &n) {
                            let _ = match answer {
                                Ok(()) => {
                                    reached_network = true;
                                    corral_seccomp::respond_continue(l, n.id)
                                }
                                Err(errno) => corral_seccomp::respond_errno(l, n.id, errno),
                            };
                            return;
                        }
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
                reached_network: reached_network || !filter.has_socket_watch(),
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
