//! Under gVisor, PID 1 is the ptrace tracer of every process of a run. gVisor's kernel (2022) has
//! no seccomp user notification, so the filter's "kill and report" calls return
//! `SECCOMP_RET_TRACE` instead (see `gvisor::traced_filter`): the calling thread stops before the
//! call runs, and PID 1 reads the call's number from its registers — the same name a notification
//! gives natively — and kills the run. A process cannot leave the trace (`ptrace` is one of the
//! blocked calls), and its children are traced from their first instruction (the fork, vfork and
//! clone options). Every other stop is passed through unchanged: a signal is delivered, a stop by
//! SIGSTOP stays a stop that SIGCONT ends (`PTRACE_LISTEN`).
//!
//! One stop is a repair, not a report ([`STATX_NO_AUTOMOUNT`]): gVisor (2022) fails `statx` with
//! `AT_NO_AUTOMOUNT` (EINVAL), which coreutils always passes — `ls DIR` and `stat` fail. PID 1
//! clears the flag (it means nothing where nothing automounts) and lets the call run.

use nix::errno::Errno;
use nix::sys::ptrace::{self, Options};
use nix::sys::signal::Signal;
use nix::sys::wait::WaitStatus;
use nix::unistd::Pid;

/// The `SECCOMP_RET_DATA` of a traced stop that is a `statx` with `AT_NO_AUTOMOUNT` to repair
/// (0 is a blocked call).
pub(crate) const STATX_NO_AUTOMOUNT: u16 = 1;

/// Traces `child` (a fresh fork of PID 1 that waits for this before it does anything).
pub(crate) fn seize(child: Pid) -> Result<(), Errno> {
    ptrace::seize(
        child,
        Options::PTRACE_O_TRACESECCOMP
            | Options::PTRACE_O_TRACEFORK
            | Options::PTRACE_O_TRACEVFORK
            | Options::PTRACE_O_TRACECLONE
            | Options::PTRACE_O_EXITKILL,
    )
}

/// What a wait status of a traced process was.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// Not a stop but an end (an exit, a death): the caller records it as without tracing.
    Ended,
    /// `pid` stopped before a call the filter reports: the call's number. It stays stopped: the
    /// caller kills it or, for the program's own exec, resumes it ([`resume`]).
    Seccomp { pid: Pid, nr: i64 },
    /// Any other stop, already dealt with (the process resumed, or left in its group stop).
    PassedThrough,
}

/// Deals with one wait status of a traced process.
pub(crate) fn on_status(status: WaitStatus) -> Stop {
    match status {
        WaitStatus::PtraceEvent(pid, _, libc::PTRACE_EVENT_SECCOMP)
            if ptrace::getevent(pid) == Ok(STATX_NO_AUTOMOUNT.into()) =>
        {
            // A process killed meanwhile has no registers: it dies in its stop, as it should.
            if clear_no_automount(pid).is_ok() {
                resume(pid, None);
            }
            Stop::PassedThrough
        }
        WaitStatus::PtraceEvent(pid, _, libc::PTRACE_EVENT_SECCOMP) => Stop::Seccomp {
            pid,
            // A process killed meanwhile has no registers to read: -1 names no call.
            nr: syscall_nr(pid).unwrap_or(-1),
        },
        // A group stop (SIGSTOP and the terminal stops) stays a stop that SIGCONT can end.
        WaitStatus::PtraceEvent(
            pid,
            Signal::SIGSTOP | Signal::SIGTSTP | Signal::SIGTTIN | Signal::SIGTTOU,
            libc::PTRACE_EVENT_STOP,
        ) => {
            listen(pid);
            Stop::PassedThrough
        }
        // Fork, vfork and clone events, and a new child's first stop: go on.
        WaitStatus::PtraceEvent(pid, _, _) | WaitStatus::PtraceSyscall(pid) => {
            resume(pid, None);
            Stop::PassedThrough
        }
        // A signal about to be delivered: deliver it.
        WaitStatus::Stopped(pid, sig) => {
            resume(pid, Some(sig));
            Stop::PassedThrough
        }
        _ => Stop::Ended,
    }
}

/// Lets a stopped process go on (with `sig` delivered). A process killed meanwhile is gone: fine.
pub(crate) fn resume(pid: Pid, sig: Option<Signal>) {
    let _ = ptrace::cont(pid, sig);
}

fn listen(pid: Pid) {
    // nix has no PTRACE_LISTEN.
    // SAFETY: ptrace(PTRACE_LISTEN, pid, 0, 0) takes no pointers; a pid that is gone fails ESRCH.
    unsafe {
        libc::ptrace(
            libc::PTRACE_LISTEN,
            pid.as_raw(),
            std::ptr::null_mut::<libc::c_void>(),
            std::ptr::null_mut::<libc::c_void>(),
        )
    };
}

/// Clears `AT_NO_AUTOMOUNT` from the flags (third argument) of the `statx` `pid` is stopped in.
fn clear_no_automount(pid: Pid) -> Result<(), Errno> {
    let mut regs = ptrace::getregs(pid)?;
    #[cfg(target_arch = "x86_64")]
    {
        regs.rdx &= !(libc::AT_NO_AUTOMOUNT as u64);
    }
    #[cfg(target_arch = "aarch64")]
    {
        regs.regs[2] &= !(libc::AT_NO_AUTOMOUNT as u64);
    }
    ptrace::setregs(pid, regs)
}

/// The number of the call `pid` is stopped in.
fn syscall_nr(pid: Pid) -> Result<i64, Errno> {
    let regs = ptrace::getregs(pid)?;
    #[cfg(target_arch = "x86_64")]
    let nr = regs.orig_rax as i64;
    #[cfg(target_arch = "aarch64")]
    let nr = regs.regs[8] as i64;
    Ok(nr)
}
