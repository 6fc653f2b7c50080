//! The fixed folders a grader contract expects (`/autograder`, `/grade`), made of symlinks into
//! the sandbox's working directory.
//!
//! A grader writes to `/autograder/results/` or `/grade/results/`, and the sandbox's only
//! writable, size-limited folders are its working directory, `/tmp` and `/dev/shm`. So the
//! contract's folder is a read-only mount of a host folder holding only symlinks whose absolute
//! targets (`/home/sandbox/results`, …) resolve *inside* the sandbox, to folders corral copied
//! into its working directory. The host never follows them: it reads the results through the
//! working directory's descriptor without following links. The grader cannot add entries to the
//! contract's folder itself (it is read-only); everything under the links is writable.

use std::path::Path;
use std::sync::{Arc, Mutex, Weak};

/// Layout folders shared while in use (so pooled sandboxes of that shape are reused), removed
/// when the last user is done.
static FOLDERS: Mutex<Vec<(String, Weak<tempfile::TempDir>)>> = Mutex::new(Vec::new());

/// A host folder of symlinks `name -> target` (targets are paths inside the sandbox).
pub fn layout_folder(links: &[(&str, &str)]) -> std::io::Result<Arc<tempfile::TempDir>> {
    use std::os::unix::fs::PermissionsExt;
    let key = links
        .iter()
        .map(|(n, t)| format!("{n}\0{t}"))
        .collect::<Vec<_>>()
        .join("\0\0");
    let mut folders = FOLDERS.lock().unwrap_or_else(|e| e.into_inner());
    folders.retain(|(_, w)| w.strong_count() > 0);
    if let Some(t) = folders
        .iter()
        .find(|(k, _)| *k == key)
        .and_then(|(_, w)| w.upgrade())
    {
        return Ok(t);
    }
    let t = tempfile::Builder::new()
        .prefix("corral-layout-")
        .tempdir()?;
    std::fs::set_permissions(t.path(), std::fs::Permissions::from_mode(0o755))?;
    for (name, target) in links {
        std::os::unix::fs::symlink(Path::new(target), t.path().join(name))?;
    }
    let t = Arc::new(t);
    folders.push((key, Arc::downgrade(&t)));
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_folder_per_layout_while_in_use() {
        let a = layout_folder(&[("results", "/home/sandbox/results")]).unwrap();
        let b = layout_folder(&[("results", "/home/sandbox/results")]).unwrap();
        assert_eq!(a.path(), b.path());
        assert_eq!(
            std::fs::read_link(a.path().join("results")).unwrap(),
            Path::new("/home/sandbox/results")
        );
        let c = layout_folder(&[("student", "/home/sandbox/student")]).unwrap();
        assert_ne!(a.path(), c.path());
        let p = a.path().to_path_buf();
        drop((a, b));
        assert!(!p.exists());
    }
}
