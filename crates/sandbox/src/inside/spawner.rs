//! The spawner process (`corral __sandbox-init --spawner`, see [`crate::spawner`]): forks one
//! keeper per request. It starts no thread, so each fork may run arbitrary code, and each keeper
//! begins as a started init would: single-threaded, the control socket as fd 3, no other
//! descriptor, default signal dispositions (the keeper resets them as a started init does) —
//! and the namespaces (and host root) made for it ahead ([`spares`]), when there are.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{fork, ForkResult, Pid};

use crate::error::SandboxError;
use crate::inside::spares::{self, Spares};
use crate::protocol::{self, Spawn, Spawned};

/// What [`serve`] returned to.
pub(crate) enum Served {
    /// The spawner: the supervisor closed its socket.
    SupervisorGone,
    /// A forked keeper: its control socket, at the number the spawner's had (fd 3), and the
    /// namespaces made for it.
    Keeper(OwnedFd, Spares),
}

/// Serves spawn requests on `sock` until the supervisor closes it; returns in the spawner then,
/// and at once in each forked keeper.
pub(crate) fn serve(sock: OwnedFd) -> Result<Served, SandboxError> {
    // Its folder is nobody's concern; holding the supervisor's could keep a mount busy.
    let _ = nix::unistd::chdir("/");
    let mut maker = spares::Maker::new();
    let mut making = false;
    loop {
        reap();
        let mut fds = [PollFd::new(sock.as_fd(), PollFlags::POLLIN)];
        // The next keeper's spares are made once no request came for a millisecond: not at
        // once after a fork, where the supervisor (waiting for the reply) and the new keeper
        // need the CPUs (on 2 cores making them then delayed the reply by up to ~0.5 ms). They
        // are made a step at a time, and between steps a request that came goes first.
        let wants_work = maker.as_ref().is_some_and(spares::Maker::wants_work);
        // Else wakes now and then to reap keepers of sandboxes that ended while no request came.
        let timeout = match (wants_work, making) {
            (true, true) => 0u16,
            (true, false) => 1,
            (false, _) => 1000,
        };
        match poll(&mut fds, PollTimeout::from(timeout)) {
            Ok(0) => {
                making = false;
                if let Some(m) = maker.as_mut().filter(|_| wants_work) {
                    m.make()?;
                    making = true;
                }
                continue;
            }
            Err(nix::errno::Errno::EINTR) => continue,
            Ok(_) => making = false,
            Err(e) => return Err(SandboxError::io("poll", e.into())),
        }
        let Some((Spawn { host_root }, mut fds)) = protocol::recv::<Spawn>(sock.as_fd())? else {
            return Ok(Served::SupervisorGone);
        };
        if fds.len() != 1 {
            continue;
        }
        let ctl = fds.remove(0);
        let spares = maker
            .as_mut()
            .map(|m| m.take(host_root))
            .unwrap_or_default();
        // SAFETY: this process is single-threaded (it starts no thread), so the child may run
        // arbitrary code.
        match unsafe { fork() }.map_err(|e| SandboxError::io("fork of a keeper", e.into()))? {
            ForkResult::Child => {
                // The spawner's own namespaces are not the keeper's to hold.
                drop(maker);
                return become_keeper(sock, ctl).map(|c| Served::Keeper(c, spares));
            }
            ForkResult::Parent { child } => {
                drop((ctl, spares));
                // Opened before this process reaps anything: the pid cannot have been reused.
                // Without one the supervisor refuses the keeper, which then exits at the
                // end-of-file of its control socket.
                let pidfd = rustix::process::Pid::from_raw(child.as_raw()).and_then(|p| {
                    rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()).ok()
                });
                let fds: Vec<_> = pidfd.iter().map(|f| f.as_raw_fd()).collect();
                let pid = child.as_raw() as u32;
                protocol::send(sock.as_fd(), &Spawned { pid }, &fds)?;
            }
        }
    }
}

/// In the forked child: the sandbox's control socket takes the spawner's number (fd 3: it was
/// started as an init is), which closes the spawner's socket in this process. The spawner holds
/// no other descriptor but stdio and its namespaces' (dropped by the caller), so nothing else is
/// inherited.
fn become_keeper(mut sock: OwnedFd, ctl: OwnedFd) -> Result<OwnedFd, SandboxError> {
    rustix::io::dup2(&ctl, &mut sock)
        .map_err(|e| SandboxError::io("placing a keeper's control socket", e.into()))?;
    Ok(sock)
}

/// Reaps keepers that exited, without blocking.
fn reap() {
    while let Ok(s) = waitpid(
        Pid::from_raw(-1),
        Some(WaitPidFlag::WNOHANG | WaitPidFlag::__WALL),
    ) {
        if s == WaitStatus::StillAlive {
            break;
        }
    }
}
