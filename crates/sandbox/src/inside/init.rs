//! The sandbox's init: the only code of ours that runs inside a sandbox.
//!
//! The supervisor starts it by re-executing the corral binary (`corral __sandbox-init`) with the
//! control socket as fd 3, so it begins single-threaded and owns nothing of the caller's state;
//! or the spawner, such an init started once, forks it in the same state ([`crate::spawner`]).
//! It unshares the namespaces, forks PID 1 of the new PID namespace (the "keeper" parent just waits
//! for it), and PID 1 builds the sandbox in the ordered steps of [`build`] before it serves
//! requests ([`crate::inside::pid1`]). When PID 1 exits the kernel kills every process in the
//! namespace.

use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use nix::sched::{unshare, CloneFlags};
use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::Pid;

use crate::error::SandboxError;
use crate::inside::error::SetupError;
use crate::inside::fork_into::{fork_into, Forked};
use crate::inside::pid1::{self, Built};
use crate::inside::privileges;
use crate::inside::scratch::Scratch;
use crate::inside::spares::Spares;
use crate::inside::spawner::{self, Served};
use crate::inside::syscalls::Kernel;
use crate::inside::{gvisor, idmap, ipcns, landlock, netns, rootfs};
use crate::protocol::{self, Event, Setup};

/// The hidden subcommand the supervisor runs.
pub const INIT_ARG: &str = "__sandbox-init";
/// The control socket's number in init.
pub(crate) const CONTROL_FD: RawFd = 3;
/// Names another descriptor as the control socket (under gVisor, runsc donates only stdio: it is
/// 0); init moves it to [`CONTROL_FD`] and puts `/dev/null` in its place.
pub(crate) const CONTROL_FD_ENV: &str = "CORRAL_CONTROL_FD";
/// Under gVisor, the loader the init was started with (the host's, see `gvisor::loader`): the
/// init executes itself again through it.
pub(crate) const LOADER_ENV: &str = "CORRAL_INIT_LOADER";

/// Entry point of `corral __sandbox-init`: a binary that starts sandboxes calls this first thing
/// in `main` when its first argument is [`INIT_ARG`]. Never returns.
pub fn init_main() -> ! {
    if let Some(fd) = std::env::var(CONTROL_FD_ENV)
        .ok()
        .and_then(|v| v.parse::<RawFd>().ok())
    {
        if fd != CONTROL_FD {
            move_control_fd(fd);
        }
        // Only under gVisor, whose /proc (2022) lets every process read another's environ
        // (Linux asks for ptrace access): init starts again with an empty one, so a program
        // reads nothing of it there.
        exec_again_without_environment();
    }
    // SAFETY: the supervisor passes the control socket as fd 3 and nothing else in this fresh
    // process has taken ownership of it.
    let ctl = unsafe { OwnedFd::from_raw_fd(CONTROL_FD) };
    if std::env::args_os()
        .nth(2)
        .is_some_and(|a| a == crate::protocol::SPAWNER_ARG)
    {
        match spawner::serve(ctl) {
            Ok(Served::Keeper(ctl, spares)) => exit_with("corral init", run(ctl, spares)),
            other => exit_with("corral spawner", other.map(drop)),
        }
    }
    exit_with("corral init", run(ctl, Spares::default()))
}

fn exit_with(who: &str, result: Result<(), SandboxError>) -> ! {
    let code = match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("{who}: {e}");
            1
        }
    };
    std::process::exit(code)
}

/// Executes this program again with the same arguments and an empty environment (the control
/// socket, [`CONTROL_FD`], stays open: `dup2` made it inheritable). Never returns.
fn exec_again_without_environment() -> ! {
    use std::os::unix::process::CommandExt;
    let mut args = std::env::args_os();
    let argv0 = args.next().unwrap_or_default();
    // Started by the host's loader (gVisor): /proc/self/exe is that loader, which is given
    // corral's binary and its library folder again.
    let mut cmd = match std::env::var_os(LOADER_ENV) {
        Some(loader) => {
            let mut c = std::process::Command::new(loader);
            c.args([
                "--inhibit-cache",
                "--library-path",
                crate::gvisor::loader::LIB_IN_CONTAINER,
            ])
            .arg(&argv0);
            c
        }
        None => {
            let mut c = std::process::Command::new("/proc/self/exe");
            c.arg0(argv0);
            c
        }
    };
    let err = cmd.args(args).env_clear().exec();
    eprintln!("corral init: executing itself again without an environment: {err}");
    std::process::exit(1)
}

/// Makes `fd` the control socket's [`CONTROL_FD`] and `/dev/null` the old number.
fn move_control_fd(fd: RawFd) {
    // SAFETY: dup2/open/close on descriptors of this fresh single-threaded process; nothing owns
    // `fd` or CONTROL_FD yet.
    unsafe {
        libc::dup2(fd, CONTROL_FD);
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 && null != fd {
            libc::dup2(null, fd);
            libc::close(null);
        }
    }
}

/// Tells the supervisor why the sandbox could not be built, and fails with the same words.
fn refuse(ctl: BorrowedFd<'_>, error: String) -> Result<(), SandboxError> {
    protocol::send(ctl, &Event::failed(&error), &[])?;
    Err(SandboxError::Init(error))
}

fn run(ctl: OwnedFd, spares: Spares) -> Result<(), SandboxError> {
    let Some((setup, mut cgroup_procs)) = protocol::recv::<Setup>(ctl.as_fd())? else {
        return Ok(());
    };
    let fork_target = if setup.fork_into_cgroup {
        cgroup_procs.pop()
    } else {
        None
    };
    // Inside gVisor, init already is PID 1 of the container's own namespaces (runsc made them).
    if setup.gvisor {
        // gVisor's /proc has no hidepid and shows init's environment to the program: init
        // emptied it first (see `init_main`).
        return build(&setup, Join::Write(&cgroup_procs), false, ctl.as_fd(), None)
            .and_then(|built| pid1::serve(&setup, ctl.as_fd(), built))
            .inspect_err(|e| {
                let _ = protocol::send(ctl.as_fd(), &Event::failed(e), &[]);
            });
    }
    if let Some((uid, gid)) = setup.userns {
        if let Err(e) = privileges::enter_user_namespace(&mut Kernel::for_init(), uid, gid) {
            return refuse(ctl.as_fd(), format!("user namespace: {e}"));
        }
    }
    // Build mode's user namespace is made here, in the host's PID namespace, where its helper's
    // /proc entry is found; PID 1 idmaps the layers through it and each program joins it.
    let build_userns = match setup.build_ids {
        Some(base) => match idmap::build_user_namespace(base) {
            Ok(ns) => Some(ns),
            Err(e) => return refuse(ctl.as_fd(), e.to_string()),
        },
        None => None,
    };
    // Namespaces the spawner made ahead are entered, not made; a user namespace of the
    // sandbox's own (rootless) has no privilege over them.
    let usable = setup.userns.is_none();
    let net = spares.net.filter(|_| usable && !setup.network);
    let ipc = spares.ipc.filter(|_| usable);
    let root = spares.root.filter(|_| rootfs::fits_prepared(&setup));
    let mut flags = CloneFlags::CLONE_NEWPID | CloneFlags::CLONE_NEWUTS;
    if root.is_none() {
        flags |= CloneFlags::CLONE_NEWNS;
    }
    if ipc.is_none() {
        flags |= CloneFlags::CLONE_NEWIPC;
    }
    if !setup.network && net.is_none() {
        flags |= CloneFlags::CLONE_NEWNET;
    }
    if let Err(e) = unshare(flags) {
        return refuse(ctl.as_fd(), SetupError::Unshare(flags, e).to_string());
    }
    let root_prepared = root.is_some();
    for (ns, kind) in [
        (net, CloneFlags::CLONE_NEWNET),
        (ipc, CloneFlags::CLONE_NEWIPC),
        (root, CloneFlags::CLONE_NEWNS),
    ] {
        if let Some(ns) = ns {
            if let Err(e) = nix::sched::setns(&ns, kind) {
                return refuse(ctl.as_fd(), SetupError::EnterSpare(kind, e).to_string());
            }
        }
    }
    // SAFETY: this process is single-threaded (a fresh exec that started no threads), so the child
    // may run arbitrary code.
    let forked = unsafe { fork_into(fork_target.as_ref().map(|f| f.as_fd())) }
        .map_err(|e| SandboxError::io("fork of PID 1", e.into()))?;
    drop(fork_target);
    match forked {
        Forked::Parent(child) => keeper(child, ctl),
        Forked::Child { in_cgroup } => {
            let join = if in_cgroup {
                Join::AtFork
            } else {
                Join::Write(&cgroup_procs)
            };
            // If the keeper dies, PID 1 dies, and with it the namespace.
            // SAFETY: plain prctl with integer arguments.
            unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
            let code = match build(&setup, join, root_prepared, ctl.as_fd(), build_userns)
                .and_then(|built| pid1::serve(&setup, ctl.as_fd(), built))
            {
                Ok(()) => 0,
                Err(e) => {
                    let _ = protocol::send(ctl.as_fd(), &Event::failed(e), &[]);
                    1
                }
            };
            std::process::exit(code)
        }
    }
}

/// The parent outside the PID namespace only waits, so the supervisor sees one child to reap.
fn keeper(child: Pid, ctl: OwnedFd) -> Result<(), SandboxError> {
    drop(ctl);
    loop {
        match waitpid(child, None) {
            Ok(WaitStatus::Exited(_, c)) => std::process::exit(c),
            Ok(WaitStatus::Signaled(..)) => std::process::exit(1),
            Ok(_) => continue,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => std::process::exit(1),
        }
    }
}

/// How PID 1 enters the sandbox's cgroup.
#[derive(Clone, Copy)]
enum Join<'a> {
    /// It was forked into it (`fork_into`): nothing to do.
    AtFork,
    /// By writing "0" to each of these join files.
    Write(&'a [OwnedFd]),
}

/// PID 1 builds the sandbox, in this order, before any untrusted code exists; then tells the
/// supervisor it is ready. Each step is a leaf. `root_prepared`: PID 1 started in a root the
/// spawner made ahead ([`rootfs::prepare_host_root`]), which it finishes instead of building one.
fn build(
    setup: &Setup,
    join: Join<'_>,
    root_prepared: bool,
    ctl: BorrowedFd<'_>,
    build_userns: Option<OwnedFd>,
) -> Result<Built, SandboxError> {
    // Before anything else: every program inherits the cgroup.
    if let Join::Write(procs) = join {
        join_cgroup(procs)?;
    }
    let _ = nix::unistd::sethostname(&setup.hostname);
    if root_prepared {
        // Its /proc is the first thing a prepared root lacks (ns_last_pid is opened through it).
        rootfs::mount_proc(std::path::Path::new("/proc"))?;
    }
    // Kept open from before /proc/sys becomes read-only: a reset restarts PID numbering with it,
    // so a run cannot count how many processes the previous one made.
    // gVisor has no ns_last_pid: its PID numbering is not restarted, and a run there can count
    // how many processes earlier runs of the same lease made (never another user's: a gVisor
    // sandbox serves one submission).
    let last_pid = match std::fs::OpenOptions::new()
        .write(true)
        .open("/proc/sys/kernel/ns_last_pid")
    {
        Ok(f) => Some(f),
        Err(_) if setup.gvisor => None,
        Err(e) => return Err(SandboxError::io("opening ns_last_pid", e)),
    };
    // Under gVisor the program's processes are counted by gVisor's own pids cgroup, which PID 1
    // joins like the host's (before the root hides it).
    let pids_max = if setup.gvisor {
        Some(gvisor::join()?)
    } else {
        None
    };
    // Every cgroup joined: a namespace rooted at them hides the host's cgroup paths from every
    // program, which inherits it (made once here rather than by each program's process).
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWCGROUP)
        .map_err(|e| SandboxError::io("entering a cgroup namespace", e.into()))?;
    if !setup.network {
        netns::loopback_up();
    }
    if setup.gvisor {
        gvisor::hide_runsc_additions()?;
    } else if root_prepared {
        rootfs::finish_prepared(setup)?;
    } else {
        rootfs::build(setup, build_userns.as_ref())?;
    }
    default_signals();
    privileges::drop_bounding_set(&mut Kernel::for_init())?;
    // The OOM killer should pick a program, never PID 1 (best effort: needs CAP_SYS_RESOURCE).
    let oom_protected = std::fs::write("/proc/self/oom_score_adj", b"-1000").is_ok();
    let filter = corral_seccomp::CompiledFilter::from_bytes(setup.seccomp.clone())?;
    // What a reset needs to know whether the network namespace is as new (see `netns::Baseline`).
    let net_baseline = if setup.network {
        None
    } else {
        Some(netns::Baseline::new(filter.has_socket_watch()))
    };
    let landlock = if setup.landlock {
        landlock::prepare(setup)?
    } else {
        None
    };
    // Resets empty the scratch mounts in place unless a bind lives on them (the walk would stop
    // at it every time) or gVisor holds them (its reset is its own).
    let binds_on_scratch = setup.mounts.iter().any(|m| rootfs::on_scratch(&m.dst));
    let scratch = if setup.gvisor || binds_on_scratch {
        None
    } else {
        Scratch::capture(setup.disk_bytes, setup.inodes).ok()
    };
    // The IPC namespace is new here (under gVisor every reset makes another).
    let ipc = if setup.gvisor {
        None
    } else {
        ipcns::Usage::capture()
    };
    let landlock_abi = setup.landlock.then(landlock::kernel_abi);
    // PID 1 is alone until its first reset (see `pid1::serve` for its confined thread).
    let how = pid1::HowBuilt {
        forked_into_cgroup: matches!(join, Join::AtFork),
        root_prepared,
    };
    pid1::send_ready(ctl, landlock_abi, setup.gvisor, 1, how)?;
    Ok(Built {
        last_pid,
        pids_max,
        oom_protected,
        net_baseline,
        landlock,
        landlock_abi,
        filter,
        build_userns,
        scratch,
        ipc,
    })
}

/// PID 1 enters the sandbox's cgroup before anything else; every program inherits it. PID 1 is
/// single-threaded (a fresh exec that starts no threads), which the v1 `tasks` files ask of a
/// joiner (see `corral_cgroups::Cgroup::procs_files`).
fn join_cgroup(procs: &[OwnedFd]) -> Result<(), SandboxError> {
    for f in procs {
        nix::unistd::write(f, b"0")
            .map_err(|e| SandboxError::io("joining the sandbox cgroup", e.into()))?;
    }
    Ok(())
}

/// Sets every signal disposition to the default except SIGPIPE (which PID 1 keeps ignored), so
/// nothing the host ignored (e.g. SIGHUP under nohup) is inherited by programs.
fn default_signals() {
    for sig in Signal::iterator() {
        if matches!(sig, Signal::SIGKILL | Signal::SIGSTOP | Signal::SIGPIPE) {
            continue;
        }
        // SAFETY: installing SIG_DFL has no handler code that could run.
        let _ = unsafe {
            sigaction(
                sig,
                &SigAction::new(SigHandler::SigDfl, SaFlags::empty(), SigSet::empty()),
            )
        };
    }
}
