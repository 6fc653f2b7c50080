//! PID 1's long-lived descriptors live above the numbers a run allocates.
//!
//! The program's process starts with a copy of PID 1's descriptor table, sets the run's
//! `RLIMIT_NOFILE`, then still opens two descriptors (a copy of the Landlock ruleset, the
//! seccomp listener) before it closes everything but its stdio. A new descriptor takes the
//! lowest free number, and must be under the limit: with PID 1's own files in the low numbers,
//! a run limited to 16 open files could not start. So what PID 1 keeps open for its own use is
//! moved up here.

use std::os::fd::OwnedFd;

/// The lowest number PID 1's long-lived descriptors take.
const FIRST: i32 = 256;

/// The same open file, under a number of at least [`FIRST`] (close-on-exec).
pub(crate) fn above_runs(fd: impl Into<OwnedFd>) -> std::io::Result<OwnedFd> {
    let fd: OwnedFd = fd.into();
    let high = nix::fcntl::fcntl(&fd, nix::fcntl::FcntlArg::F_DUPFD_CLOEXEC(FIRST))?;
    // SAFETY: F_DUPFD_CLOEXEC returned a new descriptor that nothing else owns.
    Ok(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(high) })
}
