//! Compiling the profile to classic BPF, shipping it, installing it.

use std::fmt;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use libseccomp::{ScmpAction, ScmpFilterContext, ScmpSyscall};

use crate::arg_blocks;
use crate::bpf::{self, Verdict};
use crate::error::Error;
use crate::notify::AUDIT_ARCH_NATIVE;
use crate::profile::{self, Action, Profile};

/// Size of one `struct sock_filter` instruction.
pub const INSN_SIZE: usize = 8;
/// The kernel's limit on the length of one filter program.
pub const MAX_INSNS: usize = libc::BPF_MAXINSNS as usize;

const _: () = assert!(std::mem::size_of::<libc::sock_filter>() == INSN_SIZE);
const _: () = assert!(std::mem::align_of::<libc::sock_filter>() <= INSN_SIZE);

/// A profile compiled to a seccomp-bpf program for the native architecture.
///
/// The bytes ([`as_bytes`](Self::as_bytes)) are the raw `struct sock_filter`
/// array in native byte order; they are only meaningful on a machine of the
/// same architecture, which is the case for host → sandbox-init shipping.
#[derive(Clone)]
pub struct CompiledFilter {
    // Kept as typed instructions (not `Vec<u8>`) so the array handed to the
    // kernel is properly aligned.
    insns: Vec<libc::sock_filter>,
}

impl PartialEq for CompiledFilter {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for CompiledFilter {}

impl fmt::Debug for CompiledFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompiledFilter")
            .field("instructions", &self.insns.len())
            .finish()
    }
}

fn seccomp_err(
    context: impl Into<String>,
) -> impl FnOnce(libseccomp::error::SeccompError) -> Error {
    let context = context.into();
    move |source| Error::Seccomp { context, source }
}

/// What the kernel is told to do for `action`, as a `ret` of the program.
fn ret_value(action: Action) -> u32 {
    match action {
        Action::KillAndReport => bpf::op::RET_USER_NOTIF,
        Action::Errno(e) => bpf::op::RET_ERRNO | (e as u32 & bpf::op::RET_DATA),
    }
}

fn scmp_action(action: Action) -> ScmpAction {
    match action {
        Action::KillAndReport => ScmpAction::Notify,
        Action::Errno(e) => ScmpAction::Errno(e),
    }
}

impl CompiledFilter {
    /// Compiles `profile` with libseccomp. Do this once per process (it
    /// takes a few milliseconds) and ship [`as_bytes`](Self::as_bytes).
    ///
    /// The filter covers the native architecture only; syscalls made through
    /// any other ABI (i386 `int 0x80` on x86_64, x32 syscall numbers, arm32
    /// on aarch64) take the bad-architecture action, which is the same
    /// user notification as [`Action::KillAndReport`].
    pub fn compile(profile: &Profile) -> Result<CompiledFilter, Error> {
        Self::compile_with(profile, true)
    }

    /// [`compile`](Self::compile), with the rules that have one written as their hand-compiled
    /// argument test (`compact`, see [`crate::arg_blocks`]) or all as libseccomp patterns (the
    /// tests compare the two).
    fn compile_with(profile: &Profile, compact: bool) -> Result<CompiledFilter, Error> {
        let mut ctx =
            ScmpFilterContext::new(ScmpAction::Allow).map_err(seccomp_err("creating filter"))?;
        ctx.set_act_badarch(ScmpAction::Notify)
            .map_err(seccomp_err("setting the bad-architecture action"))?;
        // Binary tree of syscall numbers rather than a linear scan: the
        // common (allowed) path stays short.
        ctx.set_ctl_optimize(2)
            .map_err(seccomp_err("setting the optimization level"))?;

        let rules = profile::rule_specs(profile);
        let mut blocks = Vec::new();
        for rule in &rules {
            let Some(nr) = profile::resolve(rule.syscall) else {
                continue;
            };
            let syscall = ScmpSyscall::from(nr);
            let context = || format!("adding rule for {}", rule.syscall);
            if let Some(test) = rule.compact.as_ref().filter(|_| compact) {
                // One unconditional rule whose `ret` becomes a jump to the test (see `splice`).
                let sentinel = arg_blocks::SENTINEL_BASE + blocks.len() as u32;
                ctx.add_rule_exact(ScmpAction::Errno(sentinel as i32), syscall)
                    .map_err(seccomp_err(context()))?;
                blocks.push((test.clone(), ret_value(rule.action)));
                continue;
            }
            let action = scmp_action(rule.action);
            if rule.alternatives.is_empty() {
                ctx.add_rule_exact(action, syscall)
                    .map_err(seccomp_err(context()))?;
            }
            for conds in &rule.alternatives {
                ctx.add_rule_conditional_exact(action, syscall, conds)
                    .map_err(seccomp_err(context()))?;
            }
        }
        let denied = profile::allow_list_denied(profile, &rules);
        for &nr in &denied {
            ctx.add_rule_exact(ScmpAction::Notify, ScmpSyscall::from(nr))
                .map_err(seccomp_err(format!(
                    "adding allow-list rule for syscall {nr}"
                )))?;
        }

        if blocks.len() > (4095 - arg_blocks::SENTINEL_BASE) as usize {
            return Err(Error::InvalidProgram(format!(
                "{} hand-compiled argument tests, more than the sentinels allow",
                blocks.len()
            )));
        }
        let exported = Self::from_bytes(export_bpf(&ctx)?)?;
        let mut insns = arg_blocks::splice(exported.insns, &blocks);
        if profile.restrictions().allow.is_some() {
            insns.splice(0..0, allow_list_prefix());
        }
        Self::from_insns(insns)
    }

    /// The raw `struct sock_filter` array, to ship over a socket.
    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: `sock_filter` is `#[repr(C)] { u16, u8, u8, u32 }`: 8 bytes
        // (asserted above) without padding, so every byte of the vector's
        // initialized elements is an initialized `u8`; the length is the
        // element count times the element size, and `u8` has alignment 1.
        unsafe {
            std::slice::from_raw_parts(
                self.insns.as_ptr().cast::<u8>(),
                self.insns.len() * INSN_SIZE,
            )
        }
    }

    /// Rebuilds a filter from [`as_bytes`](Self::as_bytes) output. Checks the
    /// length is a non-zero multiple of 8 bytes and at most
    /// [`MAX_INSNS`] instructions; the kernel verifies the rest on install.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<CompiledFilter, Error> {
        if !bytes.len().is_multiple_of(INSN_SIZE) {
            return Err(Error::InvalidProgram(format!(
                "length {} is not a multiple of {INSN_SIZE}",
                bytes.len()
            )));
        }
        let insns = bytes
            .chunks_exact(INSN_SIZE)
            .map(|c| libc::sock_filter {
                code: u16::from_ne_bytes([c[0], c[1]]),
                jt: c[2],
                jf: c[3],
                k: u32::from_ne_bytes([c[4], c[5], c[6], c[7]]),
            })
            .collect();
        Self::from_insns(insns)
    }

    /// A program of 1..=[`MAX_INSNS`] instructions.
    fn from_insns(insns: Vec<libc::sock_filter>) -> Result<CompiledFilter, Error> {
        if insns.is_empty() {
            return Err(Error::InvalidProgram("empty program".into()));
        }
        if insns.len() > MAX_INSNS {
            return Err(Error::InvalidProgram(format!(
                "{} instructions, more than the kernel's limit of {MAX_INSNS}",
                insns.len()
            )));
        }
        Ok(CompiledFilter { insns })
    }

    /// Number of BPF instructions.
    pub fn instruction_count(&self) -> usize {
        self.insns.len()
    }

    /// Installs the filter on the calling thread with
    /// `SECCOMP_FILTER_FLAG_NEW_LISTENER` and returns the listener fd.
    ///
    /// Meant for a freshly forked, single-threaded child right before
    /// `execve` (so no `TSYNC`): it is async-signal-safe — one raw
    /// `seccomp(2)` syscall on the already built program, no allocation, no
    /// locks.
    ///
    /// Requirements and caveats:
    /// * `prctl(PR_SET_NO_NEW_PRIVS, 1)` must already be set (or the caller
    ///   must have `CAP_SYS_ADMIN`), otherwise the kernel answers `EACCES`.
    /// * Only one filter in a process's filter stack can have a listener:
    ///   installing while an ancestor filter already has one fails with
    ///   `EBUSY`.
    /// * The returned fd is the caller's (`O_CLOEXEC` is set by the kernel).
    ///   Hand it to the supervisor and close it before `execve`: whoever holds
    ///   the listener can answer the notifications, including with "continue".
    /// * If every copy of the listener is closed, notified syscalls fail with
    ///   `ENOSYS` instead — still blocked, just not reported.
    ///
    /// On failure returns the `errno`.
    pub fn install_with_listener(&self) -> Result<RawFd, i32> {
        let prog = libc::sock_fprog {
            // from_bytes/compile guarantee 1..=MAX_INSNS (4096) instructions.
            len: self.insns.len() as libc::c_ushort,
            filter: self.insns.as_ptr().cast_mut(),
        };
        // SAFETY: seccomp(SECCOMP_SET_MODE_FILTER, flags, &prog) reads `prog`
        // and the instruction array it points to, both alive for the call;
        // the kernel does not write through `filter`.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
                &prog as *const libc::sock_fprog,
            )
        };
        if rc < 0 {
            Err(std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EINVAL))
        } else {
            Ok(rc as RawFd)
        }
    }

    /// Runs the program on a syscall the way the kernel would and returns
    /// its verdict, without installing anything. Useful for `corral doctor`
    /// and for tests; `arch` is an `AUDIT_ARCH_*` value (see
    /// [`crate::AUDIT_ARCH_NATIVE`]).
    pub fn evaluate(&self, arch: u32, nr: i32, args: [u64; 6]) -> Verdict {
        bpf::run(&self.insns, arch, nr, 0, args)
    }

    /// This program behind a watch on sockets: every native `socket(2)` whose domain is not
    /// `AF_UNIX` raises a user notification before the program decides, so the listener learns
    /// that a run reached for the network namespace (a reset then checks whether it changed; see
    /// the sandbox's `netns`). The listener must answer a watched call with what the program
    /// itself says ([`policy_verdict`](Self::policy_verdict)): continue, an errno, or the
    /// report. `socket(2)` takes no pointer, so answering "continue" runs exactly the call the
    /// verdict was made on. An already watched program is returned as it is.
    pub fn with_socket_watch(&self) -> CompiledFilter {
        if self.has_socket_watch() {
            return self.clone();
        }
        let mut insns = socket_watch_prefix();
        insns.extend_from_slice(&self.insns);
        CompiledFilter { insns }
    }

    /// Whether the program starts with the watch of [`with_socket_watch`](Self::with_socket_watch).
    pub fn has_socket_watch(&self) -> bool {
        let prefix = socket_watch_prefix();
        self.insns.len() > prefix.len() && same_insns(&self.insns[..prefix.len()], &prefix)
    }

    /// The verdict of the program without its socket watch (the whole program's, when it has none).
    pub fn policy_verdict(&self, arch: u32, nr: i32, args: [u64; 6]) -> Verdict {
        let skip = if self.has_socket_watch() {
            socket_watch_prefix().len()
        } else {
            0
        };
        bpf::run(&self.insns[skip..], arch, nr, 0, args)
    }
}

fn same_insns(a: &[libc::sock_filter], b: &[libc::sock_filter]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| (x.code, x.jt, x.jf, x.k) == (y.code, y.jt, y.jf, y.k))
}

use crate::bpf::op::{JEQ_K, JGT_K, LD_ABS, RET_K, RET_USER_NOTIF};

fn insns(list: &[(u16, u8, u8, u32)]) -> Vec<libc::sock_filter> {
    list.iter()
        .map(|&(code, jt, jf, k)| libc::sock_filter { code, jt, jf, k })
        .collect()
}

/// See [`CompiledFilter::with_socket_watch`]. Its jumps land on the instruction right after it
/// (the program it watches, intact: libseccomp's jumps are relative). Other ABIs and x32
/// numbers pass through to the program, which treats them as a bad architecture. The number is
/// tested before the architecture: two instructions for every other call, not four (each process
/// that installs the filter has the kernel walk the prefix for every syscall number, to cache the
/// ones always allowed).
fn socket_watch_prefix() -> Vec<libc::sock_filter> {
    // The domain is an int: the low 32 bits of args[0].
    let domain = arg_blocks::arg_low(0);
    insns(&[
        (LD_ABS, 0, 0, 0), // nr
        (JEQ_K, 0, 5, libc::SYS_socket as u32),
        (LD_ABS, 0, 0, 4), // arch
        (JEQ_K, 0, 3, AUDIT_ARCH_NATIVE),
        (LD_ABS, 0, 0, domain),
        (JEQ_K, 1, 0, libc::AF_UNIX as u32),
        (RET_K, 0, 0, RET_USER_NOTIF),
    ])
}

/// Placed before libseccomp's program in allow-list mode: a native syscall numbered above
/// [`profile::ALLOW_LIST_NR_MAX`] (one a newer kernel may add, which no rule names) is killed and
/// reported. libseccomp's program starts from scratch (it loads what it tests), and its jumps are
/// relative, so a prefix leaves it intact.
fn allow_list_prefix() -> Vec<libc::sock_filter> {
    insns(&[
        (LD_ABS, 0, 0, 4), // arch
        (JEQ_K, 0, 3, AUDIT_ARCH_NATIVE),
        (LD_ABS, 0, 0, 0), // nr
        (JGT_K, 0, 1, profile::ALLOW_LIST_NR_MAX as u32),
        (RET_K, 0, 0, RET_USER_NOTIF),
    ])
}

fn export_bpf(ctx: &ScmpFilterContext) -> Result<Vec<u8>, Error> {
    // libseccomp 2.5 can only export to an fd (export_bpf_mem needs 2.6).
    // A memfd avoids the pipe-capacity deadlock and touches no filesystem.
    // SAFETY: memfd_create takes a NUL-terminated name and flags; no memory
    // is retained.
    let fd = unsafe { libc::memfd_create(c"corral-seccomp-bpf".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(Error::Io(std::io::Error::last_os_error()));
    }
    // SAFETY: `fd` was just returned by memfd_create and is owned by nobody
    // else.
    let mut file = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    ctx.export_bpf(&file)
        .map_err(seccomp_err("exporting BPF"))?;
    file.seek(SeekFrom::Start(0))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grants::Grant;
    use crate::restrictions::Restrictions;

    /// Argument values that reach every branch of the hand-compiled tests: each bit alone and
    /// with its neighbour, small numbers (families, personalities), the allowed values with
    /// upper halves set, all ones, and a spread of others.
    fn values() -> Vec<u64> {
        let mut v: Vec<u64> = (0..=300).collect();
        for i in 0..64 {
            v.push(1 << i);
            v.push((1 << i) | (1 << ((i + 1) % 64)));
            v.push(!(1u64 << i));
            v.push(0xffff_ffff & !(1u64 << (i % 32)));
        }
        for base in [0u64, 0x40000, 0xffff_ffff, 1, 2, 10, 16] {
            for hi in [0u64, 1, 7, 0xffff_ffff] {
                v.push(base | (hi << 32));
                v.push(base | 0x100 | (hi << 32));
            }
        }
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..2000 {
            // xorshift: a fixed, varied spread (no dependency for a test).
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            v.push(x);
            v.push(x & 0xffff_ffff);
            v.push(x & 0xff);
        }
        v
    }

    fn profiles() -> Vec<(String, Profile)> {
        let mut out = Vec::new();
        for network in [false, true] {
            for unix in [true, false] {
                for r in ["default", "no_spawn", "no_sockets", "no_spawn+no_sockets"] {
                    let restrictions: Restrictions = r.parse().unwrap();
                    let p = Profile::default_profile()
                        .with_network(network)
                        .with_unix_sockets(unix);
                    out.push((
                        format!("network {network} unix {unix} {r:?}"),
                        p.clone().with_restrictions(restrictions.clone()),
                    ));
                    out.push((
                        format!("network {network} unix {unix} {r:?} + list_interfaces"),
                        p.with_restrictions(restrictions.granting([Grant::ListInterfaces])),
                    ));
                }
            }
        }
        let allow: Restrictions = "allow:read,write,exit_group,personality,socket,clone"
            .parse()
            .unwrap();
        out.push((
            "allow-list".into(),
            Profile::default_profile().with_restrictions(allow),
        ));
        out
    }

    #[test]
    fn hand_compiled_tests_give_the_verdicts_of_libseccomps_patterns() {
        let values = values();
        for (name, profile) in profiles() {
            let compact = CompiledFilter::compile_with(&profile, true).unwrap();
            let patterns = CompiledFilter::compile_with(&profile, false).unwrap();
            let with_tests: Vec<i32> = profile::rule_specs(&profile)
                .iter()
                .filter(|r| r.compact.is_some())
                .filter_map(|r| profile::resolve(r.syscall))
                .collect();
            // The default offline profile must really use them, and be shorter for it: by the
            // 125 instructions they saved when written (then 123 against 248; counted as a
            // saving, since every rule without arguments adds the same to both forms).
            if name == "network false unix true \"default\"" {
                assert_eq!(with_tests.len(), 4, "{name}");
                assert!(
                    compact.instruction_count() + 125 <= patterns.instruction_count(),
                    "{name}: {} vs {} instructions",
                    compact.instruction_count(),
                    patterns.instruction_count()
                );
            }
            for &nr in &with_tests {
                for arg in 0..3 {
                    for &v in &values {
                        let mut args = [0u64; 6];
                        args[arg] = v;
                        assert_eq!(
                            compact.evaluate(AUDIT_ARCH_NATIVE, nr, args),
                            patterns.evaluate(AUDIT_ARCH_NATIVE, nr, args),
                            "{name}: syscall {nr} arg {arg} = {v:#x}"
                        );
                    }
                }
            }
            // Every other syscall, ABI and number: unchanged.
            for arch in [AUDIT_ARCH_NATIVE, 0x4000_0003] {
                for nr in (0..=700).chain([0x4000_0000, 0x4000_0001, -1]) {
                    assert_eq!(
                        compact.evaluate(arch, nr, [0; 6]),
                        patterns.evaluate(arch, nr, [0; 6]),
                        "{name}: arch {arch:#x} syscall {nr}"
                    );
                }
            }
        }
    }
}
