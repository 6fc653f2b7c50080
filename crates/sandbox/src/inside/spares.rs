//! Network, IPC and mount namespaces made ahead of need by the spawner
//! ([`crate::inside::spawner`]).
//!
//! A new network namespace is the dearest part of a sandbox's `unshare` (~0.4 ms of ~0.55 ms
//! here: every protocol registers its tables and sysctls in it); an IPC namespace mounts its own
//! mqueue filesystem (~40 us). The spawner makes the next sandbox's pair while it waits for the
//! request, and the forked keeper enters them with `setns` instead of making them on the build's
//! critical path. A spare is as new as one made at the build: the spawner made it, nothing ran
//! in it, no other process holds it, and its loopback is up as PID 1 would bring it up.
//!
//! The mount namespace comes with a host root already made in it
//! ([`rootfs::prepare_host_root`]): the binds of the system folders and the curated `/etc`,
//! `/dev`, and the switch of roots, whose detach of the host's mount tree waits for an RCU grace
//! period — ~0.6 ms of PID 1's ~1.2 ms root build here. It is made only while sandboxes of a
//! host root are asked for (an image root is built in place), and its PID 1 adds what depends on
//! the sandbox ([`rootfs::finish_prepared`]).

use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

use nix::sched::{setns, unshare, CloneFlags};

use crate::error::SandboxError;
use crate::inside::{netns, rootfs};

/// A keeper's share: namespaces it enters instead of making them (none when the spawner had no
/// spare ready, or cannot make them: a rootless spawner).
#[derive(Default)]
pub(crate) struct Spares {
    pub(crate) net: Option<OwnedFd>,
    pub(crate) ipc: Option<OwnedFd>,
    /// A mount namespace whose root is a prepared host root.
    pub(crate) root: Option<OwnedFd>,
}

/// The spawner's maker of spares: it steps into a new namespace of each kind, keeps a descriptor
/// of it, and steps back into its own (`home`), which every keeper it forks starts in.
pub(crate) struct Maker {
    home_net: OwnedFd,
    home_ipc: OwnedFd,
    home_mnt: OwnedFd,
    ready: Spares,
    /// The kernel refused a namespace once (no privilege over it): no more attempts.
    refused: bool,
    /// Likewise for a prepared root (or making one failed).
    root_refused: bool,
    /// The last request was for a host root: the next is likely to be.
    roots_wanted: bool,
    /// When the ready root was made, and how old it may grow before it is made again.
    root_made: Instant,
    root_max_age: Duration,
}

/// A prepared root's binds show the host's files as they were when it was made (a file replaced
/// since, as `ldconfig` replaces `/etc/ld.so.cache`, is still the old one in it): one left
/// unused this long is made again.
const ROOT_MAX_AGE: Duration = Duration::from_secs(60);

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
            home_mnt: open("mnt")?,
            ready: Spares::default(),
            refused: false,
            root_refused: false,
            roots_wanted: false,
            root_made: Instant::now(),
            root_max_age: ROOT_MAX_AGE,
        })
    }

    /// Whether something is missing and another attempt may succeed.
    pub(crate) fn wants_work(&self) -> bool {
        self.wants_namespaces() || self.wants_root()
    }

    fn wants_namespaces(&self) -> bool {
        self.ready.net.is_none() && self.ready.ipc.is_none() && !self.refused
    }

    fn wants_root(&self) -> bool {
        let missing = self.ready.root.is_none() || self.root_made.elapsed() > self.root_max_age;
        self.roots_wanted && missing && !self.root_refused
    }

    /// Makes one thing the next keeper lacks — the namespaces, else the root — so that a request
    /// arriving meanwhile waits for one step at most (the caller asks again while
    /// [`Maker::wants_work`]). An error means the spawner could not return to its own
    /// namespace: it must not fork another keeper (it would start in the wrong one).
    pub(crate) fn make(&mut self) -> Result<(), SandboxError> {
        if self.wants_namespaces() {
            // Not away from home for the second kind when the first could not return.
            let net = make_one(CloneFlags::CLONE_NEWNET, self.home_net.as_fd(), "net")?;
            let ipc = make_one(CloneFlags::CLONE_NEWIPC, self.home_ipc.as_fd(), "ipc")?;
            self.refused = net.is_none() || ipc.is_none();
            (self.ready.net, self.ready.ipc) = (net, ipc);
        } else if self.wants_root() {
            // A stale one is let go first: no two are held at once.
            drop(self.ready.root.take());
            self.ready.root = make_root(self.home_mnt.as_fd())?;
            self.root_made = Instant::now();
            self.root_refused = self.ready.root.is_none();
        }
        Ok(())
    }

    /// Hands the spares made for the next keeper over (nothing when none are ready); a prepared
    /// root only to a keeper of a host root (`host_root`), else it waits for the next one.
    pub(crate) fn take(&mut self, host_root: bool) -> Spares {
        self.roots_wanted = host_root;
        Spares {
            net: self.ready.net.take(),
            ipc: self.ready.ipc.take(),
            root: if host_root {
                self.ready.root.take()
            } else {
                None
            },
        }
    }
}

/// Steps into a new mount namespace, prepares a host root in it ([`rootfs::prepare_host_root`])
/// and steps back `home`, to the root and folder it had. `Ok(None)`: the kernel refused, or the
/// root could not be made (the keeper builds its own then).
fn make_root(home: std::os::fd::BorrowedFd<'_>) -> Result<Option<OwnedFd>, SandboxError> {
    let back = |e: nix::Error| SandboxError::io("the spawner returning to its root", e.into());
    // Entering a mount namespace moves the caller to its root: the spawner's own root and
    // folder are put back.
    let open_dir = |p: &str| {
        nix::fcntl::open(
            p,
            nix::fcntl::OFlag::O_PATH
                | nix::fcntl::OFlag::O_DIRECTORY
                | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .map_err(back)
    };
    let (own_root, own_cwd) = (open_dir("/")?, open_dir(".")?);
    if unshare(CloneFlags::CLONE_NEWNS).is_err() {
        return Ok(None);
    }
    let spare = File::open("/proc/thread-self/ns/mnt")
        .map(OwnedFd::from)
        .ok()
        .filter(|_| rootfs::prepare_host_root().is_ok());
    setns(home, CloneFlags::CLONE_NEWNS)
        .map_err(|e| SandboxError::io("the spawner returning to its namespace", e.into()))?;
    nix::unistd::fchdir(&own_root).map_err(back)?;
    nix::unistd::chroot(".").map_err(back)?;
    nix::unistd::fchdir(&own_cwd).map_err(back)?;
    Ok(spare)
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
        let first = maker.take(false);
        assert!(maker.wants_work(), "taken: the next pair is wanted");
        maker.make().expect("returning home");
        let second = maker.take(false);
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

    /// A prepared root is made only once a host root was asked for, is kept back from a keeper
    /// of another root, and each is a mount namespace of its own whose `/` is the prepared root:
    /// the system folders read-only, the curated `/etc` without the synthetic files (its PID 1
    /// writes them), `/dev`'s nodes, empty mount points, and nothing else of the host. The maker
    /// ends in its own namespace, root and folder. Runs on a thread of its own (a mount
    /// namespace belongs to a thread that does not share its root with the others). Needs root.
    #[test]
    fn a_prepared_root_is_a_host_root_of_its_own_and_the_maker_stays_home() {
        std::thread::spawn(|| {
            let where_am_i = || {
                let root = std::fs::metadata("/").expect("/");
                let cwd = std::env::current_dir().expect("cwd");
                (own("mnt"), root.dev(), root.ino(), cwd)
            };
            let home = where_am_i();
            let mut maker = Maker::new().expect("/proc/self/ns");
            maker.make().expect("returning home");
            assert!(
                maker.take(true).root.is_none(),
                "a root was made before any host root was asked for"
            );
            if !nix::unistd::geteuid().is_root() {
                maker.make().expect("returning home");
                assert!(maker.take(true).root.is_none(), "a root made without root");
                return;
            }
            assert!(
                maker.wants_work(),
                "a host root was asked for: one is wanted"
            );
            // One step at a time: the namespaces, then the root.
            maker.make().expect("returning home");
            assert!(maker.ready.root.is_none() && maker.wants_work());
            maker.make().expect("returning home");
            assert!(!maker.wants_work());
            // One left unused too long is made again.
            maker.root_max_age = Duration::ZERO;
            // (A descriptor of the stale one kept here, so that its number is not reused.)
            let stale = maker.ready.root.as_ref().expect("a prepared root");
            let stale = stale.try_clone().expect("dup");
            assert!(maker.wants_work(), "a stale root is not made again");
            maker.make().expect("returning home");
            let fresh = maker.ready.root.as_ref().expect("a prepared root");
            assert_ne!(ino_of(&stale), ino_of(fresh), "the stale root was kept");
            maker.root_max_age = ROOT_MAX_AGE;
            assert!(
                maker.take(false).root.is_none(),
                "a prepared root went to a keeper of another root"
            );
            let first = maker.take(true).root.expect("a prepared root");
            maker.make().expect("returning home");
            maker.make().expect("returning home");
            let second = maker.take(true).root.expect("a second prepared root");
            assert_eq!(
                where_am_i(),
                home,
                "the maker left its namespace, root or folder"
            );
            assert!(
                ino_of(&first) != home.0 && ino_of(&first) != ino_of(&second),
                "a prepared root is the maker's namespace or another keeper's"
            );

            // Entered as a keeper does.
            let seen = std::thread::spawn(move || {
                nix::sched::unshare(CloneFlags::CLONE_FS).expect("a root of this thread's own");
                setns(&first, CloneFlags::CLONE_NEWNS).expect("setns into the prepared root");
                let exists = |p: &str| std::fs::symlink_metadata(p).is_ok();
                let read_only = |p: &str| {
                    nix::sys::statvfs::statvfs(p)
                        .expect("statvfs")
                        .flags()
                        .contains(nix::sys::statvfs::FsFlags::ST_RDONLY)
                };
                let empty = |p: &str| std::fs::read_dir(p).map(|d| d.count()).ok();
                (
                    [
                        exists("/usr/bin/sh"),
                        exists("/etc/ld.so.cache"),
                        exists("/dev/null"),
                        exists("/etc/passwd"),
                        exists("/etc/shadow"),
                        exists("/root"),
                        exists(env!("CARGO_MANIFEST_DIR")),
                    ],
                    [read_only("/"), read_only("/usr"), read_only("/dev")],
                    [empty("/proc"), empty("/tmp"), empty(crate::spec::WORKDIR)],
                )
            })
            .join()
            .expect("the keeper's thread");
            assert_eq!(
                seen,
                (
                    [true, true, true, false, false, false, false],
                    [true, true, true],
                    [Some(0), Some(0), Some(0)]
                ),
                "([/usr/bin/sh, ld.so.cache, /dev/null, passwd, shadow, /root, this crate], \
                 read-only [/, /usr, /dev], entries in [/proc, /tmp, workdir])"
            );
        })
        .join()
        .expect("the test thread");
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
