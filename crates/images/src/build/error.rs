//! What can stop a build: one variant per step of it.

/// A build that did not produce an image. No name was pointed at anything.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The build file cannot be read, does not parse or means something impossible.
    #[error(transparent)]
    File(#[from] crate::document::DocumentError),
    #[error("from {reference}: {source} (pull or import the base image first)")]
    Base {
        reference: String,
        #[source]
        source: crate::error::Error,
    },
    /// A `copy` step whose source cannot be used (outside the folder, missing, a device, …).
    #[error("step {step}/{total} (copy): {message}")]
    Copy {
        step: usize,
        total: usize,
        message: String,
    },
    /// A `run` step's program failed (exit status or a limit's verdict).
    #[error("step {step}/{total} failed: {verdict}")]
    StepFailed {
        step: usize,
        total: usize,
        verdict: String,
    },
    /// The build sandbox could not run the step at all.
    #[error("step {step}/{total}: the build sandbox failed: {message}")]
    Sandbox {
        step: usize,
        total: usize,
        message: String,
    },
    /// The step's changes could not become a layer.
    #[error("step {step}/{total}: its changes cannot become a layer: {source}")]
    Layer {
        step: usize,
        total: usize,
        #[source]
        source: crate::error::Error,
    },
    /// Reading or writing the image store (step cache, blobs, the new image).
    #[error("image store: {0}")]
    Store(#[from] crate::error::Error),
}
