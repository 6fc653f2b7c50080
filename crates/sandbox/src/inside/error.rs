//! What can go wrong inside a sandbox, one variant per step (as firecracker's jailer does): the
//! message names the step and what the kernel answered. These travel to the supervisor as text
//! (`Event::Failed`), so a failed step always fails the sandbox or the run closed.

use std::os::fd::RawFd;

use nix::errno::Errno;
use nix::sched::CloneFlags;
use nix::sys::resource::Resource;

/// A step of building a sandbox or of preparing a program's process that failed. Nothing ran
/// with less isolation than asked: the program was never exec'd.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    // Namespaces and identity.
    #[error("unshare({0:?}): {1}")]
    Unshare(CloneFlags, Errno),
    #[error("entering the spawner's spare namespace setns({0:?}): {1}")]
    EnterSpare(CloneFlags, Errno),
    #[error("writing /proc/self/{file}: {source}")]
    WriteProcSelf {
        file: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("dropping capability {cap} from the bounding set: {errno}")]
    BoundingSet { cap: u64, errno: Errno },
    #[error("setgroups: {0}")]
    SetGroups(Errno),
    #[error("setresgid: {0}")]
    SetResGid(Errno),
    #[error("setresuid: {0}")]
    SetResUid(Errno),
    #[error("could regain uid 0 after dropping privileges")]
    RegainedRoot,
    #[error("PR_SET_NO_NEW_PRIVS: {0}")]
    NoNewPrivs(Errno),
    #[error("entering the build user namespace: {0}")]
    SetnsUser(Errno),
    #[error("the build program is still in the host's user namespace")]
    NotInBuildUserns,

    // An image root.
    #[error("making the build user namespace: {0}")]
    BuildUserns(Errno),
    #[error("writing the build user namespace's {file}: {why}")]
    BuildIdMap { file: &'static str, why: String },
    #[error("idmapping the image folder {path} ({step}): {errno} (build mode needs idmapped mounts: Linux 5.19+ and a filesystem that supports them)")]
    IdmappedMount {
        path: String,
        step: &'static str,
        errno: Errno,
    },
    #[error("switching filesystem ids to mount the build overlay: {0}")]
    BuildFsIds(Errno),
    #[error("opening the image layer {path}: {errno}")]
    ImageLayer { path: String, errno: Errno },
    #[error("mounting root mode's writable layer (a tmpfs): {0}")]
    ScratchUpper(Errno),
    #[error("writing the image root's skeleton ({path}): {source}")]
    Skeleton {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("mounting the image's layers with overlayfs ({layers} layers{mode}): {errno}{hint}")]
    Overlay {
        layers: usize,
        mode: &'static str,
        errno: Errno,
        hint: &'static str,
    },
    #[error("the image's {path} cannot hold corral's mount: {why}")]
    ImageMountPoint { path: String, why: String },

    // The program's process.
    #[error("sigprocmask: {0}")]
    SignalMask(Errno),
    #[error("setsid: {0}")]
    Setsid(Errno),
    #[error("setrlimit({resource:?}): {errno}")]
    Rlimit { resource: Resource, errno: Errno },
    #[error("leaving the supervisor's scheduling priority: {0}")]
    Scheduling(Errno),
    #[error("making descriptor {from} the program's fd {to}: {errno}")]
    Stdio {
        from: RawFd,
        to: RawFd,
        errno: Errno,
    },
    #[error("TIOCSCTTY: {0}")]
    ControllingTty(Errno),
    #[error("chdir {dir}: {errno}")]
    Chdir { dir: String, errno: Errno },
    #[error("building the Landlock ruleset: {0}")]
    LandlockRuleset(#[source] landlock::RulesetError),
    #[error("Landlock rule for {path}: {source}")]
    LandlockRule {
        path: String,
        #[source]
        source: landlock::RulesetError,
    },
    #[error("listing the image root for the Landlock rules: {0}")]
    LandlockListRoot(#[source] std::io::Error),
    #[error("copying the Landlock ruleset: {0}")]
    LandlockClone(#[source] std::io::Error),
    #[error("applying the Landlock ruleset: {0}")]
    LandlockRestrict(#[source] landlock::RulesetError),
    #[error("Landlock is available but enforced nothing")]
    LandlockNotEnforced,
    #[error("the Landlock ruleset is missing")]
    LandlockMissing,
    #[error("installing the seccomp filter: {0}")]
    Seccomp(Errno),
    #[error("sending the seccomp listener to PID 1: {0}")]
    ReportListener(String),
    #[error("waiting for PID 1 to trace the program's process (gVisor): {0}")]
    AwaitTracer(String),

    // What PID 1 does to start a program.
    #[error("empty command")]
    EmptyCommand,
    #[error("{0:?} contains a NUL byte")]
    NulByte(String),
    #[error("expected at least 3 descriptors, got {0}")]
    MissingStdio(usize),
    #[error("socketpair: {0}")]
    Socketpair(Errno),
    #[error("fork: {0}")]
    Fork(Errno),
    #[error("tracing the program's process (gVisor; needs ptrace in gVisor's kernel): {0}")]
    Trace(Errno),
    #[error("reading the child's report: {0}")]
    ChildReport(String),
    /// The program's process reported that one of its steps failed (the step's own message).
    #[error("{0}")]
    Child(String),
    #[error("the program's process ended before its seccomp filter was installed")]
    NoListener,
    #[error("opening /dev/pts/ptmx: {0}")]
    OpenPtmx(Errno),
    #[error("unlocking the pty: {0}")]
    UnlockPty(Errno),
    #[error("opening the pty's slave: {0}")]
    PtySlave(Errno),
    #[error("dup: {0}")]
    Dup(std::io::Error),
    #[error("PID 1's confined thread: {0}")]
    Confined(String),
}
