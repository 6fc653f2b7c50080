//! The errors of compiling or loading a filter program.

/// Errors of compiling or loading a filter program.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// libseccomp refused something.
    #[error("libseccomp: {context}: {source}")]
    Seccomp {
        /// What was being done.
        context: String,
        /// The library's error.
        #[source]
        source: libseccomp::error::SeccompError,
    },
    /// I/O while exporting the program.
    #[error("exporting the seccomp program: {0}")]
    Io(#[from] std::io::Error),
    /// Bytes that cannot be a filter program.
    #[error("invalid seccomp program: {0}")]
    InvalidProgram(String),
}
