//! The rule table of the default profile.

use std::fmt;

use libseccomp::{ScmpArgCompare, ScmpCompareOp};

use crate::arg_blocks::ArgTest;
use crate::grants::Grant;
use crate::patterns::{self, Pattern};
use crate::restrictions::{Restrictions, STARTUP};
pub(crate) use crate::syscalls::{resolve, resolve_owned};

/// What the profile does when a syscall matches one of its rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// `SECCOMP_RET_USER_NOTIF`: the syscall is suspended and the supervisor
    /// is notified; it records the syscall, kills the sandboxed process tree
    /// and answers `EPERM`. Without a listener the kernel fails the syscall
    /// with `ENOSYS`.
    KillAndReport,
    /// `SECCOMP_RET_ERRNO`: the syscall fails quietly with this errno.
    Errno(i32),
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::KillAndReport => f.write_str("kill and report"),
            Action::Errno(e) => match errno_name(*e) {
                Some(name) => write!(f, "fail with {name}"),
                None => write!(f, "fail with errno {e}"),
            },
        }
    }
}

fn errno_name(e: i32) -> Option<&'static str> {
    Some(match e {
        libc::EPERM => "EPERM",
        libc::ENOSYS => "ENOSYS",
        libc::EAFNOSUPPORT => "EAFNOSUPPORT",
        libc::EACCES => "EACCES",
        _ => return None,
    })
}

/// The configurable knobs of the seccomp profile.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Profile {
    allow_network: bool,
    unix_sockets: bool,
    quiet_keyrings: bool,
    restrictions: Restrictions,
}

impl Default for Profile {
    fn default() -> Self {
        Self::default_profile()
    }
}

impl Profile {
    /// The default profile: network off (see [`Profile::with_network`]).
    pub fn default_profile() -> Self {
        Profile {
            allow_network: false,
            unix_sockets: true,
            quiet_keyrings: false,
            restrictions: Restrictions::default(),
        }
    }

    /// Whether the sandbox has network access.
    ///
    /// `AF_UNIX`, `AF_INET` and `AF_INET6` sockets are allowed either way: the
    /// network namespace is what cuts the sandbox off, and loopback inside it
    /// is useful. With network on, `socket(AF_NETLINK, _, NETLINK_ROUTE)` is
    /// additionally allowed so that `getifaddrs()` and friends can list the
    /// interfaces (reading routing state needs no privilege; changing it needs
    /// `CAP_NET_ADMIN`, which the sandbox does not have). Other netlink
    /// protocols stay blocked. Offline, only the `list_interfaces` grant
    /// ([`Restrictions::grants`], see [`crate::grants`]) allows the same socket.
    pub fn with_network(mut self, on: bool) -> Self {
        self.allow_network = on;
        self
    }

    /// See [`Profile::with_network`].
    pub fn allow_network(&self) -> bool {
        self.allow_network
    }

    /// Whether `socket(AF_UNIX, …)` is allowed (it is by default). A sandbox that shares the
    /// host's network namespace can reach the host's *abstract* unix sockets (they are scoped by
    /// network namespace, not by path: the containerd-shim escape, CVE-2020-15257). Landlock ABI
    /// 6 scopes them to the sandbox; on older kernels the sandbox turns this off so that such a
    /// socket cannot be made at all (`EAFNOSUPPORT`). `socketpair(AF_UNIX)` stays allowed: its
    /// two ends reach only each other.
    pub fn with_unix_sockets(mut self, on: bool) -> Self {
        self.unix_sockets = on;
        self
    }

    /// See [`Profile::with_unix_sockets`].
    pub fn unix_sockets(&self) -> bool {
        self.unix_sockets
    }

    /// Whether the keyring calls (`keyctl`, `add_key`, `request_key`) fail with `EPERM` instead of
    /// ending the run: for programs that are root of their own user namespace (image builds,
    /// graders run as root), whose `su -` and `runuser` ask PAM's `pam_keyinit` for a session
    /// keyring and go on without one — what Docker's default profile answers too. Refused either
    /// way; only the report differs.
    pub fn with_quiet_keyrings(mut self, on: bool) -> Self {
        self.quiet_keyrings = on;
        self
    }

    /// See [`Profile::with_quiet_keyrings`].
    pub fn quiet_keyrings(&self) -> bool {
        self.quiet_keyrings
    }

    /// A stricter layer on top, with its configuration's grants (see [`Restrictions`]).
    pub fn with_restrictions(mut self, restrictions: Restrictions) -> Self {
        self.restrictions = restrictions;
        self
    }

    /// See [`Profile::with_restrictions`].
    pub fn restrictions(&self) -> &Restrictions {
        &self.restrictions
    }
}

/// One rule of the profile, for documentation and `corral doctor`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleInfo {
    /// Syscall name.
    pub syscall: &'static str,
    /// Its number on the native architecture.
    pub nr: i32,
    /// What happens when the rule matches.
    pub action: Action,
    /// When it matches, in words; empty if the rule is unconditional.
    pub condition: &'static str,
}

/// A rule as compiled: the syscall, its action, and alternatives (OR) of
/// conjunctions (AND) of argument comparisons. No alternatives means
/// unconditional.
pub(crate) struct RuleSpec {
    pub syscall: &'static str,
    pub action: Action,
    pub condition: &'static str,
    pub alternatives: Vec<Vec<ScmpArgCompare>>,
    /// The same condition as a hand-compiled test (a shorter program; see `crate::arg_blocks`).
    /// Whatever changes `alternatives` must drop it.
    pub compact: Option<ArgTest>,
}

/// The kernel keyrings: reported like the calls above, or refused quietly (see
/// [`Profile::with_quiet_keyrings`]).
const KEYRINGS: &[&str] = &["keyctl", "add_key", "request_key"];

/// `CLONE_NEW*` flags that `clone()` can carry (`CLONE_NEWTIME` only fits in
/// `clone3()`/`unshare()`, both of which are blocked as a whole).
pub(crate) const CLONE_NS_FLAGS: [(u64, &str); 7] = [
    (libc::CLONE_NEWNS as u64, "CLONE_NEWNS"),
    (libc::CLONE_NEWUTS as u64, "CLONE_NEWUTS"),
    (libc::CLONE_NEWIPC as u64, "CLONE_NEWIPC"),
    (libc::CLONE_NEWUSER as u64, "CLONE_NEWUSER"),
    (libc::CLONE_NEWPID as u64, "CLONE_NEWPID"),
    (libc::CLONE_NEWNET as u64, "CLONE_NEWNET"),
    (libc::CLONE_NEWCGROUP as u64, "CLONE_NEWCGROUP"),
];

/// Socket families every profile allows.
pub(crate) const ALLOWED_FAMILIES: [u32; 3] = [
    libc::AF_UNIX as u32,
    libc::AF_INET as u32,
    libc::AF_INET6 as u32,
];

/// The family filter covers the low 8 bits of the domain argument. The kernel
/// itself rejects `domain < 0 || domain >= NPROTO` (`AF_MAX`, 46 on Linux 6.x)
/// with `EAFNOSUPPORT`, so values whose low byte is an allowed family but
/// that have higher bits set are refused by the kernel either way.
const FAMILY_BITS: u32 = 8;

/// Personalities allowed: `PER_LINUX`, `PER_LINUX | ADDR_NO_RANDOMIZE` and
/// the query value `0xffffffff`.
const ADDR_NO_RANDOMIZE_BIT: u32 = 18;
const _: () = assert!(1 << ADDR_NO_RANDOMIZE_BIT == 0x0040000);

/// Syscalls that are only ever an escape attempt or a kernel-attack-surface
/// probe for an unprivileged sandboxed program: notify unconditionally.
/// Names unknown on the build architecture are skipped.
const NOTIFY_ALWAYS: &[&str] = &[
    // Inspecting or controlling other processes.
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "pidfd_getfd",
    // Namespaces and mounts.
    "unshare",
    "setns",
    "mount",
    "umount",
    "umount2",
    "pivot_root",
    "chroot",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "move_mount",
    "open_tree",
    "open_tree_attr",
    "mount_setattr",
    // Large kernel attack surface, not needed by ordinary programs.
    "bpf",
    "perf_event_open",
    "userfaultfd",
    // Kernel and system administration.
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "create_module",
    "get_kernel_syms",
    "query_module",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "quotactl",
    "quotactl_fd",
    "syslog",
    "lookup_dcookie",
    "nfsservctl",
    "uselib",
    "_sysctl",
    "vhangup",
    // File handles bypass path-based confinement.
    "open_by_handle_at",
    "name_to_handle_at",
    // Raw hardware access (x86 only).
    "iopl",
    "ioperm",
    "vm86",
    "vm86old",
    // Setting the system clock.
    "settimeofday",
    "clock_settime",
    "clock_settime64",
];

fn lo32_patterns(arg: u32, patterns: &[Pattern]) -> Vec<Vec<ScmpArgCompare>> {
    patterns
        .iter()
        .map(|p| vec![masked32(arg, p.mask, p.value)])
        .collect()
}

/// `arg & mask == value` on the low 32 bits only: the kernel reads these
/// arguments as `int`/`unsigned int`, so whatever is in the upper half of the
/// register must not let a value slip past the filter.
fn masked32(arg: u32, mask: u32, value: u32) -> ScmpArgCompare {
    ScmpArgCompare::new(
        arg,
        ScmpCompareOp::MaskedEqual(u64::from(mask)),
        u64::from(value),
    )
}

/// The whole rule table for `profile`, including rules for syscalls that do
/// not exist on the native architecture (the compiler skips those).
pub(crate) fn rule_specs(profile: &Profile) -> Vec<RuleSpec> {
    let mut rules = Vec::new();
    let mut push = |syscall, action, condition, alternatives| {
        rules.push(RuleSpec {
            syscall,
            action,
            condition,
            alternatives,
            compact: None,
        })
    };

    for &name in NOTIFY_ALWAYS {
        push(name, Action::KillAndReport, "", Vec::new());
    }
    for &name in KEYRINGS {
        if profile.quiet_keyrings {
            push(
                name,
                Action::Errno(libc::EPERM),
                "always (root of its own user namespace: PAM's pam_keyinit goes on without)",
                Vec::new(),
            );
        } else {
            push(name, Action::KillAndReport, "", Vec::new());
        }
    }

    push(
        "clone",
        Action::KillAndReport,
        "flags contain any CLONE_NEW* namespace flag",
        CLONE_NS_FLAGS
            .iter()
            .map(|&(flag, _)| {
                vec![ScmpArgCompare::new(
                    0,
                    ScmpCompareOp::MaskedEqual(flag),
                    flag,
                )]
            })
            .collect(),
    );

    push(
        "personality",
        Action::KillAndReport,
        "persona is not PER_LINUX (0), PER_LINUX|ADDR_NO_RANDOMIZE (0x40000) or the query 0xffffffff",
        lo32_patterns(
            0,
            &patterns::all_but_zero_bit_and_ones(ADDR_NO_RANDOMIZE_BIT),
        ),
    );

    // Probed by common runtimes, which fall back: fail quietly.
    push(
        "clone3",
        Action::Errno(libc::ENOSYS),
        "always (flags live in memory the filter cannot read; glibc falls back to clone)",
        Vec::new(),
    );
    for name in ["io_uring_setup", "io_uring_enter", "io_uring_register"] {
        push(
            name,
            Action::Errno(libc::ENOSYS),
            "always (libuv and others fall back)",
            Vec::new(),
        );
    }

    // The root's read-only binds are the host's own inodes: a watch on /usr/bin or a library
    // would show the sandbox which programs and modules the host and every other sandbox open,
    // and when (a channel between tenants, too). As if the kernel had no inotify: file watchers
    // (tail -f, glib, watchdog, Node's fs.watch) fall back to polling.
    // fanotify the same: since Linux 5.13 an unprivileged caller may mark inodes with
    // `FAN_REPORT_FID`, and its events name the files opened there.
    for name in [
        "inotify_init",
        "inotify_init1",
        "inotify_add_watch",
        "fanotify_init",
        "fanotify_mark",
    ] {
        push(
            name,
            Action::Errno(libc::ENOSYS),
            "always (watches on the shared read-only binds would show other tenants' activity)",
            Vec::new(),
        );
    }

    // Native AIO contexts count against one host-wide limit (`fs.aio-max-nr`), charged to no
    // cgroup: a run could take them all, and `io_setup` would fail for the host and every other
    // sandbox until it ends. As if the kernel had no AIO: glibc's `aio_*` use threads, and
    // libaio users (databases, qemu) fall back to synchronous I/O.
    for name in [
        "io_setup",
        "io_destroy",
        "io_submit",
        "io_cancel",
        "io_getevents",
        "io_pgetevents",
    ] {
        push(
            name,
            Action::Errno(libc::ENOSYS),
            "always (AIO contexts are a host-wide pool no cgroup limits)",
            Vec::new(),
        );
    }

    let eafnosupport = Action::Errno(libc::EAFNOSUPPORT);
    let socket_families: Vec<u32> = ALLOWED_FAMILIES
        .iter()
        .copied()
        .filter(|&f| profile.unix_sockets || f != libc::AF_UNIX as u32)
        .collect();
    // Interface listing: with network on (the host's interfaces are the sandbox's anyway), or
    // offline by the `list_interfaces` grant, where the socket sees only the sandbox's own
    // namespace (`lo`) and cannot change it without CAP_NET_ADMIN (see `crate::grants`). The
    // stricter layers (`restrict`, below) still apply on top.
    let route_netlink =
        profile.allow_network || profile.restrictions.grants.contains(&Grant::ListInterfaces);
    if route_netlink {
        let mut allowed = socket_families.clone();
        allowed.push(libc::AF_NETLINK as u32);
        let mut alternatives = lo32_patterns(0, &patterns::low_bits_except(FAMILY_BITS, &allowed));
        alternatives.push(vec![
            masked32(0, u32::MAX, libc::AF_NETLINK as u32),
            // Full 64-bit comparison: any bit set anywhere counts as "not
            // NETLINK_ROUTE", which can only block more.
            ScmpArgCompare::new(2, ScmpCompareOp::NotEqual, libc::NETLINK_ROUTE as u64),
        ]);
        push(
            "socket",
            eafnosupport,
            if profile.unix_sockets {
                "domain is not AF_UNIX, AF_INET, AF_INET6 or AF_NETLINK with protocol NETLINK_ROUTE"
            } else {
                "domain is not AF_INET, AF_INET6 or AF_NETLINK with protocol NETLINK_ROUTE"
            },
            alternatives,
        );
    } else {
        push(
            "socket",
            eafnosupport,
            if profile.unix_sockets {
                "domain is not AF_UNIX, AF_INET or AF_INET6"
            } else {
                "domain is not AF_INET or AF_INET6"
            },
            lo32_patterns(0, &patterns::low_bits_except(FAMILY_BITS, &socket_families)),
        );
    }
    push(
        "socketpair",
        eafnosupport,
        "domain is not AF_UNIX, AF_INET or AF_INET6",
        lo32_patterns(
            0,
            &patterns::low_bits_except(FAMILY_BITS, &ALLOWED_FAMILIES),
        ),
    );

    push(
        "ioctl",
        Action::Errno(libc::EPERM),
        "request is TIOCSTI or TIOCLINUX (terminal input injection) or TIOCSETD (line discipline)",
        [libc::TIOCSTI, libc::TIOCLINUX, libc::TIOCSETD]
            .iter()
            .map(|&req| vec![masked32(1, u32::MAX, req as u32)])
            .collect(),
    );

    // The same conditions, hand-compiled (before `restrict`, which drops what it changes).
    let low_byte = patterns::low_mask(FAMILY_BITS);
    set_compact(
        &mut rules,
        "personality",
        ArgTest::NoneOf {
            arg: 0,
            mask: u32::MAX,
            values: vec![0, 1 << ADDR_NO_RANDOMIZE_BIT, u32::MAX],
        },
    );
    set_compact(
        &mut rules,
        "clone",
        ArgTest::AnyBit {
            arg: 0,
            mask: CLONE_NS_FLAGS
                .iter()
                .map(|&(flag, _)| u32::try_from(flag).expect("clone's flags fit 32 bits"))
                .fold(0, |m, f| m | f),
        },
    );
    if !route_netlink {
        set_compact(
            &mut rules,
            "socket",
            ArgTest::NoneOf {
                arg: 0,
                mask: low_byte,
                values: socket_families,
            },
        );
    }
    set_compact(
        &mut rules,
        "socketpair",
        ArgTest::NoneOf {
            arg: 0,
            mask: low_byte,
            values: ALLOWED_FAMILIES.to_vec(),
        },
    );

    restrict(&mut rules, &profile.restrictions);
    rules
}

fn set_compact(rules: &mut [RuleSpec], syscall: &str, test: ArgTest) {
    for r in rules.iter_mut().filter(|r| r.syscall == syscall) {
        r.compact = Some(test.clone());
    }
}

/// Makes `syscall` killed and reported whatever its arguments, replacing its default rules.
fn notify_always(rules: &mut Vec<RuleSpec>, syscall: &'static str, condition: &'static str) {
    rules.retain(|r| r.syscall != syscall);
    rules.push(RuleSpec {
        syscall,
        action: Action::KillAndReport,
        condition,
        alternatives: Vec::new(),
        compact: None,
    });
}

/// The stricter layers: each only turns an allowed case into a reported one.
fn restrict(rules: &mut Vec<RuleSpec>, r: &Restrictions) {
    if r.no_spawn {
        for name in ["fork", "vfork"] {
            notify_always(rules, name, "");
        }
        for name in ["execve", "execveat"] {
            notify_always(
                rules,
                name,
                "after the program's own exec (no_spawn; PID 1 lets that one through)",
            );
        }
        let clone = rules
            .iter_mut()
            .find(|r| r.syscall == "clone")
            .expect("the default profile has a clone rule");
        clone.condition = "flags contain any CLONE_NEW* namespace flag, or lack CLONE_THREAD (no_spawn: a new process)";
        clone.compact = None;
        clone.alternatives.push(vec![ScmpArgCompare::new(
            0,
            ScmpCompareOp::MaskedEqual(libc::CLONE_THREAD as u64),
            0,
        )]);
    }
    if r.no_sockets {
        notify_always(rules, "socket", "any family (no_sockets)");
        notify_always(rules, "socketpair", "any family (no_sockets)");
    }
    if let Some(allow) = &r.allow {
        // A syscall outside the list loses its conditional default rules (it is reported whatever
        // its arguments); one the default fails quietly as a whole (clone3, io_uring) stays quiet,
        // so runtimes still fall back. Syscalls with no rule at all are denied by number when the
        // filter is compiled (`allow_list_denied`).
        let conditional: Vec<&'static str> = rules
            .iter()
            .filter(|r| !r.alternatives.is_empty() && !allowed(allow, r.syscall))
            .map(|r| r.syscall)
            .collect();
        for name in conditional {
            notify_always(rules, name, "not in the allow-list");
        }
    }
}

fn allowed(allow: &std::collections::BTreeSet<String>, name: &str) -> bool {
    allow.contains(name) || STARTUP.contains(&name)
}

/// Highest syscall number an allow-list denies one by one; anything above is denied by a check
/// placed before libseccomp's program (see `CompiledFilter::compile`). x86_64 and aarch64 number
/// their syscalls below 600 (x86_64's x32 range ends at 547; new syscalls share numbers from 424).
pub(crate) const ALLOW_LIST_NR_MAX: i32 = 599;

/// In allow-list mode: every native syscall number up to [`ALLOW_LIST_NR_MAX`] that is neither
/// allowed nor already has a rule, to be killed and reported. Empty without an allow-list.
pub(crate) fn allow_list_denied(profile: &Profile, rules: &[RuleSpec]) -> Vec<i32> {
    let Some(allow) = &profile.restrictions.allow else {
        return Vec::new();
    };
    let mut keep: std::collections::BTreeSet<i32> = allow
        .iter()
        .map(String::as_str)
        .chain(STARTUP.iter().copied())
        .filter_map(resolve_owned)
        .collect();
    keep.extend(rules.iter().filter_map(|r| resolve(r.syscall)));
    (0..=ALLOW_LIST_NR_MAX)
        .filter(|nr| !keep.contains(nr))
        .collect()
}
