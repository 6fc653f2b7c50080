//! `Sandbox`: one isolated environment (namespaces, root, working directory) served by its init,
//! and the supervisor loop that runs a program in it — output capture, time limits, the verdict.
//!
//! The supervisor is event-driven: one `ppoll` over the output pipes, the init's socket and the
//! next deadline (wall limit, or the moment the CPU budget could first run out). Nothing polls on
//! a fixed tick, so a limit fires within a millisecond or so of being reached.

use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::fcntl::{fcntl, FcntlArg, OFlag};
use nix::poll::{PollFd, PollFlags};
use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};
use nix::sys::time::TimeSpec;

use crate::capture::{Capture, OutputSink, Stream};
use crate::error::SandboxError;
use crate::host::Host;
use crate::limits::Limits;
use crate::outcome::{Outcome, Status, Usage};
use crate::protocol::{self, Event, Request, Rlimits, Setup};
use crate::spec::{Mount, RunSpec, Stdin};

/// The shape of a sandbox: what is fixed when it is built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxConfig {
    pub network: bool,
    pub mounts: Vec<Mount>,
    /// Size of the working directory, `/tmp` and `/dev/shm` (each).
    pub disk_bytes: u64,
    pub inodes: u64,
}

impl SandboxConfig {
    pub fn for_spec(spec: &RunSpec) -> Self {
        SandboxConfig {
            network: spec.network,
            mounts: spec.mounts.clone(),
            disk_bytes: spec.limits.disk.bytes(),
            inodes: (spec.limits.disk.bytes() / 4096).clamp(256, 1 << 20),
        }
    }
}

/// A live sandbox. Dropping it ends every process in it and removes everything it created.
pub struct Sandbox {
    host: Arc<Host>,
    keeper: Option<Child>,
    ctl: OwnedFd,
    workdir: OwnedFd,
    uid: u32,
    gid: u32,
    pub landlock_abi: Option<i32>,
}

impl Sandbox {
    pub fn create(host: &Arc<Host>, config: &SandboxConfig) -> Result<Sandbox, SandboxError> {
        let (n, _) = host.unique();
        // A uid of its own per sandbox (like isolate's boxes), far from real users.
        let uid = 60_000 + (std::process::id().wrapping_mul(31).wrapping_add(n) % 30_000);
        let filter = host.filter(config.network)?;
        let (mine, theirs) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .map_err(|e| SandboxError::io("socketpair", e.into()))?;
        let child_fd = theirs.as_raw_fd();
        let mut cmd = Command::new(&host.init.path);
        cmd.arg(&host.init.arg)
            .env_clear()
            .env("PATH", crate::spec::DEFAULT_PATH)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        // SAFETY: the closure only calls dup2/fcntl, which are async-signal-safe, on a descriptor
        // that stays open in the parent until spawn returns.
        unsafe {
            cmd.pre_exec(move || {
                if child_fd == crate::init::CONTROL_FD {
                    if libc::fcntl(child_fd, libc::F_SETFD, 0) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                } else if libc::dup2(child_fd, crate::init::CONTROL_FD) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let keeper = cmd
            .spawn()
            .map_err(|e| SandboxError::io(format!("starting {}", host.init.path.display()), e))?;
        drop(theirs);
        let mut sandbox = Sandbox {
            host: host.clone(),
            keeper: Some(keeper),
            ctl: mine,
            workdir: placeholder_fd()?,
            uid,
            gid: uid,
            landlock_abi: None,
        };
        let setup = Setup {
            uid,
            gid: uid,
            hostname: "sandbox".into(),
            network: config.network,
            disk_bytes: config.disk_bytes,
            inodes: config.inodes,
            mounts: config.mounts.clone(),
            etc_entries: crate::rootfs::DEFAULT_ETC
                .iter()
                .map(|s| s.to_string())
                .collect(),
            seccomp: filter.as_bytes().to_vec(),
            landlock: host.landlock,
        };
        protocol::send(sandbox.ctl.as_fd(), &setup, &[])?;
        match protocol::recv::<Event>(sandbox.ctl.as_fd())? {
            Some((Event::Ready { landlock_abi }, mut fds)) if fds.len() == 1 => {
                sandbox.workdir = fds.pop().expect("one descriptor");
                sandbox.landlock_abi = landlock_abi;
                Ok(sandbox)
            }
            Some((Event::Failed { error }, _)) => Err(SandboxError::Init(error)),
            Some((other, _)) => Err(SandboxError::Protocol(format!(
                "expected Ready, got {other:?}"
            ))),
            None => Err(SandboxError::Init(
                "the sandbox init exited while building the sandbox".into(),
            )),
        }
    }

    /// The working directory, for host-side copies (see [`crate::hostfs`]).
    pub fn workdir(&self) -> BorrowedFd<'_> {
        self.workdir.as_fd()
    }

    pub fn copy_in(&self, dir: &std::path::Path) -> Result<(), SandboxError> {
        crate::hostfs::copy_in(dir, self.workdir(), self.uid, self.gid)
    }

    pub fn copy_out(
        &self,
        dest: &std::path::Path,
        max_bytes: u64,
    ) -> Result<Vec<String>, SandboxError> {
        crate::hostfs::copy_out(self.workdir(), dest, max_bytes)
    }

    /// Runs one program to its end (or its limit) and reports what happened.
    pub fn run(&mut self, spec: &RunSpec, sink: &mut dyn OutputSink) -> Outcome {
        match self.run_inner(spec, sink) {
            Ok(o) => o,
            Err(e) => Outcome::sandbox_error(spec.limits.clone(), e.to_string()),
        }
    }

    fn run_inner(
        &mut self,
        spec: &RunSpec,
        sink: &mut dyn OutputSink,
    ) -> Result<Outcome, SandboxError> {
        spec.validate()?;
        let limits = &spec.limits;
        let (_, name) = self.host.unique();
        let cg = self.host.cgroups.create(
            &format!("run-{name}"),
            &corral_cgroups::Limits {
                memory_bytes: Some(limits.memory.bytes()),
                pids: Some(limits.pids),
            },
        )?;
        let result = self.supervise(spec, cg.as_ref(), sink);
        let usage = cg.usage();
        let destroyed = cg.destroy();
        let (mut outcome, killed_for) = result?;
        let usage = usage?;
        destroyed?;
        outcome.usage.cpu_time_ms = usage.cpu_time.as_millis() as u64;
        outcome.usage.memory_peak_bytes = usage.memory_peak_bytes;
        outcome.usage.pids_peak = usage.pids_peak;
        outcome.usage.pids_limit_hit = usage.pids_limit_hit;
        outcome.usage.disk_used_bytes = crate::hostfs::used_bytes(self.workdir());
        outcome.status = verdict(&outcome, killed_for, usage.oom_killed, limits);
        Ok(outcome)
    }

    fn supervise(
        &mut self,
        spec: &RunSpec,
        cg: &dyn corral_cgroups::Cgroup,
        sink: &mut dyn OutputSink,
    ) -> Result<(Outcome, Option<Status>), SandboxError> {
        let limits = &spec.limits;
        let (out_r, out_w) = pipe()?;
        let (err_r, err_w) = pipe()?;
        let (stdin_r, mut stdin_w, stdin_data) = match &spec.stdin {
            Stdin::Empty => {
                let (r, _w) = pipe()?;
                (r, None, Vec::new())
            }
            Stdin::File(path) => {
                let f = File::open(path).map_err(|e| SandboxError::Path {
                    path: path.clone(),
                    why: format!("cannot open stdin file: {e}"),
                })?;
                (OwnedFd::from(f), None, Vec::new())
            }
            Stdin::Bytes(b) => {
                let (r, w) = pipe()?;
                set_nonblocking(w.as_fd())?;
                (r, Some(w), b.clone())
            }
        };
        let procs = cg.procs_files()?;
        let mut fds = vec![stdin_r.as_raw_fd(), out_w.as_raw_fd(), err_w.as_raw_fd()];
        fds.extend(procs.iter().map(|f| f.as_raw_fd()));
        let rlimits = Rlimits {
            nofile: limits.open_files,
            fsize: limits.file_size.bytes(),
            // The kernel's own CPU limit is a backstop a little past ours.
            cpu_secs: limits.cpu_time.duration().as_secs() + 2,
            // Above the pids cgroup limit, so the cgroup (which reports hits) bites first.
            nproc: limits.pids.saturating_add(8),
        };
        let run = Request::Run {
            argv: spec.argv.clone(),
            env: spec.environment(),
            rlimits,
        };
        protocol::send(self.ctl.as_fd(), &run, &fds)?;
        drop((stdin_r, out_w, err_w, procs));
        match self.next_event()? {
            Event::Started => {}
            Event::Failed { error } => return Err(SandboxError::Init(error)),
            other => {
                return Err(SandboxError::Protocol(format!(
                    "expected Started, got {other:?}"
                )))
            }
        }
        let start = Instant::now();
        set_nonblocking(out_r.as_fd())?;
        set_nonblocking(err_r.as_fd())?;

        let cpus = std::thread::available_parallelism()
            .map(|n| n.get() as u32)
            .unwrap_or(1);
        let cpu_limit = limits.cpu_time.duration();
        let wall_deadline = start + limits.wall_time.duration();
        let mut cpu_check = start + cpu_limit / cpus;
        let mut capture = Capture::new(limits.output.bytes());
        let mut outs: [Option<(OwnedFd, Stream)>; 2] =
            [Some((out_r, Stream::Stdout)), Some((err_r, Stream::Stderr))];
        let mut stdin_pos = 0usize;
        let mut killed_for: Option<Status> = None;
        let mut blocked: Option<String> = None;
        let mut finished: Option<(Option<i32>, Option<i32>, u64)> = None;
        let mut drain_deadline: Option<Instant> = None;
        let mut buf = vec![0u8; 64 * 1024];

        loop {
            if finished.is_some() && outs.iter().all(Option::is_none) {
                break;
            }
            let now = Instant::now();
            if let Some(d) = drain_deadline {
                if now >= d {
                    break; // every process is dead; a pipe still open can only be a leak of ours
                }
            }
            if finished.is_none() && killed_for.is_none() {
                if now >= wall_deadline {
                    killed_for = Some(Status::WallTimeLimit);
                    self.kill()?;
                } else if now >= cpu_check {
                    let used = cg.cpu_time()?;
                    if used >= cpu_limit {
                        killed_for = Some(Status::TimeLimit);
                        self.kill()?;
                    } else {
                        // The earliest moment the budget could run out with every CPU busy.
                        cpu_check =
                            now + ((cpu_limit - used) / cpus).max(Duration::from_micros(500));
                    }
                }
            }
            let deadline = if let Some(d) = drain_deadline {
                d
            } else if finished.is_none() && killed_for.is_none() {
                wall_deadline.min(cpu_check)
            } else {
                now + Duration::from_secs(5)
            };
            let timeout = deadline.saturating_duration_since(Instant::now());

            let mut pfds = vec![PollFd::new(self.ctl.as_fd(), PollFlags::POLLIN)];
            let mut which = vec![None];
            for (i, o) in outs.iter().enumerate() {
                if let Some((fd, _)) = o {
                    pfds.push(PollFd::new(fd.as_fd(), PollFlags::POLLIN));
                    which.push(Some(i));
                }
            }
            let stdin_slot = stdin_w.as_ref().map(|w| {
                pfds.push(PollFd::new(w.as_fd(), PollFlags::POLLOUT));
                pfds.len() - 1
            });
            match nix::poll::ppoll(&mut pfds, Some(TimeSpec::from_duration(timeout)), None) {
                Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                Err(e) => return Err(SandboxError::io("ppoll", e.into())),
            }
            let revents: Vec<bool> = pfds
                .iter()
                .map(|p| p.revents().is_some_and(|r| !r.is_empty()))
                .collect();
            drop(pfds);

            for (slot, idx) in which.iter().enumerate() {
                let Some(i) = idx else { continue };
                if !revents[slot] {
                    continue;
                }
                let (fd, stream) = outs[*i].as_ref().expect("polled stream is open");
                let stream = *stream;
                match nix::unistd::read(fd.as_fd(), &mut buf) {
                    Ok(0) => outs[*i] = None,
                    Ok(n) => {
                        let data = &buf[..n];
                        match stream {
                            Stream::Stdout => sink.stdout(data),
                            Stream::Stderr => sink.stderr(data),
                        }
                        if !capture.push(stream, data) && killed_for.is_none() && finished.is_none()
                        {
                            killed_for = Some(Status::OutputLimit);
                            self.kill()?;
                        }
                    }
                    Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EINTR) => {}
                    Err(_) => outs[*i] = None,
                }
            }
            if let (Some(slot), Some(w)) = (stdin_slot, stdin_w.as_ref()) {
                if revents[slot] {
                    match nix::unistd::write(w, &stdin_data[stdin_pos..]) {
                        Ok(n) => stdin_pos += n,
                        Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EINTR) => {}
                        Err(_) => stdin_pos = stdin_data.len(),
                    }
                    if stdin_pos >= stdin_data.len() {
                        stdin_w = None;
                    }
                }
            }
            if stdin_w.is_some() && stdin_pos >= stdin_data.len() {
                stdin_w = None;
            }
            if revents[0] {
                match self.next_event()? {
                    Event::Blocked { syscall } => blocked = Some(syscall),
                    Event::Finished {
                        exit_code,
                        signal,
                        wall_ns,
                    } => {
                        finished = Some((exit_code, signal, wall_ns));
                        stdin_w = None;
                        drain_deadline = Some(Instant::now() + Duration::from_secs(2));
                    }
                    Event::Failed { error } => return Err(SandboxError::Init(error)),
                    other => return Err(SandboxError::Protocol(format!("unexpected {other:?}"))),
                }
            }
        }
        let (exit_code, signal, wall_ns) = finished.expect("loop ends only after Finished");
        let usage = Usage {
            wall_time_ms: wall_ns / 1_000_000,
            output_bytes: capture.total(),
            ..Usage::default()
        };
        let outcome = Outcome {
            status: Status::Ok,
            exit_code,
            signal,
            usage,
            stdout: capture.stdout,
            stderr: capture.stderr,
            script: capture.script,
            blocked_syscall: blocked,
            limits: limits.clone(),
            error: None,
            copy_out_skipped: Vec::new(),
        };
        Ok((outcome, killed_for))
    }

    fn kill(&self) -> Result<(), SandboxError> {
        protocol::send(self.ctl.as_fd(), &Request::Kill, &[])
    }

    fn next_event(&self) -> Result<Event, SandboxError> {
        match protocol::recv::<Event>(self.ctl.as_fd())? {
            Some((e, _)) => Ok(e),
            None => Err(SandboxError::Init(
                "the sandbox init exited unexpectedly".into(),
            )),
        }
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = protocol::send(self.ctl.as_fd(), &Request::Exit, &[]);
        if let Some(mut keeper) = self.keeper.take() {
            // PID 1 exits at once on Exit; if it does not, killing the keeper kills it (PDEATHSIG).
            let deadline = Instant::now() + Duration::from_secs(2);
            loop {
                match keeper.try_wait() {
                    Ok(Some(_)) | Err(_) => break,
                    Ok(None) if Instant::now() >= deadline => {
                        let _ = keeper.kill();
                        let _ = keeper.wait();
                        break;
                    }
                    Ok(None) => std::thread::sleep(Duration::from_millis(1)),
                }
            }
        }
    }
}

/// Decides the status; the first limit that fired wins, then what the kernel tells us.
fn verdict(o: &Outcome, killed_for: Option<Status>, oom_killed: bool, limits: &Limits) -> Status {
    if let Some(s) = killed_for {
        return s;
    }
    if o.blocked_syscall.is_some() {
        return Status::BlockedSyscall;
    }
    if oom_killed && o.exit_code != Some(0) {
        return Status::MemoryLimit;
    }
    let cpu_over = o.usage.cpu_time_ms >= limits.cpu_time.duration().as_millis() as u64;
    match (o.exit_code, o.signal) {
        (_, Some(s)) if s == libc::SIGXCPU || (s == libc::SIGKILL && cpu_over) => Status::TimeLimit,
        (_, Some(_)) => Status::Signaled,
        (Some(0), _) => Status::Ok,
        _ => Status::NonzeroExit,
    }
}

fn pipe() -> Result<(OwnedFd, OwnedFd), SandboxError> {
    nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(|e| SandboxError::io("pipe", e.into()))
}

fn set_nonblocking(fd: BorrowedFd<'_>) -> Result<(), SandboxError> {
    let flags = OFlag::from_bits_truncate(
        fcntl(fd, FcntlArg::F_GETFL).map_err(|e| SandboxError::io("fcntl", e.into()))?,
    );
    fcntl(fd, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))
        .map_err(|e| SandboxError::io("fcntl", e.into()))?;
    Ok(())
}

fn placeholder_fd() -> Result<OwnedFd, SandboxError> {
    File::open("/")
        .map(OwnedFd::from)
        .map_err(|e| SandboxError::io("opening /", e))
}

/// Runs `spec` in a fresh sandbox: build, copy the folder in, run, copy out, tear down.
pub fn run_fresh(host: &Arc<Host>, spec: &RunSpec, sink: &mut dyn OutputSink) -> Outcome {
    let fail = |e: SandboxError| Outcome::sandbox_error(spec.limits.clone(), e.to_string());
    if let Err(e) = spec.validate() {
        return fail(e.into());
    }
    let mut sandbox = match Sandbox::create(host, &SandboxConfig::for_spec(spec)) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    if let Some(dir) = &spec.dir {
        if let Err(e) = sandbox.copy_in(dir) {
            return fail(e);
        }
    }
    let mut outcome = sandbox.run(spec, sink);
    if let (Some(dest), false) = (&spec.copy_out, outcome.status == Status::SandboxError) {
        match sandbox.copy_out(dest, spec.limits.disk.bytes()) {
            Ok(skipped) => outcome.copy_out_skipped = skipped,
            Err(e) => return fail(e),
        }
    }
    outcome
}

#[allow(dead_code)]
fn read_all(mut f: File) -> std::io::Result<Vec<u8>> {
    let mut v = Vec::new();
    f.read_to_end(&mut v)?;
    Ok(v)
}
