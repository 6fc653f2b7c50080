//! What a build asks of a build sandbox: one `run` step over the image so far, its changes back.
//! The sandbox's own runner is [`super::sandboxed`]; tests bring their own.

use std::path::{Path, PathBuf};

use corral_sandbox::Limits;

use crate::changes::IdMap;
use crate::digest::Digest;

/// What a build sandbox is asked to run: one `run` step over the image so far.
pub struct RunRequest<'a> {
    pub step: usize,
    pub total: usize,
    /// What the image so far is called in results (`BASE, build step N`) and its state's key.
    pub image: String,
    pub parent: Digest,
    pub argv: Vec<String>,
    /// The image's layer folders, top first (overlayfs `lowerdir` order), read-only.
    pub lower_dirs: Vec<PathBuf>,
    /// The image's Env (`K=V`) and WorkingDir as they stand before this step.
    pub env: Vec<String>,
    pub working_dir: Option<String>,
    pub limits: Limits,
    /// An empty folder on the store's filesystem for the runner's upper and work folders.
    pub scratch: &'a Path,
}

/// A step the sandbox ran to its end.
pub enum StepOutcome {
    /// Exit status 0: its changes, to become a layer.
    Succeeded(Changes),
    /// Anything else: the verdict in words (`exit status 2`, `wall time limit (30m)`, …).
    Failed(String),
}

/// The changes a step made: an overlayfs upper folder, readable until this value is dropped.
pub struct Changes {
    pub upper: PathBuf,
    /// How the owners on disk map to the image's.
    pub ids: IdMap,
    /// Whatever keeps the folder available (a mount, a temporary folder), released on drop.
    pub keep: Box<dyn Send>,
}

/// Runs `run` steps in build sandboxes. `output` receives the step's stdout and stderr as they come.
pub trait StepRunner {
    fn run(
        &mut self,
        request: RunRequest<'_>,
        output: &mut dyn FnMut(&[u8]),
    ) -> Result<StepOutcome, String>;
}
