//! `Waker`: lets another thread interrupt an [`crate::Execution`] waiting in `step`, so input
//! that arrives meanwhile (a WebSocket's stdin, a kill) is acted on at once instead of at the
//! caller's next deadline. A non-blocking pipe: `wake` writes a byte, the execution's `ppoll`
//! watches the read end and drains it.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

use nix::fcntl::OFlag;

use crate::error::SandboxError;

#[derive(Clone)]
pub struct Waker(Arc<Ends>);

struct Ends {
    read: OwnedFd,
    write: OwnedFd,
}

impl Waker {
    pub fn new() -> Result<Waker, SandboxError> {
        let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)
            .map_err(|e| SandboxError::io("pipe for a waker", e.into()))?;
        Ok(Waker(Arc::new(Ends { read, write })))
    }

    /// Makes the execution's current or next wait return. A full pipe already holds a wake-up.
    pub fn wake(&self) {
        let _ = nix::unistd::write(&self.0.write, &[1]);
    }

    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.0.read.as_fd()
    }

    /// Empties the pipe (every wake-up so far is being handled).
    pub(crate) fn drain(&self) {
        let mut buf = [0u8; 64];
        while matches!(nix::unistd::read(self.0.read.as_fd(), &mut buf), Ok(n) if n > 0) {}
    }
}
