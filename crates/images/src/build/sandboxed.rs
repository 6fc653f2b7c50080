//! The build sandbox: corral's own sandbox in build mode (the same isolation as every run; the
//! program is root of a user namespace of its own, with network, over the image's layers) — the
//! [`StepRunner`] `corral env build` uses.
//!
//! The step's upper folder lives on a tmpfs of exactly the step's `disk` limit, mounted here
//! before the sandbox starts and unmounted when its changes have become a layer: a step that
//! fills it gets `ENOSPC`, and the verdict says the disk limit was reached. (tmpfs pages are
//! charged to the step's memory cgroup too; the default memory limit is above the disk's.)

use std::path::{Path, PathBuf};
use std::sync::Arc;

use corral_sandbox::{run_fresh, Host, ImageRoot, OutputSink, Root, RootClaim, RunSpec, Status};
use nix::mount::{mount, umount2, MntFlags, MsFlags};

use super::runner::{Changes, RunRequest, StepOutcome, StepRunner};
use crate::changes::IdMap;

/// Runs each step in a fresh build-mode sandbox of `host`.
pub struct SandboxRunner {
    host: Arc<Host>,
}

impl SandboxRunner {
    pub fn new(host: Arc<Host>) -> SandboxRunner {
        SandboxRunner { host }
    }
}

/// A tmpfs mounted for one step; unmounted (lazily: nothing may hold it) when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, bytes: u64) -> Result<Tmpfs, String> {
        std::fs::create_dir(at).map_err(|e| format!("{}: {e}", at.display()))?;
        mount(
            Some("corral-build"),
            at,
            Some("tmpfs"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            Some(format!("size={bytes},mode=0755,huge=never").as_str()),
        )
        .map_err(|e| format!("cannot mount the step's tmpfs at {}: {e}", at.display()))?;
        Ok(Tmpfs(at.to_path_buf()))
    }

    /// Whether (almost) nothing is left: the step ran into its disk limit.
    fn full(&self) -> bool {
        nix::sys::statvfs::statvfs(&self.0).is_ok_and(|s| s.blocks_available() * 64 < s.blocks())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        if let Err(e) = umount2(&self.0, MntFlags::MNT_DETACH) {
            tracing::warn!(path = %self.0.display(), error = %e, "cannot unmount a build step's tmpfs");
        }
    }
}

/// Passes the step's output on as it comes.
struct Forward<'a>(&'a mut dyn FnMut(&[u8]));

impl OutputSink for Forward<'_> {
    fn stdout(&mut self, data: &[u8]) {
        (self.0)(data)
    }
    fn stderr(&mut self, data: &[u8]) {
        (self.0)(data)
    }
}

impl StepRunner for SandboxRunner {
    fn run(
        &mut self,
        req: RunRequest<'_>,
        output: &mut dyn FnMut(&[u8]),
    ) -> Result<StepOutcome, String> {
        let disk = Tmpfs::mount(&req.scratch.join("disk"), req.limits.disk.bytes())?;
        let upper = disk.0.join("upper");
        std::fs::create_dir(&upper).map_err(|e| format!("{}: {e}", upper.display()))?;
        let mut spec = RunSpec::new(req.argv);
        spec.limits = req.limits.clone();
        spec.network = true;
        spec.root = Root::Image(ImageRoot {
            name: req.image,
            digest: req.parent.to_string(),
            layers: req.lower_dirs,
            env: req
                .env
                .iter()
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            working_dir: req.working_dir,
            upper: Some(upper.clone()),
            as_root: false,
            // The build holds the store's writer lock throughout: no gc runs under it.
            claim: RootClaim::default(),
        });
        let outcome = run_fresh(&self.host, &spec, &mut Forward(output));
        let verdict = match outcome.status {
            Status::Ok => {
                return Ok(StepOutcome::Succeeded(Changes {
                    upper,
                    // The sandbox writes through an idmapped upper: the image's own ids on disk.
                    ids: IdMap::IDENTITY,
                    keep: Box::new(disk),
                }));
            }
            Status::SandboxError => return Err(outcome.reason().unwrap_or_default()),
            Status::NonzeroExit => format!("exit status {}", outcome.shell_code()),
            Status::Signaled => format!(
                "killed by signal {}",
                outcome.signal.map_or("?".into(), |s| s.to_string())
            ),
            _ => outcome
                .reason()
                .unwrap_or_else(|| outcome.status.as_str().into()),
        };
        Ok(StepOutcome::Failed(if disk.full() {
            format!(
                "{verdict}; its disk limit of {} is full (what a step writes into the image; raise `limits: {{disk: …}}`)",
                req.limits.disk
            )
        } else {
            verdict
        }))
    }
}
