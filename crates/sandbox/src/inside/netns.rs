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

/// The network namespace's observable state: its interfaces' counters and its protocol
/// statistics (all per namespace, and cheap to read — unlike `/proc/net/tcp`, which walks the
/// host's whole connection table). A namespace whose fingerprint has not moved since it was made
/// has carried no packet and failed no send: nothing in it can tell one run from the next
/// (sockets die with their processes; addresses, routes and sysctls need CAP_NET_ADMIN).
pub(crate) fn fingerprint() -> Option<Vec<u8>> {
    let mut all = Vec::new();
    for f in [
        "/proc/net/dev",
        "/proc/net/snmp",
        "/proc/net/snmp6",
        "/proc/net/netstat",
    ] {
        all.extend(std::fs::read(f).ok()?);
    }
    Some(all)
}
