//! Paths of a suite: relative paths inside the working directory and files of the assignment
//! folder.

use std::path::{Component, Path, PathBuf};

/// A relative path with only normal components (no `/` at the start, no `..`, no `.`), of the
/// working directory.
pub fn relative(p: &str) -> Result<&Path, &'static str> {
    relative_in(p, Base::WorkingDir)
}

/// What a suite's relative path is taken from: said when it is not relative.
#[derive(Clone, Copy)]
pub enum Base {
    WorkingDir,
    /// The assignment folder: the suite file's folder.
    Assignment,
}

/// [`relative`], its errors naming `base`.
pub fn relative_in(p: &str, base: Base) -> Result<&Path, &'static str> {
    let path = Path::new(p);
    if p.is_empty() {
        return Err("is empty");
    }
    if path.is_absolute() {
        return Err(match base {
            Base::WorkingDir => "must be relative to the working directory",
            Base::Assignment => {
                "must be relative to the assignment folder (the suite file's folder): copy or \
                 move it there"
            }
        });
    }
    if path
        .components()
        .any(|c| !matches!(c, Component::Normal(_)))
    {
        return Err(match base {
            Base::WorkingDir => "may not contain '..' or '.'",
            Base::Assignment => {
                "may not contain '..' or '.': name a folder inside the assignment folder (the \
                 suite file's folder)"
            }
        });
    }
    Ok(path)
}

/// A path of the assignment folder `dir` named under `key` in the suite: relative and present.
/// Errors are `key: message`.
pub fn assignment_path(dir: &Path, key: &str, p: &str) -> Result<(), String> {
    relative_in(p, Base::Assignment).map_err(|why| format!("{key}: {p:?} {why}"))?;
    if std::fs::symlink_metadata(dir.join(p)).is_err() {
        // The folder is not named: a server's is a temporary folder of its own (the suite's
        // registered files), and the error's file name already says where the suite is.
        return Err(format!(
            "{key}: {p:?} is not in the assignment folder (the suite file's folder and the \
             files registered with it)"
        ));
    }
    Ok(())
}

/// `path` (relative, `..` allowed) taken from the folder `from`, both assignment paths: the
/// assignment path it names, or `None` when it is absolute or leaves the assignment folder.
/// Lexical: a link on the way is not followed (callers refuse links where it matters).
pub fn within(from: &Path, path: &str) -> Option<PathBuf> {
    let mut out = from.to_path_buf();
    for c in Path::new(path).components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    (!out.as_os_str().is_empty()).then_some(out)
}

/// The path with its components normalized (`a//b` is `a/b`), to compare assignment paths.
pub fn normalize_rel(p: &str) -> PathBuf {
    Path::new(p).components().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn within_resolves_dots_and_refuses_to_leave_the_folder() {
        let from = Path::new("mario/more");
        assert_eq!(within(from, "../less"), Some(PathBuf::from("mario/less")));
        assert_eq!(
            within(from, "./x/../y"),
            Some(PathBuf::from("mario/more/y"))
        );
        assert_eq!(within(from, "../.."), None);
        assert_eq!(within(from, "../../../etc"), None);
        assert_eq!(within(from, "/etc"), None);
    }
}
