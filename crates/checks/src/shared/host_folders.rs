//! Host folders made for mounting into sandboxes and shared while in use: one per content key in
//! this process (so pooled sandboxes of that shape are reused), removed when the last user drops
//! it.
//!
//! Each lives inside a private (0700) temporary folder of its own: the folder itself must be
//! world-readable (0755), since a sandbox's programs read it as an unprivileged uid, but what it
//! holds — hidden tests, a check50 problem — is no business of the host's other users. A bind
//! mount is looked up once, by the sandbox's privileged init, so the private parent never stands
//! in the programs' way.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use crate::shared::private_temp::private_tempdir;

/// A world-readable folder to mount (`path`), inside a private folder removed with it.
pub struct HostFolder {
    path: PathBuf,
    _parent: tempfile::TempDir,
}

impl HostFolder {
    /// The folder to mount.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// One kind of shared folder (assignment files, contract layouts): the live ones by key.
pub struct SharedFolders {
    prefix: &'static str,
    live: Mutex<Vec<(String, Weak<HostFolder>)>>,
}

impl SharedFolders {
    /// Folders named `PREFIX…` in the temporary folder.
    pub const fn new(prefix: &'static str) -> SharedFolders {
        SharedFolders {
            prefix,
            live: Mutex::new(Vec::new()),
        }
    }

    /// The live folder for `key`, or a new world-readable (0755) one, in a private parent, that
    /// `fill` fills.
    pub fn get_or_make(
        &self,
        key: String,
        fill: impl FnOnce(&Path) -> std::io::Result<()>,
    ) -> std::io::Result<Arc<HostFolder>> {
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        live.retain(|(_, w)| w.strong_count() > 0);
        if let Some(t) = live
            .iter()
            .find(|(k, _)| *k == key)
            .and_then(|(_, w)| w.upgrade())
        {
            return Ok(t);
        }
        let parent = private_tempdir(self.prefix)?;
        let path = parent.path().join("folder");
        std::fs::create_dir(&path)?;
        // Whatever the umask: the sandbox's uid must be able to read it.
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
        fill(&path)?;
        let t = Arc::new(HostFolder {
            path,
            _parent: parent,
        });
        live.push((key, Arc::downgrade(&t)));
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
    }

    /// The folder is readable by anyone who reaches it; its parent lets no other user reach it.
    #[test]
    fn a_shared_folder_is_readable_inside_a_private_parent() {
        static F: SharedFolders = SharedFolders::new("corral-unit-");
        let f = F
            .get_or_make("k".into(), |p| std::fs::write(p.join("t.py"), "x"))
            .unwrap();
        assert_eq!(mode(f.path()), 0o755);
        assert_eq!(mode(f.path().parent().unwrap()), 0o700);
        // The same key shares it; dropping the last user removes the parent too.
        let again = F.get_or_make("k".into(), |_| unreachable!()).unwrap();
        assert_eq!(again.path(), f.path());
        let parent = f.path().parent().unwrap().to_path_buf();
        drop((f, again));
        assert!(!parent.exists());
    }
}
