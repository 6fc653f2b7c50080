//! `openat2` as the host-side file code calls it.

use std::os::fd::{BorrowedFd, OwnedFd};

use nix::fcntl::{openat2, OpenHow};

/// `openat2(dir, path, how)`, tried again while the kernel answers `EAGAIN`: with
/// `RESOLVE_BENEATH` (or `RESOLVE_IN_ROOT`) it cannot always prove that a `..` reached through
/// a symlink stayed beneath `dir` while a rename or mount happens anywhere on the machine, and
/// says so rather than guess (openat2(2): "the caller may choose to retry"). A build's copy of
/// a folder with such a link failed with "EAGAIN: Try again" while other tests renamed files.
pub fn openat2_retrying<P: ?Sized + nix::NixPath>(
    dir: BorrowedFd<'_>,
    path: &P,
    how: OpenHow,
) -> nix::Result<OwnedFd> {
    let mut tries = 0;
    loop {
        match openat2(dir, path, how) {
            Err(nix::errno::Errno::EAGAIN) if tries < 64 => tries += 1,
            r => return r,
        }
    }
}
