//! `Cancel`: a request, from any thread, to stop the runs that watch it — a grading whose client
//! went away, a kept sandbox deleted while its run goes on. A run that watches it
//! ([`crate::Sandbox::cancel_runs_on`], [`crate::Execution::cancel_on`]) has its whole tree
//! killed at once and ends as `signaled` (SIGKILL) unless a limit fired first; a run started
//! after the request is killed as soon as it starts.
//!
//! The wake-up is a pipe written once and never drained while requested: it stays readable, so
//! every execution polling it — several checks of one grading at once — wakes, not only the
//! first. The pipe is made when first needed (by a run that watches, or by the request), so a
//! `Cancel` costs no descriptor until then and making one cannot fail.

use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use crate::waker::Waker;

#[derive(Default)]
pub struct Cancel {
    requested: AtomicBool,
    /// `None` inside when no pipe could be made: a watching run then sees the request at its
    /// next look at the clock (its limits') instead of at once.
    readable: OnceLock<Option<Waker>>,
}

impl Cancel {
    /// Asks for the runs to be killed; later calls do nothing more.
    pub fn request(&self) {
        if !self.requested.swap(true, Ordering::SeqCst) {
            // After the flag: a run that looked at it before polls this pipe, which wakes it.
            if let Some(w) = self.pipe() {
                w.wake();
            }
        }
    }

    pub fn requested(&self) -> bool {
        self.requested.load(Ordering::SeqCst)
    }

    /// The next runs start uncancelled. Only while no run watches it (a kept sandbox between
    /// two runs): a run polling it meanwhile could miss a request.
    pub fn clear(&self) {
        if self.requested.swap(false, Ordering::SeqCst) {
            if let Some(w) = self.pipe() {
                w.drain();
            }
        }
    }

    /// Readable once requested (and until cleared); `None` when no pipe could be made.
    pub(crate) fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.pipe().map(Waker::fd)
    }

    fn pipe(&self) -> Option<&Waker> {
        self.readable
            .get_or_init(|| match Waker::new() {
                Ok(w) => Some(w),
                Err(e) => {
                    tracing::warn!(error = %e, "no pipe for a cancel: a cancelled run is killed at its next limit check");
                    None
                }
            })
            .as_ref()
    }
}

impl std::fmt::Debug for Cancel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cancel")
            .field("requested", &self.requested())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::poll::{PollFd, PollFlags, PollTimeout};

    fn readable(c: &Cancel) -> bool {
        let fd = c.fd().expect("a pipe");
        let mut p = [PollFd::new(fd, PollFlags::POLLIN)];
        nix::poll::poll(&mut p, PollTimeout::ZERO).unwrap() == 1
    }

    #[test]
    fn a_request_stays_readable_for_every_watcher_until_cleared() {
        let c = Cancel::default();
        assert!(!c.requested() && !readable(&c));
        c.request();
        c.request();
        // Polled by two runs, twice each: nothing drains it.
        for _ in 0..4 {
            assert!(c.requested() && readable(&c));
        }
        c.clear();
        assert!(!c.requested() && !readable(&c));
        c.request();
        assert!(c.requested() && readable(&c));
    }
}
