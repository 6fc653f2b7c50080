//! End-to-end tests against the running kernel: a forked child installs the
//! filter, sends the listener to the test (the supervisor), makes one
//! syscall, and reports what it returned.
//!
//! The test harness is multi-threaded, so the forked child only calls
//! async-signal-safe functions: prctl, the raw install, sendmsg with a
//! buffer on its stack, the syscall under test, write and _exit.

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use corral_seccomp::*;

/// An ioctl request as a raw argument (`Ioctl` is `c_ulong` on glibc,
/// `c_int` on musl).
#[allow(clippy::unnecessary_cast)]
fn req(r: libc::Ioctl) -> u64 {
    r as u64
}

fn default_filter() -> &'static CompiledFilter {
    static F: OnceLock<CompiledFilter> = OnceLock::new();
    F.get_or_init(|| {
        let f = CompiledFilter::compile(&Profile::default_profile()).unwrap();
        // Exercise the shipping path too.
        CompiledFilter::from_bytes(f.as_bytes().to_vec()).unwrap()
    })
}

fn net_filter() -> &'static CompiledFilter {
    static F: OnceLock<CompiledFilter> = OnceLock::new();
    F.get_or_init(|| {
        CompiledFilter::compile(&Profile::default_profile().with_network(true)).unwrap()
    })
}

fn errno() -> i32 {
    // SAFETY: __errno_location returns a valid pointer to this thread's errno.
    unsafe { *libc::__errno_location() }
}

fn set_errno(v: i32) {
    // SAFETY: as above; writing errno is allowed.
    unsafe { *libc::__errno_location() = v }
}

/// A raw syscall. Callers only pass integers, null or pointers to live
/// stack values, so this cannot corrupt memory.
fn sys(nr: libc::c_long, args: [u64; 6]) -> i64 {
    // SAFETY: see above; the syscalls used here either get intercepted by
    // the filter or are harmless with the given arguments.
    unsafe { libc::syscall(nr, args[0], args[1], args[2], args[3], args[4], args[5]) }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exit {
    Code(i32),
    Signal(i32),
}

fn decode(status: i32) -> Exit {
    if libc::WIFEXITED(status) {
        Exit::Code(libc::WEXITSTATUS(status))
    } else {
        Exit::Signal(libc::WTERMSIG(status))
    }
}

#[derive(Debug)]
enum Event {
    /// The child hit a notify rule.
    Notified(Notification),
    /// The syscall returned (result, errno) in the child.
    Returned { ret: i64, errno: i32 },
    /// The child is gone without reporting a result.
    Gone(Exit),
}

/// Exit codes of the child's setup steps.
const EXIT_NNP: i32 = 101;
const EXIT_INSTALL: i32 = 102;
const EXIT_SEND: i32 = 103;
const EXIT_NOT_CLOEXEC: i32 = 104;
const EXIT_UNWIND: i32 = 120;

struct Sandboxed {
    pid: libc::pid_t,
    sock: OwnedFd,
    listener: Option<OwnedFd>,
    exit: Option<Exit>,
}

/// Leaves the child with `_exit` should anything unwind in it.
struct ExitOnUnwind;

impl Drop for ExitOnUnwind {
    fn drop(&mut self) {
        // SAFETY: _exit is async-signal-safe and never returns.
        unsafe { libc::_exit(EXIT_UNWIND) }
    }
}

/// Runs in the forked child. Never returns.
fn child_main(
    filter: &CompiledFilter,
    sock: RawFd,
    send_listener: bool,
    op: &dyn Fn() -> i64,
) -> ! {
    let _guard = ExitOnUnwind;
    // SAFETY: everything below is a plain syscall wrapper on integers,
    // this function's own stack buffers or the filter (already built by the
    // parent); no allocation, no locks.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            libc::_exit(EXIT_NNP);
        }
        let listener = match filter.install_with_listener() {
            Ok(fd) => fd,
            Err(_) => libc::_exit(EXIT_INSTALL),
        };
        if libc::fcntl(listener, libc::F_GETFD) & libc::FD_CLOEXEC == 0 {
            libc::_exit(EXIT_NOT_CLOEXEC);
        }

        let mut byte = [0u8; 1];
        let mut iov = libc::iovec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: 1,
        };
        let mut cmsg_buf = [0u64; 8];
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        if send_listener {
            msg.msg_control = cmsg_buf.as_mut_ptr().cast();
            msg.msg_controllen = libc::CMSG_SPACE(4) as _;
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(4) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>(), listener);
        }
        if libc::sendmsg(sock, &msg, 0) != 1 {
            libc::_exit(EXIT_SEND);
        }
        libc::close(listener);

        set_errno(0);
        let ret = op();
        let err = errno();
        let mut out = [0u8; 12];
        out[..8].copy_from_slice(&ret.to_ne_bytes());
        out[8..].copy_from_slice(&err.to_ne_bytes());
        libc::write(sock, out.as_ptr().cast(), out.len());
        libc::_exit(0);
    }
}

fn spawn(filter: &CompiledFilter, send_listener: bool, op: &dyn Fn() -> i64) -> Sandboxed {
    let mut fds = [0; 2];
    // SAFETY: socketpair writes two fds into `fds`.
    let rc = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    assert_eq!(rc, 0, "socketpair: {}", std::io::Error::last_os_error());
    // SAFETY: both fds were just created and are owned by nobody else.
    let (ours, theirs) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };

    // SAFETY: the child only runs `child_main`, which is async-signal-safe
    // and ends in _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
    if pid == 0 {
        child_main(filter, theirs.as_raw_fd(), send_listener, op);
    }
    drop(theirs);
    let mut sandboxed = Sandboxed {
        pid,
        sock: ours,
        listener: None,
        exit: None,
    };
    sandboxed.listener = sandboxed.receive_listener();
    sandboxed
}

impl Sandboxed {
    fn receive_listener(&mut self) -> Option<OwnedFd> {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !self.poll_in(self.sock.as_fd(), 100) {
            if let Some(exit) = self.try_reap() {
                panic!("child failed during setup: {exit:?}");
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for the listener"
            );
        }
        let mut byte = [0u8; 1];
        let mut iov = libc::iovec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: 1,
        };
        let mut cmsg_buf = [0u64; 8];
        // SAFETY: msghdr is plain data; all-zero is valid.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cmsg_buf.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&cmsg_buf) as _;
        // SAFETY: `msg` points to live buffers of the stated sizes.
        let n = unsafe { libc::recvmsg(self.sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        assert_eq!(n, 1, "recvmsg: {}", std::io::Error::last_os_error());
        // SAFETY: the kernel filled in the control buffer `msg` points to.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            if cmsg.is_null() {
                return None;
            }
            assert_eq!((*cmsg).cmsg_type, libc::SCM_RIGHTS);
            let fd = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>());
            Some(OwnedFd::from_raw_fd(fd))
        }
    }

    fn listener(&self) -> BorrowedFd<'_> {
        self.listener.as_ref().expect("no listener").as_fd()
    }

    fn poll_in(&self, fd: BorrowedFd<'_>, timeout_ms: i32) -> bool {
        let mut pfd = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let rc = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
        rc > 0 && pfd.revents & libc::POLLIN != 0
    }

    fn try_reap(&mut self) -> Option<Exit> {
        if self.exit.is_none() {
            let mut status = 0;
            // SAFETY: waitpid on our own child with a valid status pointer.
            let rc = unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) };
            if rc == self.pid {
                self.exit = Some(decode(status));
            }
        }
        self.exit
    }

    fn read_result(&self) -> Option<Event> {
        if !self.poll_in(self.sock.as_fd(), 0) {
            return None;
        }
        let mut buf = [0u8; 12];
        // SAFETY: reading into a live 12-byte buffer.
        let n = unsafe { libc::read(self.sock.as_raw_fd(), buf.as_mut_ptr().cast(), 12) };
        if n != 12 {
            return None;
        }
        Some(Event::Returned {
            ret: i64::from_ne_bytes(buf[..8].try_into().unwrap()),
            errno: i32::from_ne_bytes(buf[8..].try_into().unwrap()),
        })
    }

    /// The next thing that happens to the child.
    fn next_event(&mut self) -> Event {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(ev) = self.read_result() {
                return ev;
            }
            if let Some(listener) = &self.listener {
                if self.poll_in(listener.as_fd(), 0) {
                    match receive(listener.as_fd()) {
                        Ok(n) => return Event::Notified(n),
                        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::EINTR)) => {}
                        Err(e) => panic!("receive: {e}"),
                    }
                }
            }
            if let Some(exit) = self.try_reap() {
                if let Some(ev) = self.read_result() {
                    return ev;
                }
                return Event::Gone(exit);
            }
            assert!(Instant::now() < deadline, "timed out waiting for the child");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn wait(&mut self) -> Exit {
        if let Some(exit) = self.exit {
            return exit;
        }
        let mut status = 0;
        loop {
            // SAFETY: waitpid on our own child with a valid status pointer.
            let rc = unsafe { libc::waitpid(self.pid, &mut status, 0) };
            if rc == self.pid {
                let exit = decode(status);
                self.exit = Some(exit);
                return exit;
            }
            assert_eq!(errno(), libc::EINTR, "waitpid");
        }
    }
}

impl Drop for Sandboxed {
    fn drop(&mut self) {
        if self.exit.is_none() {
            // SAFETY: killing and reaping our own child.
            unsafe {
                libc::kill(self.pid, libc::SIGKILL);
                libc::waitpid(self.pid, std::ptr::null_mut(), 0);
            }
        }
    }
}

/// Runs `op` sandboxed, expects a notification for `name`, answers EPERM
/// and checks the child saw EPERM.
fn expect_reported(filter: &CompiledFilter, name: &str, op: &dyn Fn() -> i64) -> Notification {
    let mut s = spawn(filter, true, op);
    let n = match s.next_event() {
        Event::Notified(n) => n,
        other => panic!("{name}: expected a notification, got {other:?}"),
    };
    assert_eq!(syscall_name(n.syscall_nr, n.arch), name);
    assert_eq!(n.syscall_name(), name);
    assert_eq!(n.pid as libc::pid_t, s.pid, "{name}: notification pid");
    respond_errno(s.listener(), n.id, libc::EPERM).unwrap();
    match s.next_event() {
        Event::Returned { ret: -1, errno } if errno == libc::EPERM => {}
        other => panic!("{name}: expected -1/EPERM after the answer, got {other:?}"),
    }
    assert_eq!(s.wait(), Exit::Code(0), "{name}");
    n
}

/// Runs `op` sandboxed and expects it to return without a notification.
fn expect_returns(filter: &CompiledFilter, what: &str, op: &dyn Fn() -> i64) -> (i64, i32) {
    let mut s = spawn(filter, true, op);
    let r = match s.next_event() {
        Event::Returned { ret, errno } => (ret, errno),
        other => panic!("{what}: expected the syscall to return, got {other:?}"),
    };
    assert_eq!(s.wait(), Exit::Code(0), "{what}");
    r
}

fn expect_errno(filter: &CompiledFilter, what: &str, errno: i32, op: &dyn Fn() -> i64) {
    assert_eq!(expect_returns(filter, what, op), (-1, errno), "{what}");
}

fn expect_success(filter: &CompiledFilter, what: &str, op: &dyn Fn() -> i64) -> i64 {
    let (ret, err) = expect_returns(filter, what, op);
    assert!(ret >= 0, "{what}: returned {ret}, errno {err}");
    ret
}

#[test]
fn ptrace_is_reported() {
    let n = expect_reported(default_filter(), "ptrace", &|| {
        sys(
            libc::SYS_ptrace,
            [libc::PTRACE_TRACEME as u64, 0, 0, 0, 0, 0],
        )
    });
    assert_eq!(n.arch, AUDIT_ARCH_NATIVE);
    assert_eq!(n.syscall_nr as libc::c_long, libc::SYS_ptrace);
}

#[test]
fn unshare_user_is_reported() {
    let n = expect_reported(default_filter(), "unshare", &|| {
        sys(
            libc::SYS_unshare,
            [libc::CLONE_NEWUSER as u64, 0, 0, 0, 0, 0],
        )
    });
    assert_eq!(n.args[0], libc::CLONE_NEWUSER as u64);
}

#[test]
fn mount_is_reported() {
    expect_reported(default_filter(), "mount", &|| sys(libc::SYS_mount, [0; 6]));
}

#[test]
fn keyctl_is_reported() {
    // KEYCTL_GET_KEYRING_ID(KEY_SPEC_SESSION_KEYRING, create=0)
    expect_reported(default_filter(), "keyctl", &|| {
        sys(libc::SYS_keyctl, [0, -3i64 as u64, 0, 0, 0, 0])
    });
}

#[test]
fn bpf_is_reported() {
    expect_reported(default_filter(), "bpf", &|| sys(libc::SYS_bpf, [0; 6]));
}

#[test]
fn perf_event_open_is_reported() {
    expect_reported(default_filter(), "perf_event_open", &|| {
        sys(libc::SYS_perf_event_open, [0, 0, u64::MAX, u64::MAX, 0, 0])
    });
}

#[test]
fn userfaultfd_is_reported() {
    expect_reported(default_filter(), "userfaultfd", &|| {
        sys(
            libc::SYS_userfaultfd,
            [libc::O_CLOEXEC as u64, 0, 0, 0, 0, 0],
        )
    });
}

#[test]
fn clone_newnet_is_reported() {
    let n = expect_reported(default_filter(), "clone", &|| {
        let r = sys(
            libc::SYS_clone,
            [(libc::CLONE_NEWNET | libc::SIGCHLD) as u64, 0, 0, 0, 0, 0],
        );
        if r == 0 {
            // Only reachable if the filter failed: leave quietly.
            // SAFETY: _exit never returns.
            unsafe { libc::_exit(0) }
        }
        r
    });
    assert_ne!(n.args[0] & libc::CLONE_NEWNET as u64, 0);
}

#[test]
fn personality_linux32_is_reported() {
    // PER_LINUX32
    let n = expect_reported(default_filter(), "personality", &|| {
        sys(libc::SYS_personality, [0x0008, 0, 0, 0, 0, 0])
    });
    assert_eq!(n.args[0], 8);
    // Upper-half garbage does not hide it.
    expect_reported(default_filter(), "personality", &|| {
        sys(
            libc::SYS_personality,
            [(1 << 32) | 0x0040_0000, 0, 0, 0, 0, 0],
        )
    });
}

#[test]
fn personality_query_and_no_randomize_are_allowed() {
    let f = default_filter();
    let current = expect_success(f, "personality query", &|| {
        sys(libc::SYS_personality, [0xffff_ffff, 0, 0, 0, 0, 0])
    });
    assert_eq!(current & !0x40000, 0, "persona {current:#x}");
    expect_success(f, "personality ADDR_NO_RANDOMIZE", &|| {
        sys(libc::SYS_personality, [0x40000, 0, 0, 0, 0, 0])
    });
}

#[test]
fn open_tree_attr_is_reported() {
    // Newer than libseccomp 2.5.4's tables: added by number.
    expect_reported(default_filter(), "open_tree_attr", &|| {
        sys(467, [u64::MAX, 0, 0, 0, 0, 0])
    });
}

#[test]
fn settimeofday_is_reported() {
    // settimeofday(NULL, NULL) would be a harmless no-op if it got through.
    expect_reported(default_filter(), "settimeofday", &|| {
        sys(libc::SYS_settimeofday, [0; 6])
    });
}

#[test]
fn supervisor_kills_the_child() {
    let mut s = spawn(default_filter(), true, &|| {
        sys(
            libc::SYS_ptrace,
            [libc::PTRACE_TRACEME as u64, 0, 0, 0, 0, 0],
        )
    });
    let n = match s.next_event() {
        Event::Notified(n) => n,
        other => panic!("expected a notification, got {other:?}"),
    };
    assert_eq!(n.syscall_name(), "ptrace");
    // SAFETY: killing our own child.
    assert_eq!(unsafe { libc::kill(s.pid, libc::SIGKILL) }, 0);
    assert_eq!(s.wait(), Exit::Signal(libc::SIGKILL));
    // The target is gone: answering is not an error.
    respond_errno(s.listener(), n.id, libc::EPERM).unwrap();
}

#[test]
fn without_listener_blocked_syscalls_fail_with_enosys() {
    let mut s = spawn(default_filter(), false, &|| {
        sys(
            libc::SYS_ptrace,
            [libc::PTRACE_TRACEME as u64, 0, 0, 0, 0, 0],
        )
    });
    assert!(s.listener.is_none());
    match s.next_event() {
        Event::Returned { ret: -1, errno } if errno == libc::ENOSYS => {}
        other => panic!("expected -1/ENOSYS, got {other:?}"),
    }
    assert_eq!(s.wait(), Exit::Code(0));
}

#[test]
fn second_listener_is_refused() {
    let f = default_filter();
    expect_errno(f, "second install", libc::EBUSY, &|| {
        f.install_with_listener().map(i64::from).unwrap_or(-1)
    });
}

#[test]
fn quiet_errnos() {
    let f = default_filter();
    expect_errno(f, "io_uring_setup", libc::ENOSYS, &|| {
        sys(libc::SYS_io_uring_setup, [1, 0, 0, 0, 0, 0])
    });
    expect_errno(f, "io_uring_enter", libc::ENOSYS, &|| {
        sys(libc::SYS_io_uring_enter, [u64::MAX, 0, 0, 0, 0, 0])
    });
    expect_errno(f, "clone3", libc::ENOSYS, &|| sys(libc::SYS_clone3, [0; 6]));
    for (what, domain) in [
        ("AF_NETLINK", libc::AF_NETLINK),
        ("AF_PACKET", libc::AF_PACKET),
        ("AF_VSOCK", libc::AF_VSOCK),
        ("AF_ALG", libc::AF_ALG),
        ("AF_KEY", libc::AF_KEY),
        ("AF_BLUETOOTH", libc::AF_BLUETOOTH),
    ] {
        expect_errno(f, what, libc::EAFNOSUPPORT, &|| {
            sys(
                libc::SYS_socket,
                [domain as u64, libc::SOCK_RAW as u64, 0, 0, 0, 0],
            )
        });
    }
    expect_errno(f, "socket(AF_NETLINK | 1<<32)", libc::EAFNOSUPPORT, &|| {
        sys(
            libc::SYS_socket,
            [
                (1 << 32) | libc::AF_NETLINK as u64,
                libc::SOCK_RAW as u64,
                0,
                0,
                0,
                0,
            ],
        )
    });
    expect_errno(f, "socketpair(AF_NETLINK)", libc::EAFNOSUPPORT, &|| {
        let mut fds = [0i32; 2];
        sys(
            libc::SYS_socketpair,
            [
                libc::AF_NETLINK as u64,
                libc::SOCK_RAW as u64,
                0,
                fds.as_mut_ptr() as u64,
                0,
                0,
            ],
        )
    });
    // Not a terminal: without the filter this would be EBADF.
    let c = b'x';
    for req in [
        req(libc::TIOCSTI),
        req(libc::TIOCLINUX),
        req(libc::TIOCSETD),
        (1 << 32) | req(libc::TIOCSTI),
    ] {
        expect_errno(f, "ioctl", libc::EPERM, &|| {
            sys(
                libc::SYS_ioctl,
                [u64::MAX, req, &c as *const u8 as u64, 0, 0, 0],
            )
        });
    }
    expect_errno(f, "ioctl(TCGETS) on a bad fd", libc::EBADF, &|| {
        sys(libc::SYS_ioctl, [u64::MAX, req(libc::TCGETS), 0, 0, 0, 0])
    });
}

#[test]
fn allowed_sockets() {
    let f = default_filter();
    for (what, domain, ty) in [
        ("AF_INET", libc::AF_INET, libc::SOCK_STREAM),
        ("AF_INET6", libc::AF_INET6, libc::SOCK_DGRAM),
        ("AF_UNIX", libc::AF_UNIX, libc::SOCK_STREAM),
    ] {
        expect_success(f, what, &|| {
            sys(libc::SYS_socket, [domain as u64, ty as u64, 0, 0, 0, 0])
        });
    }
    expect_success(f, "socketpair(AF_UNIX)", &|| {
        let mut fds = [0i32; 2];
        sys(
            libc::SYS_socketpair,
            [
                libc::AF_UNIX as u64,
                libc::SOCK_STREAM as u64,
                0,
                fds.as_mut_ptr() as u64,
                0,
                0,
            ],
        )
    });
    // With network on, netlink route sockets work, other netlink not.
    let n = net_filter();
    expect_success(n, "AF_NETLINK/NETLINK_ROUTE", &|| {
        sys(
            libc::SYS_socket,
            [libc::AF_NETLINK as u64, libc::SOCK_RAW as u64, 0, 0, 0, 0],
        )
    });
    expect_errno(n, "AF_NETLINK/NETLINK_AUDIT", libc::EAFNOSUPPORT, &|| {
        sys(
            libc::SYS_socket,
            [
                libc::AF_NETLINK as u64,
                libc::SOCK_RAW as u64,
                libc::NETLINK_AUDIT as u64,
                0,
                0,
                0,
            ],
        )
    });
}

#[test]
fn ordinary_syscalls_work() {
    let f = default_filter();
    let pid = expect_success(f, "getpid", &|| sys(libc::SYS_getpid, [0; 6]));
    assert!(pid > 0);
    expect_success(f, "write", &|| {
        let msg = b"";
        sys(libc::SYS_write, [1, msg.as_ptr() as u64, 0, 0, 0, 0])
    });
    // fork(): clone without namespace flags.
    let code = expect_success(f, "fork", &|| {
        let r = sys(libc::SYS_clone, [libc::SIGCHLD as u64, 0, 0, 0, 0, 0]);
        if r == 0 {
            // SAFETY: _exit never returns.
            unsafe { libc::_exit(7) }
        }
        if r < 0 {
            return r;
        }
        let mut status = 0;
        // SAFETY: waiting for the grandchild just created.
        unsafe { libc::waitpid(r as libc::pid_t, &mut status, 0) };
        if libc::WIFEXITED(status) {
            i64::from(libc::WEXITSTATUS(status))
        } else {
            -100
        }
    });
    assert_eq!(code, 7);
}

#[cfg(target_arch = "x86_64")]
#[test]
fn x32_syscalls_are_reported() {
    let n = expect_reported(default_filter(), "getpid (x32 ABI)", &|| {
        sys(libc::SYS_getpid | X32_SYSCALL_BIT as libc::c_long, [0; 6])
    });
    assert_eq!(n.arch, AUDIT_ARCH_X86_64);
    assert_eq!(n.syscall_nr, X32_SYSCALL_BIT | libc::SYS_getpid as i32);
}

#[cfg(target_arch = "x86_64")]
fn int80_getpid() -> i64 {
    let ret: i32;
    // SAFETY: `int 0x80` with eax = 20 is the i386 getpid(): no arguments,
    // no memory access. The compat entry may clobber r8-r11; declared.
    unsafe {
        std::arch::asm!(
            "int 0x80",
            inlateout("eax") 20i32 => ret,
            out("r8") _, out("r9") _, out("r10") _, out("r11") _,
            options(nostack),
        );
    }
    i64::from(ret)
}

#[cfg(target_arch = "x86_64")]
#[test]
fn i386_syscalls_do_not_get_through() {
    let mut s = spawn(default_filter(), true, &int80_getpid);
    match s.next_event() {
        Event::Notified(n) => {
            assert_eq!(n.arch, AUDIT_ARCH_I386);
            assert_eq!(n.syscall_nr, 20);
            assert_eq!(n.syscall_name(), "getpid (i386 ABI)");
            respond_errno(s.listener(), n.id, libc::EPERM).unwrap();
            match s.next_event() {
                // The raw syscall returns -errno in eax.
                Event::Returned { ret: -1, .. } => {}
                other => panic!("expected -EPERM, got {other:?}"),
            }
            assert_eq!(s.wait(), Exit::Code(0));
        }
        // Kernel without IA32 emulation: int 0x80 faults.
        Event::Gone(Exit::Signal(sig)) => {
            eprintln!("int 0x80 killed the child with signal {sig} (no IA32 emulation?)");
            assert!(sig == libc::SIGSEGV || sig == libc::SIGSYS, "signal {sig}");
        }
        other => panic!("int 0x80 getpid must not succeed, got {other:?}"),
    }
}

/// A real program under the filter: glibc thread creation (clone3 → clone
/// fallback), posix_spawn, loopback TCP, refused netlink.
#[test]
fn python_runs_under_the_filter() {
    let python = "/usr/bin/python3";
    if !std::path::Path::new(python).exists() {
        eprintln!("skipping: {python} not found");
        return;
    }
    let script = r#"
import errno, os, socket, subprocess, sys, threading
t = threading.Thread(target=lambda: None); t.start(); t.join()
srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
srv.bind(("127.0.0.1", 0)); srv.listen(1)
cli = socket.create_connection(srv.getsockname())
conn, _ = srv.accept(); cli.sendall(b"hi")
if conn.recv(2) != b"hi": sys.exit(3)
try:
    socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
    sys.exit(4)
except OSError as e:
    if e.errno != errno.EAFNOSUPPORT: sys.exit(5)
if subprocess.run(["/bin/true"]).returncode != 0: sys.exit(6)
if os.fork() == 0: os._exit(0)
os.wait()
sys.exit(0)
"#;
    let path = CString::new(python).unwrap();
    let args = [
        CString::new("python3").unwrap(),
        CString::new("-c").unwrap(),
        CString::new(script).unwrap(),
    ];
    let env = [CString::new("PATH=/usr/bin:/bin").unwrap()];
    let argv: Vec<*const libc::c_char> = args
        .iter()
        .map(|a| a.as_ptr())
        .chain([std::ptr::null()])
        .collect();
    let envp: Vec<*const libc::c_char> = env
        .iter()
        .map(|a| a.as_ptr())
        .chain([std::ptr::null()])
        .collect();
    let exec = || {
        // SAFETY: NUL-terminated strings and null-terminated arrays built
        // before fork; execve only returns on failure.
        unsafe { libc::execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr()) };
        -1
    };
    let mut s = spawn(default_filter(), true, &exec);
    match s.next_event() {
        Event::Gone(exit) => assert_eq!(exit, Exit::Code(0), "python exit"),
        Event::Notified(n) => panic!("python was reported for {}", n.syscall_name()),
        other => panic!("unexpected {other:?}"),
    }
}

/// The `list_interfaces` grant on the running kernel: NETLINK_ROUTE opens, other netlink
/// protocols and AF_PACKET fail with EAFNOSUPPORT, and under `no_sockets` the call is reported.
/// (What the socket can then do is the sandbox's to limit: see the CLI's seccomp_profiles test.)
#[test]
fn the_list_interfaces_grant_opens_route_netlink_only() {
    let grant = |name: &str| {
        let r: Restrictions = name.parse().unwrap();
        CompiledFilter::compile(
            &Profile::default_profile().with_restrictions(r.granting([Grant::ListInterfaces])),
        )
        .unwrap()
    };
    let socket = |domain: i32, protocol: i32| {
        move || {
            sys(
                libc::SYS_socket,
                [
                    domain as u64,
                    (libc::SOCK_RAW | libc::SOCK_CLOEXEC) as u64,
                    protocol as u64,
                    0,
                    0,
                    0,
                ],
            )
        }
    };
    let f = grant("default");
    expect_success(
        &f,
        "socket(AF_NETLINK, NETLINK_ROUTE)",
        &socket(libc::AF_NETLINK, libc::NETLINK_ROUTE),
    );
    for (what, domain, protocol) in [
        ("NETLINK_AUDIT", libc::AF_NETLINK, libc::NETLINK_AUDIT),
        (
            "NETLINK_KOBJECT_UEVENT",
            libc::AF_NETLINK,
            libc::NETLINK_KOBJECT_UEVENT,
        ),
        (
            "NETLINK_SOCK_DIAG",
            libc::AF_NETLINK,
            libc::NETLINK_SOCK_DIAG,
        ),
        ("AF_PACKET", libc::AF_PACKET, 0),
    ] {
        expect_errno(&f, what, libc::EAFNOSUPPORT, &socket(domain, protocol));
    }
    expect_errno(
        default_filter(),
        "socket(AF_NETLINK, NETLINK_ROUTE) without the grant",
        libc::EAFNOSUPPORT,
        &socket(libc::AF_NETLINK, libc::NETLINK_ROUTE),
    );
    expect_reported(
        &grant("no_sockets"),
        "socket",
        &socket(libc::AF_NETLINK, libc::NETLINK_ROUTE),
    );
}

/// Under the socket watch, a network socket waits for the listener, which answers with the
/// program's own verdict (here: continue, and the socket is made); an `AF_UNIX` one never waits.
#[test]
fn a_watched_network_socket_waits_for_the_listener_and_then_runs() {
    let w = default_filter().with_socket_watch();
    for (what, domain, ty) in [
        ("AF_INET", libc::AF_INET, libc::SOCK_STREAM),
        ("AF_INET6", libc::AF_INET6, libc::SOCK_DGRAM),
    ] {
        let mut s = spawn(&w, true, &|| {
            sys(libc::SYS_socket, [domain as u64, ty as u64, 0, 0, 0, 0])
        });
        let n = match s.next_event() {
            Event::Notified(n) => n,
            other => panic!("{what}: expected a notification, got {other:?}"),
        };
        assert_eq!(n.syscall_name(), "socket", "{what}");
        assert_eq!(
            w.policy_verdict(n.arch, n.syscall_nr, n.args),
            Verdict::Allow,
            "{what}"
        );
        respond_continue(s.listener(), n.id).unwrap();
        match s.next_event() {
            Event::Returned { ret, .. } if ret >= 0 => {}
            other => panic!("{what}: expected a socket after continue, got {other:?}"),
        }
        assert_eq!(s.wait(), Exit::Code(0), "{what}");
    }
    expect_success(&w, "AF_UNIX", &|| {
        sys(
            libc::SYS_socket,
            [libc::AF_UNIX as u64, libc::SOCK_STREAM as u64, 0, 0, 0, 0],
        )
    });
}
