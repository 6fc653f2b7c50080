//! Syscall names and their numbers on the native architecture, including the few syscalls newer
//! than the libseccomp corral builds against.

use libseccomp::ScmpSyscall;

/// Syscalls newer than the libseccomp we build against (2.5.4) knows,
/// with their number on the architectures we support. Since Linux 5.1 all
/// architectures share numbers for new syscalls (x86_64 included).
const RAW_NUMBERS: &[(&str, i32)] = &[("open_tree_attr", 467)];

/// Resolves a syscall name on the native architecture; `None` if it does
/// not exist there.
pub(crate) fn resolve(name: &'static str) -> Option<i32> {
    resolve_owned(name)
}

/// [`resolve`] for a name that is not `'static` (an allow-list's).
pub(crate) fn resolve_owned(name: &str) -> Option<i32> {
    // libseccomp returns negative pseudo numbers for syscalls that exist on other architectures
    // only, and an error for names it does not know at all.
    match ScmpSyscall::from_name(name) {
        Ok(s) if i32::from(s) >= 0 => Some(i32::from(s)),
        _ => RAW_NUMBERS
            .iter()
            .find(|(n, _)| *n == name)
            .map(|&(_, nr)| nr),
    }
}

/// Name of a native syscall number that libseccomp does not know.
pub(crate) fn raw_name(nr: i32) -> Option<&'static str> {
    RAW_NUMBERS.iter().find(|(_, n)| *n == nr).map(|&(n, _)| n)
}
