//! `Control`: the supervisor's handle on one sandbox's init — its socket, its working directory,
//! and the cgroup that accounts for its runs. [`crate::Sandbox`] owns one; an
//! [`crate::Execution`] borrows it for the length of a run and can do nothing else to the sandbox.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Duration;

use crate::error::SandboxError;
use crate::protocol::{self, Event, Request};

pub(crate) struct Control {
    pub(crate) ctl: OwnedFd,
    /// The working directory (`O_PATH`), replaced by every reset.
    pub(crate) workdir: OwnedFd,
    pub(crate) cgroup: Option<Box<dyn corral_cgroups::Cgroup>>,
    /// The cgroup's counters when the current run started.
    pub(crate) baseline: Option<corral_cgroups::Baseline>,
    /// Runs started since the sandbox was built.
    pub(crate) runs: u64,
    /// Set when something went wrong; a broken sandbox is never reused.
    pub(crate) broken: bool,
}

impl Control {
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
        self.broken = false;
    }

    fn accounting(
        &self,
    ) -> Result<(&dyn corral_cgroups::Cgroup, &corral_cgroups::Baseline), SandboxError> {
        match (self.cgroup.as_deref(), self.baseline.as_ref()) {
            (Some(cg), Some(b)) => Ok((cg, b)),
            _ => Err(SandboxError::Init("no run is being accounted".into())),
        }
    }

    /// CPU time of the current run so far (the whole process tree).
    pub(crate) fn cpu_time(&self) -> Result<Duration, SandboxError> {
        let (cg, b) = self.accounting()?;
        Ok(cg.cpu_time_since(b)?)
    }

    /// What the current run used; memory is what it added on top of PID 1's resident share.
    pub(crate) fn run_usage(&self) -> Result<corral_cgroups::Usage, SandboxError> {
        let (cg, b) = self.accounting()?;
        let mut u = cg.usage_since(b)?;
        u.memory_peak_bytes = u.memory_peak_bytes.saturating_sub(b.resident_bytes);
        // The kernel keeps the pids peak for the cgroup's whole life and cannot reset it: it
        // describes this run only when this is the sandbox's first run. Otherwise it would tell
        // a later user something about an earlier one.
        if self.runs > 1 {
            u.pids_peak = None;
        }
        Ok(u)
    }
}
