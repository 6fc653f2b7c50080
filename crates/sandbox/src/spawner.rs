//! How a native sandbox's init process comes to be: started by the supervisor (`corral
//! __sandbox-init`), or forked by the spawner.
//!
//! Starting the init from the supervisor costs a fork of the supervisor (a large, multi-threaded
//! process: its page tables are copied) and the exec and start-up of the corral binary (~2 ms of
//! CPU: the dynamic loader relocates ~38,000 pointers and faults ~280 pages in). The spawner is a
//! copy of the init started once (`corral __sandbox-init --spawner`) that stays single-threaded and
//! forks a ready keeper per sandbox, which then runs exactly the code a started init runs, with
//! the sandbox's control socket as its fd 3 — and enters the network and IPC namespaces the
//! spawner made for it while it waited (`inside::spares`) instead of making them on the build's path.
//!
//! A process's first sandbox is started directly (a one-shot `corral run` never pays for a
//! spawner it would use once); the spawner is started for the second and serves every later one.
//! When it cannot be started or answers wrongly, sandboxes are started directly again.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::error::SandboxError;
use crate::protocol::{self, Spawn, Spawned};

/// How to start a sandbox's init: a program and the hidden argument that makes it one.
#[derive(Debug, Clone)]
pub struct InitProgram {
    pub path: PathBuf,
    pub arg: String,
}

impl InitProgram {
    /// The running executable itself, which must call `corral_sandbox::init_main()` when its
    /// first argument is [`crate::INIT_ARG`].
    pub fn current_exe() -> Result<Self, SandboxError> {
        let path = std::env::current_exe()
            .map_err(|e| SandboxError::io("finding the corral executable", e))?;
        Ok(InitProgram {
            path,
            arg: crate::inside::init::INIT_ARG.to_string(),
        })
    }
}

/// A sandbox's keeper (the init outside its PID namespace): ended when the sandbox is dropped.
pub(crate) enum Keeper {
    /// Started by the supervisor (the first sandbox, no spawner, or `runsc` under gVisor).
    Child(Child),
    /// Forked by the spawner, whose child it is (the spawner reaps it).
    Forked { pid: u32, pidfd: OwnedFd },
}

impl Keeper {
    pub(crate) fn id(&self) -> u32 {
        match self {
            Keeper::Child(c) => c.id(),
            Keeper::Forked { pid, .. } => *pid,
        }
    }

    /// Waits up to `grace` for the keeper to exit (PID 1 exits when told, and the keeper with
    /// it), then kills it: its PID 1 dies with it (`PR_SET_PDEATHSIG`), and with PID 1 the
    /// namespace's every process.
    pub(crate) fn end(self, grace: Duration) {
        match self {
            Keeper::Child(mut keeper) => {
                let deadline = Instant::now() + grace;
                loop {
                    match keeper.try_wait() {
                        Ok(Some(_)) | Err(_) => break,
                        Ok(None) if Instant::now() >= deadline => {
                            tracing::warn!("the sandbox init did not exit in time; killing it");
                            let _ = keeper.kill();
                            let _ = keeper.wait();
                            break;
                        }
                        Ok(None) => std::thread::sleep(Duration::from_micros(200)),
                    }
                }
            }
            Keeper::Forked { pidfd, .. } => {
                if !exited_within(&pidfd, grace) {
                    tracing::warn!("the sandbox init did not exit in time; killing it");
                    let _ =
                        rustix::process::pidfd_send_signal(&pidfd, rustix::process::Signal::KILL);
                    exited_within(&pidfd, Duration::from_secs(5));
                }
            }
        }
    }
}

/// Whether the process behind `pidfd` has exited (it polls readable then) within `limit`.
fn exited_within(pidfd: &OwnedFd, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let ms = u16::try_from(left.as_millis()).unwrap_or(u16::MAX);
        let mut fds = [nix::poll::PollFd::new(
            pidfd.as_fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        match nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(ms)) {
            Ok(n) if n > 0 => return true,
            Ok(_) if left.is_zero() => return false,
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(_) => return false,
        }
    }
}

/// The host's spawner, started on demand and shared by every sandbox it builds.
pub(crate) struct Spawner {
    state: Mutex<State>,
}

enum State {
    /// No sandbox was started yet: the first is started directly.
    Unused,
    /// One was: the next starts the spawner.
    Wanted,
    Running {
        process: Child,
        sock: OwnedFd,
    },
    /// It failed `failures` times in a row; after [`MAX_FAILURES`] sandboxes are started directly.
    Broken {
        failures: u32,
    },
}

const MAX_FAILURES: u32 = 3;

impl Spawner {
    pub(crate) fn new() -> Self {
        Spawner {
            state: Mutex::new(State::Unused),
        }
    }

    /// A keeper for a new native sandbox whose end of the control socket is `theirs`: forked by
    /// the spawner when there is one, else started from here.
    /// `host_root`: the sandbox may start in a host root the spawner prepared ahead.
    pub(crate) fn keeper(
        &self,
        init: &InitProgram,
        theirs: OwnedFd,
        host_root: bool,
    ) -> Result<Keeper, SandboxError> {
        match self.forked(init, &theirs, host_root) {
            Some(k) => Ok(k),
            None => start_init(init, None, theirs).map(Keeper::Child),
        }
    }

    fn forked(&self, init: &InitProgram, theirs: &OwnedFd, host_root: bool) -> Option<Keeper> {
        let Ok(mut state) = self.state.lock() else {
            return None;
        };
        let failures = match &*state {
            State::Unused => {
                *state = State::Wanted;
                return None;
            }
            State::Broken { failures } if *failures >= MAX_FAILURES => return None,
            State::Broken { failures } => *failures,
            State::Wanted | State::Running { .. } => 0,
        };
        if !matches!(*state, State::Running { .. }) {
            match start_spawner(init) {
                Ok((process, sock)) => *state = State::Running { process, sock },
                Err(e) => {
                    tracing::warn!(error = %e, "starting the sandbox spawner failed; sandboxes are started directly");
                    *state = State::Broken {
                        failures: failures + 1,
                    };
                    return None;
                }
            }
        }
        let State::Running { sock, .. } = &*state else {
            return None;
        };
        match request(sock, theirs, host_root) {
            Ok(k) => {
                tracing::debug!(keeper = k.id(), "a sandbox init forked by the spawner");
                Some(k)
            }
            Err(e) => {
                tracing::warn!(error = %e, "the sandbox spawner failed; starting this sandbox directly");
                if let State::Running { mut process, .. } = std::mem::replace(
                    &mut *state,
                    State::Broken {
                        failures: failures + 1,
                    },
                ) {
                    let _ = process.kill();
                    let _ = process.wait();
                }
                None
            }
        }
    }
}

impl Drop for Spawner {
    fn drop(&mut self) {
        if let Ok(state) = self.state.get_mut() {
            if let State::Running { process, sock } =
                std::mem::replace(state, State::Broken { failures: 0 })
            {
                // The spawner exits when its socket closes; the keepers it forked do not depend on it.
                drop(sock);
                Keeper::Child(process).end(Duration::from_secs(2));
            }
        }
    }
}

fn request(sock: &OwnedFd, theirs: &OwnedFd, host_root: bool) -> Result<Keeper, SandboxError> {
    protocol::send(sock.as_fd(), &Spawn { host_root }, &[theirs.as_raw_fd()])?;
    match protocol::recv::<Spawned>(sock.as_fd())? {
        Some((Spawned { pid }, mut fds)) if fds.len() == 1 => Ok(Keeper::Forked {
            pid,
            pidfd: fds.remove(0),
        }),
        Some(_) => Err(SandboxError::Protocol(
            "the spawner answered without a pidfd".into(),
        )),
        None => Err(SandboxError::Init("the spawner exited".into())),
    }
}

fn start_spawner(init: &InitProgram) -> Result<(Child, OwnedFd), SandboxError> {
    let (mine, theirs) = protocol::channel()?;
    let child = start_init(init, Some(protocol::SPAWNER_ARG), theirs)?;
    Ok((child, mine))
}

/// Starts `corral __sandbox-init [mode]` with `theirs` as its fd 3, an empty environment but
/// `PATH`, and nothing else of this process's.
pub(crate) fn start_init(
    init: &InitProgram,
    mode: Option<&str>,
    theirs: OwnedFd,
) -> Result<Child, SandboxError> {
    let child_fd = theirs.as_raw_fd();
    let mut cmd = Command::new(&init.path);
    cmd.arg(&init.arg)
        .args(mode)
        .env_clear()
        .env("PATH", crate::spec::DEFAULT_PATH)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    // SAFETY: the closure only calls dup2/fcntl, which are async-signal-safe, on a descriptor
    // that stays open in the parent until spawn returns.
    unsafe {
        cmd.pre_exec(move || {
            if child_fd == crate::inside::init::CONTROL_FD {
                if libc::fcntl(child_fd, libc::F_SETFD, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            } else if libc::dup2(child_fd, crate::inside::init::CONTROL_FD) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd
        .spawn()
        .map_err(|e| SandboxError::io(format!("starting {}", init.path.display()), e))?;
    drop(theirs);
    Ok(child)
}
