//! `Execution`: one program running in a sandbox, driven step by step.
//!
//! Batch runs drive it to the end in one call ([`Execution::finish`]); interactive users (check
//! steps that wait for a prompt, a WebSocket terminal) call [`Execution::step`] with a deadline,
//! feed stdin as they go, and read the output captured so far. Everything waits in one `ppoll`
//! over the output pipes, the init's socket and the next deadline (wall limit, or the earliest
//! moment the CPU budget could run out, re-armed from the cgroup's CPU counter) — no fixed tick,
//! so a limit fires within a millisecond or so of being reached.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags};
use nix::sys::time::TimeSpec;

use crate::cancel::Cancel;
use crate::capture::{Capture, OutputSink, Stream};
use crate::control::Control;
use crate::error::SandboxError;
use crate::limits::Limits;
use crate::outcome::{Outcome, Status, Usage};
use crate::placement::Turn;
use crate::protocol::{Event, Request};
use crate::spec::{OutputOverflow, Runtime};
use crate::waker::Waker;

/// How long output may keep trickling in after every process is dead (only a leaked pipe could).
const DRAIN: Duration = Duration::from_secs(2);

/// PID 1 kills a run at its wall limit by its own clock; the supervisor sends its `Kill` only
/// this much later, for a PID 1 that did not (its clock starts a hand-off after ours).
const WALL_BACKSTOP: Duration = Duration::from_millis(50);

pub struct Execution<'s> {
    /// The sandbox's init and accounting; nothing else of the sandbox is reachable from a run.
    control: &'s mut Control,
    limits: Limits,
    start: Instant,
    /// When the wall limit runs out (PID 1 kills the run then, by its own clock).
    wall_limit_at: Instant,
    /// The supervisor's own kill, a backstop for a PID 1 that did not.
    wall_deadline: Instant,
    cpu_check: Instant,
    cpus: u32,
    capture: Capture,
    overflow: OutputOverflow,
    outs: [Option<(OwnedFd, Stream)>; 2],
    stdin: Option<OwnedFd>,
    /// stdin is a terminal (its master, or under gVisor a pipe PID 1 relays to it): "closing"
    /// it means typing end-of-file (^D), and output of both streams arrives as stdout.
    tty: Tty,
    /// The sandbox's runtime, which the outcome records.
    runtime: Runtime,
    pending_stdin: Vec<u8>,
    /// The answer to the last `ProbeStdin`, once it arrived.
    stdin_wait: Option<bool>,
    close_stdin_when_flushed: bool,
    killed_for: Option<Status>,
    blocked: Option<String>,
    finished: Option<(Option<i32>, Option<i32>, u64)>,
    /// The CPU the program started on, as `Finished` said (see [`crate::placement`]).
    started_on: Option<u32>,
    /// The run counts as under way on the host until it completes or is dropped.
    turn: Option<Turn>,
    drain_deadline: Option<Instant>,
    done: bool,
    buf: Vec<u8>,
    /// Another thread's way to end a wait early (see [`Execution::wake_on`]).
    waker: Option<Waker>,
    /// Kills the run when requested (the grading it is part of was abandoned).
    cancel: Option<Arc<Cancel>>,
    /// The kill for `cancel` was sent.
    cancelled: bool,
}

/// Whether a run has a terminal, and how the supervisor reaches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tty {
    None,
    /// The supervisor holds the pty's master.
    Master,
    /// Under gVisor: PID 1 holds the master and relays it to the run's stdin and output pipes.
    Relayed,
}

/// The supervisor's ends of a run's standard streams.
pub(crate) struct Streams {
    pub stdout: OwnedFd,
    pub stderr: Option<OwnedFd>,
    pub stdin: Option<OwnedFd>,
    pub tty: Tty,
    /// What output past the limit does.
    pub overflow: OutputOverflow,
}

impl<'s> Execution<'s> {
    pub(crate) fn new(
        control: &'s mut Control,
        limits: Limits,
        streams: Streams,
        runtime: Runtime,
        start: Instant,
        turn: Turn,
    ) -> Self {
        let Streams {
            stdout,
            stderr,
            stdin,
            tty,
            overflow,
        } = streams;
        let cpus = cpus();
        Execution {
            control,
            wall_limit_at: start + limits.wall_time.duration(),
            wall_deadline: start + limits.wall_time.duration() + WALL_BACKSTOP,
            cpu_check: start + limits.cpu_time.duration() / cpus,
            cpus,
            capture: Capture::new(limits.output.bytes()),
            overflow,
            limits,
            start,
            outs: [
                Some((stdout, Stream::Stdout)),
                stderr.map(|e| (e, Stream::Stderr)),
            ],
            stdin,
            tty,
            runtime,
            pending_stdin: Vec::new(),
            stdin_wait: None,
            close_stdin_when_flushed: false,
            killed_for: None,
            blocked: None,
            finished: None,
            started_on: None,
            turn: Some(turn),
            drain_deadline: None,
            done: false,
            buf: vec![0u8; 64 * 1024],
            waker: None,
            cancel: None,
            cancelled: false,
        }
    }

    /// From now on, [`Waker::wake`] from any thread makes a waiting [`Execution::step`] return
    /// at once, so the caller can act on what it was woken for (input, a kill).
    pub fn wake_on(&mut self, waker: &Waker) {
        self.waker = Some(waker.clone());
    }

    /// The run is killed (its whole tree, as for a limit) once `cancel` is requested — at once
    /// when it already is. It then ends as `signaled` (SIGKILL), unless a limit fired first.
    pub fn cancel_on(&mut self, cancel: &Arc<Cancel>) {
        self.cancel = Some(cancel.clone());
    }

    /// Queues bytes for the program's standard input (written as the pipe accepts them).
    pub fn write_stdin(&mut self, data: &[u8]) {
        if self.stdin.is_some() {
            self.pending_stdin.extend_from_slice(data);
        }
    }

    /// Closes standard input once everything queued has been written (the program then sees EOF).
    pub fn close_stdin(&mut self) {
        if self.tty != Tty::None {
            // The terminal stays; ^D at the start of a line reads as end-of-file.
            if !self.close_stdin_when_flushed && self.stdin.is_some() {
                self.pending_stdin.push(0x04);
                self.close_stdin_when_flushed = true;
            }
            return;
        }
        self.close_stdin_when_flushed = true;
        if self.pending_stdin.is_empty() {
            self.stdin = None;
        }
    }

    /// Resizes the terminal of a run with one (no-op otherwise).
    pub fn resize(&mut self, cols: u16, rows: u16) -> Result<(), SandboxError> {
        match (self.tty, self.stdin.as_ref()) {
            (Tty::Master, Some(master)) => crate::inside::pty::resize(master.as_fd(), cols, rows)
                .map_err(|e| SandboxError::io("resizing the terminal", e)),
            (Tty::Relayed, _) if self.finished.is_none() => {
                self.control.send(&Request::Resize { cols, rows })
            }
            _ => Ok(()),
        }
    }

    /// Sends a signal to the program's process group (like Ctrl-C in a terminal for SIGINT).
    pub fn signal(&mut self, signal: i32) -> Result<(), SandboxError> {
        if self.finished.is_none() {
            self.control.send(&Request::Signal { signal })?;
        }
        Ok(())
    }

    /// Kills the whole run now (reported as `signaled`, unless a limit already fired).
    pub fn kill(&mut self) -> Result<(), SandboxError> {
        if self.finished.is_none() {
            self.control.send(&Request::Kill)?;
        }
        Ok(())
    }

    /// Output captured so far.
    pub fn stdout_so_far(&self) -> &[u8] {
        &self.capture.stdout.bytes
    }
    pub fn stderr_so_far(&self) -> &[u8] {
        &self.capture.stderr.bytes
    }
    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    /// Asks the kernel whether the program is blocked reading its standard input right now
    /// (false once it has ended). Other events that arrive meanwhile are handled as usual.
    pub fn waiting_for_stdin(&mut self, sink: &mut dyn OutputSink) -> Result<bool, SandboxError> {
        if self.finished.is_some() {
            return Ok(false);
        }
        self.stdin_wait = None;
        self.control.send(&Request::ProbeStdin)?;
        while self.stdin_wait.is_none() && self.finished.is_none() {
            self.turn(None, sink)?;
        }
        Ok(self.stdin_wait.take().unwrap_or(false))
    }

    /// True once the main program has ended (output may still be draining).
    pub fn has_exited(&self) -> bool {
        self.finished.is_some()
    }

    /// Waits for events until `until` (or, with `None`, until something happens), forwarding
    /// output to `sink`. Returns `Some(outcome)` once the run is over.
    pub fn step(
        &mut self,
        until: Option<Instant>,
        sink: &mut dyn OutputSink,
    ) -> Result<Option<Outcome>, SandboxError> {
        loop {
            if let Some(o) = self.try_complete()? {
                return Ok(Some(o));
            }
            let progressed = self.turn(until, sink)?;
            if let Some(o) = self.try_complete()? {
                return Ok(Some(o));
            }
            if progressed || until.is_some_and(|u| Instant::now() >= u) {
                return Ok(None);
            }
        }
    }

    /// Drives the run to its end.
    pub fn finish(mut self, sink: &mut dyn OutputSink) -> Result<Outcome, SandboxError> {
        self.close_stdin();
        loop {
            if let Some(o) = self.step(None, sink)? {
                return Ok(o);
            }
        }
    }

    fn kill_if_cancelled(&mut self) -> Result<(), SandboxError> {
        if self.cancelled || self.finished.is_some() {
            return Ok(());
        }
        if self.cancel.as_ref().is_some_and(|c| c.requested()) {
            self.cancelled = true;
            tracing::debug!("the run was cancelled: it is killed");
            return self.control.send(&Request::Kill);
        }
        Ok(())
    }

    fn enforce_limits(&mut self, now: Instant) -> Result<(), SandboxError> {
        if self.finished.is_some() || self.killed_for.is_some() {
            return Ok(());
        }
        if now >= self.wall_deadline {
            self.killed_for = Some(Status::WallTimeLimit);
            return self.control.send(&Request::Kill);
        }
        if now >= self.wall_limit_at {
            // The wall limit ran out first and PID 1 is killing the run for it: a CPU budget
            // spent meanwhile (a busy program's CPU time keeps pace with the wall clock) must not
            // take the verdict from it.
            return Ok(());
        }
        if now >= self.cpu_check {
            let limit = self.limits.cpu_time.duration();
            let used = self.control.cpu_time()?;
            if used >= limit {
                self.killed_for = Some(Status::TimeLimit);
                return self.control.send(&Request::Kill);
            }
            // The earliest moment the budget could run out with every CPU busy.
            self.cpu_check = now + ((limit - used) / self.cpus).max(Duration::from_micros(500));
        }
        Ok(())
    }

    /// One `ppoll` and the handling of what it reported. Returns whether anything happened that a
    /// caller may want to look at (output, exit).
    fn turn(
        &mut self,
        until: Option<Instant>,
        sink: &mut dyn OutputSink,
    ) -> Result<bool, SandboxError> {
        let now = Instant::now();
        self.kill_if_cancelled()?;
        self.enforce_limits(now)?;
        let mut deadline = match self.drain_deadline {
            Some(d) => d,
            None if self.finished.is_none() && self.killed_for.is_none() => {
                self.wall_deadline.min(self.cpu_check)
            }
            None => now + Duration::from_secs(5),
        };
        if let Some(u) = until {
            deadline = deadline.min(u);
        }
        let timeout = deadline.saturating_duration_since(now);

        let ctl = self.control.fd();
        let mut pfds = vec![PollFd::new(ctl, PollFlags::POLLIN)];
        let mut slots = Vec::new();
        for (i, o) in self.outs.iter().enumerate() {
            if let Some((fd, _)) = o {
                slots.push((pfds.len(), i));
                pfds.push(PollFd::new(fd.as_fd(), PollFlags::POLLIN));
            }
        }
        let stdin_slot = match (&self.stdin, self.pending_stdin.is_empty()) {
            (Some(w), false) => {
                pfds.push(PollFd::new(w.as_fd(), PollFlags::POLLOUT));
                Some(pfds.len() - 1)
            }
            _ => None,
        };
        let wake_slot = self.waker.as_ref().map(|w| {
            pfds.push(PollFd::new(w.fd(), PollFlags::POLLIN));
            pfds.len() - 1
        });
        // Watched until the kill is sent (the next turn sends it): the pipe stays readable once
        // requested.
        if let Some(fd) = self
            .cancel
            .as_ref()
            .filter(|_| !self.cancelled && self.finished.is_none())
            .and_then(|c| c.fd())
        {
            pfds.push(PollFd::new(fd, PollFlags::POLLIN));
        }
        match nix::poll::ppoll(&mut pfds, Some(TimeSpec::from_duration(timeout)), None) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(SandboxError::io("ppoll", e.into())),
        }
        let ready: Vec<bool> = pfds
            .iter()
            .map(|p| p.revents().is_some_and(|r| !r.is_empty()))
            .collect();
        drop(pfds);

        let mut progressed = false;
        for (slot, i) in slots {
            if ready[slot] {
                progressed |= self.read_stream(i, sink)?;
            }
        }
        if let Some(slot) = stdin_slot {
            if ready[slot] {
                self.flush_stdin();
            }
        }
        if let (Some(slot), Some(w)) = (wake_slot, &self.waker) {
            if ready[slot] {
                w.drain();
                progressed = true;
            }
        }
        if ready[0] {
            progressed = true;
            let event = match self.control.next_event() {
                Ok(event) => event,
                Err(_) if self.finished.is_none() && self.control.init_died_of_oom() => {
                    tracing::info!(
                        "the memory limit's OOM kill took the sandbox's kernel (gVisor)"
                    );
                    let wall_ns = self.start.elapsed().as_nanos() as u64;
                    self.finished = Some((None, Some(libc::SIGKILL), wall_ns));
                    self.stdin = None;
                    self.drain_deadline = Some(Instant::now() + DRAIN);
                    return Ok(true);
                }
                Err(e) => return Err(e),
            };
            match event {
                Event::Blocked { syscall } => {
                    tracing::info!(%syscall, "a forbidden syscall: the run is killed");
                    self.blocked = Some(syscall)
                }
                Event::StdinWait { waiting } => self.stdin_wait = Some(waiting),
                Event::Finished {
                    exit_code,
                    signal,
                    wall_ns,
                    wall_limit,
                    cpu,
                } => {
                    self.started_on = cpu;
                    if wall_limit && self.killed_for.is_none() {
                        self.killed_for = Some(Status::WallTimeLimit);
                    }
                    self.finished = Some((exit_code, signal, wall_ns));
                    self.stdin = None;
                    self.drain_deadline = Some(Instant::now() + DRAIN);
                    if self.tty == Tty::None && self.runtime == Runtime::Native {
                        self.drain_pipes(sink)?;
                    }
                }
                Event::Failed { error } => return Err(SandboxError::Init(error)),
                other => {
                    return Err(SandboxError::Protocol(format!(
                        "unexpected {other:?} during a run"
                    )))
                }
            }
        }
        Ok(progressed)
    }

    /// After `Finished` of a native run without a terminal: every process of the run is dead and
    /// PID 1 never writes to the output pipes, so everything the run wrote is in them now. They
    /// are read until empty and count as ended: PID 1 closes its copies only after the event,
    /// and their end-of-file used to wake this thread once for each pipe before it (two more
    /// wake-ups a run, each preempting PID 1 on its way to `Finished`).
    fn drain_pipes(&mut self, sink: &mut dyn OutputSink) -> Result<(), SandboxError> {
        for i in 0..self.outs.len() {
            while self.outs[i].is_some() {
                if !self.read_stream(i, sink)? {
                    // Empty (the pipes are non-blocking): nothing more will come.
                    self.outs[i] = None;
                }
            }
        }
        Ok(())
    }

    fn read_stream(&mut self, i: usize, sink: &mut dyn OutputSink) -> Result<bool, SandboxError> {
        let Some((fd, stream)) = self.outs[i].as_ref() else {
            return Ok(false);
        };
        let stream = *stream;
        let read = loop {
            match nix::unistd::read(fd.as_fd(), &mut self.buf) {
                Err(nix::errno::Errno::EINTR) => continue,
                r => break r,
            }
        };
        match read {
            Ok(0) => {
                self.outs[i] = None;
                Ok(true)
            }
            Ok(n) => {
                let data = &self.buf[..n];
                // Live output (a terminal, a WebSocket) gets what the capture keeps and no
                // more: the output limit bounds what a program can push at a client too.
                let shown = &data[..n.min(self.capture.room())];
                if !shown.is_empty() {
                    match stream {
                        Stream::Stdout => sink.stdout(shown),
                        Stream::Stderr => sink.stderr(shown),
                    }
                    if sink.closed() && self.killed_for.is_none() && self.finished.is_none() {
                        // Reported as `signaled`: the caller knows why (its own sink said so).
                        self.control.send(&Request::Kill)?;
                    }
                }
                if !self.capture.push(stream, data)
                    && self.overflow == OutputOverflow::Ends
                    && self.killed_for.is_none()
                    && self.finished.is_none()
                {
                    self.killed_for = Some(Status::OutputLimit);
                    self.control.send(&Request::Kill)?;
                }
                Ok(true)
            }
            Err(nix::errno::Errno::EAGAIN) => Ok(false),
            Err(_) => {
                self.outs[i] = None;
                Ok(true)
            }
        }
    }

    fn flush_stdin(&mut self) {
        let Some(w) = self.stdin.as_ref() else { return };
        match nix::unistd::write(w, &self.pending_stdin) {
            Ok(n) => {
                self.pending_stdin.drain(..n);
            }
            Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EINTR) => {}
            // The program closed its stdin: what it did not read is dropped, like a shell pipe.
            Err(_) => {
                self.pending_stdin.clear();
                self.stdin = None;
            }
        }
        if self.pending_stdin.is_empty() && self.close_stdin_when_flushed && self.tty == Tty::None {
            self.stdin = None;
        }
    }

    /// Once the program ended and output drained (or the drain timed out), builds the outcome.
    fn try_complete(&mut self) -> Result<Option<Outcome>, SandboxError> {
        if self.done {
            return Err(SandboxError::Protocol("the run is already over".into()));
        }
        let Some((exit_code, signal, wall_ns)) = self.finished else {
            return Ok(None);
        };
        let drained = self.outs.iter().all(Option::is_none);
        if !drained && self.drain_deadline.is_some_and(|d| Instant::now() < d) {
            return Ok(None);
        }
        self.done = true;
        let mut usage = self.control.run_usage()?;
        if self.killed_for == Some(Status::TimeLimit) {
            // Killed when the exact clock reached the limit: the report agrees with the verdict
            // even where the cgroup's counter (what runs are charged) came out a hair lower.
            usage.cpu_time = usage.cpu_time.max(self.control.cpu_time()?);
        }
        if let Some(turn) = self.turn.take() {
            turn.ended(self.started_on, usage.memory_peak_bytes);
        }
        self.control.run_finished();
        let mut outcome = Outcome {
            status: Status::Ok,
            exit_code,
            signal,
            usage: Usage {
                cpu_time_ms: usage.cpu_time.as_millis() as u64,
                wall_time_ms: wall_ns / 1_000_000,
                memory_peak_bytes: usage.memory_peak_bytes,
                // Under gVisor the host cgroup's pids figures count gVisor's threads, not the
                // program's processes; gVisor's own pids cgroup keeps no peak and no event count.
                pids_peak: usage.pids_peak.filter(|_| self.runtime == Runtime::Native),
                pids_limit_hit: usage.pids_limit_hit && self.runtime == Runtime::Native,
                oom_killed: usage.oom_killed,
                disk_used_bytes: crate::hostfs::used_bytes(self.control.workdir()),
                output_bytes: self.capture.total(),
            },
            stdout: std::mem::take(&mut self.capture.stdout),
            stderr: std::mem::take(&mut self.capture.stderr),
            script: std::mem::take(&mut self.capture.script),
            blocked_syscall: self.blocked.take(),
            limits: self.limits.clone(),
            error: None,
            copy_out_skipped: Vec::new(),
            copy_out_error: None,
            sandbox: None,
            runtime: self.runtime,
        };
        outcome.status = verdict(&outcome, self.killed_for, usage.oom_killed);
        Ok(Some(outcome))
    }
}

/// CPUs this process may use, asked once: `available_parallelism` reads `/proc/self/cgroup` and
/// the CPU quota files on every call, four file opens that each run would otherwise pay.
fn cpus() -> u32 {
    static CPUS: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *CPUS.get_or_init(|| {
        std::thread::available_parallelism()
            .map(|n| n.get() as u32)
            .unwrap_or(1)
    })
}

/// Decides the status; the limit corral enforced wins, then a blocked syscall, then what the
/// kernel tells us.
fn verdict(o: &Outcome, killed_for: Option<Status>, oom_killed: bool) -> Status {
    if let Some(s) = killed_for {
        return s;
    }
    if o.blocked_syscall.is_some() {
        return Status::BlockedSyscall;
    }
    if oom_killed && o.exit_code != Some(0) {
        return Status::MemoryLimit;
    }
    let cpu_over = o.usage.cpu_time_ms >= o.limits.cpu_time.duration().as_millis() as u64;
    // SIGXCPU is the `RLIMIT_CPU` backstop's only when the run's CPU time got there: natively the
    // backstop sits 2 s above the limit, so a program ended by a SIGXCPU it sent itself (or by a
    // `RLIMIT_CPU` it lowered itself) below the limit merely died of a signal. Under gVisor the
    // program's own CPU clock may run ahead of the host's figure (it counts runnable time), so
    // its backstop's SIGXCPU cannot be told from one the program sent itself.
    let backstop_xcpu = cpu_over || o.runtime == Runtime::Gvisor;
    match (o.exit_code, o.signal) {
        (_, Some(s))
            if (s == libc::SIGXCPU && backstop_xcpu) || (s == libc::SIGKILL && cpu_over) =>
        {
            Status::TimeLimit
        }
        (_, Some(_)) => Status::Signaled,
        (Some(0), _) => Status::Ok,
        _ => Status::NonzeroExit,
    }
}
