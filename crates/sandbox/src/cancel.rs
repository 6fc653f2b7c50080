//! `Cancel`: a request, from any thread, to stop every run of a sandbox (or of several) that
//! nobody wants the result of any more — a grading whose client went away. A run that watches
//! it ([`crate::Sandbox::cancel_runs_on`]) has its whole tree killed at once and ends as
//! `signaled` (SIGKILL); a run started after the request is killed as soon as it starts.
//!
//! The wake-up is a pipe that is written once and never drained: it stays readable, so every
//! execution polling it — several checks of one grading run at once — wakes, not only the first.

use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::SandboxError;
use crate::waker::Waker;

pub struct Cancel {
    requested: AtomicBool,
    readable: Waker,
}

impl Cancel {
    pub fn new() -> Result<Cancel, SandboxError> {
        Ok(Cancel {
            requested: AtomicBool::new(false),
            readable: Waker::new()?,
        })
    }

    /// Asks for the runs to be killed; later calls do nothing more.
    pub fn request(&self) {
        if !self.requested.swap(true, Ordering::SeqCst) {
            self.readable.wake();
        }
    }

    pub fn requested(&self) -> bool {
        self.requested.load(Ordering::SeqCst)
    }

    /// Readable once requested (and from then on).
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.readable.fd()
    }
}

impl std::fmt::Debug for Cancel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cancel")
            .field("requested", &self.requested())
            .finish()
    }
}
