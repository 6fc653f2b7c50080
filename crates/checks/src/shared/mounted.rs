//! Read-only host folders of assignment files (test files, a check50 problem) that kinds mount
//! into the sandbox, shared while in use.

use std::path::Path;
use std::sync::Arc;

use super::host_folders::{HostFolder, SharedFolders};

/// Host folders holding assignment files to mount, shared by every grading of the same assignment
/// in this process.
static FOLDERS: SharedFolders = SharedFolders::new("corral-tests-");

/// A host folder with these assignment files (paths relative to the assignment folder `dir`),
/// world-readable, owned by the host user; mounted read-only, the sandbox cannot change it.
pub fn mounted_folder(dir: &Path, files: &[&String]) -> std::io::Result<Arc<HostFolder>> {
    use std::os::unix::fs::PermissionsExt;
    let mut contents = Vec::new();
    for f in files {
        contents.push(((*f).clone(), std::fs::read(dir.join(f))?));
    }
    let key = {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        contents.hash(&mut h);
        format!("{}\0{:016x}", dir.display(), h.finish())
    };
    FOLDERS.get_or_make(key, |root| {
        for (rel, bytes) in &contents {
            let to = root.join(rel);
            let mut at = root.to_path_buf();
            for c in Path::new(rel)
                .parent()
                .into_iter()
                .flat_map(|p| p.components())
            {
                at.push(c);
                if !at.is_dir() {
                    std::fs::create_dir(&at)?;
                    std::fs::set_permissions(&at, std::fs::Permissions::from_mode(0o755))?;
                }
            }
            std::fs::write(&to, bytes)?;
            std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o644))?;
        }
        Ok(())
    })
}
