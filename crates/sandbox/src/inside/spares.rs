//! Network and IPC namespaces made ahead of need by the spawner ([`crate::inside::spawner`]).
//!
//! A new network namespace is the dearest part of a sandbox's `unshare` (~0.4 ms of ~0.55 ms
//! here: every protocol registers its tables and sysctls in it); an IPC namespace mounts its own
//! mqueue filesystem (~40 us). The spawner makes the next sandbox's pair while it waits for the
//! request, and the forked keeper enters them with `setns` instead of making them on the build's
//! critical path. A spare is as new as one made at the build: the spawner made it, nothing ran
//! in it, no other process holds it, and its loopback is up as PID 1 would bring it up.

use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};

use nix::sched::{setns, unshare, CloneFlags};

use crate::error::SandboxError;
use crate::inside::netns;

/// A keeper's share: namespaces it enters instead of making them (none when the spawner had no
/// spare ready, or cannot make them: a rootless spawner).
#[derive(Default)]
pub(crate) struct Spares {
    pub(crate) net: Option<OwnedFd>,
    pub(crate) ipc: Option<OwnedFd>,
}

impl Spares {
    fn is_empty(&self) -> bool {
        self.net.is_none() && self.ipc.is_none()
    }
}

/// The spawner's maker of spares: it steps into a new namespace of each kind, keeps a descriptor
/// of it, and steps back into its own (`home`), which every keeper it forks starts in.
pub(crate) struct Maker {
    home_net: OwnedFd,
    home_ipc: OwnedFd,
    ready: Spares,
    /// The kernel refused a namespace once (no privilege over it): no more attempts.
    refused: bool,
}

impl Maker {
    /// None when the spawner's own namespaces cannot be named (no /proc): keepers make theirs.
    /// They are named through `/proc/thread-self`: `unshare` and `setns` change only the calling
    /// thread, and `/proc/self` names the process's first thread.
    pub(crate) fn new() -> Option<Maker> {
        let open = |kind: &str| {
            File::open(format!("/proc/thread-self/ns/{kind}"))
                .ok()
                .map(OwnedFd::from)
        };
        Some(Maker {
            home_net: open("net")?,
            home_ipc: open("ipc")?,
            ready: Spares::default(),
            refused: false,
        })
    }

    /// Whether there is nothing ready and another attempt may succeed.
    pub(crate) fn wants_work(&self) -> bool {
        self.ready.is_empty() && !self.refused
    }

    /// Makes the next keeper's spares. An error means the spawner could not return to its own
    /// namespace: it must not fork another keeper (it would start in the wrong one).
    pub(crate) fn make(&mut self) -> Result<(), SandboxError> {
        // Not away from home for the second kind when the first could not return.
        let net = make_one(CloneFlags::CLONE_NEWNET, self.home_net.as_fd(), "net")?;
        let ipc = make_one(CloneFlags::CLONE_NEWIPC, self.home_ipc.as_fd(), "ipc")?;
        self.refused = net.is_none() || ipc.is_none();
        self.ready = Spares { net, ipc };
        Ok(())
    }

    /// Hands the spares made for the next keeper over (nothing when none are ready).
    pub(crate) fn take(&mut self) -> Spares {
        std::mem::take(&mut self.ready)
    }
}

/// Steps into a new namespace of `kind`, names it, and steps back `home`. `Ok(None)`: the kernel
/// refused a new one (nothing changed).
fn make_one(
    kind: CloneFlags,
    home: std::os::fd::BorrowedFd<'_>,
    name: &str,
) -> Result<Option<OwnedFd>, SandboxError> {
    if unshare(kind).is_err() {
        return Ok(None);
    }
    if kind == CloneFlags::CLONE_NEWNET {
        netns::loopback_up();
    }
    let spare = File::open(format!("/proc/thread-self/ns/{name}")).map(OwnedFd::from);
    setns(home, kind)
        .map_err(|e| SandboxError::io("the spawner returning to its namespace", e.into()))?;
    Ok(spare.ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn ino_of(fd: &OwnedFd) -> u64 {
        nix::sys::stat::fstat(fd)
            .expect("fstat of a namespace")
            .st_ino
    }

    fn own(kind: &str) -> u64 {
        std::fs::metadata(format!("/proc/thread-self/ns/{kind}"))
            .expect("this thread's namespace")
            .ino()
    }

    /// The maker hands out namespaces that are new (neither this thread's nor each other's),
    /// leaves the thread in its own, and brings the spare's loopback up. Needs root (CI runs
    /// the tests as root); elsewhere the kernel refuses and the maker says so.
    #[test]
    fn spares_are_new_namespaces_and_the_maker_stays_home() {
        let (net0, ipc0) = (own("net"), own("ipc"));
        let mut maker = Maker::new().expect("/proc/self/ns");
        assert!(maker.wants_work());
        maker.make().expect("returning home");
        if !nix::unistd::geteuid().is_root() {
            assert!(
                !maker.wants_work(),
                "refused without privilege: no more attempts"
            );
            return;
        }
        assert!(!maker.wants_work(), "a made pair waits for its keeper");
        let first = maker.take();
        assert!(maker.wants_work(), "taken: the next pair is wanted");
        maker.make().expect("returning home");
        let second = maker.take();
        assert_eq!(
            (own("net"), own("ipc")),
            (net0, ipc0),
            "the maker left its namespaces"
        );
        let ids = |s: &Spares| {
            (
                ino_of(s.net.as_ref().expect("a spare network namespace")),
                ino_of(s.ipc.as_ref().expect("a spare IPC namespace")),
            )
        };
        let (a, b) = (ids(&first), ids(&second));
        assert!(a.0 != net0 && a.1 != ipc0, "a spare is the maker's own");
        assert!(
            a.0 != b.0 && a.1 != b.1,
            "two keepers were given the same namespace"
        );

        // Entered (as a keeper does), the spare's loopback is up and it has no other interface.
        let net = first.net.expect("a spare network namespace");
        let report = std::thread::spawn(move || {
            setns(&net, CloneFlags::CLONE_NEWNET).expect("setns into the spare");
            let flags = std::fs::read_to_string("/proc/thread-self/net/dev").expect("net/dev");
            let mut ifaces: Vec<String> = flags
                .lines()
                .skip(2)
                .filter_map(|l| l.split(':').next().map(|n| n.trim().to_string()))
                .collect();
            ifaces.sort();
            (ifaces, loopback_is_up())
        })
        .join()
        .expect("the probe thread");
        assert_eq!(report, (vec!["lo".to_string()], true));
    }

    fn loopback_is_up() -> bool {
        // SAFETY: a datagram socket used for one ioctl on an ifreq we own, then closed.
        unsafe {
            let sock = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
            assert!(sock >= 0, "socket");
            let mut req: libc::ifreq = std::mem::zeroed();
            for (i, b) in b"lo".iter().enumerate() {
                req.ifr_name[i] = *b as libc::c_char;
            }
            let ok = libc::ioctl(sock, libc::SIOCGIFFLAGS, &mut req) == 0;
            libc::close(sock);
            ok && req.ifr_ifru.ifru_flags & libc::IFF_UP as libc::c_short != 0
        }
    }
}
