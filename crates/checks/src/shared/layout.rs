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
use std::sync::Arc;

use super::host_folders::{HostFolder, SharedFolders};

/// Layout folders shared while in use.
static FOLDERS: SharedFolders = SharedFolders::new("corral-layout-");

/// A host folder of symlinks `name -> target` (targets are paths inside the sandbox).
pub fn layout_folder(links: &[(&str, &str)]) -> std::io::Result<Arc<HostFolder>> {
    let key = links
        .iter()
        .map(|(n, t)| format!("{n}\0{t}"))
        .collect::<Vec<_>>()
        .join("\0\0");
    FOLDERS.get_or_make(key, |dir| {
        for (name, target) in links {
            std::os::unix::fs::symlink(Path::new(target), dir.join(name))?;
        }
        Ok(())
    })
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
