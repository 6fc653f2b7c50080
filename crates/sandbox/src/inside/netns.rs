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
pub(crate) enum Baseline {
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
        if watched {
            return Baseline::Watched;
        }
        match Fingerprint::capture() {
            Some(f) => Baseline::Captured(f),
            None => Baseline::Unreadable,
        }
    }

    /// Whether a reset must replace the namespace, `reached` telling whether a run since the last
    /// one made a network socket (or was not watched).
    pub(crate) fn must_renew(&mut self, reached: bool) -> bool {
        match self {
            Baseline::Watched => reached,
            Baseline::Captured(f) => reached && !f.unchanged(),
            Baseline::Unreadable => true,
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
/// (sockets die with their processes; addresses, routes and sysctls need CAP_NET_ADMIN).
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
