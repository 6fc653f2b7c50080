//! `TreeClock`: the CPU time of a process and of everything it starts afterwards, read exact.
//!
//! A run is charged what its cgroup's CPU counter says, but the kernel adds a *running* task's
//! time to that counter only at a scheduler tick or a context switch (every 4 ms at HZ=250): a
//! busy program's limit check read it up to a tick late, and the run overshot its CPU limit by
//! that much. A perf task-clock event on the sandbox's keeper, opened before the keeper forks
//! PID 1, is inherited by PID 1 and by every program PID 1 starts; reading it brings the running
//! tasks' time up to date (the kernel samples them then), so a check sees the tree's CPU time to
//! the microsecond. No extra work per run: one event per sandbox, read by the limit checks.
//!
//! The first task-bound perf event of a quiet host costs an RCU grace period (~10 ms here, see
//! [`warm_up`]): a one-shot `corral run` after a second without sandboxes waits that once.
//!
//! Hosts that refuse perf events (`perf_event_paranoid` 3 without CAP_PERFMON, a container's
//! seccomp profile) keep the cgroup counter and its tick; `corral doctor` says which applies.

use std::sync::{Mutex, Once, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

use perf_event::events::Software;
use perf_event::{Builder, Counter, ReadFormat};

pub(crate) struct TreeClock(Counter);

impl TreeClock {
    /// Starts counting `pid` and every task it creates from now on; `None` where this host
    /// refuses perf events (said once in the log, and by `corral doctor`).
    pub(crate) fn follow(pid: u32) -> Option<TreeClock> {
        // Where the warm-up failed the host refuses perf events: no second try per sandbox.
        available().ok()?;
        match open(Some(pid)) {
            Ok(c) => Some(TreeClock(c)),
            Err(e) => {
                static SAID: OnceLock<()> = OnceLock::new();
                SAID.get_or_init(|| {
                    tracing::warn!(error = %e, pid, "no perf task clock for a sandbox: its CPU limit is checked against the cgroup's counter, which lags a running program by up to a scheduler tick");
                });
                None
            }
        }
    }

    /// CPU time of the tree since the clock was opened: live tasks up to now, and every task
    /// that has exited.
    pub(crate) fn read(&mut self) -> std::io::Result<Duration> {
        self.0.read().map(Duration::from_nanos)
    }
}

/// The process's first task-bound perf event switches the kernel's perf scheduling hooks on,
/// which waits for an RCU grace period (~10 ms on a 2-core VM); later ones take microseconds,
/// and the hooks stay on while any event is open. [`warm_up`] opens one in the background and
/// keeps it for the life of the process, so that wait overlaps the caller's own start-up rather
/// than a sandbox's build. [`crate::Host::new`] calls it; later calls do nothing.
pub(crate) fn warm_up() {
    static STARTED: Once = Once::new();
    STARTED.call_once(|| {
        let spawned = std::thread::Builder::new()
            .name("corral-perf-warm".into())
            .spawn(|| open(None).map_err(|e| e.to_string()));
        if let (Ok(handle), Ok(mut slot)) = (spawned, WARMING.lock()) {
            *slot = Some(handle);
        }
    });
}

type Warmed = Result<Counter, String>;
static WARMING: Mutex<Option<JoinHandle<Warmed>>> = Mutex::new(None);
/// The warm-up's event, kept open for good (it also answers whether perf events work here).
static WARMED: OnceLock<Warmed> = OnceLock::new();

/// Whether this host lets corral follow a sandbox's CPU time exactly, and why not (waits for
/// the warm-up, or does its work here if it could not start).
pub fn available() -> Result<(), String> {
    warm_up();
    WARMED
        .get_or_init(|| {
            let handle = WARMING.lock().ok().and_then(|mut h| h.take());
            match handle {
                Some(h) => h
                    .join()
                    .unwrap_or_else(|_| Err("the perf warm-up thread panicked".into())),
                None => open(None).map_err(|e| e.to_string()),
            }
        })
        .as_ref()
        .map(drop)
        .map_err(Clone::clone)
}

/// A task-clock counter on `pid` (this process when `None`) and its later descendants. It counts
/// kernel time too: `exclude_kernel` only filters samples, which this counter never takes, and it
/// lets an unprivileged (rootless) supervisor open it at `perf_event_paranoid` 2.
fn open(pid: Option<u32>) -> std::io::Result<Counter> {
    let mut b = Builder::new(Software::TASK_CLOCK);
    if let Some(pid) = pid {
        b.observe_pid(pid as libc::pid_t);
    }
    b.any_cpu()
        .inherit(true)
        .exclude_kernel(true)
        .read_format(ReadFormat::empty())
        .enabled(true)
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A child that spins in a grandchild: the clock opened on the child before it forked counts
    /// the grandchild's time while it runs (it never exits, so nothing reached the clock at exit).
    #[test]
    fn the_clock_counts_later_descendants_while_they_run() {
        use std::io::Write;
        use std::os::unix::process::CommandExt;
        if let Err(why) = available() {
            eprintln!("SKIPPED: this host refuses perf events ({why})");
            return;
        }
        let mut child = std::process::Command::new("/bin/sh")
            .args(["-c", "read _; sh -c 'while :; do :; done' & sleep 30"])
            .stdin(std::process::Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap();
        let mut clock = TreeClock::follow(child.id()).expect("a clock");
        let before = clock.read().unwrap();
        child.stdin.take().unwrap().write_all(b"go\n").unwrap();
        // A clock that missed the grandchild stays at the shells' few milliseconds for good.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let mut counted = Duration::ZERO;
        while counted < Duration::from_millis(200) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
            counted = clock.read().unwrap() - before;
        }
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
        let _ = child.wait();
        assert!(counted >= Duration::from_millis(200), "counted {counted:?}");
    }
}
