//! A program running in a sandbox, as PID 1 keeps it: its seccomp notifications, its end
//! (reaped, or killed at its wall limit), everything it left behind killed, and `Finished`.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use crate::error::SandboxError;
use crate::inside::tracer::{self, Stop};
use crate::inside::tty_relay::Relay;
use crate::protocol::{self, Event};

/// A program running in this sandbox.
pub(super) struct Running {
    pub(super) pid: Pid,
    pub(super) started: Instant,
    pub(super) listener: Option<OwnedFd>,
    /// The listener once it hung up, no longer polled.
    pub(super) spent_listener: Option<OwnedFd>,
    pub(super) blocked: Option<String>,
    /// How the main program ended, once it has been reaped: (exit code, signal).
    pub(super) ended: Option<(Option<i32>, Option<i32>)>,
    pub(super) wall_ns: u64,
    /// Inside gVisor, where PID 1 traces the run's processes and a blocked call is a ptrace stop
    /// instead of a notification (see [`tracer`]).
    pub(super) traced: bool,
    /// The wall-clock limit, counted from `started`.
    pub(super) wall_limit: Option<Duration>,
    /// Killed at that limit.
    pub(super) wall_killed: bool,
    /// Under gVisor, a terminal run's pty, relayed to the supervisor's pipes.
    pub(super) relay: Option<Relay>,
    /// The run's program, when it watches sockets ([`corral_seccomp::CompiledFilter::with_socket_watch`]):
    /// a watched call is answered with the program's own verdict.
    pub(super) watch: Option<corral_seccomp::CompiledFilter>,
    /// A process of the run made a network socket (or the run was not watched): the reset must
    /// look at the network namespace.
    pub(super) reached_network: bool,
    /// The CPU the program's process started on (from the confined thread).
    pub(super) cpu: Option<u32>,
    /// PID 1's copies of the program's standard streams. Held until the run ends, so the
    /// program's exit alone does not end the supervisor's output pipes (a wake-up of the
    /// supervisor before `Finished`); closed just before `Finished` or, see below, after it.
    pub(super) stdio: Vec<OwnedFd>,
    /// The streams are the supervisor's pipes, natively: closed after `Finished`, which the
    /// supervisor drains them at (`Execution::drain_pipes`).
    pub(super) stdio_after_finished: bool,
}

/// How long the end of a relayed terminal run waits for the supervisor to take its last output.
pub(super) const RELAY_DRAIN: Duration = Duration::from_secs(2);

impl Running {
    /// When the program reaches its wall limit, while it still runs.
    pub(super) fn wall_deadline(&self) -> Option<Instant> {
        if self.ended.is_some() || self.wall_killed {
            return None;
        }
        self.wall_limit.map(|l| self.started + l)
    }

    pub(super) fn on_notification(&mut self, ctl: BorrowedFd<'_>, hung_up: bool) {
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

    fn watched_socket(&self, n: &corral_seccomp::Notification) -> Option<Result<(), i32>> {
        watched_socket(self.watch.as_ref()?, n)
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

    pub(super) fn record(&mut self, status: WaitStatus) {
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
    pub(super) fn reap(&mut self, ctl: BorrowedFd<'_>) -> Result<(), SandboxError> {
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
    pub(super) fn kill_all(&mut self) {
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
    pub(super) fn finished(&mut self) -> Option<Event> {
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

/// For a `socket(2)` the socket watch of `watch` raised, what the program underneath says when
/// it lets the call through (`Ok`) or fails it quietly (the errno); None for anything to report
/// (including every call the watch did not raise, and any call when `watch` has no watch).
pub(super) fn watched_socket(
    watch: &corral_seccomp::CompiledFilter,
    n: &corral_seccomp::Notification,
) -> Option<Result<(), i32>> {
    if !watch.has_socket_watch()
        || n.syscall_nr != libc::SYS_socket as i32
        || n.arch != corral_seccomp::AUDIT_ARCH_NATIVE
    {
        return None;
    }
    match watch.policy_verdict(n.arch, n.syscall_nr, n.args) {
        corral_seccomp::Verdict::Allow => Some(Ok(())),
        corral_seccomp::Verdict::Errno(e) => Some(Err(e)),
        _ => None,
    }
}

/// Whether PID 1 has no child at all (running, stopped or a zombie). Then no other process is
/// left in the namespace: every process here descends from PID 1 (an orphan is handed to PID 1,
/// or to a subreaper that itself descends from it), so one without a child is alone.
pub(super) fn no_children() -> bool {
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

pub(super) fn reap_all_nonblocking() {
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
pub(super) fn native_syscall_name(nr: i64) -> String {
    match i32::try_from(nr) {
        Ok(nr) if nr >= 0 => corral_seccomp::syscall_name(nr, corral_seccomp::AUDIT_ARCH_NATIVE),
        _ => format!("syscall {nr}"),
    }
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
