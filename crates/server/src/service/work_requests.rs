//! The requests in flight that do work (everything but reads), counted for a shutdown to wait
//! for (`http/draining.rs` counts them; the shutdown in `lib.rs` reads the count).

use std::sync::atomic::{AtomicUsize, Ordering};

/// The requests in flight that do work (everything but reads), for a shutdown to wait for.
#[derive(Debug, Default)]
pub struct WorkRequests(AtomicUsize);

impl WorkRequests {
    /// How many are in flight now.
    pub fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }

    pub(crate) fn enter(&self) -> WorkGuard<'_> {
        self.0.fetch_add(1, Ordering::SeqCst);
        WorkGuard(self)
    }
}

pub(crate) struct WorkGuard<'a>(&'a WorkRequests);

impl Drop for WorkGuard<'_> {
    fn drop(&mut self) {
        (self.0).0.fetch_sub(1, Ordering::SeqCst);
    }
}
