//! Checks of the compiled program without installing it, by running it in
//! the crate's BPF interpreter (`CompiledFilter::evaluate`).

use std::collections::HashSet;
use std::sync::OnceLock;

use corral_seccomp::*;

/// An ioctl request as a raw argument (`Ioctl` is `c_ulong` on glibc,
/// `c_int` on musl).
#[allow(clippy::unnecessary_cast)]
fn req(r: libc::Ioctl) -> u64 {
    r as u64
}

fn default_filter() -> &'static CompiledFilter {
    static F: OnceLock<CompiledFilter> = OnceLock::new();
    F.get_or_init(|| CompiledFilter::compile(&Profile::default_profile()).unwrap())
}

fn net_filter() -> &'static CompiledFilter {
    static F: OnceLock<CompiledFilter> = OnceLock::new();
    F.get_or_init(|| {
        CompiledFilter::compile(&Profile::default_profile().with_network(true)).unwrap()
    })
}

fn native(f: &CompiledFilter, nr: libc::c_long, args: &[u64]) -> Verdict {
    let mut a = [0u64; 6];
    a[..args.len()].copy_from_slice(args);
    f.evaluate(AUDIT_ARCH_NATIVE, nr as i32, a)
}

const EAFNOSUPPORT: Verdict = Verdict::Errno(libc::EAFNOSUPPORT);

#[test]
fn bytes_round_trip_and_size() {
    for f in [default_filter(), net_filter()] {
        let again = CompiledFilter::from_bytes(f.as_bytes().to_vec()).unwrap();
        assert_eq!(&again, f);
        assert_eq!(again.as_bytes(), f.as_bytes());
        assert_eq!(f.as_bytes().len(), f.instruction_count() * INSN_SIZE);
        let n = f.instruction_count();
        assert!(n > 10 && n < 1024, "{n} instructions");
    }
    // Compiling is deterministic.
    let again = CompiledFilter::compile(&Profile::default_profile()).unwrap();
    assert_eq!(&again, default_filter());
    assert_ne!(default_filter(), net_filter());
}

#[test]
fn from_bytes_validates() {
    assert!(CompiledFilter::from_bytes(Vec::new()).is_err());
    assert!(CompiledFilter::from_bytes(vec![0; 7]).is_err());
    assert!(CompiledFilter::from_bytes(vec![0; 12]).is_err());
    assert!(CompiledFilter::from_bytes(vec![0; MAX_INSNS * INSN_SIZE]).is_ok());
    assert!(CompiledFilter::from_bytes(vec![0; (MAX_INSNS + 1) * INSN_SIZE]).is_err());
    let err = CompiledFilter::from_bytes(vec![0; 9]).unwrap_err();
    assert!(err.to_string().contains("multiple of 8"), "{err}");
}

#[test]
fn unconditional_rules_notify_whatever_the_arguments() {
    let f = default_filter();
    let rules = rules(&Profile::default_profile());
    let mut seen = HashSet::new();
    for r in &rules {
        assert!(seen.insert(r.syscall), "{} listed twice", r.syscall);
        if !r.condition.is_empty() {
            continue;
        }
        let expect = match r.action {
            Action::KillAndReport => Verdict::Notify,
            Action::Errno(e) => Verdict::Errno(e),
        };
        for args in [[0u64; 6], [u64::MAX; 6], [1, 2, 3, 4, 5, 6]] {
            assert_eq!(
                f.evaluate(AUDIT_ARCH_NATIVE, r.nr, args),
                expect,
                "{} ({})",
                r.syscall,
                r.nr
            );
        }
        assert_eq!(syscall_name(r.nr, AUDIT_ARCH_NATIVE), r.syscall);
    }
    for name in [
        "ptrace",
        "unshare",
        "setns",
        "mount",
        "umount2",
        "keyctl",
        "bpf",
        "perf_event_open",
        "userfaultfd",
        "open_by_handle_at",
        "fsopen",
        "open_tree_attr",
        "kexec_load",
        "init_module",
        "clock_settime",
        "settimeofday",
        "pidfd_getfd",
        "clone",
        "personality",
        "clone3",
        "io_uring_setup",
        "socket",
        "ioctl",
    ] {
        assert!(seen.contains(name), "{name} missing from the rules");
    }
    #[cfg(target_arch = "x86_64")]
    for name in ["iopl", "ioperm"] {
        assert!(seen.contains(name), "{name} missing from the rules");
    }
}

#[test]
fn ordinary_syscalls_are_allowed() {
    let f = default_filter();
    for nr in [
        libc::SYS_read,
        libc::SYS_write,
        libc::SYS_openat,
        libc::SYS_close,
        libc::SYS_mmap,
        libc::SYS_mprotect,
        libc::SYS_execve,
        libc::SYS_getpid,
        libc::SYS_futex,
        libc::SYS_exit_group,
        libc::SYS_wait4,
        libc::SYS_kill,
        libc::SYS_prctl,
        libc::SYS_adjtimex,
        libc::SYS_clock_adjtime,
        libc::SYS_clock_gettime,
        libc::SYS_landlock_create_ruleset,
        libc::SYS_landlock_restrict_self,
        libc::SYS_seccomp,
        libc::SYS_pidfd_open,
    ] {
        assert_eq!(native(f, nr, &[0, 0, 0]), Verdict::Allow, "nr {nr}");
        assert_eq!(native(f, nr, &[u64::MAX; 6]), Verdict::Allow, "nr {nr}");
    }
    // syscall(-1) is a plain ENOSYS in the kernel, not a foreign ABI.
    assert_eq!(f.evaluate(AUDIT_ARCH_NATIVE, -1, [0; 6]), Verdict::Allow);
}

#[test]
fn clone_namespace_flags() {
    let f = default_filter();
    let sigchld = libc::SIGCHLD as u64;
    let thread = (libc::CLONE_VM
        | libc::CLONE_FS
        | libc::CLONE_FILES
        | libc::CLONE_SIGHAND
        | libc::CLONE_THREAD
        | libc::CLONE_SYSVSEM
        | libc::CLONE_SETTLS
        | libc::CLONE_PARENT_SETTID
        | libc::CLONE_CHILD_CLEARTID) as u64;
    let vfork = (libc::CLONE_VM | libc::CLONE_VFORK) as u64 | sigchld;
    for flags in [sigchld, thread, vfork, 0, (1 << 32) | sigchld] {
        assert_eq!(
            native(f, libc::SYS_clone, &[flags]),
            Verdict::Allow,
            "{flags:#x}"
        );
    }
    for ns in [
        libc::CLONE_NEWNS,
        libc::CLONE_NEWUTS,
        libc::CLONE_NEWIPC,
        libc::CLONE_NEWUSER,
        libc::CLONE_NEWPID,
        libc::CLONE_NEWNET,
        libc::CLONE_NEWCGROUP,
    ] {
        let ns = ns as u64;
        for flags in [ns, ns | sigchld, ns | thread, ns | (1 << 40)] {
            assert_eq!(
                native(f, libc::SYS_clone, &[flags]),
                Verdict::Notify,
                "{flags:#x}"
            );
        }
    }
    assert_eq!(
        native(f, libc::SYS_clone, &[u64::MAX]),
        Verdict::Notify,
        "all flags"
    );
    assert_eq!(
        native(f, libc::SYS_clone3, &[0, 0]),
        Verdict::Errno(libc::ENOSYS)
    );
}

#[test]
fn personality_allows_only_linux_no_randomize_and_query() {
    let f = default_filter();
    let p = |v: u64| native(f, libc::SYS_personality, &[v]);
    for v in [
        0,
        0x40000,
        0xffff_ffff,
        1 << 32,
        (1 << 32) | 0x40000,
        u64::MAX,
    ] {
        assert_eq!(p(v), Verdict::Allow, "{v:#x}");
    }
    for v in [
        0x0008,             // PER_LINUX32
        0x0008 | 0x40000,   // PER_LINUX32 | ADDR_NO_RANDOMIZE
        0x0040_0000,        // READ_IMPLIES_EXEC
        0x0010_0000,        // MMAP_PAGE_ZERO
        0x0020_0000,        // ADDR_COMPAT_LAYOUT
        0x0002_0000,        // UNAME26
        0x0006,             // PER_BSD
        0xffff_fffe,        // almost the query value
        0x6_0000,           // UNAME26 | ADDR_NO_RANDOMIZE
        (7 << 32) | 0x0008, // upper half ignored, as by the kernel
    ] {
        assert_eq!(p(v), Verdict::Notify, "{v:#x}");
    }
    // Every single bit and every pair of bits.
    for i in 0..32 {
        for j in 0..32 {
            let v = (1u64 << i) | (1u64 << j);
            let expect = if v == 0x40000 {
                Verdict::Allow
            } else {
                Verdict::Notify
            };
            assert_eq!(p(v), expect, "{v:#x}");
            assert_eq!(p(!v & 0xffff_ffff), Verdict::Notify, "{:#x}", !v);
        }
    }
}

#[test]
fn socket_families() {
    let f = default_filter();
    let allowed = [libc::AF_UNIX, libc::AF_INET, libc::AF_INET6];
    for nr in [libc::SYS_socket, libc::SYS_socketpair] {
        for domain in 0..=300i32 {
            let expect = if allowed.contains(&domain) {
                Verdict::Allow
            } else if domain < 256 {
                EAFNOSUPPORT
            } else {
                continue; // the kernel refuses domain >= NPROTO itself
            };
            for ty in [libc::SOCK_STREAM, libc::SOCK_DGRAM, libc::SOCK_RAW] {
                assert_eq!(
                    native(f, nr, &[domain as u64, ty as u64, 0]),
                    expect,
                    "nr {nr} domain {domain}"
                );
            }
        }
        // Garbage in the upper half of the register does not matter.
        assert_eq!(native(f, nr, &[(1 << 32) | 2, 1, 0]), Verdict::Allow);
        assert_eq!(native(f, nr, &[(1 << 32) | 16, 3, 0]), EAFNOSUPPORT);
        assert_eq!(native(f, nr, &[u64::MAX, 1, 0]), EAFNOSUPPORT);
    }
    // Network off: no netlink at all.
    assert_eq!(native(f, libc::SYS_socket, &[16, 3, 0]), EAFNOSUPPORT);

    // Network on: NETLINK_ROUTE only.
    let n = net_filter();
    assert_eq!(native(n, libc::SYS_socket, &[16, 3, 0]), Verdict::Allow);
    assert_eq!(
        native(n, libc::SYS_socket, &[16, 3 | libc::SOCK_CLOEXEC as u64, 0]),
        Verdict::Allow
    );
    for proto in [9u64, 12, 16, 1 << 32] {
        assert_eq!(
            native(n, libc::SYS_socket, &[16, 3, proto]),
            EAFNOSUPPORT,
            "netlink protocol {proto:#x}"
        );
    }
    assert_eq!(native(n, libc::SYS_socketpair, &[16, 3, 0]), EAFNOSUPPORT);
    for domain in [1u64, 2, 10] {
        assert_eq!(native(n, libc::SYS_socket, &[domain, 1, 0]), Verdict::Allow);
    }
    for domain in [17u64, 40, 38, 31, 15] {
        assert_eq!(native(n, libc::SYS_socket, &[domain, 1, 0]), EAFNOSUPPORT);
    }
}

#[test]
fn terminal_injection_ioctls() {
    let f = default_filter();
    let eperm = Verdict::Errno(libc::EPERM);
    let sti = req(libc::TIOCSTI);
    let linux = req(libc::TIOCLINUX);
    assert_eq!(native(f, libc::SYS_ioctl, &[0, sti, 0]), eperm);
    assert_eq!(native(f, libc::SYS_ioctl, &[5, linux, 0]), eperm);
    assert_eq!(native(f, libc::SYS_ioctl, &[0, (1 << 32) | sti, 0]), eperm);
    assert_eq!(
        native(f, libc::SYS_ioctl, &[3, req(libc::TIOCSETD), 0]),
        eperm
    );
    for r in [
        libc::TIOCGETD,
        libc::TIOCSWINSZ,
        libc::TIOCSCTTY,
        libc::TCGETS,
        libc::TIOCGWINSZ,
        libc::FIONREAD,
        libc::FIOCLEX,
    ] {
        assert_eq!(native(f, libc::SYS_ioctl, &[0, req(r), 0]), Verdict::Allow);
    }
}

#[test]
fn foreign_abis_are_reported() {
    let f = default_filter();
    for arch in [
        AUDIT_ARCH_I386,
        AUDIT_ARCH_ARM,
        AUDIT_ARCH_X86_64,
        AUDIT_ARCH_AARCH64,
        0x8000_0016, // s390x
        0,
    ] {
        if arch == AUDIT_ARCH_NATIVE {
            continue;
        }
        for nr in [0, 1, 20, 39, 172, 400] {
            assert_eq!(
                f.evaluate(arch, nr, [0; 6]),
                Verdict::Notify,
                "arch {arch:#x} nr {nr}"
            );
        }
    }
    #[cfg(target_arch = "x86_64")]
    for nr in [0, 1, 39, 59, 60, 231, 512, 547] {
        assert_eq!(
            f.evaluate(AUDIT_ARCH_X86_64, nr | X32_SYSCALL_BIT, [0; 6]),
            Verdict::Notify,
            "x32 nr {nr}"
        );
    }
}

#[test]
fn syscall_names() {
    assert_eq!(
        syscall_name(libc::SYS_ptrace as i32, AUDIT_ARCH_NATIVE),
        "ptrace"
    );
    assert_eq!(
        syscall_name(libc::SYS_getpid as i32, AUDIT_ARCH_NATIVE),
        "getpid"
    );
    assert_eq!(
        syscall_name(12345, AUDIT_ARCH_NATIVE),
        format!("syscall 12345 (arch {AUDIT_ARCH_NATIVE:#x})")
    );
    assert_eq!(syscall_name(20, 0x1234), "syscall 20 (arch 0x1234)");
    assert_eq!(syscall_name(20, AUDIT_ARCH_I386), "getpid (i386 ABI)");
    #[cfg(target_arch = "x86_64")]
    {
        assert_eq!(
            syscall_name(39 | X32_SYSCALL_BIT, AUDIT_ARCH_X86_64),
            "getpid (x32 ABI)"
        );
        assert_eq!(
            syscall_name(172, AUDIT_ARCH_AARCH64),
            "getpid (aarch64 ABI)"
        );
        assert_eq!(syscall_name(467, AUDIT_ARCH_X86_64), "open_tree_attr");
    }
}

#[test]
fn blocked_list_matches_rules() {
    let p = Profile::default_profile();
    assert!(!p.allow_network());
    assert!(p.clone().with_network(true).allow_network());
    assert_eq!(Profile::default(), p);
    let list = blocked_syscalls(&p);
    assert!(list.contains(&("ptrace", Action::KillAndReport)));
    assert!(list.contains(&("clone3", Action::Errno(libc::ENOSYS))));
    assert!(list.contains(&("socket", Action::Errno(libc::EAFNOSUPPORT))));
    assert!(list.contains(&("ioctl", Action::Errno(libc::EPERM))));
    assert!(!list.iter().any(|(n, _)| n.starts_with("landlock")));
    assert_eq!(list.len(), rules(&p).len());
    // Names that do not exist on this architecture are left out.
    #[cfg(target_arch = "x86_64")]
    assert!(!list
        .iter()
        .any(|(n, _)| *n == "umount" || *n == "clock_settime64"));
    assert_eq!(Action::KillAndReport.to_string(), "kill and report");
    assert_eq!(Action::Errno(libc::ENOSYS).to_string(), "fail with ENOSYS");
}

#[test]
fn without_unix_sockets_socket_af_unix_fails_but_socketpair_works() {
    for network in [false, true] {
        let p = Profile::default_profile()
            .with_network(network)
            .with_unix_sockets(false);
        assert!(!p.unix_sockets());
        let f = CompiledFilter::compile(&p).unwrap();
        let (unix, stream) = (libc::AF_UNIX as u64, libc::SOCK_STREAM as u64);
        assert_eq!(
            native(&f, libc::SYS_socket, &[unix, stream, 0]),
            Verdict::Errno(libc::EAFNOSUPPORT),
            "network {network}"
        );
        assert_eq!(
            native(&f, libc::SYS_socket, &[libc::AF_INET as u64, stream, 0]),
            Verdict::Allow
        );
        assert_eq!(
            native(&f, libc::SYS_socketpair, &[unix, stream, 0]),
            Verdict::Allow
        );
        // The default keeps AF_UNIX sockets.
        let d = CompiledFilter::compile(&Profile::default_profile().with_network(network)).unwrap();
        assert_eq!(
            native(&d, libc::SYS_socket, &[unix, stream, 0]),
            Verdict::Allow
        );
    }
}

fn strict(name: &str) -> CompiledFilter {
    let r: Restrictions = name.parse().unwrap();
    CompiledFilter::compile(&Profile::default_profile().with_restrictions(r)).unwrap()
}

/// Flags glibc's pthread_create gives clone (CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|
/// CLONE_THREAD|CLONE_SYSVSEM|CLONE_SETTLS|CLONE_PARENT_SETTID|CLONE_CHILD_CLEARTID).
const THREAD_FLAGS: u64 = 0x3d0f00;

#[test]
fn no_spawn_reports_new_processes_and_programs_but_not_threads() {
    let f = strict("no_spawn");
    let d = default_filter();
    let sigchld = libc::SIGCHLD as u64;
    for (nr, args) in [
        (libc::SYS_clone, vec![sigchld]),
        // vfork as posix_spawn does it.
        (
            libc::SYS_clone,
            vec![(libc::CLONE_VM | libc::CLONE_VFORK) as u64 | sigchld],
        ),
        (libc::SYS_fork, vec![]),
        (libc::SYS_vfork, vec![]),
        (libc::SYS_execve, vec![]),
        (libc::SYS_execveat, vec![]),
    ] {
        assert_eq!(native(&f, nr, &args), Verdict::Notify, "{nr} {args:?}");
        assert_eq!(native(d, nr, &args), Verdict::Allow, "{nr} {args:?}");
    }
    // Threads (glibc's and Go's flags) still work; a namespace flag is still reported.
    assert_eq!(native(&f, libc::SYS_clone, &[THREAD_FLAGS]), Verdict::Allow);
    assert_eq!(
        native(&f, libc::SYS_clone, &[0x50f00 | libc::CLONE_THREAD as u64]),
        Verdict::Allow
    );
    assert_eq!(
        native(
            &f,
            libc::SYS_clone,
            &[THREAD_FLAGS | libc::CLONE_NEWNET as u64]
        ),
        Verdict::Notify
    );
    // clone3 keeps failing quietly, so glibc falls back to clone.
    assert_eq!(
        native(&f, libc::SYS_clone3, &[]),
        Verdict::Errno(libc::ENOSYS)
    );
    assert_eq!(native(&f, libc::SYS_getpid, &[]), Verdict::Allow);
    assert_eq!(
        native(&f, libc::SYS_socket, &[libc::AF_INET as u64]),
        Verdict::Allow
    );
}

#[test]
fn no_sockets_reports_every_family() {
    let f = strict("no_sockets");
    for family in [
        libc::AF_UNIX,
        libc::AF_INET,
        libc::AF_INET6,
        libc::AF_NETLINK,
        0,
        200,
    ] {
        for nr in [libc::SYS_socket, libc::SYS_socketpair] {
            assert_eq!(native(&f, nr, &[family as u64, 1, 0]), Verdict::Notify);
        }
    }
    assert_eq!(
        native(
            default_filter(),
            libc::SYS_socket,
            &[libc::AF_INET as u64, 1, 0]
        ),
        Verdict::Allow
    );
    // Fork still works.
    assert_eq!(
        native(&f, libc::SYS_clone, &[libc::SIGCHLD as u64]),
        Verdict::Allow
    );
    let both = strict("no_spawn+no_sockets");
    assert_eq!(
        native(&both, libc::SYS_clone, &[libc::SIGCHLD as u64]),
        Verdict::Notify
    );
    assert_eq!(
        native(&both, libc::SYS_socketpair, &[1, 1, 0]),
        Verdict::Notify
    );
}

#[test]
fn allow_list_allows_only_the_list_startup_and_quiet_defaults() {
    let f = strict("allow:getpid,clone,socket");
    assert!(
        f.instruction_count() < MAX_INSNS,
        "{}",
        f.instruction_count()
    );
    for nr in [
        libc::SYS_getpid,
        libc::SYS_read,
        libc::SYS_write,
        libc::SYS_mmap,
        libc::SYS_exit_group,
    ] {
        assert_eq!(native(&f, nr, &[]), Verdict::Allow, "{nr}");
    }
    for nr in [
        libc::SYS_getuid,
        libc::SYS_kill,
        libc::SYS_unlink,
        libc::SYS_socketpair,
        libc::SYS_ioctl,
        libc::SYS_execve,
        // The default's own reported calls stay reported.
        libc::SYS_ptrace,
    ] {
        assert_eq!(native(&f, nr, &[]), Verdict::Notify, "{nr}");
    }
    // Numbers no libseccomp knows, and numbers past any syscall a kernel has.
    for nr in [470, 599, 600, 5000, i32::MAX] {
        assert_eq!(
            f.evaluate(AUDIT_ARCH_NATIVE, nr, [0; 6]),
            Verdict::Notify,
            "{nr}"
        );
    }
    // The default's conditions still apply to listed syscalls.
    assert_eq!(
        native(&f, libc::SYS_clone, &[libc::SIGCHLD as u64]),
        Verdict::Allow
    );
    assert_eq!(
        native(&f, libc::SYS_clone, &[libc::CLONE_NEWUSER as u64]),
        Verdict::Notify
    );
    assert_eq!(
        native(&f, libc::SYS_socket, &[libc::AF_INET as u64]),
        Verdict::Allow
    );
    assert_eq!(
        native(&f, libc::SYS_socket, &[libc::AF_NETLINK as u64]),
        Verdict::Errno(libc::EAFNOSUPPORT)
    );
    assert_eq!(
        native(&f, libc::SYS_clone3, &[]),
        Verdict::Errno(libc::ENOSYS)
    );
    // Foreign ABIs stay reported.
    #[cfg(target_arch = "x86_64")]
    assert_eq!(f.evaluate(AUDIT_ARCH_I386, 20, [0; 6]), Verdict::Notify);
    // Without the list, a number beyond the table is the kernel's to refuse (ENOSYS).
    assert_eq!(
        default_filter().evaluate(AUDIT_ARCH_NATIVE, 5000, [0; 6]),
        Verdict::Allow
    );
}

/// `strict(name)` with the `list_interfaces` grant.
fn granted(name: &str) -> CompiledFilter {
    let r: Restrictions = name.parse().unwrap();
    CompiledFilter::compile(
        &Profile::default_profile().with_restrictions(r.granting([Grant::ListInterfaces])),
    )
    .unwrap()
}

#[test]
fn the_list_interfaces_grant_allows_route_netlink_only_offline() {
    let f = granted("default");
    let route = libc::NETLINK_ROUTE as u64;
    for ty in [
        libc::SOCK_RAW,
        libc::SOCK_DGRAM,
        libc::SOCK_RAW | libc::SOCK_CLOEXEC,
    ] {
        assert_eq!(
            native(&f, libc::SYS_socket, &[16, ty as u64, route]),
            Verdict::Allow,
            "type {ty:#x}"
        );
    }
    // Every other netlink protocol (audit, uevent, sock_diag, netfilter, generic …) stays refused,
    // as do a protocol with high bits set, socketpair, AF_PACKET and the other families.
    for proto in [
        libc::NETLINK_AUDIT as u64,
        libc::NETLINK_KOBJECT_UEVENT as u64,
        libc::NETLINK_SOCK_DIAG as u64,
        libc::NETLINK_NETFILTER as u64,
        libc::NETLINK_GENERIC as u64,
        libc::NETLINK_XFRM as u64,
        1 << 32,
    ] {
        assert_eq!(
            native(&f, libc::SYS_socket, &[16, 3, proto]),
            EAFNOSUPPORT,
            "netlink protocol {proto:#x}"
        );
    }
    assert_eq!(
        native(&f, libc::SYS_socketpair, &[16, 3, route]),
        EAFNOSUPPORT
    );
    for domain in [
        libc::AF_PACKET,
        libc::AF_KEY,
        libc::AF_VSOCK,
        libc::AF_ALG,
        40,
    ] {
        assert_eq!(
            native(&f, libc::SYS_socket, &[domain as u64, 3, route]),
            EAFNOSUPPORT,
            "domain {domain}"
        );
    }
    // Nothing else moves: the rest of the program is the default profile's.
    for (nr, args) in [
        (libc::SYS_socket, vec![libc::AF_INET as u64, 1, 0]),
        (libc::SYS_getpid, vec![]),
        (libc::SYS_unshare, vec![libc::CLONE_NEWUSER as u64]),
        (libc::SYS_clone3, vec![]),
        (libc::SYS_ptrace, vec![]),
    ] {
        assert_eq!(
            native(&f, nr, &args),
            native(default_filter(), nr, &args),
            "syscall {nr}"
        );
    }
    // Without the grant, offline, the same socket is refused (the default is unchanged).
    assert_eq!(
        native(default_filter(), libc::SYS_socket, &[16, 3, route]),
        EAFNOSUPPORT
    );
}

#[test]
fn a_stricter_layer_wins_over_the_grant() {
    let route = libc::NETLINK_ROUTE as u64;
    // no_sockets: every socket is reported, the granted one too.
    let f = granted("no_sockets");
    assert_eq!(
        native(&f, libc::SYS_socket, &[16, 3, route]),
        Verdict::Notify
    );
    // An allow-list without socket reports it; one with socket keeps the grant's exception.
    let f = granted("allow:read,write");
    assert_eq!(
        native(&f, libc::SYS_socket, &[16, 3, route]),
        Verdict::Notify
    );
    let f = granted("allow:socket,bind,sendto,recvfrom");
    assert_eq!(
        native(&f, libc::SYS_socket, &[16, 3, route]),
        Verdict::Allow
    );
    assert_eq!(
        native(&f, libc::SYS_socket, &[16, 3, libc::NETLINK_AUDIT as u64]),
        EAFNOSUPPORT
    );
    // no_spawn changes nothing about sockets.
    let f = granted("no_spawn");
    assert_eq!(
        native(&f, libc::SYS_socket, &[16, 3, route]),
        Verdict::Allow
    );
    assert_eq!(
        native(&f, libc::SYS_clone, &[libc::SIGCHLD as u64]),
        Verdict::Notify
    );
}

#[test]
fn a_grant_is_never_part_of_a_profile_name() {
    for name in [
        "list_interfaces",
        "no_spawn+list_interfaces",
        "grant:list_interfaces",
    ] {
        let e = name.parse::<Restrictions>().unwrap_err();
        assert!(
            matches!(e, RestrictionsError::GrantInName(..)),
            "{name}: {e:?}"
        );
        assert!(
            e.to_string().contains("only a language, suite or check"),
            "{e}"
        );
    }
    // Configuration writes it as a mapping; it round-trips through serde and shows in Display.
    let r: Restrictions =
        serde_json::from_str(r#"{"profile": "no_spawn", "grant": ["list_interfaces"]}"#).unwrap();
    assert_eq!(
        r,
        "no_spawn"
            .parse::<Restrictions>()
            .unwrap()
            .granting([Grant::ListInterfaces])
    );
    assert!(!r.is_default());
    assert_eq!(r.to_string(), "no_spawn (grant: list_interfaces)");
    let back: Restrictions = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
    assert_eq!(back, r);
    let only: Restrictions = serde_json::from_str(r#"{"grant": ["list_interfaces"]}"#).unwrap();
    assert_eq!(only.to_string(), "default (grant: list_interfaces)");
    let layers: Restrictions =
        serde_json::from_str(r#"{"profile": ["no_spawn", "no_sockets"]}"#).unwrap();
    assert_eq!(layers, "no_spawn+no_sockets".parse().unwrap());
    // Without grants it stays a name.
    assert_eq!(
        serde_json::to_string(&layers).unwrap(),
        r#""no_spawn+no_sockets""#
    );
    for (bad, says) in [
        (r#"{"grant": ["raw_sockets"]}"#, "unknown seccomp grant"),
        (
            r#"{"grants": ["list_interfaces"]}"#,
            "unknown field `grants`",
        ),
        (r#"{"profile": "nope"}"#, "unknown seccomp profile"),
        (r#"{"profile": "list_interfaces"}"#, "is a grant"),
    ] {
        let e = serde_json::from_str::<Restrictions>(bad).unwrap_err();
        assert!(e.to_string().contains(says), "{bad}: {e}");
    }
    // `and` keeps a configuration's grant and adds what the other side denies.
    let lang = only.clone();
    let asked: Restrictions = "no_sockets".parse().unwrap();
    let both = lang.and(&asked);
    assert!(both.no_sockets && both.grants.contains(&Grant::ListInterfaces));
}

/// The socket watch notifies every native `socket(2)` of a family other than `AF_UNIX` (judged on
/// the low 32 bits, as the kernel reads an int), changes nothing else, and leaves the program's
/// own verdict readable underneath: allowed, refused with an errno, or reported.
#[test]
fn a_socket_watch_notifies_network_sockets_and_keeps_every_other_verdict() {
    let cases = [
        ("default", default_filter().clone()),
        ("network", net_filter().clone()),
        ("no_sockets", strict("no_sockets")),
        ("list_interfaces", granted("no_spawn")),
        ("allow-list", strict("allow:read,write,exit_group,socket")),
    ];
    let domains: [u64; 8] = [
        libc::AF_UNIX as u64,
        libc::AF_INET as u64,
        libc::AF_INET6 as u64,
        libc::AF_NETLINK as u64,
        libc::AF_PACKET as u64,
        0x1_0000_0000 | libc::AF_UNIX as u64,
        0x1_0000_0000 | libc::AF_INET as u64,
        0xffff_ffff,
    ];
    for (name, f) in &cases {
        let w = f.with_socket_watch();
        assert!(w.has_socket_watch() && !f.has_socket_watch(), "{name}");
        assert_eq!(w.with_socket_watch(), w, "{name}: watched twice");
        assert_eq!(
            CompiledFilter::from_bytes(w.as_bytes().to_vec()).unwrap(),
            w,
            "{name}"
        );
        for &domain in &domains {
            let args = [domain, libc::SOCK_STREAM as u64, 0, 0, 0, 0];
            let nr = libc::SYS_socket as i32;
            let own = f.evaluate(AUDIT_ARCH_NATIVE, nr, args);
            assert_eq!(
                w.policy_verdict(AUDIT_ARCH_NATIVE, nr, args),
                own,
                "{name} {domain:#x}"
            );
            assert_eq!(
                f.policy_verdict(AUDIT_ARCH_NATIVE, nr, args),
                own,
                "{name} {domain:#x}"
            );
            let want = if domain as u32 == libc::AF_UNIX as u32 {
                own
            } else {
                Verdict::Notify
            };
            assert_eq!(
                w.evaluate(AUDIT_ARCH_NATIVE, nr, args),
                want,
                "{name} {domain:#x}"
            );
        }
        // Everything else is the program's verdict, foreign ABIs and x32 numbers included.
        let others: [(u32, i32, [u64; 6]); 8] = [
            (AUDIT_ARCH_NATIVE, libc::SYS_read as i32, [0; 6]),
            (
                AUDIT_ARCH_NATIVE,
                libc::SYS_socketpair as i32,
                [libc::AF_INET as u64, 1, 0, 0, 0, 0],
            ),
            (AUDIT_ARCH_NATIVE, libc::SYS_ptrace as i32, [0; 6]),
            (
                AUDIT_ARCH_NATIVE,
                libc::SYS_clone as i32,
                [libc::CLONE_NEWNET as u64, 0, 0, 0, 0, 0],
            ),
            (
                AUDIT_ARCH_NATIVE,
                libc::SYS_connect as i32,
                [3, 0, 16, 0, 0, 0],
            ),
            (AUDIT_ARCH_NATIVE, 599, [0; 6]),
            (AUDIT_ARCH_I386, 359, [libc::AF_INET as u64, 1, 0, 0, 0, 0]),
            (
                AUDIT_ARCH_NATIVE,
                libc::SYS_socket as i32 | 0x4000_0000,
                [libc::AF_INET as u64, 1, 0, 0, 0, 0],
            ),
        ];
        for (arch, nr, args) in others {
            assert_eq!(
                w.evaluate(arch, nr, args),
                f.evaluate(arch, nr, args),
                "{name}: arch {arch:#x} nr {nr}"
            );
        }
    }
}

/// Keyrings: reported by default; refused with `EPERM` for programs that are root of their own
/// user namespace (`with_quiet_keyrings`), and nothing else changes.
#[test]
fn quiet_keyrings_fail_with_eperm_and_change_nothing_else() {
    let quiet =
        CompiledFilter::compile(&Profile::default_profile().with_quiet_keyrings(true)).unwrap();
    let f = default_filter();
    for nr in [libc::SYS_keyctl, libc::SYS_add_key, libc::SYS_request_key] {
        assert_eq!(native(f, nr, &[0]), Verdict::Notify, "{nr}");
        assert_eq!(
            native(&quiet, nr, &[0]),
            Verdict::Errno(libc::EPERM),
            "{nr}"
        );
    }
    for nr in [
        libc::SYS_unshare,
        libc::SYS_mount,
        libc::SYS_bpf,
        libc::SYS_ptrace,
        libc::SYS_setns,
    ] {
        assert_eq!(native(&quiet, nr, &[0]), Verdict::Notify, "{nr}");
    }
    for nr in [libc::SYS_read, libc::SYS_setresuid, libc::SYS_chown] {
        assert_eq!(native(&quiet, nr, &[0]), Verdict::Allow, "{nr}");
    }
}
