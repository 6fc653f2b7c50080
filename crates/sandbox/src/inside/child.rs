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
use nix::sys::resource::Resource;

use crate::inside::error::SetupError;
use crate::inside::privileges::{self, Identity};
use crate::inside::syscalls::{ExecArgs, Kernel, Syscalls};
use crate::protocol::{self, ChildReport, Rlimits, Setup};
use crate::spec::DEFAULT_PATH;

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
    /// Where the program starts.
    cwd: String,
    /// Inside gVisor: PID 1 traces the process and the seccomp filter stops it for PID 1 instead
    /// of notifying (gVisor has no user notification, see `gvisor::traced_filter` and
    /// `inside::tracer`), and RLIMIT_MSGQUEUE is gVisor's to set
    /// (it refuses to lower it; its message queues live in its own kernel), as are
    /// RLIMIT_RTPRIO and RLIMIT_NICE (the host schedules gVisor's sentry, not its processes).
    pub(crate) gvisor: bool,
    /// Started by PID 1's confined thread (`inside::confined`): `no_new_privs`, the Landlock
    /// domain and the seccomp filter are inherited from it, not set up here.
    pub(crate) preconfined: bool,
}

impl ChildPlan {
    pub(crate) fn new(
        setup: &Setup,
        argv: &[String],
        env: &[(String, String)],
        rlimits: &Rlimits,
        controlling_tty: bool,
        oom_protected: bool,
        build_userns: Option<RawFd>,
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
                build_userns,
            },
            controlling_tty,
            oom_protected,
            rlimits: rlimits.clone(),
            landlock: setup.landlock,
            program,
            cwd: setup.cwd.clone(),
            gvisor: setup.gvisor,
            preconfined: false,
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
/// that our own setup syscalls are not subject to it — except in a process PID 1's confined
/// thread started, which has worn `no_new_privs`, Landlock and the filter from its first step
/// (`inside::confined::allowed` checked that the filter lets every step below through).
pub(crate) fn contain_and_exec<S: Syscalls>(
    plan: &ChildPlan,
    sys: &mut S,
    stdio: [RawFd; 3],
    landlock: Option<&S::Ruleset>,
    filter: &S::Filter,
) -> Result<Errno, SetupError> {
    // Traced before anything else, so that no step of ours and no call of the program runs untraced.
    if plan.gvisor {
        sys.await_tracer().map_err(SetupError::AwaitTracer)?;
    }
    reset_signals(sys)?;
    set_oom_score(plan, sys)?;
    sys.setsid().map_err(SetupError::Setsid)?;
    // The cgroup is hidden behind a namespace PID 1 made at the build, which this process shares.
    set_rlimits(plan, sys)?;
    // After the limits: RLIMIT_RTPRIO and RLIMIT_NICE at 0 keep the program from taking back
    // the priority it leaves here. Inside gVisor priorities are its own kernel's (which lacks
    // ioprio_get); the host schedules the sentry, started at a plain priority (`crate::gvisor`).
    if !plan.gvisor {
        sys.leave_raised_priority()
            .map_err(SetupError::Scheduling)?;
    }
    attach_stdio(plan, sys, stdio)?;
    sys.chdir(&plan.cwd).map_err(|errno| SetupError::Chdir {
        dir: plan.cwd.clone(),
        errno,
    })?;
    privileges::drop_privileges(sys, plan.identity)?;
    if plan.preconfined {
        sys.close_from(3);
        return Ok(exec(plan, sys));
    }
    sys.no_new_privs().map_err(SetupError::NoNewPrivs)?;
    restrict_filesystem(plan, sys, landlock)?;
    if !plan.gvisor {
        let listener = sys.install_seccomp(filter).map_err(SetupError::Seccomp)?;
        sys.report_listener(listener)
            .map_err(SetupError::ReportListener)?;
    } else {
        sys.install_seccomp_traced(filter)
            .map_err(SetupError::Seccomp)?;
        sys.report_traced().map_err(SetupError::ReportListener)?;
    }
    // No descriptor but 0, 1, 2 may reach the program (the listener above would let it answer its
    // own seccomp notifications); the report socket, close-on-exec, goes with the exec.
    sys.close_from(3);
    Ok(exec(plan, sys))
}

/// PID 1 set every disposition to default at start except SIGPIPE, and blocks SIGCHLD.
fn reset_signals(sys: &mut impl Syscalls) -> Result<(), SetupError> {
    sys.default_sigpipe_and_unblock()
        .map_err(SetupError::SignalMask)
}

/// The OOM killer must pick a program, never PID 1. A PID 1 that could exempt itself
/// (`-1000`, which needs CAP_SYS_RESOURCE) passed that on to this process, which takes the
/// ordinary score back. One that could not (root without CAP_SYS_RESOURCE, as in some
/// containers and VMs) is at 0 like this process would be: memory the program left in tmpfs or
/// pipes belongs to no process, so the killer could take PID 1 and, with it, the run's output
/// and usage. The program then takes the highest score instead, which needs no privilege (best
/// effort: a failure leaves the score as it was, and changes no limit).
fn set_oom_score(plan: &ChildPlan, sys: &mut impl Syscalls) -> Result<(), SetupError> {
    if plan.oom_protected {
        sys.write_proc_self("oom_score_adj", "0")
            .map_err(|source| SetupError::WriteProcSelf {
                file: "oom_score_adj",
                source,
            })?;
    } else {
        let _ = sys.write_proc_self("oom_score_adj", "1000");
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
    ]);
    if !plan.gvisor {
        limits.push((Resource::RLIMIT_MSGQUEUE, 64 << 10, 64 << 10));
        // No real-time policy and no negative nice a program could give itself, whatever the
        // supervisor's own limits allow (a desktop's audio group gets rtprio 95). gVisor's
        // scheduling of its sentry is the host's: `crate::gvisor` starts it at a plain priority.
        limits.push((Resource::RLIMIT_RTPRIO, 0, 0));
        limits.push((Resource::RLIMIT_NICE, 0, 0));
    }
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
        (Some(ruleset), _) => sys.landlock_restrict(ruleset),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inside::syscalls::recording::Recording;

    fn setup(rootless: bool) -> Setup {
        Setup {
            uid: if rootless { 1000 } else { 60_123 },
            gid: if rootless { 1000 } else { 60_123 },
            userns: rootless.then_some((4242, 4343)),
            hostname: "sandbox".into(),
            network: false,
            disk_bytes: 1 << 20,
            inodes: 256,
            mounts: Vec::new(),
            etc_entries: Vec::new(),
            seccomp: Vec::new(),
            landlock: true,
            root: crate::protocol::SetupRoot::Host,
            cwd: crate::spec::WORKDIR.into(),
            build_ids: None,
            gvisor: false,
            fork_into_cgroup: false,
            workdir_alias: None,
        }
    }

    fn plan(
        rootless: bool,
        tty: bool,
        oom_protected: bool,
        argv: &[&str],
        env: &[(&str, &str)],
    ) -> ChildPlan {
        let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let rlimits = Rlimits {
            nofile: 256,
            fsize: 1 << 20,
            cpu_secs: 3,
            nproc: 72,
        };
        ChildPlan::new(
            &setup(rootless),
            &argv,
            &env,
            &rlimits,
            tty,
            oom_protected,
            None,
        )
        .expect("a valid plan")
    }

    fn kernel() -> Recording {
        Recording {
            landlock_abi: 6,
            last_cap: 2,
            ..Recording::default()
        }
    }

    fn run(plan: &ChildPlan, sys: &mut Recording, landlock: bool) -> Result<Errno, SetupError> {
        contain_and_exec(plan, sys, [10, 11, 12], landlock.then_some(&()), &())
    }

    /// The same in both modes once the ids are dropped: no way back to privileges, the filesystem
    /// wall, seccomp last (its listener goes to PID 1), no stray descriptor, exec.
    const FROM_NO_NEW_PRIVS_TO_EXEC: [&str; 6] = [
        "PR_SET_NO_NEW_PRIVS",
        "landlock_restrict_self",
        "seccomp(SET_MODE_FILTER, NEW_LISTENER)",
        "send listener 99",
        "close_range(3..)",
        "execve /usr/bin/prog",
    ];

    /// The whole way from fork to exec as root, step by step. Any change to this order is a change
    /// to the isolation and must be deliberate.
    #[test]
    fn as_root_the_program_is_confined_in_this_exact_order() {
        let plan = plan(false, false, true, &["/usr/bin/prog", "arg"], &[]);
        let mut sys = kernel();
        let last = run(&plan, &mut sys, true).expect("every step succeeds");
        assert_eq!(last, Errno::ENOENT);
        assert_eq!(
            sys.calls,
            [
                "sigaction(SIGPIPE, SIG_DFL) + sigprocmask(none)",
                "write /proc/self/oom_score_adj \"0\"",
                "setsid",
                "setrlimit(RLIMIT_NOFILE, 256, 256)",
                "setrlimit(RLIMIT_FSIZE, 1048576, 1048576)",
                "setrlimit(RLIMIT_CPU, 3, 4)",
                "setrlimit(RLIMIT_NPROC, 72, 72)",
                "setrlimit(RLIMIT_CORE, 0, 0)",
                "setrlimit(RLIMIT_MEMLOCK, 65536, 65536)",
                "setrlimit(RLIMIT_MSGQUEUE, 65536, 65536)",
                "setrlimit(RLIMIT_RTPRIO, 0, 0)",
                "setrlimit(RLIMIT_NICE, 0, 0)",
                "leave a raised priority",
                "dup 10 -> 0",
                "dup 11 -> 1",
                "dup 12 -> 2",
                "chdir /home/sandbox",
                "PR_CAP_AMBIENT_CLEAR_ALL",
                "setgroups([])",
                "setresgid(60123)",
                "setresuid(60123)",
                "setuid(0)",
            ]
            .into_iter()
            .chain(FROM_NO_NEW_PRIVS_TO_EXEC)
            .collect::<Vec<_>>()
        );
    }

    /// Started by PID 1's confined thread: the same steps up to the dropped ids, then straight to
    /// closing the stray descriptors and exec — `no_new_privs`, Landlock and the filter came with
    /// the clone (no listener to send: PID 1's thread holds it).
    #[test]
    fn a_preconfined_process_takes_the_same_steps_without_installing_anything() {
        let mut plan = plan(false, false, true, &["/usr/bin/prog", "arg"], &[]);
        let mut full = kernel();
        run(&plan, &mut full, true).expect("every step succeeds");
        plan.preconfined = true;
        let mut sys = kernel();
        let last = run(&plan, &mut sys, true).expect("every step succeeds");
        assert_eq!(last, Errno::ENOENT);
        let until_ids: Vec<&str> = full
            .calls
            .iter()
            .map(String::as_str)
            .take_while(|c| *c != "PR_SET_NO_NEW_PRIVS")
            .collect();
        assert_eq!(until_ids.last(), Some(&"setuid(0)"));
        assert_eq!(
            sys.calls,
            until_ids
                .into_iter()
                .chain(["close_range(3..)", "execve /usr/bin/prog"])
                .collect::<Vec<_>>()
        );
    }

    /// Rootless, with a terminal: a nested user namespace replaces setgroups, its bounding set is
    /// emptied before the ids change, RLIMIT_NPROC is left to the pids cgroup, and fd 0 becomes the
    /// controlling terminal.
    #[test]
    fn rootless_the_program_is_confined_in_this_exact_order() {
        let plan = plan(true, true, false, &["/usr/bin/prog"], &[]);
        let mut sys = kernel();
        run(&plan, &mut sys, true).expect("every step succeeds");
        assert_eq!(
            sys.calls,
            [
                "sigaction(SIGPIPE, SIG_DFL) + sigprocmask(none)",
                "write /proc/self/oom_score_adj \"1000\"",
                "setsid",
                "setrlimit(RLIMIT_NOFILE, 256, 256)",
                "setrlimit(RLIMIT_FSIZE, 1048576, 1048576)",
                "setrlimit(RLIMIT_CPU, 3, 4)",
                "setrlimit(RLIMIT_CORE, 0, 0)",
                "setrlimit(RLIMIT_MEMLOCK, 65536, 65536)",
                "setrlimit(RLIMIT_MSGQUEUE, 65536, 65536)",
                "setrlimit(RLIMIT_RTPRIO, 0, 0)",
                "setrlimit(RLIMIT_NICE, 0, 0)",
                "leave a raised priority",
                "dup 10 -> 0",
                "dup 11 -> 1",
                "dup 12 -> 2",
                "TIOCSCTTY",
                "chdir /home/sandbox",
                "unshare(CloneFlags(CLONE_NEWUSER))",
                "write /proc/self/setgroups \"deny\"",
                "write /proc/self/uid_map \"1000 0 1\"",
                "write /proc/self/gid_map \"1000 0 1\"",
                "PR_CAPBSET_DROP 0",
                "PR_CAPBSET_DROP 1",
                "PR_CAPBSET_DROP 2",
                "PR_CAP_AMBIENT_CLEAR_ALL",
                "setresgid(1000)",
                "setresuid(1000)",
                "setuid(0)",
            ]
            .into_iter()
            .chain(FROM_NO_NEW_PRIVS_TO_EXEC)
            .collect::<Vec<_>>()
        );
    }

    /// Under gVisor: traced by PID 1 before the first step (so nothing of ours or the program's
    /// runs untraced), no RLIMIT_MSGQUEUE (gVisor's own), no Landlock, and the filter whose
    /// reported calls stop for PID 1 instead of notifying it.
    #[test]
    fn under_gvisor_the_process_is_traced_before_anything_else() {
        let mut s = setup(false);
        s.gvisor = true;
        s.landlock = false;
        let rlimits = Rlimits {
            nofile: 256,
            fsize: 1 << 20,
            cpu_secs: 3,
            nproc: 72,
        };
        let argv = ["/usr/bin/prog".to_string()];
        let plan = ChildPlan::new(&s, &argv, &[], &rlimits, false, false, None).unwrap();
        let mut sys = kernel();
        run(&plan, &mut sys, false).expect("every step succeeds");
        assert_eq!(
            sys.calls.first().map(String::as_str),
            Some("wait until traced")
        );
        assert!(!sys.calls.iter().any(|c| c.contains("MSGQUEUE")));
        assert!(!sys.calls.iter().any(|c| c.contains("priority")));
        let from_no_new_privs: Vec<&str> = sys
            .calls
            .iter()
            .map(String::as_str)
            .skip_while(|c| *c != "PR_SET_NO_NEW_PRIVS")
            .collect();
        assert_eq!(
            from_no_new_privs,
            [
                "PR_SET_NO_NEW_PRIVS",
                "seccomp(SET_MODE_FILTER, 0)",
                "report traced",
                "close_range(3..)",
                "execve /usr/bin/prog",
            ]
        );
    }

    /// Build mode: the program joins the build user namespace and becomes its root (capabilities
    /// over that namespace only), in its working folder, then proves it left the host's user
    /// namespace; no bounding-set drop (the kernel gives a joined namespace a full one, which
    /// `apt-get` and `dpkg` need for chown and setuid inside), then the same confinement.
    #[test]
    fn in_build_mode_the_program_is_root_of_its_own_user_namespace_in_this_exact_order() {
        let mut s = setup(false);
        s.uid = 0;
        s.gid = 0;
        s.build_ids = Some(0x7000_0000);
        s.cwd = "/src".into();
        let rlimits = Rlimits {
            nofile: 256,
            fsize: 1 << 20,
            cpu_secs: 3,
            nproc: 72,
        };
        let plan = ChildPlan::new(
            &s,
            &["/usr/bin/prog".to_string()],
            &[],
            &rlimits,
            false,
            false,
            Some(7),
        )
        .unwrap();
        let mut sys = kernel();
        run(&plan, &mut sys, true).expect("every step succeeds");
        let from_chdir: Vec<&str> = sys
            .calls
            .iter()
            .map(String::as_str)
            .skip_while(|c| !c.starts_with("chdir"))
            .collect();
        assert_eq!(
            from_chdir,
            [
                "chdir /src",
                "setns(7, CLONE_NEWUSER)",
                "PR_CAP_AMBIENT_CLEAR_ALL",
                "setgroups([])",
                "setresgid(0)",
                "setresuid(0)",
                "read /proc/self/uid_map",
            ]
            .into_iter()
            .chain(FROM_NO_NEW_PRIVS_TO_EXEC)
            .collect::<Vec<_>>()
        );
        assert!(sys
            .calls
            .contains(&"setrlimit(RLIMIT_NPROC, 72, 72)".to_string()));
        // A join that left the process in the host's user namespace fails closed.
        let mut sys = Recording {
            stayed_in_host_userns: true,
            ..kernel()
        };
        let err = run(&plan, &mut sys, true).expect_err("must refuse");
        assert!(matches!(err, SetupError::NotInBuildUserns), "{err}");
        assert!(!sys.calls.iter().any(|c| c.starts_with("execve")));
    }

    /// A failed step is the last thing that happens: nothing after it runs, least of all exec.
    #[test]
    fn a_failed_step_stops_everything_after_it() {
        for (step, expected_last) in [
            ("setgroups", "setgroups([])"),
            ("setresgid", "setresgid(60123)"),
            ("setresuid", "setresuid(60123)"),
            ("PR_SET_NO_NEW_PRIVS", "PR_SET_NO_NEW_PRIVS"),
            ("landlock", "landlock_restrict_self"),
            ("seccomp", "seccomp(SET_MODE_FILTER, NEW_LISTENER)"),
            ("setrlimit(RLIMIT_CORE", "setrlimit(RLIMIT_CORE, 0, 0)"),
            ("chdir", "chdir /home/sandbox"),
        ] {
            let plan = plan(false, false, false, &["/usr/bin/prog"], &[]);
            let mut sys = Recording {
                fail: Some(step),
                ..kernel()
            };
            let err = run(&plan, &mut sys, true).expect_err(step);
            assert_eq!(
                sys.calls.last().map(String::as_str),
                Some(expected_last),
                "{err}"
            );
        }
    }

    #[test]
    fn a_drop_that_leaves_root_regainable_fails_closed() {
        let plan = plan(false, false, false, &["/usr/bin/prog"], &[]);
        let mut sys = Recording {
            root_regainable: true,
            ..kernel()
        };
        let err = run(&plan, &mut sys, true).expect_err("must refuse");
        assert!(matches!(err, SetupError::RegainedRoot), "{err}");
        assert_eq!(sys.calls.last().map(String::as_str), Some("setuid(0)"));
    }

    #[test]
    fn a_missing_landlock_ruleset_fails_closed_when_the_kernel_has_landlock() {
        let plan = plan(false, false, false, &["/usr/bin/prog"], &[]);
        let mut sys = kernel();
        let err = run(&plan, &mut sys, false).expect_err("must refuse");
        assert!(matches!(err, SetupError::LandlockMissing), "{err}");
        assert_eq!(
            sys.calls.last().map(String::as_str),
            Some("PR_SET_NO_NEW_PRIVS")
        );
        // Without Landlock in the kernel, mount namespaces alone confine files.
        let mut sys = Recording {
            landlock_abi: 0,
            ..kernel()
        };
        run(&plan, &mut sys, false).expect("no Landlock to apply");
        assert!(!sys.calls.iter().any(|c| c.starts_with("landlock")));
    }

    #[test]
    fn the_program_is_looked_up_in_the_sandbox_path_like_execvp() {
        let plan = plan(false, false, false, &["prog"], &[("PATH", "/a::/b")]);
        let mut sys = kernel();
        assert_eq!(run(&plan, &mut sys, true).unwrap(), Errno::ENOENT);
        let execs: Vec<&str> = sys
            .calls
            .iter()
            .filter(|c| c.starts_with("execve"))
            .map(String::as_str)
            .collect();
        assert_eq!(execs, ["execve /a/prog", "execve /b/prog"]);
        // "Here but not runnable" is remembered and the search goes on, like execvp.
        let mut sys = Recording {
            fail: Some("execve /a/"),
            ..kernel()
        };
        assert_eq!(run(&plan, &mut sys, true).unwrap(), Errno::EPERM);
        assert_eq!(sys.calls.last().map(String::as_str), Some("execve /a/prog"));
        let plan = super::tests::plan(false, false, false, &["prog"], &[]);
        assert_eq!(plan.candidates.len(), DEFAULT_PATH.split(':').count());
    }
}
