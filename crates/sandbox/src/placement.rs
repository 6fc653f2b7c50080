//! Where a run's program starts: on the CPU the previous program started on, when the run is
//! the only one under way among this process's sandboxes (one [`crate::Host`]; another corral
//! process on the machine is not seen, and the kernel still moves a program off a busy CPU).
//!
//! Why: the kernel places a new process on an idle CPU other than its parent's, and the parent
//! here (PID 1's confined thread) wakes wherever the scheduler puts it, so one run after another
//! the program alternated between CPUs (221 of 300 consecutive `python3` runs, against 31 of 300
//! for the same loop of bare fork+exec). Each start on the other CPU meets cold caches and a
//! per-CPU page list the last program did not fill: `python3 -c pass` spent +0.47 ms in the
//! kernel a run (page allocation, zeroing, the zone lock); with everything on one CPU, bare and
//! sandboxed spent the same. Kept to runs alone: forcing two at once onto one CPU
//! cost up to 16 % of the runs per second at parallelism 2, and with company the kernel's own
//! spreading is the better choice.
//!
//! It is a hint, not a limit: the program's process takes the sandbox's whole CPU set back
//! before its first step (`inside::confined`), and the kernel may still move it.

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;

/// The least memory a program must have used for the next one to be started where it did. A
/// pinned start costs the starting thread and the new process three affinity changes; a program
/// of `/bin/true`'s size (~0.7 MiB) leaves too little behind to pay for them (runs per second
/// of `/bin/true` one after the other: 3–6 % fewer with every start pinned), `python3` (~2.8
/// MiB) plenty.
const WORTH_BYTES: u64 = 2 << 20;

/// Shared by every sandbox of a [`crate::Host`].
#[derive(Debug)]
pub(crate) struct Placement {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    /// Runs from their `Run` request until their outcome (or until they are dropped).
    running: AtomicUsize,
    /// The CPU the last program started on (-1: none yet).
    last_cpu: AtomicI64,
}

/// One run's share: counts it as running until dropped.
#[derive(Debug)]
pub(crate) struct Turn {
    shared: Arc<Shared>,
}

impl Placement {
    pub(crate) fn new() -> Self {
        Placement {
            shared: Arc::new(Shared {
                running: AtomicUsize::new(0),
                last_cpu: AtomicI64::new(-1),
            }),
        }
    }

    /// A run begins: its turn, and the CPU to start it on when no other run is under way.
    pub(crate) fn begin(&self) -> (Turn, Option<u32>) {
        let others = self.shared.running.fetch_add(1, Ordering::AcqRel);
        let last = self.shared.last_cpu.load(Ordering::Relaxed);
        let cpu = (others == 0).then(|| u32::try_from(last).ok()).flatten();
        let turn = Turn {
            shared: self.shared.clone(),
        };
        (turn, cpu)
    }
}

impl Turn {
    /// The run's program started on `cpu` (when known) and used `peak_bytes` at its peak: the
    /// next run alone starts there too, if the program left enough behind to be worth it.
    pub(crate) fn ended(self, cpu: Option<u32>, peak_bytes: u64) {
        let next = match cpu {
            Some(cpu) if peak_bytes >= WORTH_BYTES => i64::from(cpu),
            _ => -1,
        };
        self.shared.last_cpu.store(next, Ordering::Relaxed);
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.shared.running.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Leaves a real-time scheduling policy (`SCHED_FIFO`, `SCHED_RR`, `SCHED_DEADLINE`) for
/// `SCHED_OTHER`, a negative nice value for 0 and the real-time I/O class for the default one:
/// what a process started by a supervisor that runs above ordinary processes (`chrt`,
/// `nice -n -5`, `ionice -c1`, a service's `Nice=`) would otherwise inherit. A lower priority
/// (`SCHED_BATCH`, `SCHED_IDLE`, a positive nice, the idle I/O class) stays. Only raw system
/// calls, async-signal-safe: also called between fork and exec.
pub(crate) fn leave_raised_priority() -> Result<(), nix::errno::Errno> {
    use nix::errno::Errno;
    const SCHED_DEADLINE: libc::c_int = 6;
    // SAFETY: queries this process's own policy; no memory is passed.
    let policy = unsafe { libc::sched_getscheduler(0) };
    if policy < 0 {
        return Err(Errno::last());
    }
    let policy = policy & !libc::SCHED_RESET_ON_FORK;
    if [libc::SCHED_FIFO, libc::SCHED_RR, SCHED_DEADLINE].contains(&policy) {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: sets this process's own policy; `param` lives across the call.
        if unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &param) } != 0 {
            return Err(Errno::last());
        }
    }
    Errno::clear();
    // SAFETY: queries this process's own nice value; no memory is passed.
    let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
    if nice == -1 && Errno::last_raw() != 0 {
        return Err(Errno::last());
    }
    if nice < 0 {
        // SAFETY: sets this process's own nice value; no memory is passed.
        if unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, 0) } != 0 {
            return Err(Errno::last());
        }
    }
    // ioprio_get/ioprio_set(IOPRIO_WHO_PROCESS, self): the class in the top bits; class 0 is
    // "none", the best-effort level the nice value gives.
    const WHO_PROCESS: libc::c_long = 1;
    const CLASS_SHIFT: libc::c_long = 13;
    const CLASS_RT: libc::c_long = 1;
    // SAFETY: queries this process's own I/O priority; no memory is passed.
    let ioprio = unsafe { libc::syscall(libc::SYS_ioprio_get, WHO_PROCESS, 0) };
    if ioprio < 0 {
        return Err(Errno::last());
    }
    if ioprio >> CLASS_SHIFT == CLASS_RT {
        // SAFETY: sets this process's own I/O priority; no memory is passed.
        if unsafe { libc::syscall(libc::SYS_ioprio_set, WHO_PROCESS, 0, 0) } != 0 {
            return Err(Errno::last());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hint goes only to a run alone among its process's runs, and names the last start.
    #[test]
    fn only_a_run_alone_is_given_the_last_cpu() {
        let p = Placement::new();
        let big = WORTH_BYTES;
        let (first, hint) = p.begin();
        assert_eq!(hint, None, "no program has started yet");
        first.ended(Some(3), big);
        let (alone, hint) = p.begin();
        assert_eq!(hint, Some(3));
        let (second, hint) = p.begin();
        assert_eq!(hint, None, "another run is under way");
        second.ended(Some(1), big);
        alone.ended(None, big);
        assert_eq!(p.begin().1, None, "the last run's start is not known");
        let (known, _) = p.begin();
        known.ended(Some(1), big);
        assert_eq!(p.begin().1, Some(1));
    }

    /// A run dropped without an end (its execution abandoned, or its start failed) no longer
    /// counts as under way, and leaves the last start as it was.
    #[test]
    fn a_dropped_turn_stops_counting() {
        let p = Placement::new();
        p.begin().0.ended(Some(1), WORTH_BYTES);
        let (abandoned, _) = p.begin();
        assert_eq!(p.begin().1, None, "a run is under way");
        drop(abandoned);
        assert_eq!(p.begin().1, Some(1));
    }

    /// A program that used little memory leaves nothing worth a pinned start.
    #[test]
    fn a_small_program_leaves_no_hint() {
        let p = Placement::new();
        p.begin().0.ended(Some(2), WORTH_BYTES);
        p.begin().0.ended(Some(2), WORTH_BYTES - 1);
        assert_eq!(p.begin().1, None);
    }
}
