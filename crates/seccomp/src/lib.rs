//! The sandbox's default seccomp-bpf profile.
//!
//! # Where it sits
//!
//! Seccomp is one layer of several. The sandboxed program already runs in
//! its own user, mount, PID, network, IPC, UTS and cgroup namespaces, as an
//! unprivileged uid with every capability dropped, under `no_new_privs`,
//! with cgroup limits. The seccomp profile does two things on top:
//!
//! 1. It shrinks the kernel attack surface reachable from the sandbox:
//!    interfaces that an ordinary program never needs, that are refused
//!    anyway without privileges (so calling them is a sign of an escape
//!    attempt), or that have a long history of exploitable bugs.
//! 2. It *reports* hostile attempts. Instead of a bare `EPERM`, the hostile
//!    syscalls raise a seccomp user notification (`SECCOMP_RET_USER_NOTIF`).
//!    The supervisor receives it, records which syscall was attempted (and
//!    by whom), kills the whole sandboxed process tree and answers the
//!    notification with `EPERM`. If no supervisor listens (the listener fd
//!    is closed), the kernel fails these syscalls with `ENOSYS`: still
//!    blocked, only not reported.
//!
//! The profile is a denylist: everything not listed is allowed.
//!
//! # Kill and report ([`Action::KillAndReport`])
//!
//! * Other processes: `ptrace`, `process_vm_readv`, `process_vm_writev`,
//!   `kcmp`, `pidfd_getfd`.
//! * Namespaces and mounts: `unshare` (any flags), `setns`, `clone` with any
//!   of `CLONE_NEWNS`, `CLONE_NEWUTS`, `CLONE_NEWIPC`, `CLONE_NEWUSER`,
//!   `CLONE_NEWPID`, `CLONE_NEWNET`, `CLONE_NEWCGROUP` in its flags, `mount`,
//!   `umount2`, `pivot_root`, `chroot`, and the new mount API (`fsopen`,
//!   `fsconfig`, `fsmount`, `fspick`, `move_mount`, `open_tree`,
//!   `open_tree_attr`, `mount_setattr`). Creating a user namespace is the
//!   usual first step of a kernel exploit: it hands out capabilities over
//!   new namespaces and with them a large amount of otherwise privileged
//!   kernel code.
//! * Kernel keyrings: `keyctl`, `add_key`, `request_key` (with
//!   [`Profile::with_quiet_keyrings`], for programs that are root of their own
//!   user namespace, these fail with `EPERM` instead, as under Docker's
//!   default profile: PAM's `pam_keyinit` in `su -` and `runuser` goes on).
//! * Big attack surfaces with no use in a sandboxed program: `bpf`,
//!   `perf_event_open`, `userfaultfd` (also a classic exploitation aid for
//!   widening race windows).
//! * System administration: `kexec_load`, `kexec_file_load`, `init_module`,
//!   `finit_module`, `delete_module`, `reboot`, `swapon`, `swapoff`, `acct`,
//!   `quotactl`, `quotactl_fd`, `syslog`, `vhangup`, `settimeofday`,
//!   `clock_settime`, and obsolete calls (`lookup_dcookie`, `uselib`,
//!   `nfsservctl`, `create_module`, `get_kernel_syms`, `query_module`,
//!   `_sysctl`) where the architecture has them.
//! * `open_by_handle_at` and `name_to_handle_at`: file handles sidestep
//!   path-based confinement (the "shocker" container escape).
//! * x86 port I/O: `iopl`, `ioperm`.
//! * `personality` with any persona other than `PER_LINUX` (0),
//!   `PER_LINUX | ADDR_NO_RANDOMIZE` (`0x40000`, used by debuggers and
//!   `setarch -R`) or the query value `0xffffffff`: the other flags change
//!   memory layout (`READ_IMPLIES_EXEC`, `MMAP_PAGE_ZERO`,
//!   `ADDR_COMPAT_LAYOUT`, ...).
//! * Any syscall made through an ABI other than the native one (on x86_64:
//!   i386 `int 0x80` and x32 syscall numbers with bit `0x40000000` set; on
//!   aarch64: arm32). The profile only reasons about native syscall
//!   numbers, and foreign ABIs are a classic way around filters. This is
//!   libseccomp's "bad architecture" action, set to the same notification;
//!   the supervisor sees the foreign `arch` in the notification, and
//!   [`syscall_name`] says e.g. `"getpid (i386 ABI)"`. (On kernels built
//!   without IA32 emulation, `int 0x80` simply faults with `SIGSEGV`.)
//!
//! `adjtimex` and `clock_adjtime` are allowed: whether they modify anything
//! is decided by a field in memory the filter cannot read, read-only use is
//! common (`ntp_gettime`), and changing the clock requires `CAP_SYS_TIME`.
//! `landlock_*` are allowed: they can only restrict the caller further.
//!
//! # Fail quietly ([`Action::Errno`])
//!
//! Common runtimes probe these and fall back, so failing them must not kill:
//!
//! * `clone3` → `ENOSYS`. Its flags live in memory, out of the filter's
//!   reach, so the namespace check above could be bypassed through it;
//!   glibc (threads, `posix_spawn`) and others fall back to `clone`.
//! * `io_uring_setup`, `io_uring_enter`, `io_uring_register` → `ENOSYS`.
//!   io_uring has been a rich source of kernel exploits and its operations
//!   bypass seccomp entirely; libuv (Node.js) and others fall back.
//! * `inotify_init`, `inotify_init1`, `inotify_add_watch`, `fanotify_init`,
//!   `fanotify_mark` → `ENOSYS`. The root's read-only binds are the host's
//!   inodes: a watch would show which files the host and other sandboxes
//!   open, and when (a channel between tenants; fanotify is open to
//!   unprivileged callers since Linux 5.13). File watchers fall back to
//!   polling, as without inotify.
//! * `io_setup`, `io_destroy`, `io_submit`, `io_cancel`, `io_getevents`,
//!   `io_pgetevents` → `ENOSYS`. AIO contexts come from one host-wide pool
//!   (`fs.aio-max-nr`) that no cgroup limits: a run could take it all and
//!   `io_setup` would fail on the host and in every other sandbox. glibc's
//!   `aio_*` use threads; libaio users fall back to synchronous I/O.
//! * `socket` and `socketpair` with a domain other than `AF_UNIX`,
//!   `AF_INET` or `AF_INET6` → `EAFNOSUPPORT` (as if the family were not
//!   compiled in; this is what glibc's `getifaddrs` gets for `AF_NETLINK`).
//!   Every other family (`AF_NETLINK`, `AF_PACKET`, `AF_VSOCK`, `AF_KEY`,
//!   `AF_BLUETOOTH`, `AF_ALG`, ...) is rarely needed and a frequent source
//!   of kernel bugs, and creating one may auto-load a protocol module.
//!   `AF_INET`/`AF_INET6` are allowed even when the sandbox has no network:
//!   the network namespace is what isolates it, and loopback inside the
//!   sandbox is useful. With network enabled
//!   ([`Profile::with_network`]), `AF_NETLINK` with protocol
//!   `NETLINK_ROUTE` is allowed too (interface listing); offline, only the
//!   `list_interfaces` grant allows it (below).
//! * `ioctl` with `TIOCSTI` or `TIOCLINUX` → `EPERM`: injecting input into
//!   a terminal the sandbox shares would execute commands outside it. `TIOCSETD` → `EPERM`
//!   too: programs may open ptys of the sandbox's own devpts, and a line discipline other than
//!   the default one (n_hdlc, n_gsm, …) is kernel code that has had privilege escalations
//!   reachable this way (CVE-2017-2636, CVE-2023-6546) and that no program needs.
//!
//! # Stricter profiles ([`Restrictions`])
//!
//! A language, suite, check or run can add layers that only deny more: `no_spawn` (no new
//! process or program once the program runs: `fork`, `vfork`, `clone` without `CLONE_THREAD`,
//! `execve`, `execveat` are killed and reported; threads still work), `no_sockets` (`socket` and
//! `socketpair` of every family killed and reported) and `allow:NAME,…` (allow-list mode: only the
//! named syscalls, [`STARTUP`], and what the default answers quietly; every other syscall number,
//! those libseccomp does not know included, is killed and reported). The program's own `execve`
//! under `no_spawn` is let through by the sandbox's PID 1, which answers it with
//! [`respond_continue`] while the program's process has not exec'd yet.
//!
//! # Grants ([`grants`])
//!
//! The one exception to "only denies more": a language, suite or check (never a run request's
//! profile name) may give the `list_interfaces` grant, which allows `socket(AF_NETLINK, *,
//! NETLINK_ROUTE)` in an offline sandbox so that `getifaddrs()` works (libzmq, so every Jupyter
//! kernel, aborts without it). It reaches only the sandbox's own network namespace (`lo`), which
//! the sandbox cannot change without `CAP_NET_ADMIN`. Nothing else is grantable, and
//! `no_sockets` or an allow-list without `socket` still report the call.
//!
//! Arguments the kernel reads as 32-bit `int`s (socket domain, ioctl
//! request, persona) are compared on their low 32 bits only, so garbage in
//! the upper half of the register cannot smuggle a value past the filter.
//!
//! libseccomp compiles the program; the argument tests it would write long
//! (`personality`, `clone`, `socket`, `socketpair`) are compiled by hand and
//! spliced in (`arg_blocks`), which halves the program that every run's
//! process installs.
//!
//! # Using it
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use corral_seccomp::{CompiledFilter, Profile};
//! // Host side, once per process:
//! let filter = CompiledFilter::compile(&Profile::default_profile())?;
//! let bytes = filter.as_bytes().to_vec(); // ship to the sandbox init
//! // Sandbox init, before forking the child:
//! let filter = CompiledFilter::from_bytes(bytes)?;
//! // In the forked child, after no_new_privs, setuid and dropping
//! // capabilities, right before execve:
//! //   let listener = filter.install_with_listener()?;  // then send it to
//! //   the supervisor over a unix socket and close it.
//! // Supervisor: corral_seccomp::receive(listener) -> record
//! //   syscall_name(nr, arch), kill the tree, respond_errno(.., EPERM).
//! # Ok(()) }
//! ```

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("corral-seccomp supports x86_64 and aarch64 only");

mod arg_blocks;
mod bpf;
mod error;
mod filter;
pub mod grants;
mod notify;
mod patterns;
mod profile;
mod restrictions;
mod syscalls;

pub use bpf::Verdict;
pub use error::Error;
pub use filter::{CompiledFilter, INSN_SIZE, MAX_INSNS};
pub use grants::{Grant, Grants, UnknownGrant};
pub use notify::{
    receive, respond_continue, respond_errno, syscall_name, Notification, AUDIT_ARCH_AARCH64,
    AUDIT_ARCH_ARM, AUDIT_ARCH_I386, AUDIT_ARCH_NATIVE, AUDIT_ARCH_X86_64, X32_SYSCALL_BIT,
};
pub use profile::{Action, Profile, RuleInfo};
pub use restrictions::{Restrictions, RestrictionsError, STARTUP};

/// The profile's rules that exist on the native architecture, with their
/// conditions in words.
pub fn rules(profile: &Profile) -> Vec<RuleInfo> {
    profile::rule_specs(profile)
        .into_iter()
        .filter_map(|r| {
            Some(RuleInfo {
                syscall: r.syscall,
                nr: profile::resolve(r.syscall)?,
                action: r.action,
                condition: r.condition,
            })
        })
        .collect()
}

/// Syscalls the profile acts on (some only for certain arguments, see
/// [`rules`]) on the native architecture, with what it does.
pub fn blocked_syscalls(profile: &Profile) -> Vec<(&'static str, Action)> {
    rules(profile)
        .into_iter()
        .map(|r| (r.syscall, r.action))
        .collect()
}
