//! Starting the program's process without copying PID 1: `clone(CLONE_VM | CLONE_VFORK)`, the
//! way `posix_spawn` does. The child borrows PID 1's memory on a stack of its own, takes its
//! confinement steps ([`crate::inside::child`]) and execs; PID 1 sleeps until then.
//!
//! Why: a `fork` copies PID 1's page tables and marks its memory copy-on-write, the child's
//! writes then fault page by page, and the exec throws the copy away — on a warm run of
//! `/bin/true` that was ~25 % of the latency (`corral-bench`, same binary taking turns with
//! `fork`: warm p50 1.46 / 1.72 / 1.42 → 1.01 / 1.16 / 1.26 ms on a 2-core host).
//!
//! When it is not used (PID 1 forks as before): inside gVisor (PID 1 must trace the child
//! before its first step), and when the run's seccomp filter would report one of the calls the
//! child makes after installing it — PID 1 answers those notifications, and it sleeps until the
//! exec, so the child would wait forever (`no_spawn` reports the child's own `execve`).

use std::num::NonZeroUsize;
use std::ptr::NonNull;

use nix::sched::CloneFlags;
use nix::sys::mman::{mmap_anonymous, mprotect, MapFlags, ProtFlags};
use nix::unistd::Pid;

use corral_seccomp::{CompiledFilter, Verdict, AUDIT_ARCH_NATIVE};

/// The child's stack. It needs far less (the steps are short, no recursion); the pages it does
/// not touch cost nothing.
const STACK: usize = 1 << 20;
const GUARD: usize = 64 << 10;

/// A stack for the child, below it a guard region that faults (an overflow kills the child, it
/// never reaches PID 1's memory). Made once per sandbox and reused: the child is done with it
/// when PID 1 wakes up.
pub(crate) struct Stack {
    base: NonNull<libc::c_void>,
}

impl Stack {
    pub(crate) fn new() -> nix::Result<Stack> {
        let len = NonZeroUsize::new(STACK + GUARD).expect("non-zero");
        // SAFETY: a new private anonymous mapping; nothing else refers to it.
        let base = unsafe {
            mmap_anonymous(
                None,
                len,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_PRIVATE | MapFlags::MAP_STACK | MapFlags::MAP_NORESERVE,
            )?
        };
        // SAFETY: the lowest GUARD bytes of the mapping just made; stacks grow down into them.
        unsafe { mprotect(base, GUARD, ProtFlags::PROT_NONE)? };
        Ok(Stack { base })
    }

    fn usable(&mut self) -> &mut [u8] {
        // SAFETY: the mapping is STACK + GUARD bytes long and lives as long as `self`; the part
        // above the guard is readable and writable, and only the child (while PID 1 sleeps)
        // uses it.
        unsafe { std::slice::from_raw_parts_mut(self.base.as_ptr().cast::<u8>().add(GUARD), STACK) }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, no longer used by anyone.
        let _ = unsafe { nix::sys::mman::munmap(self.base, STACK + GUARD) };
    }
}

/// Whether the child may share PID 1's memory under `filter`: every call it makes after the
/// filter is installed — reporting the listener (`sendmsg`), `close_range`, the `execve`s of
/// the candidate paths, and on failure a `write` to stderr and `exit_group` — must be allowed
/// outright, never reported to PID 1 (which sleeps until the exec).
pub(crate) fn allowed(filter: &CompiledFilter) -> bool {
    let calls: [(libc::c_long, [u64; 6]); 8] = [
        (libc::SYS_sendmsg, [3, 1, 0x4000, 0, 0, 0]),
        (libc::SYS_sendmsg, [0; 6]),
        (libc::SYS_close_range, [3, u32::MAX as u64, 0, 0, 0, 0]),
        (libc::SYS_execve, [1, 1, 1, 0, 0, 0]),
        (libc::SYS_execve, [0; 6]),
        (libc::SYS_write, [2, 1, 64, 0, 0, 0]),
        (libc::SYS_exit_group, [126, 0, 0, 0, 0, 0]),
        (libc::SYS_exit, [126, 0, 0, 0, 0, 0]),
    ];
    calls
        .iter()
        .all(|&(nr, args)| filter.evaluate(AUDIT_ARCH_NATIVE, nr as i32, args) == Verdict::Allow)
}

/// Starts `child` sharing this process's memory; returns once it has exec'd or exited.
///
/// # Safety
/// The caller must be single-threaded (no other thread may run while the child uses the shared
/// memory), and `child` must never return: it ends in `execve` or `_exit`, never unwinding.
pub(crate) unsafe fn spawn(
    stack: &mut Stack,
    child: &mut dyn FnMut() -> isize,
) -> nix::Result<Pid> {
    let cb: nix::sched::CloneCb = Box::new(|| {
        // A panic must not unwind out of the clone's first frame (there is nothing above it).
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(&mut *child)) {
            // SAFETY: _exit never returns and is always safe.
            Ok(_) | Err(_) => unsafe { libc::_exit(126) },
        }
    });
    // SAFETY: CLONE_VM | CLONE_VFORK: this (single-threaded, per the caller) process sleeps until
    // the child execs or exits, so the two never run at once; the child runs on a stack of its
    // own and never returns into ours. Without CLONE_FILES or CLONE_SIGHAND its descriptors and
    // signal dispositions are its own.
    unsafe {
        nix::sched::clone(
            cb,
            stack.usable(),
            CloneFlags::CLONE_VM | CloneFlags::CLONE_VFORK,
            Some(libc::SIGCHLD),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_seccomp::{Profile, Restrictions};
    use std::str::FromStr;

    /// The default profile lets the child's last calls through; `no_spawn` reports `execve`, so
    /// such runs fork.
    #[test]
    fn the_default_profile_shares_memory_and_no_spawn_does_not() {
        let profile = |name: &str| {
            let r = Restrictions::from_str(name).expect("a profile name");
            CompiledFilter::compile(&Profile::default_profile().with_restrictions(r))
                .expect("compile")
        };
        assert!(allowed(&profile("default")));
        assert!(allowed(&profile("no_sockets")));
        assert!(!allowed(&profile("no_spawn")));
        assert!(!allowed(&profile("no_spawn+no_sockets")));
    }

    /// A child that sets an exit code and exits: PID 1 wakes after it, and reaps it.
    #[test]
    fn a_spawned_child_runs_and_exits_before_the_parent_wakes() {
        let mut stack = Stack::new().expect("stack");
        // The child writes into shared memory; the parent sees it (the memory is shared, and
        // the parent slept until the child exited).
        let mut seen = Box::new(0u32);
        let p: *mut u32 = &mut *seen;
        let mut child = || -> isize {
            // SAFETY: the parent sleeps while this runs; `p` points into a live Box.
            unsafe {
                *p = 7;
                libc::_exit(3)
            }
        };
        // SAFETY: the child touches only `seen` (no allocation) and ends in _exit; the other test
        // threads that run meanwhile share nothing with it.
        let pid = unsafe { spawn(&mut stack, &mut child) }.expect("clone");
        assert_eq!(*seen, 7, "the parent woke before the child was done");
        let status = nix::sys::wait::waitpid(pid, None).expect("waitpid");
        assert_eq!(status, nix::sys::wait::WaitStatus::Exited(pid, 3));
    }
}
