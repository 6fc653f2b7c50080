//! The one trait every check kind implements, and the context a check runs in.
//!
//! A kind is its model (a [`crate::suite::CheckKind`] variant, parsed and validated with the
//! suite) and its runner: a module of [`crate::kinds`] implementing [`CheckRunner`] for that
//! model. The engine decides when a check runs and in which staged working directory; the runner
//! decides what runs in the sandbox and turns it into rows.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use corral_sandbox::{Lease, Mount, Pool, Root, SandboxConfig};

use crate::report::{CheckResult, IntegrityFlag};
use crate::shared::host_folders::HostFolder;
use crate::shared::settings::RunSettings;
use crate::suite::{Check, Suite};

/// Everything one run of one check gets from the engine.
pub struct CheckContext<'a> {
    pub pool: &'a Arc<Pool>,
    pub suite: &'a Suite,
    pub check: &'a Check,
    /// The check's resolved language, limits, mounts, environment and timeout.
    pub settings: &'a RunSettings,
    /// The host folder the check's working directory starts as a copy of (the submission with
    /// the assignment's files, or what its dependencies left).
    pub stage: &'a Path,
    /// Where the working directory goes when the check passes: dependents start from it.
    pub output: Option<&'a Path>,
    /// The image store, for kinds that name a base image (see [`crate::engine::GradeOptions`]).
    pub images: Option<&'a corral_images::Store>,
    /// References pinned to digests (a queued job's): a grader's image resolves through them,
    /// so every worker grades in the digest the server pinned.
    pub pins: &'a std::collections::BTreeMap<String, String>,
    /// The grading's cancel: every run in the check's sandboxes is killed when it is requested.
    pub cancel: Option<&'a Arc<corral_sandbox::Cancel>>,
    /// When and by whom the submission was made, as far as the caller knows.
    pub submitted: &'a crate::shared::submitted::Submitted,
}

impl CheckContext<'_> {
    /// `reference` resolved in the image store, through the pins.
    pub fn resolve_image(&self, reference: &str) -> Result<corral_sandbox::ImageRoot, String> {
        let store = self
            .images
            .ok_or_else(|| "no image store was given (corral check --data DIR)".to_string())?;
        crate::image_root::resolve(store, &crate::image_root::pinned(reference, self.pins))
            .map_err(|e| format!("{e} (add it with `corral env pull` or `corral env import`)"))
    }
}

impl CheckContext<'_> {
    /// A pooled sandbox for the check: offline, in the check's root (host or image), the
    /// language's mounts plus `extra` (read-only assignment files), the check's disk limit, its working directory a copy of the stage.
    /// Errors are the row's message.
    pub fn lease(&self, extra: Option<Mount>) -> Result<Lease, String> {
        self.lease_with(extra, self.stage, self.settings.root.clone(), None)
    }

    /// [`CheckContext::lease`] with the working directory a copy of `dir` instead of the stage
    /// (a kind that lays the stage out its own way), in `root`, and also at `workdir_alias`
    /// when given (see `SandboxConfig::workdir_alias`).
    pub fn lease_with(
        &self,
        extra: Option<Mount>,
        dir: &Path,
        root: Root,
        workdir_alias: Option<PathBuf>,
    ) -> Result<Lease, String> {
        let mut mounts = self.settings.mounts.clone();
        mounts.extend(extra);
        let shape = SandboxConfig {
            root,
            runtime: self.settings.runtime,
            workdir_alias,
            ..SandboxConfig::offline(mounts, self.settings.limits.disk.bytes())
        };
        let mut lease = self
            .pool
            .lease(&shape)
            .map_err(|e| format!("sandbox error: {e}"))?;
        lease.sandbox().cancel_runs_on(self.cancel.cloned());
        tracing::trace!(
            sandbox = lease.sandbox().id(),
            "leased a sandbox for the check"
        );
        lease.sandbox().copy_in(dir).map_err(|e| match e {
            // The files' fault, said by the name among them and the limit (never the host
            // path of the staging folder, which a server's caller must not see).
            corral_sandbox::SandboxError::NoSpace { path } => {
                let name = path
                    .strip_prefix(dir)
                    .ok()
                    .or_else(|| path.file_name().map(Path::new))
                    .map(|p| p.display().to_string())
                    .unwrap_or_default();
                format!(
                    "the files do not fit the check's disk limit ({}): {name:?} did not fit (submit only the assignment's files; staff may raise the suite's `limits: {{disk: …}}`)",
                    self.settings.limits.disk
                )
            }
            e => format!("copying files into the sandbox: {e}"),
        })?;
        Ok(lease)
    }
}

/// How a check kind runs.
pub trait CheckRunner {
    /// Runs the check: its row (a kind with a rubric puts one row per item in `children`) and,
    /// when it passed and [`CheckContext::output`] is given, that folder with its working
    /// directory. Never fails: what went wrong is the row's message (and `error` when corral
    /// itself failed).
    fn run(&self, cx: &CheckContext<'_>) -> (CheckResult, Option<PathBuf>);

    /// Host folders the kind mounts for this suite. Holding them across submissions keeps the
    /// same folders, and so the same pooled sandboxes, for a whole batch.
    fn mounted_folders(&self, _suite: &Suite) -> std::io::Result<Vec<Arc<HostFolder>>> {
        Ok(Vec::new())
    }

    /// Files of the kind the submission has in another version than the assignment's.
    fn integrity_flags(&self, _suite: &Suite, _submission: &Path) -> Vec<IntegrityFlag> {
        Vec::new()
    }
}
