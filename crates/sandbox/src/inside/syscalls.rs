//! The system calls that confine a process, behind a trait (like youki's `syscall` module): the
//! real [`Kernel`] makes them; tests put a recording fake in its place and check, without root,
//! that the steps in [`crate::inside::privileges`] and [`crate::inside::child`] happen in exactly
//! the order the isolation depends on.
//!
//! Each method is one step of that order and does nothing else; none calls back into the steps.

use std::ffi::{CStr, CString};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::path::Path;

use nix::errno::Errno;
use nix::mount::MsFlags;
use nix::sched::CloneFlags;
use nix::sys::resource::Resource;
use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, SigmaskHow, Signal};

use crate::inside::error::SetupError;
use crate::protocol;

/// One step each; `Err` is the kernel's answer.
pub(crate) trait Syscalls {
    /// A prepared Landlock ruleset.
    type Ruleset;
    /// A compiled seccomp program.
    type Filter;

    /// SIGPIPE back to its default (PID 1 ignores it) and every signal unblocked.
    fn default_sigpipe_and_unblock(&mut self) -> Result<(), Errno>;
    fn write_proc_self(&mut self, file: &'static str, contents: &str) -> std::io::Result<()>;
    fn setsid(&mut self) -> Result<(), Errno>;
    fn unshare(&mut self, flags: CloneFlags) -> Result<(), Errno>;
    fn setrlimit(&mut self, resource: Resource, soft: u64, hard: u64) -> Result<(), Errno>;
    /// Leaves a real-time policy and a negative nice inherited from the supervisor
    /// ([`crate::placement::leave_raised_priority`]).
    fn leave_raised_priority(&mut self) -> Result<(), Errno>;
    /// Makes `from` the descriptor `to`, kept open across exec.
    fn dup_to(&mut self, from: RawFd, to: RawFd) -> Result<(), Errno>;
    /// Makes the terminal on fd 0 the controlling terminal.
    fn set_controlling_tty(&mut self) -> Result<(), Errno>;
    fn chdir(&mut self, dir: &str) -> Result<(), Errno>;
    /// The highest capability number this kernel knows.
    fn last_cap(&mut self) -> u64;
    fn drop_bounding_cap(&mut self, cap: u64) -> Result<(), Errno>;
    fn clear_ambient_caps(&mut self);
    fn setgroups_empty(&mut self) -> Result<(), Errno>;
    fn setresgid(&mut self, gid: u32) -> Result<(), Errno>;
    fn setresuid(&mut self, uid: u32) -> Result<(), Errno>;
    /// `setuid(0)`: true if it succeeded (which must never happen after a drop).
    fn setuid_root(&mut self) -> bool;
    /// Joins the user namespace `ns` refers to (build mode).
    fn setns_user(&mut self, ns: RawFd) -> Result<(), Errno>;
    /// Whether this process is still in the host's user namespace (its uid map is the identity).
    fn in_host_user_namespace(&mut self) -> bool;
    fn no_new_privs(&mut self) -> Result<(), Errno>;
    /// The kernel's Landlock ABI (0 = none).
    fn landlock_abi(&mut self) -> i32;
    fn landlock_restrict(&mut self, ruleset: &Self::Ruleset) -> Result<(), SetupError>;
    /// Installs the filter; returns its user-notification listener.
    fn install_seccomp(&mut self, filter: &Self::Filter) -> Result<RawFd, Errno>;
    /// Hands the listener to PID 1 (over the child's report socket).
    fn report_listener(&mut self, listener: RawFd) -> Result<(), String>;
    /// Under gVisor: waits until PID 1 traces this process (it says so on the report socket).
    fn await_tracer(&mut self) -> Result<(), String>;
    /// Installs a filter that needs no listener (gVisor's: PID 1 traces what it reports).
    fn install_seccomp_traced(&mut self, filter: &Self::Filter) -> Result<(), Errno>;
    /// Tells PID 1 the traced filter is installed.
    fn report_traced(&mut self) -> Result<(), String>;
    /// Closes every descriptor from `first` up.
    fn close_from(&mut self, first: u32);
    /// Returns only on failure, with the reason.
    fn execve(&mut self, path: &CStr, args: &ExecArgs) -> Errno;

    // PID 1 mounting an image root.
    /// `PR_SET_SECUREBITS`.
    fn set_securebits(&mut self, bits: u32) -> Result<(), Errno>;
    /// `setfsgid` then `setfsuid`: the ids new files get and permission checks use.
    fn set_fs_ids(&mut self, id: u32);
    /// Mounts overlayfs at `target`.
    fn mount_overlay(&mut self, target: &Path, flags: MsFlags, options: &str) -> Result<(), Errno>;
}

/// A program's argv and environment as the NUL-terminated pointer arrays `execve` reads; the
/// strings they point to live as long as this value.
pub(crate) struct ExecArgs {
    _strings: (Vec<CString>, Vec<CString>),
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
}

impl ExecArgs {
    pub(crate) fn new(argv: Vec<CString>, envp: Vec<CString>) -> Self {
        let ptrs = |v: &[CString]| {
            let mut p: Vec<*const libc::c_char> = v.iter().map(|a| a.as_ptr()).collect();
            p.push(std::ptr::null());
            p
        };
        ExecArgs {
            argv: ptrs(&argv),
            envp: ptrs(&envp),
            // Moving the vectors keeps their heap buffers, so the pointers stay valid.
            _strings: (argv, envp),
        }
    }
}

/// The real system calls. `report` is the program's process's socket to PID 1 (none in PID 1).
pub(crate) struct Kernel<'a> {
    report: Option<BorrowedFd<'a>>,
}

impl<'a> Kernel<'a> {
    pub(crate) fn for_init() -> Self {
        Kernel { report: None }
    }

    pub(crate) fn for_child(report: BorrowedFd<'a>) -> Self {
        Kernel {
            report: Some(report),
        }
    }
}

fn check(rc: libc::c_long) -> Result<(), Errno> {
    if rc < 0 {
        Err(Errno::last())
    } else {
        Ok(())
    }
}

impl Syscalls for Kernel<'_> {
    type Ruleset = landlock::RulesetCreated;
    type Filter = corral_seccomp::CompiledFilter;

    fn default_sigpipe_and_unblock(&mut self) -> Result<(), Errno> {
        // SAFETY: installing SIG_DFL has no handler code that could run.
        let _ = unsafe {
            sigaction(
                Signal::SIGPIPE,
                &SigAction::new(SigHandler::SigDfl, SaFlags::empty(), SigSet::empty()),
            )
        };
        nix::sys::signal::sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None)
    }

    fn write_proc_self(&mut self, file: &'static str, contents: &str) -> std::io::Result<()> {
        use std::io::Write;
        // Opened for writing only: `std::fs::write` adds O_CREAT | O_TRUNC, and under the
        // Landlock domain a warm run's process inherits from PID 1's confined thread the
        // truncation is a right of its own that `/proc` is not given (EACCES, seen on 6.18).
        std::fs::OpenOptions::new()
            .write(true)
            .open(format!("/proc/self/{file}"))?
            .write_all(contents.as_bytes())
    }

    fn setsid(&mut self) -> Result<(), Errno> {
        nix::unistd::setsid().map(drop)
    }

    fn unshare(&mut self, flags: CloneFlags) -> Result<(), Errno> {
        nix::sched::unshare(flags)
    }

    fn setrlimit(&mut self, resource: Resource, soft: u64, hard: u64) -> Result<(), Errno> {
        nix::sys::resource::setrlimit(resource, soft, hard)
    }

    fn leave_raised_priority(&mut self) -> Result<(), Errno> {
        crate::placement::leave_raised_priority()
    }

    fn dup_to(&mut self, from: RawFd, to: RawFd) -> Result<(), Errno> {
        if from == to {
            // Clear close-on-exec, which dup2 would have cleared for us.
            // SAFETY: fcntl on a descriptor we own.
            return check(unsafe { libc::fcntl(from, libc::F_SETFD, 0) } as libc::c_long);
        }
        // SAFETY: dup2 onto 0..2, which this process owns; the source is a live descriptor.
        check(unsafe { libc::dup2(from, to) } as libc::c_long)
    }

    fn set_controlling_tty(&mut self) -> Result<(), Errno> {
        // SAFETY: TIOCSCTTY on fd 0, a pty slave we own; we lead a new session (setsid before).
        check(unsafe { libc::ioctl(0, libc::TIOCSCTTY, 0) } as libc::c_long)
    }

    fn chdir(&mut self, dir: &str) -> Result<(), Errno> {
        nix::unistd::chdir(dir)
    }

    fn last_cap(&mut self) -> u64 {
        std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .unwrap_or(63)
    }

    fn drop_bounding_cap(&mut self, cap: u64) -> Result<(), Errno> {
        // SAFETY: prctl with integer arguments.
        let rc = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) };
        check(rc as libc::c_long)
    }

    fn clear_ambient_caps(&mut self) {
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
    }

    // The id changes are raw system calls, not libc's: they change the calling process only. In
    // a process that shares memory with a multi-threaded PID 1 (see `inside::confined`) libc's
    // wrappers would try to change the ids of PID 1's threads too (its set-id broadcast).

    fn setgroups_empty(&mut self) -> Result<(), Errno> {
        // SAFETY: setgroups with an empty list.
        check(unsafe {
            libc::syscall(libc::SYS_setgroups, 0usize, std::ptr::null::<libc::gid_t>())
        })
    }

    fn setresgid(&mut self, gid: u32) -> Result<(), Errno> {
        // SAFETY: plain id-changing syscall.
        check(unsafe { libc::syscall(libc::SYS_setresgid, gid, gid, gid) })
    }

    fn setresuid(&mut self, uid: u32) -> Result<(), Errno> {
        // SAFETY: plain id-changing syscall.
        check(unsafe { libc::syscall(libc::SYS_setresuid, uid, uid, uid) })
    }

    fn setuid_root(&mut self) -> bool {
        // SAFETY: setuid(0) only tests whether we could regain root; it must fail.
        unsafe { libc::syscall(libc::SYS_setuid, 0u32) == 0 }
    }

    fn setns_user(&mut self, ns: RawFd) -> Result<(), Errno> {
        // SAFETY: setns on a namespace descriptor PID 1 keeps open for the sandbox's lifetime.
        check(unsafe { libc::setns(ns, libc::CLONE_NEWUSER) } as libc::c_long)
    }

    fn in_host_user_namespace(&mut self) -> bool {
        // The host's map is "0 0 4294967295"; an unreadable map counts as the host's (fail closed).
        std::fs::read_to_string("/proc/self/uid_map").map_or(true, |m| {
            m.split_whitespace().take(3).collect::<Vec<_>>() == ["0", "0", "4294967295"]
        })
    }

    fn no_new_privs(&mut self) -> Result<(), Errno> {
        // SAFETY: prctl with integer arguments.
        check(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } as libc::c_long)
    }

    fn landlock_abi(&mut self) -> i32 {
        crate::inside::landlock::kernel_abi()
    }

    fn landlock_restrict(&mut self, ruleset: &Self::Ruleset) -> Result<(), SetupError> {
        crate::inside::landlock::apply(ruleset)
    }

    fn install_seccomp(&mut self, filter: &Self::Filter) -> Result<RawFd, Errno> {
        filter.install_with_listener().map_err(Errno::from_raw)
    }

    fn report_listener(&mut self, listener: RawFd) -> Result<(), String> {
        let report = self.report.ok_or("no report socket")?;
        protocol::send(
            report.as_fd(),
            &protocol::ChildReport::Listener,
            &[listener],
        )
        .map_err(|e| e.to_string())
    }

    fn await_tracer(&mut self) -> Result<(), String> {
        let report = self.report.ok_or("no report socket")?;
        let mut byte = [0u8; 1];
        loop {
            match nix::unistd::read(report, &mut byte) {
                Ok(1) => return Ok(()),
                Ok(_) => return Err("PID 1 closed the report socket before tracing".into()),
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(format!("waiting for PID 1 to trace: {e}")),
            }
        }
    }

    fn install_seccomp_traced(&mut self, filter: &Self::Filter) -> Result<(), Errno> {
        let insns = filter.as_bytes();
        let prog = libc::sock_fprog {
            len: (insns.len() / corral_seccomp::INSN_SIZE) as libc::c_ushort,
            filter: insns.as_ptr().cast::<libc::sock_filter>().cast_mut(),
        };
        // SAFETY: seccomp(SECCOMP_SET_MODE_FILTER, 0, &prog) only reads `prog` and the
        // instructions it points to, both alive for the call; `as_bytes` views the filter's
        // typed, aligned `sock_filter` array, and from_bytes bounded its length.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                0u32,
                &prog as *const libc::sock_fprog,
            )
        };
        if rc < 0 {
            Err(Errno::last())
        } else {
            Ok(())
        }
    }

    fn report_traced(&mut self) -> Result<(), String> {
        let report = self.report.ok_or("no report socket")?;
        protocol::send(report.as_fd(), &protocol::ChildReport::Traced, &[])
            .map_err(|e| e.to_string())
    }

    fn close_from(&mut self, first: u32) {
        // The report socket is spared: it is close-on-exec, so its end-of-file tells PID 1 that
        // the exec happened (which PID 1 needs to know under `no_spawn`); the program never has it.
        let close = |from: u32, to: u32| {
            if from <= to {
                // SAFETY: close_range on our own descriptor table; nothing else runs in this
                // process.
                unsafe { libc::syscall(libc::SYS_close_range, from, to, 0u32) };
            }
        };
        match self.report.map(|r| r.as_raw_fd() as u32) {
            Some(r) if r >= first => {
                if r > 0 {
                    close(first, r - 1);
                }
                close(r.saturating_add(1), u32::MAX);
            }
            _ => close(first, u32::MAX),
        }
    }

    fn execve(&mut self, path: &CStr, args: &ExecArgs) -> Errno {
        // SAFETY: `ExecArgs` holds NUL-terminated arrays of pointers to CStrings it owns.
        unsafe { libc::execve(path.as_ptr(), args.argv.as_ptr(), args.envp.as_ptr()) };
        Errno::last()
    }

    fn set_securebits(&mut self, bits: u32) -> Result<(), Errno> {
        // SAFETY: prctl with integer arguments.
        let rc = unsafe { libc::prctl(libc::PR_SET_SECUREBITS, bits as libc::c_ulong, 0, 0, 0) };
        check(rc as libc::c_long)
    }

    fn set_fs_ids(&mut self, id: u32) {
        // SAFETY: setfsgid/setfsuid only change this process's filesystem ids.
        unsafe {
            libc::setfsgid(id);
            libc::setfsuid(id);
        }
    }

    fn mount_overlay(&mut self, target: &Path, flags: MsFlags, options: &str) -> Result<(), Errno> {
        nix::mount::mount(
            Some("overlay"),
            target,
            Some("overlay"),
            flags,
            Some(options),
        )
    }
}

/// A stand-in for the kernel that records each call, in order, and fails the one it is told to.
#[cfg(test)]
pub(crate) mod recording {
    use super::*;

    #[derive(Default)]
    pub(crate) struct Recording {
        pub calls: Vec<String>,
        /// Calls whose record starts with this fail with EPERM.
        pub fail: Option<&'static str>,
        /// What `setuid(0)` answers after the drop (true = a broken drop).
        pub root_regainable: bool,
        /// Build mode: the process stayed in the host's user namespace (a broken join).
        pub stayed_in_host_userns: bool,
        pub landlock_abi: i32,
        pub last_cap: u64,
    }

    impl Recording {
        fn call(&mut self, record: String) -> Result<(), Errno> {
            let fails = self.fail.is_some_and(|f| record.starts_with(f));
            self.calls.push(record);
            if fails {
                Err(Errno::EPERM)
            } else {
                Ok(())
            }
        }
    }

    impl Syscalls for Recording {
        type Ruleset = ();
        type Filter = ();

        fn default_sigpipe_and_unblock(&mut self) -> Result<(), Errno> {
            self.call("sigaction(SIGPIPE, SIG_DFL) + sigprocmask(none)".into())
        }
        fn write_proc_self(&mut self, file: &'static str, contents: &str) -> std::io::Result<()> {
            Ok(self.call(format!("write /proc/self/{file} {contents:?}"))?)
        }
        fn setsid(&mut self) -> Result<(), Errno> {
            self.call("setsid".into())
        }
        fn unshare(&mut self, flags: CloneFlags) -> Result<(), Errno> {
            self.call(format!("unshare({flags:?})"))
        }
        fn setrlimit(&mut self, resource: Resource, soft: u64, hard: u64) -> Result<(), Errno> {
            self.call(format!("setrlimit({resource:?}, {soft}, {hard})"))
        }
        fn leave_raised_priority(&mut self) -> Result<(), Errno> {
            self.call("leave a raised priority".into())
        }
        fn dup_to(&mut self, from: RawFd, to: RawFd) -> Result<(), Errno> {
            self.call(format!("dup {from} -> {to}"))
        }
        fn set_controlling_tty(&mut self) -> Result<(), Errno> {
            self.call("TIOCSCTTY".into())
        }
        fn chdir(&mut self, dir: &str) -> Result<(), Errno> {
            self.call(format!("chdir {dir}"))
        }
        fn last_cap(&mut self) -> u64 {
            self.last_cap
        }
        fn drop_bounding_cap(&mut self, cap: u64) -> Result<(), Errno> {
            self.call(format!("PR_CAPBSET_DROP {cap}"))
        }
        fn clear_ambient_caps(&mut self) {
            let _ = self.call("PR_CAP_AMBIENT_CLEAR_ALL".into());
        }
        fn setgroups_empty(&mut self) -> Result<(), Errno> {
            self.call("setgroups([])".into())
        }
        fn setresgid(&mut self, gid: u32) -> Result<(), Errno> {
            self.call(format!("setresgid({gid})"))
        }
        fn setresuid(&mut self, uid: u32) -> Result<(), Errno> {
            self.call(format!("setresuid({uid})"))
        }
        fn setuid_root(&mut self) -> bool {
            let _ = self.call("setuid(0)".into());
            self.root_regainable
        }
        fn setns_user(&mut self, ns: RawFd) -> Result<(), Errno> {
            self.call(format!("setns({ns}, CLONE_NEWUSER)"))
        }
        fn in_host_user_namespace(&mut self) -> bool {
            let _ = self.call("read /proc/self/uid_map".into());
            self.stayed_in_host_userns
        }
        fn no_new_privs(&mut self) -> Result<(), Errno> {
            self.call("PR_SET_NO_NEW_PRIVS".into())
        }
        fn landlock_abi(&mut self) -> i32 {
            self.landlock_abi
        }
        fn landlock_restrict(&mut self, _: &()) -> Result<(), SetupError> {
            self.call("landlock_restrict_self".into())
                .map_err(|_| SetupError::LandlockNotEnforced)
        }
        fn await_tracer(&mut self) -> Result<(), String> {
            self.call("wait until traced".into())
                .map_err(|e| e.to_string())
        }
        fn install_seccomp_traced(&mut self, _: &()) -> Result<(), Errno> {
            self.call("seccomp(SET_MODE_FILTER, 0)".into())
        }
        fn report_traced(&mut self) -> Result<(), String> {
            self.call("report traced".into()).map_err(|e| e.to_string())
        }
        fn install_seccomp(&mut self, _: &()) -> Result<RawFd, Errno> {
            self.call("seccomp(SET_MODE_FILTER, NEW_LISTENER)".into())
                .map(|()| 99)
        }
        fn report_listener(&mut self, listener: RawFd) -> Result<(), String> {
            self.call(format!("send listener {listener}"))
                .map_err(|e| e.to_string())
        }
        fn close_from(&mut self, first: u32) {
            let _ = self.call(format!("close_range({first}..)"));
        }
        fn execve(&mut self, path: &CStr, _: &ExecArgs) -> Errno {
            match self.call(format!("execve {}", path.to_string_lossy())) {
                // The fake runs nothing: every candidate is "not here".
                Ok(()) => Errno::ENOENT,
                Err(e) => e,
            }
        }
        fn set_securebits(&mut self, bits: u32) -> Result<(), Errno> {
            self.call(format!("PR_SET_SECUREBITS {bits:#x}"))
        }
        fn set_fs_ids(&mut self, id: u32) {
            let _ = self.call(format!("setfsgid+setfsuid({id})"));
        }
        fn mount_overlay(
            &mut self,
            target: &Path,
            flags: MsFlags,
            options: &str,
        ) -> Result<(), Errno> {
            self.call(format!(
                "mount overlay {} {flags:?} {options}",
                target.display()
            ))
        }
    }
}
