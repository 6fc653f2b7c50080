//! The times the store records: Unix seconds (tokens, uploads, suites, revisions) and
//! milliseconds (the submission queue).

/// Unix time in seconds.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

use std::sync::atomic::{AtomicI64, Ordering};

/// How far this process's clock is off (tests only: a node whose clock is ahead of the
/// database's; see [`skew_for_tests`]).
static SKEW_MS: AtomicI64 = AtomicI64::new(0);

/// Unix time in milliseconds, by this process's clock.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
        + SKEW_MS.load(Ordering::Relaxed)
}

/// Sets this process's clock `ms` ahead of the system's (behind when negative), for tests of
/// what must not depend on a node's clock (leases end by the database's). For the whole
/// process: a test that uses it runs alone in its test binary.
#[doc(hidden)]
pub fn skew_for_tests(ms: i64) {
    SKEW_MS.store(ms, Ordering::Relaxed);
}
