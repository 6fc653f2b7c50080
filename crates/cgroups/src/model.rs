//! The crate's vocabulary: the cgroup [`Version`], the [`Limits`] a run gets, the [`Usage`] it
//! reports, the [`Baseline`] of one run in a long-lived cgroup, and the [`Manager`] and [`Cgroup`]
//! traits both backends implement. Plain types; the backends (`v1`, `v2`) fill them in.

use std::fmt;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use crate::error::Error;

/// Which cgroup interface a [`Manager`] drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Version {
    /// Legacy per-controller hierarchies (memory, pids, cpuacct mounted separately).
    V1,
    /// The unified hierarchy.
    V2,
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Version::V1 => "v1",
            Version::V2 => "v2",
        })
    }
}

impl FromStr for Version {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "v1" | "1" => Ok(Version::V1),
            "v2" | "2" => Ok(Version::V2),
            other => Err(format!("expected v1 or v2, got {other:?}")),
        }
    }
}

/// Limits applied to a run's leaf cgroup. `None` means unlimited.
///
/// Swap is always disabled where the kernel allows it (v2 `memory.swap.max=0`; v1
/// `memory.memsw.limit_in_bytes` equal to the memory limit, plus `memory.swappiness=0`), so a
/// memory limit cannot be dodged by swapping out.
#[derive(Debug, Clone, Default)]
pub struct Limits {
    /// Memory limit in bytes (the kernel rounds it down to whole pages).
    pub memory_bytes: Option<u64>,
    /// Maximum number of tasks (processes and threads) in the cgroup.
    pub pids: Option<u64>,
}

/// What a run consumed, read from the leaf after (or while) it ran: by [`Cgroup::usage`] over the
/// cgroup's whole life, by [`Cgroup::usage_since`] since a [`Baseline`].
#[derive(Debug, Clone, Default)]
pub struct Usage {
    /// Total CPU (user+sys) of every process that was in the cgroup, exited ones included.
    pub cpu_time: Duration,
    /// v1 `memory.max_usage_in_bytes`; v2 `memory.peak` (falls back to `memory.current` on
    /// kernels before 5.19, which is then only a lower bound). Includes page cache and whatever
    /// long-lived processes in the cgroup use (see [`Baseline::resident_bytes`]).
    pub memory_peak_bytes: u64,
    /// The kernel OOM killer killed something in the cgroup.
    pub oom_killed: bool,
    /// Memory usage hit the limit at least once (reclaim may have coped without an OOM kill).
    /// v2: `memory.events` max > 0. v1: `memory.failcnt` (or `memory.memsw.failcnt`) > 0, an
    /// OOM kill, or a recorded peak within 2 MiB of the limit — the last because kernels with
    /// memsw limits may count no failures at all (seen on 6.18).
    pub memory_limit_hit: bool,
    /// `pids.peak` where the kernel has it (v2, and v1 on recent kernels such as 6.18), else
    /// `None`. Always the cgroup's lifetime maximum: the kernel offers no way to reset it, so
    /// [`Cgroup::usage_since`] reports the same lifetime value.
    pub pids_peak: Option<u64>,
    /// A fork/clone failed because of `pids.max`.
    pub pids_limit_hit: bool,
}

/// The start of one run inside a long-lived cgroup, from [`Cgroup::begin_run`]; pass it to
/// [`Cgroup::usage_since`] and [`Cgroup::cpu_time_since`] to learn what that run used.
///
/// Holds the counters that cannot be reset (snapshotted) and, on v2 with Linux 6.12+, an open
/// `memory.peak` whose peak was reset for this fd only (closed when the baseline is dropped).
/// Only meaningful for the cgroup that returned it.
#[derive(Debug)]
pub struct Baseline {
    /// Memory already charged to the cgroup when the run began (v1 `memory.usage_in_bytes`, v2
    /// `memory.current`): the long-lived processes plus page cache left behind by earlier runs.
    /// A run's `memory_peak_bytes` includes it; subtract it for what the run added on top.
    pub resident_bytes: u64,
    /// `usage_since(..).memory_peak_bytes` is the cgroup's lifetime peak, not this run's: v2
    /// kernels before 6.12 cannot reset `memory.peak` (and before 5.19 it is `memory.current`).
    /// Always false on v1, where `memory.max_usage_in_bytes` is reset.
    pub peak_is_lifetime: bool,
    /// The cgroup directory it belongs to (v1: the memory one), to catch mix-ups in debug builds.
    pub(crate) dir: PathBuf,
    /// CPU counter at the start (v1: right after resetting it, so normally ~0).
    pub(crate) cpu: Duration,
    /// OOM kill counter (v1 `memory.oom_control` oom_kill, v2 `memory.events` oom_kill).
    pub(crate) oom_kills: u64,
    /// `pids.events` max.
    pub(crate) pids_max_events: u64,
    pub(crate) memory: MemoryBaseline,
}

#[derive(Debug)]
pub(crate) enum MemoryBaseline {
    V1 {
        /// `memory.failcnt` right after resetting it.
        failcnt: u64,
        /// `memory.memsw.failcnt` right after resetting it (0 without swap accounting).
        memsw_failcnt: u64,
    },
    V2 {
        /// `memory.events` max.
        max_events: u64,
        /// `memory.peak` opened read-write with its fd-local peak reset, if the kernel could.
        peak: Option<std::fs::File>,
    },
}

/// Creates per-run cgroups under corral's base cgroup. Obtained from [`detect()`](crate::detect()).
pub trait Manager: Send + Sync {
    /// The interface in use.
    fn version(&self) -> Version;
    /// Creates a fresh leaf cgroup named `name` (unique, `[A-Za-z0-9_-]`) under corral's base,
    /// applies the limits, returns it. Fails with [`Error::Exists`] if the leaf already exists.
    fn create(&self, name: &str, limits: &Limits) -> Result<Box<dyn Cgroup>, Error>;
    /// Human-readable facts for `corral doctor`: base path(s), controllers available.
    fn describe(&self) -> Vec<(String, String)>;
    /// corral's base directory in every hierarchy in use (where [`create`](Manager::create) makes
    /// its cgroups), for sweeping what a killed process left behind.
    fn base_dirs(&self) -> Vec<PathBuf>;
}

/// One run's leaf cgroup (one directory per hierarchy on v1).
///
/// Dropping it without calling [`destroy`](Cgroup::destroy) destroys it on a best-effort basis
/// (only in the process that created it, so a forked child can never tear it down).
pub trait Cgroup: Send {
    /// One open (O_WRONLY|O_CLOEXEC) fd per hierarchy (v2: one; v1: memory, pids, cpuacct —
    /// fewer if some are co-mounted) to the file a **single-threaded** process joins the cgroup
    /// with by writing `b"0"` to each — done by the sandboxed child itself right after fork, so
    /// the fds must be usable without any path lookups (the child is already inside another
    /// mount namespace). The kernel checks permissions against the opener's credentials, so the
    /// fds keep working after the child drops privileges.
    ///
    /// v2: `cgroup.procs`. v1: `tasks`, which moves the writing thread — the whole process when
    /// it has one thread, as every joiner here has (a forked child, the sandbox's init) — without
    /// the kernel's global threadgroup lock: a `cgroup.procs` write takes that lock, whose writer
    /// side waits for an RCU grace period (10–55 ms on a loaded 6.18 host in about one join of
    /// four; `tasks` with `"0"`: under 0.1 ms, measured in the same run).
    fn procs_files(&self) -> Result<Vec<OwnedFd>, Error>;
    /// v2: the cgroup's directory, opened `O_PATH` and close-on-exec, for
    /// `clone3(CLONE_INTO_CGROUP)`: a process forked with it starts inside the cgroup, so
    /// nothing joins — and nothing takes the threadgroup lock whose writer side waits for an RCU
    /// grace period, as a `cgroup.procs` write does (v2 has no `tasks` to go around it). The
    /// kernel checks the forking process's credentials. v1: `None` (the flag only places a
    /// process in the unified hierarchy; v1's `tasks` joins are cheap already).
    fn fork_target(&self) -> Result<Option<OwnedFd>, Error>;
    /// CPU time used so far (cheap: one read; the supervisor calls it on its CPU-limit timer).
    /// On v1, since the last [`begin_run`](Cgroup::begin_run), which resets the counter.
    fn cpu_time(&self) -> Result<Duration, Error>;
    /// Everything in [`Usage`]; several reads.
    fn usage(&self) -> Result<Usage, Error>;
    /// Pids currently in the cgroup (all hierarchies and any sub-cgroups, deduplicated, sorted),
    /// as seen from the caller's pid namespace.
    fn pids(&self) -> Result<Vec<i32>, Error>;
    /// SIGKILLs everything in it and waits (bounded) until `cgroup.procs` is empty. v2 uses
    /// `cgroup.kill` when present, which also catches tasks forked during the kill; otherwise a
    /// read-and-kill loop.
    fn kill_all(&self) -> Result<(), Error>;
    /// `kill_all`, then rmdir every directory (retrying EBUSY a few ms at a time, up to ~1 s).
    /// Leaves nothing behind.
    fn destroy(self: Box<Self>) -> Result<(), Error>;
    /// The leaf directories (one per distinct hierarchy).
    fn paths(&self) -> Vec<PathBuf>;

    /// Changes the memory and pids limits of a live cgroup (e.g. between two runs of a
    /// long-lived sandbox). `None` means unlimited, as in [`Manager::create`].
    ///
    /// v1 keeps `memory.memsw.limit_in_bytes` equal to the memory limit, writing memsw first when
    /// the limit grows and memory first when it shrinks (the kernel requires memsw >= memory at
    /// every step); if the second write fails the first is undone. A memory limit below what the
    /// cgroup uses and the kernel cannot reclaim is refused with
    /// [`Error::MemoryLimitBelowUsage`] and leaves the old limits in place: v1 answers EBUSY;
    /// v2 would reclaim and then OOM-kill, so when `memory.current` is above the new limit
    /// corral first asks `memory.reclaim` (5.19+) for the difference and refuses if the kernel
    /// cannot free it. Kernels without `memory.reclaim` get the plain write (which may OOM-kill).
    /// Lowering `pids.max` below the current count is allowed; it only stops further forks.
    fn set_limits(&self, limits: &Limits) -> Result<(), Error>;
    /// Marks the start of a run in a long-lived cgroup: resets what the kernel can reset and
    /// snapshots the rest, for [`usage_since`](Cgroup::usage_since).
    ///
    /// v1 resets `memory.max_usage_in_bytes`, `memory.failcnt` (and their memsw twins) and
    /// `cpuacct.usage` (so [`cpu_time`](Cgroup::cpu_time) and [`usage`](Cgroup::usage) count
    /// from here afterwards, except oom_kill and pids events). v2 opens `memory.peak` and resets
    /// the peak for that fd only (6.12+; otherwise [`Baseline::peak_is_lifetime`]). Snapshots:
    /// CPU, OOM kills, `pids.events` max, v2 `memory.events` max and the current memory usage
    /// ([`Baseline::resident_bytes`]).
    fn begin_run(&self) -> Result<Baseline, Error>;
    /// What happened since `baseline` was taken: CPU since then; the memory peak since then
    /// (v1 `memory.max_usage_in_bytes` after its reset; v2 the fd-local `memory.peak`, or the
    /// lifetime peak when [`Baseline::peak_is_lifetime`]); `oom_killed`, `memory_limit_hit`
    /// and `pids_limit_hit` when their counters grew (v1 also counts a peak within 2 MiB of the
    /// limit as a hit, see [`Usage::memory_limit_hit`]); `pids_peak` is the lifetime value.
    fn usage_since(&self, baseline: &Baseline) -> Result<Usage, Error>;
    /// CPU time since `baseline` (cheap: one read; for the supervisor's CPU-limit timer).
    fn cpu_time_since(&self, baseline: &Baseline) -> Result<Duration, Error>;
    /// Memory currently charged to the cgroup (v1 `memory.usage_in_bytes`, v2
    /// `memory.current`), page cache included.
    fn memory_current(&self) -> Result<u64, Error>;
    /// Number of tasks (processes and threads) currently in the cgroup (`pids.current`).
    fn pids_current(&self) -> Result<u64, Error>;
}
