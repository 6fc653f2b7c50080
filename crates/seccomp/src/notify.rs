//! The supervisor side: receiving and answering user notifications.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use libseccomp::{ScmpArch, ScmpSyscall};

/// `AUDIT_ARCH_X86_64`.
pub const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
/// `AUDIT_ARCH_I386`.
pub const AUDIT_ARCH_I386: u32 = 0x4000_0003;
/// `AUDIT_ARCH_AARCH64`.
pub const AUDIT_ARCH_AARCH64: u32 = 0xc000_00b7;
/// `AUDIT_ARCH_ARM`.
pub const AUDIT_ARCH_ARM: u32 = 0x4000_0028;
/// Bit marking x32 syscall numbers (which arrive with `AUDIT_ARCH_X86_64`).
pub const X32_SYSCALL_BIT: i32 = 0x4000_0000;

/// The `AUDIT_ARCH_*` value of native syscalls on the build architecture.
#[cfg(target_arch = "x86_64")]
pub const AUDIT_ARCH_NATIVE: u32 = AUDIT_ARCH_X86_64;
/// The `AUDIT_ARCH_*` value of native syscalls on the build architecture.
#[cfg(target_arch = "aarch64")]
pub const AUDIT_ARCH_NATIVE: u32 = AUDIT_ARCH_AARCH64;

/// One suspended syscall, as reported by `SECCOMP_IOCTL_NOTIF_RECV`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Notification {
    /// Cookie to answer with ([`respond_errno`]).
    pub id: u64,
    /// Thread id of the caller, in the listener owner's pid namespace
    /// (0 if not visible there).
    pub pid: u32,
    /// Syscall number, as seen by the filter (x32 numbers keep their
    /// `X32_SYSCALL_BIT`).
    pub syscall_nr: i32,
    /// `AUDIT_ARCH_*` of the syscall ABI used.
    pub arch: u32,
    /// Raw syscall arguments.
    pub args: [u64; 6],
}

impl Notification {
    /// [`syscall_name`] of this notification.
    pub fn syscall_name(&self) -> String {
        syscall_name(self.syscall_nr, self.arch)
    }
}

/// Waits for and reads the next notification (`SECCOMP_IOCTL_NOTIF_RECV`).
///
/// Blocks until a sandboxed task hits a [`KillAndReport`](crate::Action)
/// rule; poll the fd for `POLLIN` first to wait with a timeout (`POLLHUP`
/// means no task uses the filter any more). Errors worth retrying:
/// `EINTR`, and `ENOENT` (the task was killed or its syscall interrupted
/// between the wake-up and the read).
pub fn receive(listener: BorrowedFd<'_>) -> io::Result<Notification> {
    // SAFETY: `seccomp_notif` is plain old data (integers only); all-zero is
    // a valid value, and the kernel requires it zeroed.
    let mut notif: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    // SAFETY: NOTIF_RECV writes one `struct seccomp_notif` (the size encoded
    // in the request number is that of this very struct) to the pointer,
    // which is valid and exclusive for the duration of the call.
    let rc = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_RECV,
            &mut notif as *mut libc::seccomp_notif,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Notification {
        id: notif.id,
        pid: notif.pid,
        syscall_nr: notif.data.nr,
        arch: notif.data.arch,
        args: notif.data.args,
    })
}

/// Answers notification `id`: the suspended syscall returns -1 with
/// `errno` (a positive value such as `libc::EPERM`).
///
/// `ENOENT` from the kernel — the task died (e.g. because the supervisor
/// already killed it) or the syscall was interrupted — is not an error.
pub fn respond_errno(listener: BorrowedFd<'_>, id: u64, errno: i32) -> io::Result<()> {
    if errno <= 0 || errno > 4095 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("respond_errno: {errno} is not a valid errno"),
        ));
    }
    send(
        listener,
        libc::seccomp_notif_resp {
            id,
            val: 0,
            error: -errno,
            flags: 0,
        },
    )
}

/// Answers notification `id` by letting the suspended syscall run as if the filter had allowed it
/// (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`, Linux 5.5). The decision must not depend on the call's
/// arguments in memory (another thread could change them before the kernel reads them): the
/// sandbox uses it only for the exec of a process that has not yet run any program code, and
/// for a watched `socket(2)` (all its arguments are in registers, read once, by the kernel,
/// into the notification; see [`crate::CompiledFilter::with_socket_watch`]).
/// `ENOENT` (the task died or the call was interrupted) is not an error.
pub fn respond_continue(listener: BorrowedFd<'_>, id: u64) -> io::Result<()> {
    const SECCOMP_USER_NOTIF_FLAG_CONTINUE: u32 = 1;
    send(
        listener,
        libc::seccomp_notif_resp {
            id,
            val: 0,
            error: 0,
            flags: SECCOMP_USER_NOTIF_FLAG_CONTINUE,
        },
    )
}

/// `SECCOMP_IOCTL_NOTIF_SEND`; `ENOENT` (the task died or its call was interrupted) is success.
fn send(listener: BorrowedFd<'_>, mut resp: libc::seccomp_notif_resp) -> io::Result<()> {
    // SAFETY: NOTIF_SEND reads one `struct seccomp_notif_resp` (the size encoded in the request
    // number is that of this very struct) from the pointer, valid for the duration of the call.
    let rc = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SEND,
            &mut resp as *mut libc::seccomp_notif_resp,
        )
    };
    if rc < 0 {
        let err = io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::ENOENT) {
            return Ok(());
        }
        return Err(err);
    }
    Ok(())
}

/// Human-readable name of a syscall seen in a notification.
///
/// Native syscalls give their bare name (`"ptrace"`); syscalls through
/// another ABI are suffixed with it (`"getpid (i386 ABI)"`,
/// `"getpid (x32 ABI)"`); unknown ones give
/// `"syscall 12345 (arch 0xc000003e)"`.
pub fn syscall_name(nr: i32, arch: u32) -> String {
    let unknown = || format!("syscall {nr} (arch {arch:#x})");
    let x32 = arch == AUDIT_ARCH_X86_64 && nr & X32_SYSCALL_BIT != 0;
    let (scmp_arch, abi) = match arch {
        AUDIT_ARCH_X86_64 if x32 => (ScmpArch::X32, "x32"),
        AUDIT_ARCH_X86_64 => (ScmpArch::X8664, "x86_64"),
        AUDIT_ARCH_I386 => (ScmpArch::X86, "i386"),
        AUDIT_ARCH_AARCH64 => (ScmpArch::Aarch64, "aarch64"),
        AUDIT_ARCH_ARM => (ScmpArch::Arm, "arm"),
        _ => return unknown(),
    };
    let native = arch == AUDIT_ARCH_NATIVE && !x32;
    let name = ScmpSyscall::from(nr)
        .get_name_by_arch(scmp_arch)
        .ok()
        .or_else(|| {
            native
                .then(|| crate::syscalls::raw_name(nr))
                .flatten()
                .map(str::to_owned)
        });
    match name {
        Some(name) if native => name,
        Some(name) => format!("{name} ({abi} ABI)"),
        None => unknown(),
    }
}
