//! Whether a folder's files fit a sandbox's working directory (a tmpfs of the disk limit), said
//! before any sandbox is built: by `corral run --dir` and by a `--batch` line's `dir`.

use std::path::PathBuf;

use corral_sandbox::Size;

/// A folder whose files take more than a sandbox's disk limit (its working directory is a tmpfs
/// of that size), found by [`DirTooBig::check`] before any sandbox is built.
pub(crate) struct DirTooBig {
    /// Bytes counted (at least: the walk stops past the limit).
    total: u64,
    /// The largest file seen, relative to the folder, and its size.
    largest: Option<(PathBuf, u64)>,
}

impl DirTooBig {
    /// `Err` when the files of `dir` cannot fit `disk`.
    pub(crate) fn check(dir: &std::path::Path, disk: Size) -> Result<(), DirTooBig> {
        let mut total = 0u64;
        let mut largest: Option<(PathBuf, u64)> = None;
        let mut todo = vec![dir.to_path_buf()];
        while let Some(d) = todo.pop() {
            let Ok(entries) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in entries.flatten() {
                let Ok(meta) = e.path().symlink_metadata() else {
                    continue;
                };
                if meta.is_dir() {
                    todo.push(e.path());
                } else if meta.is_file() {
                    // A tmpfs gives a file whole pages.
                    total = total.saturating_add(meta.len().div_ceil(4096) * 4096);
                    if largest.as_ref().is_none_or(|(_, s)| meta.len() > *s) {
                        let rel = e.path().strip_prefix(dir).map(PathBuf::from);
                        largest = Some((rel.unwrap_or_else(|_| e.path()), meta.len()));
                    }
                }
            }
            if total > disk.bytes() {
                break;
            }
        }
        if total <= disk.bytes() {
            return Ok(());
        }
        Err(DirTooBig { total, largest })
    }

    /// "its files take at least N bytes (F alone M bytes), more than the disk limit (D, FLAG)".
    pub(crate) fn describe(&self, disk: Size, flag: &str) -> String {
        let largest = match &self.largest {
            Some((p, size)) => format!(" ({} alone {size} bytes)", p.display()),
            None => String::new(),
        };
        format!(
            "its files take at least {} bytes{largest}, more than the disk limit ({disk}, {flag})",
            self.total
        )
    }
}
