//! Host folders made for mounting into sandboxes and shared while in use: one per content key in
//! this process (so pooled sandboxes of that shape are reused), removed when the last user drops
//! it.

use std::path::Path;
use std::sync::{Arc, Mutex, Weak};

/// One kind of shared folder (assignment files, contract layouts): the live ones by key.
pub struct SharedFolders {
    prefix: &'static str,
    live: Mutex<Vec<(String, Weak<tempfile::TempDir>)>>,
}

impl SharedFolders {
    /// Folders named `PREFIX…` in the temporary folder.
    pub const fn new(prefix: &'static str) -> SharedFolders {
        SharedFolders {
            prefix,
            live: Mutex::new(Vec::new()),
        }
    }

    /// The live folder for `key`, or a new world-readable (0755) one that `fill` fills.
    pub fn get_or_make(
        &self,
        key: String,
        fill: impl FnOnce(&Path) -> std::io::Result<()>,
    ) -> std::io::Result<Arc<tempfile::TempDir>> {
        use std::os::unix::fs::PermissionsExt;
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        live.retain(|(_, w)| w.strong_count() > 0);
        if let Some(t) = live
            .iter()
            .find(|(k, _)| *k == key)
            .and_then(|(_, w)| w.upgrade())
        {
            return Ok(t);
        }
        let t = tempfile::Builder::new().prefix(self.prefix).tempdir()?;
        std::fs::set_permissions(t.path(), std::fs::Permissions::from_mode(0o755))?;
        fill(t.path())?;
        let t = Arc::new(t);
        live.push((key, Arc::downgrade(&t)));
        Ok(t)
    }
}
