//! Messages between the supervisor (host side) and a sandbox's init, over a `SOCK_SEQPACKET` socketpair.
//!
//! Each message is one JSON datagram; file descriptors ride along as `SCM_RIGHTS`. Seqpacket keeps
//! message boundaries, so no framing code is needed, and a peer that dies shows up as end-of-file.
//! A datagram must fit the socket's send buffer (`net.core.wmem_default`, 208 KiB on Debian), and a
//! run's arguments and environment may be 1 MiB, so a message larger than [`MAX_INLINE`] is
//! written to a memfd that travels as the first descriptor of a short datagram giving its length.

use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use nix::sys::socket::{recvmsg, sendmsg, ControlMessage, ControlMessageOwned, MsgFlags};
use serde::{de::DeserializeOwned, Deserialize, Serialize};

use crate::error::SandboxError;

/// Largest message sent as one datagram: well below any send buffer a host is likely to set.
const MAX_INLINE: usize = 64 * 1024;
/// Largest message at all: a run's 1 MiB of arguments and environment (`spec::MAX_COMMAND_BYTES`),
/// JSON-escaped (up to 6 bytes a byte), with room for the rest of the request.
const MAX_MSG: usize = 8 * 1024 * 1024;
/// The first byte of a datagram that announces a message in a memfd (a JSON text never starts
/// with a NUL), followed by the message's length as 8 little-endian bytes.
const IN_MEMFD: u8 = 0;
const MAX_FDS: usize = 16;

/// How the sandbox is built, sent once when init starts. Fds: the cgroup's join file per
/// hierarchy (`Cgroup::procs_files`), which PID 1 joins before anything else; with
/// `fork_into_cgroup`, then the cgroup's directory (`Cgroup::fork_target`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Setup {
    /// The uid and gid the program runs as (as it sees them).
    pub uid: u32,
    pub gid: u32,
    /// Rootless mode: the caller's own (uid, gid) on the host. The sandbox then lives in a user
    /// namespace where only that uid exists (as 0), and each program in a nested one as `uid`.
    pub userns: Option<(u32, u32)>,
    pub hostname: String,
    pub network: bool,
    /// Size of the working-directory tmpfs, and of `/tmp` and `/dev/shm`.
    pub disk_bytes: u64,
    pub inodes: u64,
    pub mounts: Vec<crate::spec::Mount>,
    /// Host `/etc` entries bound read-only into the curated `/etc`.
    pub etc_entries: Vec<String>,
    /// The compiled seccomp program (raw `sock_filter` array).
    pub seccomp: Vec<u8>,
    /// Apply Landlock when the kernel has it.
    pub landlock: bool,
    /// What `/` is made of.
    pub root: SetupRoot,
    /// The folder each program starts in.
    pub cwd: String,
    /// Build mode: the first of the 65536 host uids (and gids) that the program's user namespace
    /// maps its 0–65535 to; the program is its root, `uid` and `gid` are then 0.
    pub build_ids: Option<u32>,
    /// Init runs inside gVisor (see the `gvisor` module) as the container's PID 1: runsc built the
    /// root, the working directory is the host's, processes are limited by gVisor's own pids
    /// cgroup, the seccomp filter traps instead of notifying, and no descriptor is sent back.
    #[serde(default)]
    pub gvisor: bool,
    /// The last descriptor is the cgroup's directory (cgroup v2): the keeper forks PID 1 straight
    /// into it where the kernel allows (`inside::fork_into`), and PID 1 then joins nothing.
    #[serde(default)]
    pub fork_into_cgroup: bool,
    /// A second path of the working directory (`SandboxConfig::workdir_alias`): PID 1 binds the
    /// working directory's tmpfs there too.
    #[serde(default)]
    pub workdir_alias: Option<String>,
}

/// The root a sandbox's init builds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum SetupRoot {
    /// The host's system folders, bound read-only.
    Host,
    /// An image's unpacked layers (topmost first), stacked by overlayfs; with `upper`, writable
    /// into that folder (build mode); with `scratch_upper`, writable into a tmpfs of
    /// `disk_bytes` that PID 1 mounts for it (root mode).
    Image {
        layers: Vec<std::path::PathBuf>,
        upper: Option<std::path::PathBuf>,
        #[serde(default)]
        scratch_upper: bool,
    },
}

impl Setup {
    /// Owner of the scratch mounts, in the sandbox's (outer) user namespace: the program's uid,
    /// or in rootless mode the namespace's only uid 0, which the program's nested namespace maps
    /// to its own uid.
    pub fn fs_owner(&self) -> (u32, u32) {
        if self.userns.is_some() {
            (0, 0)
        } else if let Some(base) = self.build_ids {
            (base, base)
        } else {
            (self.uid, self.gid)
        }
    }

    /// Whether `/` is an image's layers (read-only or build mode).
    pub fn image_root(&self) -> bool {
        matches!(self.root, SetupRoot::Image { .. })
    }
}

/// Resource limits applied with setrlimit in the child, as a backstop to cgroups and the supervisor.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Rlimits {
    pub nofile: u64,
    pub fsize: u64,
    pub cpu_secs: u64,
    pub nproc: u64,
}

/// Supervisor → init.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Request {
    /// Start a program. Fds: stdin, stdout, stderr — or with `tty` only stderr: init then makes
    /// a pseudo-terminal in the sandbox's own devpts, gives its slave to the program as 0 and 1
    /// (and controlling terminal), and returns the master with `Started`. Under gVisor, with
    /// `tty`, the fds are stdin, stdout and stderr pipes again: PID 1 keeps the master and
    /// relays between it and the first two (`inside::tty_relay`).
    Run {
        argv: Vec<String>,
        env: Vec<(String, String)>,
        rlimits: Rlimits,
        #[serde(default)]
        tty: Option<(u16, u16)>,
        /// A stricter seccomp program for this run (raw `sock_filter` array); `None`: the
        /// sandbox's default one from `Setup`.
        #[serde(default)]
        seccomp: Option<Vec<u8>>,
        /// Processes and threads at once, enforced by init (under gVisor); natively the host
        /// cgroup enforces it and this is `None`.
        #[serde(default)]
        pids: Option<u64>,
        /// The wall-clock limit: PID 1 kills the run itself when it is reached, from its own
        /// clock (one hand-off fewer than a `Kill` from the supervisor, which stays the backstop).
        #[serde(default)]
        wall_ns: Option<u64>,
        /// No `Started` once the program is exec'd: the first event is `Blocked`, `Finished` or
        /// `Failed`. For runs driven to their end in one go, where nobody waits for the start —
        /// one wake-up of each side fewer per run. Never with a terminal (`Started` carries it).
        #[serde(default)]
        quiet_start: bool,
        /// Start the program's process on this CPU when PID 1's confined thread starts it: a
        /// placement hint only, the process takes the sandbox's whole CPU set back before its
        /// first step (see `placement`).
        #[serde(default)]
        cpu: Option<u32>,
    },
    /// Send a signal to the current program's process group.
    Signal { signal: i32 },
    /// Kill every process of the current run.
    Kill,
    /// Resize the current run's terminal. Sent under gVisor only, where PID 1 keeps the pty's
    /// master (natively the supervisor holds it and resizes it itself).
    Resize { cols: u16, rows: u16 },
    /// Is some process of the current run blocked reading its standard input? Answered by `StdinWait`.
    ProbeStdin,
    /// Make the sandbox as good as new for another user: fresh working directory, `/tmp` and
    /// `/dev/shm`, fresh IPC and network namespaces, PID numbering restarted. Answered by `Ready`.
    Reset { disk_bytes: u64, inodes: u64 },
    /// Tear the sandbox down.
    Exit,
}

/// The program's process → PID 1, before exec (end-of-file then means it exec'd).
#[derive(Debug, Serialize, Deserialize)]
pub enum ChildReport {
    /// The seccomp listener rides along as a descriptor.
    Listener,
    /// The filter is installed without a listener (under gVisor, where PID 1 traces instead).
    Traced,
    Error(String),
}

/// Init → supervisor.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Event {
    /// The root is built. Fd: the working directory (`O_PATH`); none under gVisor, whose
    /// working directory the supervisor already holds.
    ///
    /// `tasks`: PID 1's threads, counted in the sandbox's pids cgroup like the program's processes
    /// (two with `inside::confined`'s thread).
    Ready {
        landlock_abi: Option<i32>,
        tasks: u64,
        /// At the build: PID 1 was forked into its cgroup (`inside::fork_into`) rather than
        /// joining it by a write. False in a reset's answer.
        #[serde(default)]
        forked_into_cgroup: bool,
        /// At the build: the root was prepared ahead by the spawner (`inside::spares`) and
        /// finished by PID 1, rather than built by PID 1. False in a reset's answer.
        #[serde(default)]
        root_prepared: bool,
    },
    /// The program was exec'd. Fd: the terminal's master side, for a run with a terminal. Not
    /// sent for a `quiet_start` run.
    Started,
    /// The program attempted a syscall the profile forbids; the run is being killed.
    Blocked { syscall: String },
    /// Answer to `ProbeStdin`.
    StdinWait { waiting: bool },
    /// The program ended and every process of the run is dead and reaped.
    Finished {
        exit_code: Option<i32>,
        signal: Option<i32>,
        wall_ns: u64,
        /// PID 1 killed the run at its wall-clock limit.
        #[serde(default)]
        wall_limit: bool,
        /// The CPU the program's process started on (known when the confined thread started it).
        #[serde(default)]
        cpu: Option<u32>,
    },
    /// Setting up failed; nothing ran (or the run was stopped before exec).
    Failed { error: String },
}

impl Event {
    /// `Failed` with what went wrong, in words.
    pub fn failed(error: impl std::fmt::Display) -> Event {
        Event::Failed {
            error: error.to_string(),
        }
    }
}

pub fn send<T: Serialize>(
    sock: BorrowedFd<'_>,
    msg: &T,
    fds: &[RawFd],
) -> Result<(), SandboxError> {
    let body = serde_json::to_vec(msg).map_err(|e| SandboxError::Protocol(e.to_string()))?;
    if body.len() > MAX_MSG {
        return Err(SandboxError::Protocol(format!(
            "message of {} bytes is too large",
            body.len()
        )));
    }
    if body.len() <= MAX_INLINE {
        return send_datagram(sock, &body, fds);
    }
    if fds.len() >= MAX_FDS {
        return Err(SandboxError::Protocol(format!(
            "a large message with {} descriptors is too many",
            fds.len()
        )));
    }
    let memfd = rustix::fs::memfd_create("corral-message", rustix::fs::MemfdFlags::CLOEXEC)
        .map_err(|e| SandboxError::io("memfd_create for a large message", e.into()))?;
    let mut file = std::fs::File::from(memfd);
    std::io::Write::write_all(&mut file, &body)
        .map_err(|e| SandboxError::io("writing a large message to its memfd", e))?;
    let mut head = [0u8; 9];
    head[0] = IN_MEMFD;
    head[1..].copy_from_slice(&(body.len() as u64).to_le_bytes());
    let mut all = Vec::with_capacity(fds.len() + 1);
    all.push(file.as_raw_fd());
    all.extend_from_slice(fds);
    send_datagram(sock, &head, &all)
}

fn send_datagram(sock: BorrowedFd<'_>, body: &[u8], fds: &[RawFd]) -> Result<(), SandboxError> {
    let iov = [IoSlice::new(body)];
    let cmsg = [ControlMessage::ScmRights(fds)];
    let cmsgs: &[ControlMessage] = if fds.is_empty() { &[] } else { &cmsg };
    loop {
        match sendmsg::<()>(sock.as_raw_fd(), &iov, cmsgs, MsgFlags::MSG_NOSIGNAL, None) {
            Ok(_) => return Ok(()),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(SandboxError::io("sending to the sandbox peer", e.into())),
        }
    }
}

/// Receives one message; `Ok(None)` means the peer closed the socket.
pub fn recv<T: DeserializeOwned>(
    sock: BorrowedFd<'_>,
) -> Result<Option<(T, Vec<OwnedFd>)>, SandboxError> {
    // One receive buffer per thread, reused: zeroing it for every message showed up in profiles.
    thread_local! {
        static BUF: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0u8; MAX_INLINE]);
    }
    BUF.with(|cell| {
        let mut buf = cell.borrow_mut();
        let (len, mut fds) = recv_into(sock, &mut buf)?;
        if len == 0 {
            return Ok(None);
        }
        let msg = if buf[0] == IN_MEMFD {
            let body = read_memfd(&buf[..len], &mut fds)?;
            serde_json::from_slice(&body)
        } else {
            serde_json::from_slice(&buf[..len])
        }
        .map_err(|e| SandboxError::Protocol(e.to_string()))?;
        Ok(Some((msg, fds)))
    })
}

/// The body of a message announced by `head` (see [`IN_MEMFD`]), read from the first of `fds`,
/// which is taken out of them.
fn read_memfd(head: &[u8], fds: &mut Vec<OwnedFd>) -> Result<Vec<u8>, SandboxError> {
    let len = head
        .get(1..)
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map(u64::from_le_bytes)
        .ok_or_else(|| SandboxError::Protocol("a malformed large-message header".into()))?;
    if fds.is_empty() {
        return Err(SandboxError::Protocol(
            "a large message came without its memfd".into(),
        ));
    }
    if len > MAX_MSG as u64 {
        return Err(SandboxError::Protocol(format!(
            "message of {len} bytes is too large"
        )));
    }
    let file = std::fs::File::from(fds.remove(0));
    let mut body = vec![0u8; len as usize];
    std::os::unix::fs::FileExt::read_exact_at(&file, &mut body, 0)
        .map_err(|e| SandboxError::io("reading a large message from its memfd", e))?;
    Ok(body)
}

fn recv_into(sock: BorrowedFd<'_>, buf: &mut [u8]) -> Result<(usize, Vec<OwnedFd>), SandboxError> {
    let mut cmsg_space = nix::cmsg_space!([RawFd; MAX_FDS]);
    loop {
        let mut iov = [IoSliceMut::new(buf)];
        match recvmsg::<()>(
            sock.as_raw_fd(),
            &mut iov,
            Some(&mut cmsg_space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        ) {
            Ok(msg) => {
                let mut fds = Vec::new();
                for c in msg
                    .cmsgs()
                    .map_err(|e| SandboxError::io("reading control data", e.into()))?
                {
                    if let ControlMessageOwned::ScmRights(raw) = c {
                        for fd in raw {
                            // SAFETY: the kernel just installed this descriptor in our table for us; nobody else owns it.
                            fds.push(unsafe { OwnedFd::from_raw_fd(fd) });
                        }
                    }
                }
                if msg.flags.contains(MsgFlags::MSG_TRUNC)
                    || msg.flags.contains(MsgFlags::MSG_CTRUNC)
                {
                    return Err(SandboxError::Protocol("message truncated".into()));
                }
                return Ok((msg.bytes, fds));
            }
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => {
                return Err(SandboxError::io(
                    "receiving from the sandbox peer",
                    e.into(),
                ))
            }
        }
    }
}

/// The argument after [`crate::INIT_ARG`] that makes the init the spawner ([`crate::spawner`]).
pub(crate) const SPAWNER_ARG: &str = "--spawner";

/// To the spawner: fork a keeper; the sandbox's end of its control socket travels with it.
#[derive(Serialize, Deserialize)]
pub(crate) struct Spawn {
    /// The sandbox may start in a prepared host root (`inside::spares`): the keeper is given
    /// one when there is one, and the spawner prepares the next.
    #[serde(default)]
    pub host_root: bool,
}

/// The spawner's answer: the keeper's pid, with a pidfd for it (opened before anything could
/// reap it, so it names that process and no later one).
#[derive(Serialize, Deserialize)]
pub(crate) struct Spawned {
    pub pid: u32,
}

/// A connected pair of the sockets these messages travel on (datagrams that keep their
/// boundaries and carry descriptors), closed on exec.
pub(crate) fn channel() -> Result<(OwnedFd, OwnedFd), SandboxError> {
    nix::sys::socket::socketpair(
        nix::sys::socket::AddressFamily::Unix,
        nix::sys::socket::SockType::SeqPacket,
        None,
        nix::sys::socket::SockFlag::SOCK_CLOEXEC,
    )
    .map_err(|e| SandboxError::io("socketpair", e.into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Seek};
    use std::os::fd::AsFd;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Big {
        argv: Vec<String>,
    }

    fn pipe_fd() -> (OwnedFd, OwnedFd) {
        nix::unistd::pipe().unwrap()
    }

    #[test]
    fn a_message_larger_than_a_datagram_travels_in_a_memfd_with_its_descriptors() {
        let (a, b) = channel().unwrap();
        // 8 arguments of 127 KiB: more than any send buffer takes as one datagram.
        let msg = Big {
            argv: (0..8).map(|i| format!("{i}").repeat(127 << 10)).collect(),
        };
        let (r, w) = pipe_fd();
        nix::unistd::write(&w, b"stdin").unwrap();
        send(a.as_fd(), &msg, &[r.as_raw_fd()]).unwrap();
        let (got, fds): (Big, _) = recv(b.as_fd()).unwrap().unwrap();
        assert_eq!(got, msg);
        // The memfd is taken out: the caller gets exactly the descriptors sent, in order.
        assert_eq!(fds.len(), 1);
        let mut s = String::new();
        drop(w);
        std::fs::File::from(fds.into_iter().next().unwrap())
            .read_to_string(&mut s)
            .unwrap();
        assert_eq!(s, "stdin");
    }

    #[test]
    fn small_messages_still_go_inline() {
        let (a, b) = channel().unwrap();
        let msg = Big {
            argv: vec!["true".into()],
        };
        send(a.as_fd(), &msg, &[]).unwrap();
        let mut buf = vec![0u8; MAX_INLINE];
        let (len, fds) = recv_into(b.as_fd(), &mut buf).unwrap();
        assert_eq!(&buf[..len], br#"{"argv":["true"]}"#);
        assert!(fds.is_empty());
    }

    #[test]
    fn a_message_over_the_cap_is_refused_both_ways() {
        let (a, b) = channel().unwrap();
        let msg = Big {
            argv: vec!["x".repeat(MAX_MSG)],
        };
        let e = send(a.as_fd(), &msg, &[]).unwrap_err().to_string();
        assert!(e.contains("too large"), "{e}");
        // A peer that announces more than the cap is refused before anything is allocated.
        let memfd = rustix::fs::memfd_create("t", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
        let mut head = vec![IN_MEMFD];
        head.extend_from_slice(&(MAX_MSG as u64 + 1).to_le_bytes());
        send_datagram(a.as_fd(), &head, &[memfd.as_raw_fd()]).unwrap();
        let e = recv::<Big>(b.as_fd()).unwrap_err().to_string();
        assert!(e.contains("too large"), "{e}");
        // And one whose memfd holds less than it announces.
        let memfd = rustix::fs::memfd_create("t", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
        let mut f = std::fs::File::from(memfd);
        std::io::Write::write_all(&mut f, b"{}").unwrap();
        f.rewind().unwrap();
        let mut head = vec![IN_MEMFD];
        head.extend_from_slice(&100u64.to_le_bytes());
        send_datagram(a.as_fd(), &head, &[f.as_raw_fd()]).unwrap();
        assert!(recv::<Big>(b.as_fd()).is_err());
        // A header without its memfd.
        send_datagram(a.as_fd(), &head, &[]).unwrap();
        let e = recv::<Big>(b.as_fd()).unwrap_err().to_string();
        assert!(e.contains("without its memfd"), "{e}");
    }
}
