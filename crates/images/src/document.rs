//! A hand-written JSON or YAML file — an image build file here, a check suite in `corral-checks` —
//! read one way, with errors that name the file and, where the parser knows it, the line.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

/// A file that cannot be used as it is written.
#[derive(Debug, thiserror::Error)]
pub enum DocumentError {
    #[error("{}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file does not parse, has the wrong shape (unknown key, wrong type, …) or means something
    /// impossible at a known place.
    #[error("{}{}: {message}", path.display(), location.map(|(l, c)| format!(":{l}:{c}")).unwrap_or_default())]
    Parse {
        path: PathBuf,
        /// Line and column (1-based) when the parser knows them.
        location: Option<(usize, usize)>,
        message: String,
    },
}

impl DocumentError {
    /// The same error naming its file relative to `folder` (when it is inside): a server names
    /// a suite by its name in the suite's own folder, never by the host folder it was written to.
    pub fn relative_to(self, folder: &Path) -> Self {
        let rel = |path: PathBuf| match path.strip_prefix(folder) {
            Ok(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => path,
        };
        match self {
            DocumentError::Read { path, source } => DocumentError::Read {
                path: rel(path),
                source,
            },
            DocumentError::Parse {
                path,
                location,
                message,
            } => DocumentError::Parse {
                path: rel(path),
                location,
                message,
            },
        }
    }
}

/// The file's text, and whether it is JSON (a `.json` name; anything else is read as YAML).
pub fn read(path: &Path) -> Result<(String, bool), DocumentError> {
    let text = std::fs::read_to_string(path).map_err(|source| DocumentError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let json = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"));
    Ok((text, json))
}

/// Parses YAML text; `path` names it in the error, which carries the location once, in front.
pub fn from_yaml<T: DeserializeOwned>(text: &str, path: &Path) -> Result<T, DocumentError> {
    serde_yaml::from_str(text).map_err(|e| {
        let location = e.location().map(|l| (l.line(), l.column()));
        let mut message = e.to_string();
        if let Some((l, c)) = location {
            let suffix = format!(" at line {l} column {c}");
            if let Some(cut) = message.rfind(&suffix) {
                message.replace_range(cut..cut + suffix.len(), "");
            }
        }
        DocumentError::Parse {
            path: path.to_path_buf(),
            location,
            message,
        }
    })
}

/// The folder the file's relative paths are taken from: its parent, or `.` for a bare name.
pub fn folder(path: &Path) -> PathBuf {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf()
}
