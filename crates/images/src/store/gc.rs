//! Garbage collection (blobs and layers no image references) and disk use.

use std::collections::HashSet;
use std::path::Path;

use super::claim::{self, Exclusive};
use super::model::Store;
use crate::error::Error;
use crate::error::IoContext;

#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct GcReport {
    pub blobs_removed: u64,
    pub layers_removed: u64,
    /// Layers no image names that were kept because a live sandbox is built on them (its
    /// claim, see `claim`); a gc after the sandbox is gone removes them.
    pub layers_in_use: u64,
    /// Blobs of such an image, kept likewise.
    pub blobs_in_use: u64,
    /// Build-cache entries whose layers no image uses any more.
    pub cache_entries_removed: u64,
    pub bytes_freed: u64,
}

#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct DiskUsage {
    pub images: u64,
    pub blobs: u64,
    pub blob_bytes: u64,
    pub layers: u64,
    pub layer_bytes: u64,
    /// Partial downloads and staging.
    pub tmp_bytes: u64,
}

impl Store {
    /// Removes every blob and unpacked layer that no image record references, the build-cache
    /// entries that need one of them, and leftovers of interrupted unpacks. Waits for running
    /// imports, pulls and builds (they hold the writer lock). Keeps, and counts, the layers and
    /// blobs a live sandbox's claim holds (see [`Store::rootfs`]).
    pub fn gc(&self) -> Result<GcReport, Error> {
        let _g = self.gc_lock()?;
        let mut blobs = HashSet::new();
        let mut layers = HashSet::new();
        for r in self.records()? {
            blobs.insert(r.digest.hex().to_string());
            blobs.insert(r.config.hex().to_string());
            if let Some(i) = &r.index {
                blobs.insert(i.hex().to_string());
            }
            for l in &r.layers {
                blobs.insert(l.blob.hex().to_string());
                layers.insert(l.diff_id.hex().to_string());
            }
        }
        let mut report = GcReport {
            cache_entries_removed: self.gc_cache(&layers)?,
            bytes_freed: self.gc_tmp_leftovers()?,
            ..GcReport::default()
        };
        for (sub, keep, count) in [("blobs/sha256", &blobs, 0), ("layers/sha256", &layers, 1)] {
            let dir = self.root.join(sub);
            for e in std::fs::read_dir(&dir).at(&dir)? {
                let e = e.at(&dir)?;
                let name = e.file_name().to_string_lossy().into_owned();
                if keep.contains(&name) {
                    continue;
                }
                let path = e.path();
                // Held while it is deleted; no claim can be taken meanwhile (we hold gc.lock).
                let _lock = match claim::exclusive(&path)? {
                    Exclusive::Free(lock) => lock,
                    Exclusive::Claimed => {
                        if count == 0 {
                            report.blobs_in_use += 1;
                        } else {
                            report.layers_in_use += 1;
                        }
                        continue;
                    }
                };
                if std::fs::symlink_metadata(&path).is_err() {
                    continue; // a `.removing-…` folder removed earlier in this pass
                }
                report.bytes_freed += tree_bytes(&path);
                if e.file_type().at(&path)?.is_dir() {
                    remove_folder(&dir, &name)?;
                } else {
                    std::fs::remove_file(&path).at(&path)?;
                }
                if name.starts_with('.') {
                    continue; // leftovers of an interrupted write: not counted as an object
                }
                if count == 0 {
                    report.blobs_removed += 1;
                } else {
                    report.layers_removed += 1;
                }
            }
        }
        Ok(report)
    }

    /// Removes the scratch folders of builds that were killed and the `.part` files of pulls
    /// that were cut off (a running build or pull holds the writer lock, so under gc's none is
    /// live; a pull run again downloads such a blob afresh), unmounting the tmpfs a build step's
    /// upper folder was on first.
    fn gc_tmp_leftovers(&self) -> Result<u64, Error> {
        let dir = self.tmp_dir();
        let mut freed = 0;
        for e in std::fs::read_dir(&dir).at(&dir)? {
            let e = e.at(&dir)?;
            let name = e.file_name().to_string_lossy().into_owned();
            let path = e.path();
            if name.ends_with(".part") && e.file_type().at(&path)?.is_file() {
                freed += tree_bytes(&path);
                std::fs::remove_file(&path).at(&path)?;
                continue;
            }
            if !name.starts_with("build-") {
                continue;
            }
            // Not mounted (EINVAL) is the usual case; anything else shows in the removal below.
            let _ = nix::mount::umount2(&path.join("disk"), nix::mount::MntFlags::MNT_DETACH);
            freed += tree_bytes(&path);
            remove_tree(&path)?;
        }
        Ok(freed)
    }

    /// Removes the cache entries (and damaged ones) that need a layer not in `kept`.
    fn gc_cache(&self, kept: &HashSet<String>) -> Result<u64, Error> {
        let dir = self.root.join("cache/sha256");
        let mut removed = 0;
        for e in std::fs::read_dir(&dir).at(&dir)? {
            let path = e.at(&dir)?.path();
            let keep = std::fs::read(&path)
                .ok()
                .and_then(|b| serde_json::from_slice::<super::cache::State>(&b).ok())
                .is_some_and(|s| s.layers.iter().all(|l| kept.contains(l.diff_id.hex())));
            if !keep {
                std::fs::remove_file(&path).at(&path)?;
                removed += 1;
            }
        }
        Ok(removed)
    }

    pub fn disk_usage(&self) -> Result<DiskUsage, Error> {
        let mut du = DiskUsage {
            images: self.records()?.len() as u64,
            ..DiskUsage::default()
        };
        for (sub, n, bytes) in [
            ("blobs/sha256", &mut du.blobs, &mut du.blob_bytes),
            ("layers/sha256", &mut du.layers, &mut du.layer_bytes),
        ] {
            let dir = self.root.join(sub);
            for e in std::fs::read_dir(&dir).at(&dir)? {
                let e = e.at(&dir)?;
                if !e.file_name().to_string_lossy().starts_with('.') {
                    *n += 1;
                }
                *bytes += tree_bytes(&e.path());
            }
        }
        du.tmp_bytes = tree_bytes(&self.tmp_dir());
        Ok(du)
    }
}

/// Bytes allocated on disk by `path` and everything beneath it (links not followed; a hardlinked
/// inode counted once).
fn tree_bytes(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut seen = HashSet::new();
    let mut total = 0;
    let mut stack = vec![path.to_path_buf()];
    while let Some(p) = stack.pop() {
        let Ok(m) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if m.nlink() > 1 && !m.is_dir() && !seen.insert((m.dev(), m.ino())) {
            continue;
        }
        total += m.blocks() * 512;
        if m.is_dir() {
            if let Ok(rd) = std::fs::read_dir(&p) {
                stack.extend(rd.flatten().map(|e| e.path()));
            }
        }
    }
    total
}

/// Removes the layer folder `name` of `dir`: renamed to a dot name first, so a removal cut off
/// (gc killed, a file that cannot be deleted) leaves no half-deleted folder under the layer's
/// own name, which an import would take for the unpacked layer. Dot names are leftovers that
/// the next gc removes.
fn remove_folder(dir: &Path, name: &str) -> Result<(), Error> {
    let path = dir.join(name);
    if name.starts_with('.') {
        return remove_tree(&path);
    }
    let doomed = dir.join(format!(".removing-{name}"));
    if std::fs::symlink_metadata(&doomed).is_ok() {
        remove_tree(&doomed)?; // an earlier removal of this layer, cut off
    }
    std::fs::rename(&path, &doomed).at(&path)?;
    remove_tree(&doomed)
}

/// Removes a layer folder (or a build's scratch folder) of the store. Layers may hold read-only
/// folders: root removes them regardless; another user cannot delete inside them, so on
/// "permission denied" every folder under `path` is made writable by its owner and the removal
/// tried again. `remove_dir_all` never follows symlinks, nor does [`make_writable`].
fn remove_tree(path: &Path) -> Result<(), Error> {
    match std::fs::remove_dir_all(path) {
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            make_writable(path)?;
            std::fs::remove_dir_all(path).at(path)
        }
        other => other.at(path),
    }
}

/// Adds `u+rwx` to `path` and every folder beneath it, if `path` is a folder: links (never
/// followed) and files are left alone.
fn make_writable(path: &Path) -> Result<(), Error> {
    use std::os::unix::fs::PermissionsExt;
    let m = std::fs::symlink_metadata(path).at(path)?;
    if !m.is_dir() {
        return Ok(());
    }
    let mode = m.permissions().mode();
    if mode & 0o700 != 0o700 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode | 0o700)).at(path)?;
    }
    for e in std::fs::read_dir(path).at(path)? {
        let e = e.at(path)?;
        if e.file_type().at(path)?.is_dir() {
            make_writable(&e.path())?;
        }
    }
    Ok(())
}
