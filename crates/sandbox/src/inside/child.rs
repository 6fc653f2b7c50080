//! The program's process: a forked child of the sandbox's PID 1 that drops every privilege,
//! applies the limits and filters, and execs the program. Any failure is reported and the child
//! exits without running the program (fail closed).
//!
//! The steps are one ordered list ([`contain_and_exec`], after nsjail's `contain.cc`); each is a
//! leaf that makes its system calls through [`Syscalls`], so the order is unit-tested against a
//! recording fake.

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};

use nix::errno::Errno;
use nix::sched::CloneFlags;
use nix::sys::resource::Resource;

use crate::inside::error::SetupError;
use crate::inside::privileges::{self, Identity};
use crate::inside::syscalls::{ExecArgs, Kernel, Syscalls};
use crate::protocol::{self, ChildReport, Rlimits, Setup};
use crate::spec::{DEFAULT_PATH, WORKDIR};

/// Everything the program's process needs, prepared by PID 1 before forking.
pub(crate) struct ChildPlan {
    /// Where the program may be, tried in order (execvp semantics).
    candidates: Vec<CString>,
    args: ExecArgs,
    identity: Identity,
    /// Stdio is a pty slave that becomes the program's controlling terminal.
    controlling_tty: bool,
    /// PID 1 exempted itself from the OOM killer; the program must not inherit that.
    oom_protected: bool,
    rlimits: Rlimits,
    landlock: bool,
    program: String,
}

impl ChildPlan {
    pub(crate) fn new(
        setup: &Setup,
        argv: &[String],
        env: &[(String, String)],
        rlimits: &Rlimits,
        controlling_tty: bool,
        oom_protected: bool,
    ) -> Result<ChildPlan, SetupError> {
        let cstr = |s: &str| CString::new(s).map_err(|_| SetupError::NulByte(s.to_string()));
        let program = argv.first().ok_or(SetupError::EmptyCommand)?.clone();
        // execvp semantics with the sandbox's PATH, not ours.
        let candidates = if program.contains('/') {
            vec![cstr(&program)?]
        } else {
            let path = env
                .iter()
                .find(|(k, _)| k == "PATH")
                .map(|(_, v)| v.as_str())
                .unwrap_or(DEFAULT_PATH);
            path.split(':')
                .filter(|d| !d.is_empty())
                .map(|d| cstr(&format!("{d}/{program}")))
                .collect::<Result<_, _>>()?
        };
        let argv = argv.iter().map(|a| cstr(a)).collect::<Result<_, _>>()?;
        let envp = env
            .iter()
            .map(|(k, v)| cstr(&format!("{k}={v}")))
            .collect::<Result<_, _>>()?;
        Ok(ChildPlan {
            candidates,
            args: ExecArgs::new(argv, envp),
            identity: Identity {
                uid: setup.uid,
                gid: setup.gid,
                nested_userns: setup.userns.is_some(),
            },
            controlling_tty,
            oom_protected,
            rlimits: rlimits.clone(),
            landlock: setup.landlock,
            program,
        })
    }
}

/// Runs in the forked child. `fds` are stdin, stdout, stderr (the caller checked there are 3).
pub(crate) fn run(
    plan: &ChildPlan,
    filter: &corral_seccomp::CompiledFilter,
    landlock: Option<&landlock::RulesetCreated>,
    fds: &[OwnedFd],
    report: OwnedFd,
) -> ! {
    let stdio = [fds[0].as_raw_fd(), fds[1].as_raw_fd(), fds[2].as_raw_fd()];
    let result = contain_and_exec(
        plan,
        &mut Kernel::for_child(report.as_fd()),
        stdio,
        landlock,
        filter,
    );
    match result {
        // The program could not be started: say so on its stderr like a shell, exit 127 / 126.
        Ok(last) => {
            let msg = format!("corral: {}: {}\n", plan.program, last.desc());
            // SAFETY: write to fd 2 from a buffer we own.
            unsafe { libc::write(2, msg.as_ptr().cast(), msg.len()) };
            let code = if last == Errno::ENOENT { 127 } else { 126 };
            // SAFETY: _exit never returns and is always safe.
            unsafe { libc::_exit(code) }
        }
        // SAFETY: _exit is always safe; PID 1 sees no listener and fails the run.
        Err(SetupError::ReportListener(_)) => unsafe { libc::_exit(126) },
        Err(e) => {
            let _ = protocol::send(report.as_fd(), &ChildReport::Error(e.to_string()), &[]);
            // SAFETY: _exit never returns and is always safe.
            unsafe { libc::_exit(126) }
        }
    }
}

/// From fork to exec, in order: this order is the isolation. Returns only if no candidate path
/// could be exec'd (with the reason), or with the step that failed.
///
/// Unprivileged and confined by the time the program's own code could run; seccomp goes last so
/// that our own setup syscalls are not subject to it.
pub(crate) fn contain_and_exec<S: Syscalls>(
    plan: &ChildPlan,
    sys: &mut S,
    stdio: [RawFd; 3],
    landlock: Option<&S::Ruleset>,
    filter: &S::Filter,
) -> Result<Errno, SetupError> {
    reset_signals(sys)?;
    leave_oom_protection(plan, sys)?;
    sys.setsid().map_err(SetupError::Setsid)?;
    // The cgroup (joined by PID 1) is hidden behind a namespace of its own.
    sys.unshare(CloneFlags::CLONE_NEWCGROUP)
        .map_err(|e| SetupError::Unshare(CloneFlags::CLONE_NEWCGROUP, e))?;
    set_rlimits(plan, sys)?;
    attach_stdio(plan, sys, stdio)?;
    sys.chdir(WORKDIR).map_err(|errno| SetupError::Chdir {
        dir: WORKDIR,
        errno,
    })?;
    privileges::drop_privileges(sys, plan.identity)?;
    sys.no_new_privs().map_err(SetupError::NoNewPrivs)?;
    restrict_filesystem(plan, sys, landlock)?;
    let listener = sys.install_seccomp(filter).map_err(SetupError::Seccomp)?;
    sys.report_listener(listener)
        .map_err(SetupError::ReportListener)?;
    // No descriptor but 0, 1, 2 may reach the program (the listener above would let it answer its
    // own seccomp notifications).
    sys.close_from(3);
    Ok(exec(plan, sys))
}

/// PID 1 set every disposition to default at start except SIGPIPE, and blocks SIGCHLD.
fn reset_signals(sys: &mut impl Syscalls) -> Result<(), SetupError> {
    sys.default_sigpipe_and_unblock()
        .map_err(SetupError::SignalMask)
}

/// PID 1 is exempt from the OOM killer; the program must not be.
fn leave_oom_protection(plan: &ChildPlan, sys: &mut impl Syscalls) -> Result<(), SetupError> {
    if plan.oom_protected {
        sys.write_proc_self("oom_score_adj", "0")
            .map_err(|source| SetupError::WriteProcSelf {
                file: "oom_score_adj",
                source,
            })?;
    }
    Ok(())
}

fn set_rlimits(plan: &ChildPlan, sys: &mut impl Syscalls) -> Result<(), SetupError> {
    let r = &plan.rlimits;
    let mut limits = vec![
        (Resource::RLIMIT_NOFILE, r.nofile, r.nofile),
        (Resource::RLIMIT_FSIZE, r.fsize, r.fsize),
        (Resource::RLIMIT_CPU, r.cpu_secs, r.cpu_secs + 1),
    ];
    // RLIMIT_NPROC counts every process of the real uid on the host; in rootless mode that is the
    // caller's own uid, so the limit would count the caller's other processes too (pids cgroup
    // still applies).
    if !plan.identity.nested_userns {
        limits.push((Resource::RLIMIT_NPROC, r.nproc, r.nproc));
    }
    limits.extend([
        (Resource::RLIMIT_CORE, 0, 0),
        (Resource::RLIMIT_MEMLOCK, 64 << 10, 64 << 10),
        (Resource::RLIMIT_MSGQUEUE, 64 << 10, 64 << 10),
    ]);
    for (resource, soft, hard) in limits {
        sys.setrlimit(resource, soft, hard.max(soft))
            .map_err(|errno| SetupError::Rlimit { resource, errno })?;
    }
    Ok(())
}

fn attach_stdio(
    plan: &ChildPlan,
    sys: &mut impl Syscalls,
    stdio: [RawFd; 3],
) -> Result<(), SetupError> {
    for (to, from) in (0..).zip(stdio) {
        sys.dup_to(from, to)
            .map_err(|errno| SetupError::Stdio { from, to, errno })?;
    }
    if plan.controlling_tty {
        sys.set_controlling_tty()
            .map_err(SetupError::ControllingTty)?;
    }
    Ok(())
}

fn restrict_filesystem<S: Syscalls>(
    plan: &ChildPlan,
    sys: &mut S,
    landlock: Option<&S::Ruleset>,
) -> Result<(), SetupError> {
    match (landlock, plan.landlock) {
        (Some(ruleset), _) => sys.landlock_restrict(ruleset).map_err(SetupError::Landlock),
        (None, true) if sys.landlock_abi() > 0 => Err(SetupError::LandlockMissing),
        (None, _) => Ok(()),
    }
}

/// Like execvp: keep looking after "not here", remember "here but not runnable".
fn exec(plan: &ChildPlan, sys: &mut impl Syscalls) -> Errno {
    let mut last = Errno::ENOENT;
    for path in &plan.candidates {
        let e = sys.execve(path, &plan.args);
        if e != Errno::ENOENT && e != Errno::ENOTDIR {
            last = e;
            if e != Errno::EACCES {
                break;
            }
        }
    }
    last
}
