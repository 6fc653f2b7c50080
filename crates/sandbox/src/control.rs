//! `Control`: the supervisor's handle on one sandbox's init — its socket, its working directory,
//! and the cgroup that accounts for its runs. [`crate::Sandbox`] owns one; an
//! [`crate::Execution`] borrows it for the length of a run and can do nothing else to the sandbox.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Duration;

use crate::cpu_clock::TreeClock;
use crate::error::SandboxError;
use crate::protocol::{self, Event, Request};

pub(crate) struct Control {
    ctl: OwnedFd,
    /// The working directory (`O_PATH`), replaced by every reset.
    workdir: OwnedFd,
    cgroup: Option<Box<dyn corral_cgroups::Cgroup>>,
    /// The cgroup's counters when the current run started.
    baseline: Option<corral_cgroups::Baseline>,
    /// The exact CPU clock of the sandbox's process tree, where the host allows one, and its
    /// reading when the current run started: the limit checks read it, not the cgroup's counter
    /// alone, which lags a running program by up to a scheduler tick.
    clock: Option<(TreeClock, Duration)>,
    /// Runs started since the sandbox was built.
    runs: u64,
    /// Set when something went wrong; a broken sandbox is never reused.
    broken: bool,
    /// The kernel cannot reset this cgroup's memory peak (cgroup v2 before Linux 6.12) and a run
    /// raised it by more than [`LIFETIME_PEAK_SLACK`]: a later run would be charged that peak.
    peak_spent: bool,
    /// The init is gone (killed with the run, see [`Control::init_died_of_oom`]): the sandbox
    /// stays broken whatever the run's end looked like.
    dead: bool,
    /// The init's own tasks in the cgroup (its threads, as its last `Ready` said): the pids limit
    /// leaves room for them, and a run's peak does not count them beyond the first.
    init_tasks: u64,
}

/// How far a run may raise a lifetime-only memory peak before the sandbox is retired instead of
/// reused: a later run's reported peak is then at most this much above what it really used.
const LIFETIME_PEAK_SLACK: u64 = 32 << 20;

impl Control {
    /// A sandbox being built: broken until its init says it is ready.
    pub(crate) fn new(
        ctl: OwnedFd,
        workdir: OwnedFd,
        cgroup: Box<dyn corral_cgroups::Cgroup>,
    ) -> Self {
        Control {
            ctl,
            workdir,
            cgroup: Some(cgroup),
            baseline: None,
            clock: None,
            runs: 0,
            broken: true,
            peak_spent: false,
            dead: false,
            init_tasks: 1,
        }
    }

    /// How many tasks the init holds in the cgroup now (from its `Ready`).
    pub(crate) fn set_init_tasks(&mut self, tasks: u64) {
        self.init_tasks = tasks.max(1);
    }

    /// Follows the sandbox's CPU time with `clock` (opened before PID 1 existed).
    pub(crate) fn set_clock(&mut self, clock: TreeClock) {
        self.clock = Some((clock, Duration::ZERO));
    }

    pub(crate) fn set_workdir(&mut self, workdir: OwnedFd) {
        self.workdir = workdir;
    }

    pub(crate) fn runs(&self) -> u64 {
        self.runs
    }

    pub(crate) fn is_broken(&self) -> bool {
        self.broken
    }

    /// Whether the memory peak, which this kernel cannot reset, is too high for another run.
    pub(crate) fn peak_spent(&self) -> bool {
        self.peak_spent
    }

    pub(crate) fn set_broken(&mut self, broken: bool) {
        self.broken = broken;
    }

    /// Limits the cgroup for the next run and starts counting its usage. The sandbox's PID 1 lives
    /// in the cgroup too: the limits leave room for exactly what it already holds (one process,
    /// its threads, its resident memory), and usage is counted from here.
    pub(crate) fn account_new_run(
        &mut self,
        memory_bytes: u64,
        pids: u64,
    ) -> Result<(), SandboxError> {
        let cg = self
            .cgroup
            .as_ref()
            .ok_or_else(|| SandboxError::Init("no cgroup".into()))?;
        let baseline = cg.begin_run()?;
        cg.set_limits(&corral_cgroups::Limits {
            memory_bytes: Some(memory_bytes.saturating_add(baseline.resident_bytes)),
            pids: Some(pids.saturating_add(self.init_tasks)),
        })?;
        self.baseline = Some(baseline);
        if let Some((clock, start)) = &mut self.clock {
            *start = clock
                .read()
                .map_err(|e| SandboxError::io("reading the CPU clock", e))?;
        }
        Ok(())
    }

    /// A run is being started: the sandbox counts as broken until it ends cleanly.
    pub(crate) fn count_run(&mut self) {
        self.runs += 1;
        self.broken = true;
    }

    /// Memory charged to the cgroup now: between runs, what the sandbox keeps (files in its
    /// tmpfs mounts, page cache, its init). 0 without a cgroup.
    pub(crate) fn memory_held(&self) -> Result<u64, SandboxError> {
        match self.cgroup.as_deref() {
            Some(cg) => Ok(cg.memory_current()?),
            None => Ok(0),
        }
    }

    /// Removes the cgroup (once every process in it is gone).
    pub(crate) fn destroy_cgroup(&mut self) {
        if let Some(cg) = self.cgroup.take() {
            if let Err(e) = cg.destroy() {
                tracing::warn!(error = %e, "removing the sandbox's cgroup failed; it is left behind");
            }
        }
    }

    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.ctl.as_fd()
    }

    pub(crate) fn workdir(&self) -> BorrowedFd<'_> {
        self.workdir.as_fd()
    }

    pub(crate) fn send(&self, req: &Request) -> Result<(), SandboxError> {
        protocol::send(self.ctl.as_fd(), req, &[])
    }

    pub(crate) fn next_event_with_fds(&self) -> Result<(Event, Vec<OwnedFd>), SandboxError> {
        protocol::recv::<Event>(self.ctl.as_fd())?
            .ok_or_else(|| SandboxError::Init("the sandbox init exited unexpectedly".into()))
    }

    pub(crate) fn next_event(&self) -> Result<Event, SandboxError> {
        self.next_event_with_fds().map(|(e, _)| e)
    }

    /// The run ended cleanly: the sandbox may serve again.
    pub(crate) fn run_finished(&mut self) {
        self.broken = self.dead;
    }

    /// Whether the init that just vanished mid-run was taken by the cgroup's OOM killer. Under
    /// gVisor the killer picks gVisor's kernel (the cgroup's largest process) together with the
    /// program: the run ended by its memory limit, and the sandbox is gone for good.
    pub(crate) fn init_died_of_oom(&mut self) -> bool {
        let oom = self
            .accounting()
            .ok()
            .and_then(|(cg, b)| cg.usage_since(b).ok())
            .is_some_and(|u| u.oom_killed);
        if oom {
            self.dead = true;
        }
        oom
    }

    fn accounting(
        &self,
    ) -> Result<(&dyn corral_cgroups::Cgroup, &corral_cgroups::Baseline), SandboxError> {
        match (self.cgroup.as_deref(), self.baseline.as_ref()) {
            (Some(cg), Some(b)) => Ok((cg, b)),
            _ => Err(SandboxError::Init("no run is being accounted".into())),
        }
    }

    /// CPU time of the current run so far (the whole process tree): the larger of the cgroup's
    /// counter and the exact clock, so a clock that missed anything can only make a check late.
    pub(crate) fn cpu_time(&mut self) -> Result<Duration, SandboxError> {
        let (cg, b) = self.accounting()?;
        let counted = cg.cpu_time_since(b)?;
        let Some((clock, start)) = &mut self.clock else {
            return Ok(counted);
        };
        let now = clock
            .read()
            .map_err(|e| SandboxError::io("reading the CPU clock", e))?;
        Ok(counted.max(now.saturating_sub(*start)))
    }

    /// What the current run used; memory is what it added on top of PID 1's resident share.
    pub(crate) fn run_usage(&mut self) -> Result<corral_cgroups::Usage, SandboxError> {
        let (cg, b) = self.accounting()?;
        let mut u = cg.usage_since(b)?;
        u.memory_peak_bytes = u.memory_peak_bytes.saturating_sub(b.resident_bytes);
        if b.peak_is_lifetime && u.memory_peak_bytes > LIFETIME_PEAK_SLACK {
            self.peak_spent = true;
        }
        // The kernel keeps the pids peak for the cgroup's whole life and cannot reset it: it
        // describes this run only when this is the sandbox's first run. Otherwise it would tell
        // a later user something about an earlier one.
        if self.runs > 1 {
            u.pids_peak = None;
        }
        // The run's own tasks: the init's (its process and threads) are not the program's, and
        // the limit is the run's `pids` on top of them, so the peak is comparable with it.
        u.pids_peak = u.pids_peak.map(|p| p.saturating_sub(self.init_tasks));
        Ok(u)
    }
}
