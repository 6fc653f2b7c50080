//! Paths of a suite: relative paths inside the working directory and files of the assignment
//! folder.

use std::path::{Component, Path, PathBuf};

/// A relative path with only normal components (no `/` at the start, no `..`, no `.`).
pub fn relative(p: &str) -> Result<&Path, &'static str> {
    let path = Path::new(p);
    if p.is_empty() {
        return Err("is empty");
    }
    if path.is_absolute() {
        return Err("must be relative to the working directory");
    }
    if path
        .components()
        .any(|c| !matches!(c, Component::Normal(_)))
    {
        return Err("may not contain '..' or '.'");
    }
    Ok(path)
}

/// A path of the assignment folder `dir` named under `key` in the suite: relative and present.
/// Errors are `key: message`.
pub fn assignment_path(dir: &Path, key: &str, p: &str) -> Result<(), String> {
    relative(p).map_err(|why| format!("{key}: {p:?} {why}"))?;
    if std::fs::symlink_metadata(dir.join(p)).is_err() {
        return Err(format!(
            "{key}: {p:?} is not in the assignment folder {}",
            dir.display()
        ));
    }
    Ok(())
}

/// The path with its components normalized (`a//b` is `a/b`), to compare assignment paths.
pub fn normalize_rel(p: &str) -> PathBuf {
    Path::new(p).components().collect()
}
