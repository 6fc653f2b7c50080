//! The keeper's fork of PID 1, straight into the sandbox's cgroup where the kernel can:
//! `clone3(CLONE_INTO_CGROUP)` (Linux 5.7+, cgroup v2).
//!
//! Why: a process joins a v2 cgroup by writing `cgroup.procs`, which takes the kernel's global
//! threadgroup lock for writing; its writer side waits for an RCU grace period whenever the lock
//! has been idle a moment, as it is between sandboxes built milliseconds apart. v2 has no
//! `tasks` file to go around it (v1 does, see `corral_cgroups::Cgroup::procs_files`). A child
//! forked into the cgroup only takes that lock's reader side. Fork and join on Debian's 6.1
//! kernel (cgroup v2, a QEMU guest), a fresh cgroup each time, 10 ms apart: join by write p50
//! 18–21 ms, `CLONE_INTO_CGROUP` 3.4–3.6 ms.
//!
//! Where the kernel refuses (no `clone3`, a kernel before 5.7, a cgroup the keeper may not write
//! to), the keeper forks as before and PID 1 joins by writing.
//!
//! `clone3` has no libc wrapper (glibc keeps its own internal), hence the raw call. Without
//! `CLONE_VM` and with no stack given, the child runs on a copy of the parent's stack, as after
//! `fork`; glibc's fork handlers do not run — the keeper is single-threaded and has none.

use std::os::fd::{AsRawFd, BorrowedFd};

use nix::errno::Errno;
use nix::unistd::{fork, ForkResult, Pid};

/// `CLONE_INTO_CGROUP` (include/uapi/linux/sched.h). The libc crate declares it as a 32-bit
/// `c_int`, which cannot hold it.
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// Which side of the fork this is; the child knows whether it already is in the cgroup.
pub(crate) enum Forked {
    Parent(Pid),
    Child { in_cgroup: bool },
}

/// Forks, into the cgroup whose directory `target` is when given and the kernel allows it.
///
/// # Safety
/// As [`nix::unistd::fork`]: the calling process must be single-threaded (the child may then run
/// any code).
pub(crate) unsafe fn fork_into(target: Option<BorrowedFd<'_>>) -> nix::Result<Forked> {
    if let Some(dir) = target {
        match clone_into_cgroup(dir) {
            Ok(0) => return Ok(Forked::Child { in_cgroup: true }),
            Ok(pid) => return Ok(Forked::Parent(Pid::from_raw(pid))),
            // Refused or unknown: fork and join by writing instead.
            Err(_) => {}
        }
    }
    // SAFETY: the caller guarantees a single-threaded process.
    match unsafe { fork() }? {
        ForkResult::Parent { child } => Ok(Forked::Parent(child)),
        ForkResult::Child => Ok(Forked::Child { in_cgroup: false }),
    }
}

/// `clone3` with `CLONE_INTO_CGROUP` and `SIGCHLD` on exit: a fork whose child starts in the
/// cgroup `dir`. Returns 0 in the child, the child's PID in the parent.
fn clone_into_cgroup(dir: BorrowedFd<'_>) -> nix::Result<libc::pid_t> {
    let args = libc::clone_args {
        flags: CLONE_INTO_CGROUP,
        pidfd: 0,
        child_tid: 0,
        parent_tid: 0,
        exit_signal: libc::SIGCHLD as u64,
        stack: 0,
        stack_size: 0,
        tls: 0,
        set_tid: 0,
        set_tid_size: 0,
        cgroup: dir.as_raw_fd() as u64,
    };
    // SAFETY: `args` is a valid, fully initialised `clone_args` of the size passed, read by the
    // kernel during the call only. Without CLONE_VM the child gets its own copy of this
    // process's memory (as after fork); the caller of `fork_into` vouches that the process is
    // single-threaded, so no lock is held by a thread the child lacks.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &args as *const libc::clone_args,
            std::mem::size_of::<libc::clone_args>(),
        )
    };
    Errno::result(rc).map(|pid| pid as libc::pid_t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    /// Forks with `target`; the child exits 3 when it started in a cgroup, 7 when it must join.
    fn child_status(target: Option<BorrowedFd<'_>>) -> i32 {
        // SAFETY: the child only calls `_exit`, safe after a fork even of a threaded process.
        match unsafe { fork_into(target) }.unwrap() {
            Forked::Child { in_cgroup } => {
                // SAFETY: `_exit` in the forked child, no destructors run.
                unsafe { libc::_exit(if in_cgroup { 3 } else { 7 }) }
            }
            Forked::Parent(pid) => match nix::sys::wait::waitpid(pid, None).unwrap() {
                nix::sys::wait::WaitStatus::Exited(_, code) => code,
                other => panic!("child ended as {other:?}"),
            },
        }
    }

    /// Without a target it is a plain fork: the child runs, exits, and is reaped as usual.
    #[test]
    fn without_a_target_it_forks() {
        assert_eq!(child_status(None), 7);
    }

    /// A target that is no cgroup (a plain folder) is refused by the kernel: the fork still
    /// happens, and the child knows it must join by writing.
    #[test]
    fn a_refused_target_falls_back_to_fork() {
        let dir = std::fs::File::open(std::env::temp_dir()).unwrap();
        assert_eq!(child_status(Some(dir.as_fd())), 7);
    }
}
