//! A terminal run under gVisor: the pty is made inside gVisor's kernel, as natively, but its
//! master cannot be sent to the supervisor (gVisor cannot pass its own descriptors out). So PID 1
//! keeps the master and copies, without ever blocking, between it and two pipes of the
//! supervisor's: what is typed (the supervisor's "master" end for stdin) goes to the master, what
//! the program writes to its terminal goes to the output pipe. Line discipline and echo happen in
//! gVisor's pty, as natively in the host's. gVisor 2022's pty raises no signal for a typed ^C or
//! ^\ (gVisor bug 9898): the relay does, as Linux's line discipline would — with `ISIG` set, the
//! terminal's `VINTR` / `VQUIT` character becomes SIGINT / SIGQUIT for the program's process
//! group (the program leads it; gVisor cannot tell the terminal's foreground group from the
//! master) and is not passed on.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Instant;

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::Signal;

/// Bytes held in either direction before the relay stops reading that side (back-pressure).
const CAP: usize = 64 * 1024;

pub(crate) struct Relay {
    master: OwnedFd,
    /// The supervisor's stdin pipe (read end); `None` once it closed.
    from_host: Option<OwnedFd>,
    /// The supervisor's output pipe (write end); dropping the relay closes it (end of output).
    to_host: OwnedFd,
    to_master: Vec<u8>,
    to_host_buf: Vec<u8>,
    /// Every slave is closed (the master reads EIO) or the master failed.
    master_done: bool,
    /// The program's process group: where a typed ^C or ^\ goes.
    program: Option<nix::unistd::Pid>,
    buf: Vec<u8>,
}

fn nonblocking(fd: BorrowedFd<'_>) -> std::io::Result<()> {
    use nix::fcntl::{fcntl, FcntlArg, OFlag};
    let flags = fcntl(fd, FcntlArg::F_GETFL)?;
    fcntl(
        fd,
        FcntlArg::F_SETFL(OFlag::from_bits_truncate(flags) | OFlag::O_NONBLOCK),
    )?;
    Ok(())
}

impl Relay {
    pub(crate) fn new(
        master: OwnedFd,
        from_host: OwnedFd,
        to_host: OwnedFd,
    ) -> std::io::Result<Relay> {
        for fd in [master.as_fd(), from_host.as_fd(), to_host.as_fd()] {
            nonblocking(fd)?;
        }
        Ok(Relay {
            master,
            from_host: Some(from_host),
            to_host,
            to_master: Vec::new(),
            to_host_buf: Vec::new(),
            master_done: false,
            program: None,
            buf: vec![0; 16 * 1024],
        })
    }

    /// The descriptors PID 1 waits on for the relay, and for what.
    pub(crate) fn poll_fds(&self) -> Vec<PollFd<'_>> {
        let mut fds = Vec::new();
        if let Some(r) = self
            .from_host
            .as_ref()
            .filter(|_| self.to_master.len() < CAP)
        {
            fds.push(PollFd::new(r.as_fd(), PollFlags::POLLIN));
        }
        let mut master = PollFlags::empty();
        if !self.master_done && self.to_host_buf.len() < CAP {
            master |= PollFlags::POLLIN;
        }
        if !self.master_done && !self.to_master.is_empty() {
            master |= PollFlags::POLLOUT;
        }
        if !master.is_empty() {
            fds.push(PollFd::new(self.master.as_fd(), master));
        }
        if !self.to_host_buf.is_empty() {
            fds.push(PollFd::new(self.to_host.as_fd(), PollFlags::POLLOUT));
        }
        fds
    }

    /// Moves whatever can move now, in both directions, without blocking.
    pub(crate) fn pump(&mut self) {
        loop {
            let mut moved = false;
            if let Some(r) = self
                .from_host
                .as_ref()
                .filter(|_| self.to_master.len() < CAP)
            {
                match nix::unistd::read(r, &mut self.buf) {
                    Ok(0) => self.from_host = None,
                    Ok(n) => {
                        let typed = self.buf[..n].to_vec();
                        self.type_in(&typed);
                        moved = true;
                    }
                    Err(Errno::EAGAIN | Errno::EINTR) => {}
                    Err(_) => self.from_host = None,
                }
            }
            if !self.to_master.is_empty() && !self.master_done {
                match nix::unistd::write(&self.master, &self.to_master) {
                    Ok(n) => {
                        self.to_master.drain(..n);
                        moved |= n > 0;
                    }
                    Err(Errno::EAGAIN | Errno::EINTR) => {}
                    Err(_) => self.to_master.clear(),
                }
            }
            if !self.master_done && self.to_host_buf.len() < CAP {
                match nix::unistd::read(&self.master, &mut self.buf) {
                    // EIO: no slave is open any more (the program and its children are gone).
                    Ok(0) | Err(Errno::EIO) => self.master_done = true,
                    Ok(n) => {
                        self.to_host_buf.extend_from_slice(&self.buf[..n]);
                        moved = true;
                    }
                    Err(Errno::EAGAIN | Errno::EINTR) => {}
                    Err(_) => self.master_done = true,
                }
            }
            if !self.to_host_buf.is_empty() {
                match nix::unistd::write(&self.to_host, &self.to_host_buf) {
                    Ok(n) => {
                        self.to_host_buf.drain(..n);
                        moved |= n > 0;
                    }
                    Err(Errno::EAGAIN | Errno::EINTR) => {}
                    // The supervisor stopped reading (it went away): nothing to deliver to.
                    Err(_) => self.to_host_buf.clear(),
                }
            }
            if !moved {
                return;
            }
        }
    }

    /// The program whose process group gets the terminal's signals.
    pub(crate) fn set_program(&mut self, pid: nix::unistd::Pid) {
        self.program = Some(pid);
    }

    /// Queues typed bytes for the terminal; its signal characters become signals (see above).
    fn type_in(&mut self, typed: &[u8]) {
        let signals = nix::sys::termios::tcgetattr(&self.master)
            .ok()
            .filter(|t| t.local_flags.contains(nix::sys::termios::LocalFlags::ISIG))
            .map(|t| {
                use nix::sys::termios::SpecialCharacterIndices::{VINTR, VQUIT};
                [
                    (t.control_chars[VINTR as usize], Signal::SIGINT),
                    (t.control_chars[VQUIT as usize], Signal::SIGQUIT),
                ]
            });
        for &b in typed {
            let signal = signals
                .iter()
                .flatten()
                .find(|(c, _)| *c == b && *c != 0)
                .map(|(_, s)| *s);
            match (signal, self.program) {
                (Some(sig), Some(pid)) => {
                    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(-pid.as_raw()), sig);
                }
                (Some(_), None) => {}
                (None, _) => self.to_master.push(b),
            }
        }
    }

    /// At the run's end (every process of the run is dead): what the terminal still holds goes
    /// to the supervisor, waiting for room until `deadline`; dropping the relay then ends the
    /// output.
    pub(crate) fn drain(mut self, deadline: Instant) {
        self.from_host = None;
        loop {
            self.pump();
            if self.to_host_buf.is_empty() && self.master_done {
                return;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            let mut fds = self.poll_fds();
            let ms = left.as_millis().min(u128::from(u16::MAX)) as u16;
            if fds.is_empty() || poll(&mut fds, PollTimeout::from(ms)).is_err() {
                return;
            }
        }
    }

    /// Resizes the terminal (the program gets SIGWINCH).
    pub(crate) fn resize(&self, cols: u16, rows: u16) -> std::io::Result<()> {
        crate::inside::pty::resize(self.master.as_fd(), cols, rows)
    }
}
