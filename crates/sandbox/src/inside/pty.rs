//! Pseudo-terminals for interactive runs, made in the sandbox's own devpts instance.
//!
//! A program attached to a terminal behaves as a student expects in a browser terminal: stdout is
//! line-buffered (a prompt before `scanf` shows up), input is echoed, Ctrl-C is a signal. The pty
//! lives in the sandbox's private `/dev/pts` (mounted `newinstance`), so it reaches nothing of the
//! host's terminals; TIOCSTI (typing into a terminal) is refused by the seccomp profile.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use nix::errno::Errno;

use crate::inside::error::SetupError;

/// Opens a pty of `cols` × `rows`. Returns the master and three descriptors of the slave for the
/// program's stdin, stdout and stderr.
pub(crate) fn open((cols, rows): (u16, u16)) -> Result<(OwnedFd, Vec<OwnedFd>), SetupError> {
    let master = nix::fcntl::open(
        "/dev/pts/ptmx",
        nix::fcntl::OFlag::O_RDWR | nix::fcntl::OFlag::O_NOCTTY | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .map_err(SetupError::OpenPtmx)?;
    let unlock: libc::c_int = 0;
    // SAFETY: TIOCSPTLCK reads an int we own, on the master we just opened.
    if unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCSPTLCK, &unlock) } != 0 {
        return Err(SetupError::UnlockPty(Errno::last()));
    }
    let size = libc::winsize {
        ws_row: rows.max(1),
        ws_col: cols.max(1),
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads the winsize we own.
    unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCSWINSZ, &size) };
    // TIOCGPTPEER opens the slave from the master itself: no path lookup, no race on /dev/pts/N.
    // SAFETY: the ioctl returns a new descriptor or -1; flags are plain open flags.
    let slave = unsafe {
        libc::ioctl(
            master.as_raw_fd(),
            libc::TIOCGPTPEER,
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        )
    };
    let slave = match slave {
        // gVisor (2022) lacks TIOCGPTPEER: the slave is opened by its number there. Its devpts is
        // the sandbox's own and no program runs while PID 1 opens it, so nothing can race it.
        _ if slave < 0 && Errno::last() == Errno::ENOTTY => slave_by_number(&master)?,
        _ if slave < 0 => return Err(SetupError::PtySlave(Errno::last())),
        // SAFETY: the kernel just created this descriptor for us.
        fd => unsafe { OwnedFd::from_raw_fd(fd) },
    };
    let copies = (0..2)
        .map(|_| slave.try_clone())
        .collect::<Result<Vec<_>, _>>()
        .map_err(SetupError::Dup)?;
    let mut slaves = vec![slave];
    slaves.extend(copies);
    Ok((master, slaves))
}

/// Opens the slave of `master` as `/dev/pts/N` (TIOCGPTN).
fn slave_by_number(master: &OwnedFd) -> Result<OwnedFd, SetupError> {
    let mut n: libc::c_uint = 0;
    // SAFETY: TIOCGPTN writes the pty's number into the int we own.
    if unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCGPTN, &mut n) } != 0 {
        return Err(SetupError::PtySlave(Errno::last()));
    }
    nix::fcntl::open(
        format!("/dev/pts/{n}").as_str(),
        nix::fcntl::OFlag::O_RDWR
            | nix::fcntl::OFlag::O_NOCTTY
            | nix::fcntl::OFlag::O_CLOEXEC
            | nix::fcntl::OFlag::O_NOFOLLOW,
        nix::sys::stat::Mode::empty(),
    )
    .map_err(SetupError::PtySlave)
}

/// Resizes the terminal (the program gets SIGWINCH).
pub(crate) fn resize(
    master: std::os::fd::BorrowedFd<'_>,
    cols: u16,
    rows: u16,
) -> std::io::Result<()> {
    let size = libc::winsize {
        ws_row: rows.max(1),
        ws_col: cols.max(1),
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads the winsize we own, on a descriptor we borrow.
    if unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCSWINSZ, &size) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
