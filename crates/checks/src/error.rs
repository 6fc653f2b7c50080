//! Typed errors of the checks library.

use std::path::PathBuf;

/// A suite file that cannot be used. The message names the file, and where known the line and key.
#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    /// The file cannot be read, does not parse, or means something impossible (an unknown
    /// dependency, a cycle, a bad regex, …): located at the key it is about.
    #[error(transparent)]
    File(#[from] corral_images::document::DocumentError),
}

impl SuiteError {
    /// The same error naming the suite file relative to `folder`, the suite's own folder (see
    /// `DocumentError::relative_to`).
    pub fn relative_to(self, folder: &std::path::Path) -> Self {
        match self {
            SuiteError::File(e) => SuiteError::File(e.relative_to(folder)),
        }
    }
}

/// A language registry file that cannot be used, or a language that cannot be found.
#[derive(Debug, thiserror::Error)]
pub enum LanguageError {
    #[error("{}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{origin}: {message}")]
    Parse { origin: String, message: String },
    #[error("{origin}: language {id:?}: {message}")]
    Invalid {
        origin: String,
        id: String,
        message: String,
    },
    #[error("unknown language {0:?} (see `corral languages`)")]
    Unknown(String),
}

/// Grading could not proceed (as opposed to a check that failed).
#[derive(Debug, thiserror::Error)]
pub enum GradeError {
    #[error("submission {}: {why}", path.display())]
    Submission { path: PathBuf, why: String },
    #[error("language {id:?} needed by check {check:?} is unavailable on this host: {why}")]
    LanguageUnavailable {
        id: String,
        check: String,
        why: String,
    },
    #[error("check {check:?}: {why}")]
    ImageUnavailable { check: String, why: String },
    #[error("check {check:?} runs {{compile}} but language {id:?} has no compile command")]
    NoCompile { id: String, check: String },
    #[error(transparent)]
    Language(#[from] LanguageError),
    #[error("invalid limits for check {check:?}: {source}")]
    Limits {
        check: String,
        #[source]
        source: corral_sandbox::SpecError,
    },
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
}
