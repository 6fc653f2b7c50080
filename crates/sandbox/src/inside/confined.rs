//! A thread of PID 1 that takes on the programs' confinement once — `no_new_privs`, the Landlock
//! domain, the seccomp filter with its listener — and starts each program's process, which
//! inherits all three instead of setting them up itself.
//!
//! Why: installing the filter was the largest step of a warm run's process (~55 µs of its ~90:
//! at every install the kernel converts the program to eBPF, JIT-compiles it and works out which
//! calls it always allows, and at the exit it frees all that again, on a worker thread), and
//! Landlock's `restrict_self` came next. A process inherits the filter, the Landlock domain and
//! `no_new_privs` of the *thread* that cloned it, and all three belong to a thread, not to its
//! process: so one thread of PID 1 wears them, while the main thread — which resets the sandbox
//! with calls the filter forbids — stays as it was. Credentials belong to a thread too, but this
//! one keeps PID 1's: each program's process still drops them itself, now under the filter.
//!
//! The program's process shares PID 1's memory until its exec ([`vfork`]): this thread sleeps
//! in the clone, and PID 1's main thread sleeps in [`Confined::spawn`] until it returns — only
//! waking for a call the filter reports before the exec, which [`allowed`] rules out where this
//! thread is used (it answers it all the same rather than let the two wait for each other).
//!
//! The listener stays with the thread for the sandbox's life (one filter for every run), so it
//! never hangs up at a run's end either. Used only rootful, outside gVisor and build mode, with
//! the sandbox's own filter (a run's stricter one is installed by its process, as before).

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError};
use std::thread::JoinHandle;

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::sys::eventfd::{EfdFlags, EventFd};
use nix::unistd::Pid;

use corral_seccomp::{CompiledFilter, Verdict, AUDIT_ARCH_NATIVE};

use crate::inside::error::SetupError;
use crate::inside::fds::above_runs;
use crate::inside::vfork;

/// One program's process to start: a child function behind a plain pointer, its stack, and the
/// CPU to start it on (see `crate::placement`).
struct Job {
    call: unsafe fn(*mut ()) -> isize,
    data: *mut (),
    stack: *mut vfork::Stack,
    cpu: Option<u32>,
}

/// A started process, and the CPU it started on.
type Started = (nix::Result<Pid>, Option<u32>);

// SAFETY: the pointers are used on the confined thread only while the main thread, which owns
// what they point to, waits in `Confined::spawn` for that use to end.
unsafe impl Send for Job {}

/// What the thread needs to confine itself, borrowed from the main thread while it waits.
struct Setup {
    filter: *const CompiledFilter,
    landlock: Option<*const ::landlock::RulesetCreated>,
}

// SAFETY: read on the confined thread only while `Confined::start` waits for its answer.
unsafe impl Send for Setup {}

/// PID 1's confined thread, and the seccomp listener of the filter it wears.
pub(crate) struct Confined {
    jobs: Option<SyncSender<Job>>,
    results: Receiver<Started>,
    /// Written by the thread when a result is ready (or it ended): the main thread polls it
    /// together with the listener.
    done: EventFd,
    listener: OwnedFd,
    tid: Pid,
    thread: Option<JoinHandle<()>>,
}

impl Confined {
    /// Starts the thread and confines it: `no_new_privs`, `landlock` (when given), `filter`.
    ///
    /// The thread takes a PID of the sandbox's namespace: through `last_pid` (PID 1's
    /// `ns_last_pid`) it is given one at the top of the range, below `pid_max`, out of the way of
    /// the numbering each run restarts at 2 — then the numbering restarts.
    pub(crate) fn start(
        filter: &CompiledFilter,
        landlock: Option<&::landlock::RulesetCreated>,
        (last_pid, pid_max): (&std::fs::File, u64),
    ) -> Result<Confined, SetupError> {
        use std::os::unix::fs::FileExt;
        let number = |n: u64| {
            last_pid
                .write_at(n.to_string().as_bytes(), 0)
                .map_err(|e| SetupError::Confined(format!("placing its PID: {e}")))
        };
        number(pid_max.saturating_sub(2).max(2))?;
        let started = Self::start_thread(filter, landlock);
        number(1)?;
        started
    }

    fn start_thread(
        filter: &CompiledFilter,
        landlock: Option<&::landlock::RulesetCreated>,
    ) -> Result<Confined, SetupError> {
        let (jobs, job_queue) = mpsc::sync_channel::<Job>(1);
        let (result_tx, results) = mpsc::sync_channel::<Started>(1);
        let (ready_tx, ready) = mpsc::sync_channel::<Result<(OwnedFd, Pid), SetupError>>(1);
        let done = EventFd::from_flags(EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)
            .map_err(|e| SetupError::Confined(format!("eventfd: {e}")))?;
        let done_fd = done.as_fd().as_raw_fd();
        let setup = Setup {
            filter,
            landlock: landlock.map(|l| l as *const _),
        };
        let thread = std::thread::Builder::new()
            .name("confined".into())
            .stack_size(256 << 10)
            .spawn(move || {
                // No signal is ever this thread's to take: SIGCHLD of the processes it starts must
                // stay pending for PID 1's signalfd (it is blocked here already, as in the thread
                // that made this one; all of them are, to be sure).
                let _ = nix::sys::signal::SigSet::all().thread_block();
                let setup = setup;
                // SAFETY: `start` waits for `ready` before its borrows end (see `Setup`).
                let confined = unsafe { confine(&*setup.filter, setup.landlock.map(|l| &*l)) }
                    .map(|listener| (listener, nix::unistd::gettid()));
                let ok = confined.is_ok();
                if ready_tx.send(confined).is_err() || !ok {
                    return;
                }
                serve(job_queue, result_tx, done_fd);
            })
            .map_err(|e| SetupError::Confined(format!("starting it: {e}")))?;
        let (listener, tid) = match ready.recv() {
            Ok(Ok(ready)) => ready,
            Ok(Err(e)) => {
                let _ = thread.join();
                return Err(e);
            }
            Err(_) => {
                let _ = thread.join();
                return Err(SetupError::Confined("it ended".into()));
            }
        };
        Ok(Confined {
            jobs: Some(jobs),
            results,
            done,
            listener,
            tid,
            thread: Some(thread),
        })
    }

    /// The thread's id: a report from it is its own call, not a program's.
    pub(crate) fn tid(&self) -> Pid {
        self.tid
    }

    /// The listener of the filter every process started here wears.
    pub(crate) fn listener(&self) -> BorrowedFd<'_> {
        self.listener.as_fd()
    }

    /// Starts `child` from the confined thread, sharing PID 1's memory until it execs or exits,
    /// on `cpu` if it can, and returns its pid and the CPU it started on. Meanwhile this thread
    /// only waits; a call the filter reports before the exec goes to `on_report` (which must end
    /// the process that made it).
    ///
    /// # Safety
    /// As [`vfork::spawn`]: no other thread of PID 1 may run while the child uses the shared
    /// memory (the caller is PID 1's main thread, which waits here), and `child` must end in
    /// `execve` or `_exit`, never returning or unwinding.
    pub(crate) unsafe fn spawn<F: FnMut() -> isize>(
        &self,
        stack: &mut vfork::Stack,
        child: &mut F,
        mut on_report: impl FnMut(BorrowedFd<'_>),
        cpu: Option<u32>,
    ) -> Result<(Pid, Option<u32>), SetupError> {
        /// Calls the child function `data` points to.
        ///
        /// # Safety
        /// `data` is the `&mut F` that `spawn` passed, alive until `spawn` returns.
        unsafe fn trampoline<F: FnMut() -> isize>(data: *mut ()) -> isize {
            // SAFETY: per this function's contract.
            unsafe { (*data.cast::<F>())() }
        }
        let job = Job {
            call: trampoline::<F>,
            data: (child as *mut F).cast(),
            stack,
            cpu,
        };
        let gone = || SetupError::Confined("it ended".into());
        self.jobs
            .as_ref()
            .ok_or_else(gone)?
            .send(job)
            .map_err(|_| gone())?;
        loop {
            let mut fds = [
                PollFd::new(self.done.as_fd(), PollFlags::POLLIN),
                PollFd::new(self.listener.as_fd(), PollFlags::POLLIN),
            ];
            match nix::poll::poll(&mut fds, PollTimeout::NONE) {
                Ok(_) | Err(Errno::EINTR) => {}
                Err(e) => return Err(SetupError::Confined(format!("poll: {e}"))),
            }
            let reported = fds[1]
                .revents()
                .is_some_and(|r| r.contains(PollFlags::POLLIN));
            let finished = fds[0].revents().is_some_and(|r| !r.is_empty());
            if reported {
                on_report(self.listener.as_fd());
            }
            if finished {
                let _ = self.done.read();
                return match self.results.try_recv() {
                    Ok((started, cpu)) => started.map(|pid| (pid, cpu)).map_err(SetupError::Fork),
                    Err(TryRecvError::Empty) => continue,
                    Err(TryRecvError::Disconnected) => Err(gone()),
                };
            }
        }
    }
}

impl Drop for Confined {
    fn drop(&mut self) {
        // The thread ends when its queue closes.
        drop(self.jobs.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// On the confined thread: the three steps, in the order a program's process takes them (see
/// `child::contain_and_exec`), then the listener moved above the runs' descriptors.
fn confine(
    filter: &CompiledFilter,
    landlock: Option<&::landlock::RulesetCreated>,
) -> Result<OwnedFd, SetupError> {
    // SAFETY: prctl with integer arguments; it sets this thread's flag only.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(SetupError::NoNewPrivs(Errno::last()));
    }
    if let Some(ruleset) = landlock {
        crate::inside::landlock::apply(ruleset)?;
    }
    let listener = filter
        .install_with_listener()
        .map_err(|e| SetupError::Seccomp(Errno::from_raw(e)))?;
    // SAFETY: the filter's new listener, owned by nothing else.
    let listener = unsafe { OwnedFd::from_raw_fd(listener) };
    above_runs(listener).map_err(SetupError::Dup)
}

/// On the confined thread: starts each job's process and hands back its pid, until the queue
/// closes. Only calls [`allowed`] checks are made here (a channel's futex waits and wakes, the
/// clone, the eventfd's write, this thread's CPU affinity).
///
/// A job's CPU is where its process starts: this thread holds to that CPU alone for the clone
/// (the process inherits the mask, and the kernel places a new process within it), the process
/// takes the thread's whole set back as its first call, and the thread after the clone. The
/// process notes the CPU it is on before anything else, in this thread's memory, which it
/// shares until its exec.
fn serve(jobs: Receiver<Job>, results: SyncSender<Started>, done: i32) {
    let signal = || {
        // SAFETY: an 8-byte write from a local to the eventfd the main thread keeps open while
        // this thread lives (it joins it before closing the eventfd).
        unsafe { libc::write(done, (&1u64 as *const u64).cast(), 8) };
    };
    // The CPUs this thread may use, as PID 1's were: what every process goes back to.
    let all = Affinity::current();
    while let Ok(job) = jobs.recv() {
        // Held to the job's CPU: the whole set to go back to.
        let pinned = match (&all, job.cpu) {
            (Some(all), Some(cpu))
                if all.has(cpu) && Affinity::only(cpu).is_some_and(|one| one.set().is_ok()) =>
            {
                Some(all)
            }
            _ => None,
        };
        let mut started_on: Option<u32> = None;
        let on = &mut started_on;
        let mut child = || {
            if let Some(all) = pinned {
                // Failing only if every CPU of the set went away meanwhile; the process then
                // keeps the one CPU, which the sandbox may use. A placement, not a limit.
                let _ = all.set();
            }
            *on = current_cpu();
            // SAFETY: the main thread's `spawn` keeps `data` alive until it has our result.
            unsafe { (job.call)(job.data) }
        };
        // SAFETY: the main thread waits in `Confined::spawn` while the child runs (no other thread
        // of PID 1 runs), and the child function ends in execve or _exit. `stack` is the main
        // thread's, lent for this job.
        let started = unsafe { vfork::spawn(&mut *job.stack, &mut child) };
        if let Some(all) = pinned {
            let _ = all.set();
        }
        let sent = results.send((started, started_on)).is_ok();
        signal();
        if !sent {
            break;
        }
    }
    signal();
}

/// A CPU affinity mask of this thread (pid 0 is the calling thread, in the child its process).
struct Affinity(CpuSet);

impl Affinity {
    fn current() -> Option<Affinity> {
        sched_getaffinity(Pid::from_raw(0)).ok().map(Affinity)
    }

    fn only(cpu: u32) -> Option<Affinity> {
        let mut set = CpuSet::new();
        set.set(cpu as usize).ok()?;
        Some(Affinity(set))
    }

    fn has(&self, cpu: u32) -> bool {
        self.0.is_set(cpu as usize).unwrap_or(false)
    }

    fn set(&self) -> nix::Result<()> {
        sched_setaffinity(Pid::from_raw(0), &self.0)
    }
}

/// The CPU the calling thread is on, from `getcpu` itself: in the child the C library's cached
/// answer (in the thread's `rseq` area, which the child shares but the kernel does not update for
/// it) would be the thread's.
fn current_cpu() -> Option<u32> {
    let mut cpu: libc::c_uint = 0;
    // SAFETY: getcpu writes one unsigned int to `cpu`; the node and cache pointers may be null.
    let r = unsafe {
        libc::syscall(
            libc::SYS_getcpu,
            &mut cpu as *mut libc::c_uint,
            std::ptr::null_mut::<libc::c_uint>(),
            std::ptr::null_mut::<libc::c_void>(),
        )
    };
    (r == 0).then_some(cpu)
}

/// Whether the confined thread may start the program's processes under `filter`: every call
/// from the clone to the exec — this thread's clone, the child's steps (`child::contain_and_exec`
/// with the thread's confinement already in place) as a process of `uid`/`gid` makes them —
/// must be allowed outright, never reported to PID 1.
pub(crate) fn allowed(filter: &CompiledFilter, uid: u32, gid: u32) -> bool {
    // A pointer-like value: the filters never look into pointers, only at numbers.
    const P: u64 = 0x7f00_0000_1000;
    let (uid, gid) = (u64::from(uid), u64::from(gid));
    let private = |op: i32| (op | libc::FUTEX_PRIVATE_FLAG) as u64;
    let flags = (libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC) as u64;
    let mut calls: Vec<(libc::c_long, [u64; 6])> = vec![
        // This thread: its clone, the channel's futexes, the eventfd.
        (
            libc::SYS_clone,
            [
                (libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD) as u64,
                P,
                0,
                0,
                0,
                0,
            ],
        ),
        (libc::SYS_futex, [P, private(libc::FUTEX_WAIT), 0, 0, 0, 0]),
        (libc::SYS_futex, [P, private(libc::FUTEX_WAKE), 1, 0, 0, 0]),
        (
            libc::SYS_futex,
            [
                P,
                private(libc::FUTEX_WAIT_BITSET),
                0,
                P,
                0,
                u32::MAX as u64,
            ],
        ),
        (libc::SYS_sched_yield, [0; 6]),
        (libc::SYS_write, [260, P, 8, 0, 0, 0]),
        // Its CPU for the clone, and the child's taking the whole set back; where it started.
        (libc::SYS_sched_getaffinity, [0, 128, P, 0, 0, 0]),
        (libc::SYS_sched_setaffinity, [0, 128, P, 0, 0, 0]),
        (libc::SYS_getcpu, [P, 0, 0, 0, 0, 0]),
        // The child: signals, the OOM score, its session, limits, stdio, terminal, directory.
        (
            libc::SYS_rt_sigaction,
            [libc::SIGPIPE as u64, P, P, 8, 0, 0],
        ),
        (
            libc::SYS_rt_sigprocmask,
            [libc::SIG_SETMASK as u64, P, 0, 8, 0, 0],
        ),
        (
            libc::SYS_openat,
            [libc::AT_FDCWD as u64, P, flags, 0o666, 0, 0],
        ),
        (libc::SYS_write, [3, P, 1, 0, 0, 0]),
        (libc::SYS_close, [3, 0, 0, 0, 0, 0]),
        (libc::SYS_setsid, [0; 6]),
        (libc::SYS_fcntl, [0, libc::F_SETFD as u64, 0, 0, 0, 0]),
        (libc::SYS_ioctl, [0, libc::TIOCSCTTY, 0, 0, 0, 0]),
        (libc::SYS_chdir, [P, 0, 0, 0, 0, 0]),
        // Its identity (raw calls, see `Kernel`), and the proof root is gone.
        (
            libc::SYS_prctl,
            [
                libc::PR_CAP_AMBIENT as u64,
                libc::PR_CAP_AMBIENT_CLEAR_ALL as u64,
                0,
                0,
                0,
                0,
            ],
        ),
        (libc::SYS_setgroups, [0; 6]),
        (libc::SYS_setresgid, [gid, gid, gid, 0, 0, 0]),
        (libc::SYS_setresuid, [uid, uid, uid, 0, 0, 0]),
        (libc::SYS_setuid, [0; 6]),
    ];
    for resource in [
        libc::RLIMIT_NOFILE,
        libc::RLIMIT_FSIZE,
        libc::RLIMIT_CPU,
        libc::RLIMIT_NPROC,
        libc::RLIMIT_CORE,
        libc::RLIMIT_MEMLOCK,
        libc::RLIMIT_MSGQUEUE,
        libc::RLIMIT_RTPRIO,
        libc::RLIMIT_NICE,
    ] {
        calls.push((libc::SYS_prlimit64, [0, resource as u64, P, 0, 0, 0]));
    }
    // Leaving a raised priority (`crate::placement::leave_raised_priority`).
    calls.extend([
        (libc::SYS_sched_getscheduler, [0; 6]),
        (libc::SYS_sched_setscheduler, [0, 0, P, 0, 0, 0]),
        (libc::SYS_getpriority, [0; 6]),
        (libc::SYS_setpriority, [0; 6]),
        (libc::SYS_ioprio_get, [1, 0, 0, 0, 0, 0]),
        (libc::SYS_ioprio_set, [1, 0, 0, 0, 0, 0]),
    ]);
    for to in 0..3 {
        #[cfg(target_arch = "x86_64")]
        calls.push((libc::SYS_dup2, [3, to, 0, 0, 0, 0]));
        calls.push((libc::SYS_dup3, [3, to, 0, 0, 0, 0]));
    }
    calls
        .iter()
        .all(|&(nr, args)| filter.evaluate(AUDIT_ARCH_NATIVE, nr as i32, args) == Verdict::Allow)
        // ...and the last calls, which a child that installs its own filter makes under it too.
        && vfork::allowed(filter)
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_seccomp::{Profile, Restrictions};
    use std::str::FromStr;

    fn profile(name: &str) -> CompiledFilter {
        let r = Restrictions::from_str(name).expect("a profile name");
        CompiledFilter::compile(&Profile::default_profile().with_restrictions(r)).expect("compile")
    }

    /// The default profiles let every step through; `no_spawn` reports the exec (and the clone).
    #[test]
    fn the_default_profiles_allow_the_steps_and_no_spawn_does_not() {
        assert!(allowed(&profile("default"), 1000, 1000));
        assert!(allowed(&profile("no_sockets"), 1000, 1000));
        assert!(!allowed(&profile("no_spawn"), 1000, 1000));
    }
}
