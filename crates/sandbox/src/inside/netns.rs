//! The sandbox's network namespace: its loopback, and a fingerprint that tells whether anything
//! used it (so a reset can keep a namespace nobody touched).

/// Brings up `lo` in the new network namespace, so programs can talk to themselves.
pub(crate) fn loopback_up() {
    // SAFETY: a plain datagram socket used only for the interface ioctl, closed at the end.
    let sock = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if sock < 0 {
        return;
    }
    // SAFETY: ifreq is plain data; zeroed is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (i, b) in b"lo".iter().enumerate() {
        req.ifr_name[i] = *b as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS / SIOCSIFFLAGS read and write the ifreq we own.
    unsafe {
        if libc::ioctl(sock, libc::SIOCGIFFLAGS, &mut req) == 0 {
            req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            libc::ioctl(sock, libc::SIOCSIFFLAGS, &req);
        }
        libc::close(sock);
    }
}

/// What a reset knows about the namespace it may keep.
pub(crate) struct Baseline {
    kind: Kind,
    /// The namespace's unix sockets (see [`UnixSockets`]); None when it could not be opened, and
    /// every reset renews the namespace.
    unix: Option<UnixSockets>,
}

enum Kind {
    /// The socket watch guards it: no run's network socket has reached it since it was made
    /// (a reset renews it after one that did). Nothing is read, at the build or later: reading
    /// the four files cost ~0.3 ms of every fresh sandbox's build.
    Watched,
    /// Its fingerprint as made, compared at each reset (gVisor, whose filter traces instead).
    Captured(Fingerprint),
    /// Its files could not be read: every reset renews it.
    Unreadable,
}

impl Baseline {
    /// For a namespace just made: watched runs need nothing more; others a fingerprint.
    pub(crate) fn new(watched: bool) -> Baseline {
        let kind = if watched {
            Kind::Watched
        } else {
            match Fingerprint::capture() {
                Some(f) => Kind::Captured(f),
                None => Kind::Unreadable,
            }
        };
        Baseline {
            kind,
            unix: UnixSockets::open(),
        }
    }

    /// Whether the socket watch guards the namespace.
    pub(crate) fn watched(&self) -> bool {
        matches!(self.kind, Kind::Watched)
    }

    /// Whether a reset must replace the namespace, `reached` telling whether a run since the last
    /// one made a network socket (or was not watched).
    pub(crate) fn must_renew(&mut self, reached: bool) -> bool {
        match &mut self.kind {
            Kind::Watched => reached,
            Kind::Captured(f) => reached && !f.unchanged(),
            Kind::Unreadable => true,
        }
    }

    /// Whether a unix socket is left in the namespace once a run's processes are gone (or the
    /// list could not be read): see [`UnixSockets`].
    pub(crate) fn sockets_left(&self) -> bool {
        self.unix.as_ref().is_none_or(UnixSockets::any)
    }
}

/// The namespace's `/proc/net/unix`, kept open (it shows the namespace it was opened in).
///
/// A unix socket does not always die with the processes that had it: one whose descriptor is in
/// flight (`SCM_RIGHTS`, in a queue no process can read any more) lives until the kernel's unix
/// garbage collector finds it, which runs asynchronously — a listener whose descriptor sits in
/// the queue of a connection it has not accepted outlived its run, with every descriptor sent
/// alongside: still accepting connections at its abstract name (which lives in the network
/// namespace), a pty master keeping `/dev/pts/N` and what was written to it. The next run of a
/// warm sandbox could connect to the one and read the other. Such a cycle needs a unix socket
/// of the run's, which is made in this namespace (unless the run had the host's network), and
/// PID 1 has none of its own here between runs: after a run, with its processes reaped, the
/// list must be empty, or the sandbox is not reused.
struct UnixSockets(std::fs::File);

impl UnixSockets {
    fn open() -> Option<UnixSockets> {
        let file = std::fs::File::open("/proc/net/unix").ok()?;
        let high = crate::inside::fds::above_runs(file).ok()?;
        Some(UnixSockets(std::fs::File::from(high)))
    }

    /// Whether any unix socket exists in the namespace (or the list could not be read): more
    /// than the header line.
    fn any(&self) -> bool {
        use std::os::unix::fs::FileExt;
        let mut buf = [0u8; 256];
        match self.0.read_at(&mut buf, 0) {
            Ok(n) => buf[..n]
                .iter()
                .position(|&b| b == b'\n')
                .is_none_or(|end| end + 1 < n),
            Err(_) => true,
        }
    }
}

/// The files whose contents make up the fingerprint.
const FILES: [&str; 4] = [
    "/proc/net/dev",
    "/proc/net/snmp",
    "/proc/net/snmp6",
    "/proc/net/netstat",
];

/// The network namespace's observable state: its interfaces' counters and its protocol
/// statistics (all per namespace, and cheap to read — unlike `/proc/net/tcp`, which walks the
/// host's whole connection table). A namespace whose fingerprint has not moved since it was made
/// has carried no packet and failed no send: nothing in it can tell one run from the next
/// (sockets die with their processes — all but unix sockets left in flight, see
/// [`UnixSockets`]; addresses, routes and sysctls need CAP_NET_ADMIN).
///
/// The files stay open (a `/proc/net` file shows the namespace it was opened in) and are read
/// again with `pread` into one buffer: a reset of a sandbox whose namespace nobody used makes
/// four reads instead of four opens, ~30 growing reads and four closes.
pub(crate) struct Fingerprint {
    files: Vec<std::fs::File>,
    baseline: Vec<u8>,
    buf: Vec<u8>,
}

impl Fingerprint {
    /// Records the current namespace as it is now (None when a file cannot be read).
    pub(crate) fn capture() -> Option<Fingerprint> {
        let files = FILES
            .iter()
            .map(|f| {
                let high = crate::inside::fds::above_runs(std::fs::File::open(f)?)?;
                Ok(std::fs::File::from(high))
            })
            .collect::<std::io::Result<Vec<_>>>()
            .ok()?;
        let mut f = Fingerprint {
            files,
            baseline: Vec::new(),
            buf: vec![0; 64 << 10],
        };
        let n = f.read()?;
        f.baseline = f.buf[..n].to_vec();
        Some(f)
    }

    /// Whether the namespace still looks as it did when captured.
    pub(crate) fn unchanged(&mut self) -> bool {
        self.read().is_some_and(|n| self.buf[..n] == self.baseline)
    }

    /// Reads every file's whole contents into the buffer, one after the other; their length.
    fn read(&mut self) -> Option<usize> {
        use std::os::unix::fs::FileExt;
        let mut used = 0;
        for file in &self.files {
            let mut offset = 0u64;
            loop {
                if self.buf.len() - used < 4096 {
                    self.buf.resize(self.buf.len() * 2, 0);
                }
                let n = file.read_at(&mut self.buf[used..], offset).ok()?;
                if n == 0 {
                    break;
                }
                used += n;
                offset += n as u64;
            }
        }
        Some(used)
    }
}
