//! A grader's files (a Gradescope autograder zip or folder, a PrairieLearn tests folder) read
//! into memory with explicit caps, and their digest.
//!
//! Zips are staff input, but a zip is also the classic way to exhaust memory or write outside a
//! folder, and the server accepts them from any staff token: entries are counted and their sizes
//! capped *while* reading (a lying header cannot make us allocate more), names are checked (no
//! absolute paths, `..`, empty or NUL components, no backslashes), symlinks and other special
//! entries are refused, duplicates are refused. `__MACOSX/` resource forks are skipped. (The zip
//! crate parses the archive; the caps are ours. The archive crate gains a shared bounded zip
//! reader on another branch; this module will use it once it lands.)

use std::io::Read;
use std::path::{Component, Path};

use sha2::{Digest, Sha256};

/// The most files a bundle may hold.
pub const MAX_FILES: usize = 10_000;
/// The most bytes its files may hold, uncompressed.
pub const MAX_BYTES: u64 = 256 << 20;
/// The deepest a path may be.
pub const MAX_DEPTH: usize = 32;

/// One file of a bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleFile {
    /// Relative, `/`-separated, checked.
    pub path: String,
    pub bytes: Vec<u8>,
    /// Executable bits were set (in the zip's Unix mode, or on the folder's file).
    pub executable: bool,
}

/// A grader's files, sorted by path, with the SHA-256 of their paths, modes and contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bundle {
    pub files: Vec<BundleFile>,
    /// `sha256:` and 64 hex digits.
    pub digest: String,
}

/// Why a bundle cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not a zip archive: {why}")]
    NotZip { path: String, why: String },
    #[error("{path}: entry {entry:?}: {why}")]
    BadEntry {
        path: String,
        entry: String,
        why: String,
    },
    #[error("{path}: more than {MAX_FILES} files")]
    TooManyFiles { path: String },
    #[error("{path}: more than {} MiB of files", MAX_BYTES >> 20)]
    TooLarge { path: String },
}

/// Checks a relative path of a bundle; returns why it is refused.
pub fn check_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() || name.len() > 4096 {
        return Err("empty or too long a name");
    }
    if name.contains(['\0', '\\']) {
        return Err("NUL or backslash in the name");
    }
    let p = Path::new(name);
    if p.is_absolute() {
        return Err("absolute path");
    }
    let mut depth = 0;
    for c in p.components() {
        match c {
            Component::Normal(_) => depth += 1,
            _ => return Err("'..' or '.' in the path"),
        }
    }
    if depth > MAX_DEPTH {
        return Err("nested too deep");
    }
    Ok(())
}

impl Bundle {
    /// Reads a zip archive or a folder.
    pub fn load(path: &Path) -> Result<Bundle, BundleError> {
        let shown = path.display().to_string();
        let meta = std::fs::metadata(path).map_err(|source| BundleError::Io {
            path: shown.clone(),
            source,
        })?;
        if meta.is_dir() {
            Bundle::from_folder(path)
        } else {
            let f = std::fs::File::open(path).map_err(|source| BundleError::Io {
                path: shown.clone(),
                source,
            })?;
            Bundle::from_zip(f, &shown)
        }
    }

    /// Reads a zip archive (`shown` names it in errors).
    pub fn from_zip<R: Read + std::io::Seek>(
        reader: R,
        shown: &str,
    ) -> Result<Bundle, BundleError> {
        Bundle::from_zip_capped(reader, shown, MAX_BYTES)
    }

    fn from_zip_capped<R: Read + std::io::Seek>(
        reader: R,
        shown: &str,
        max_bytes: u64,
    ) -> Result<Bundle, BundleError> {
        let path = shown.to_string();
        let mut zip = zip::ZipArchive::new(reader).map_err(|e| BundleError::NotZip {
            path: path.clone(),
            why: e.to_string(),
        })?;
        if zip.len() > MAX_FILES {
            return Err(BundleError::TooManyFiles { path });
        }
        let mut files = Vec::new();
        let mut total = 0u64;
        for i in 0..zip.len() {
            let mut entry = zip.by_index(i).map_err(|e| BundleError::NotZip {
                path: path.clone(),
                why: e.to_string(),
            })?;
            let raw = String::from_utf8_lossy(entry.name_raw()).into_owned();
            let bad = |why: &str| BundleError::BadEntry {
                path: path.clone(),
                entry: raw.clone(),
                why: why.to_string(),
            };
            let name = raw.trim_end_matches('/');
            if name == "__MACOSX" || name.starts_with("__MACOSX/") {
                continue;
            }
            check_name(name).map_err(bad)?;
            let mode = entry.unix_mode().unwrap_or(0);
            let kind = mode & 0o170000;
            if entry.is_dir() {
                if kind != 0 && kind != 0o040000 {
                    return Err(bad("a folder entry of another file type"));
                }
                continue;
            }
            if entry.is_symlink() || (kind != 0 && kind != 0o100000) {
                return Err(bad(
                    "not a regular file (links and special files are refused)",
                ));
            }
            let room = max_bytes - total;
            // Read at most one byte past the room left: a lying size cannot make us allocate more.
            let mut bytes = Vec::new();
            (&mut entry)
                .take(room + 1)
                .read_to_end(&mut bytes)
                .map_err(|e| bad(&e.to_string()))?;
            if bytes.len() as u64 > room {
                return Err(BundleError::TooLarge { path });
            }
            total += bytes.len() as u64;
            files.push(BundleFile {
                path: name.to_string(),
                bytes,
                executable: mode & 0o111 != 0,
            });
        }
        Bundle::from_files(files, &path)
    }

    /// Reads a folder: regular files and folders only (a link is refused, never followed).
    pub fn from_folder(dir: &Path) -> Result<Bundle, BundleError> {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.display().to_string();
        let mut files = Vec::new();
        let mut total = 0u64;
        let mut stack = vec![(dir.to_path_buf(), String::new(), 0usize)];
        while let Some((at, rel, depth)) = stack.pop() {
            let io = |source| BundleError::Io {
                path: at.display().to_string(),
                source,
            };
            for e in std::fs::read_dir(&at).map_err(io)? {
                let e = e.map_err(io)?;
                let name = e.file_name().to_string_lossy().into_owned();
                let r = if rel.is_empty() {
                    name.clone()
                } else {
                    format!("{rel}/{name}")
                };
                let bad = |why: &str| BundleError::BadEntry {
                    path: path.clone(),
                    entry: r.clone(),
                    why: why.to_string(),
                };
                if name == "__pycache__" {
                    continue;
                }
                check_name(&r).map_err(bad)?;
                let meta = std::fs::symlink_metadata(e.path()).map_err(io)?;
                if meta.is_dir() {
                    if depth >= MAX_DEPTH {
                        return Err(bad("nested too deep"));
                    }
                    stack.push((e.path(), r, depth + 1));
                } else if meta.is_file() {
                    if files.len() >= MAX_FILES {
                        return Err(BundleError::TooManyFiles { path });
                    }
                    total += meta.len();
                    if total > MAX_BYTES {
                        return Err(BundleError::TooLarge { path });
                    }
                    let mut bytes = Vec::new();
                    std::fs::File::open(e.path())
                        .map_err(io)?
                        .take(meta.len() + 1)
                        .read_to_end(&mut bytes)
                        .map_err(io)?;
                    if bytes.len() as u64 != meta.len() {
                        return Err(bad("changed while it was read"));
                    }
                    files.push(BundleFile {
                        path: r,
                        bytes,
                        executable: meta.permissions().mode() & 0o111 != 0,
                    });
                } else {
                    return Err(bad(
                        "not a regular file (links and special files are refused)",
                    ));
                }
            }
        }
        Bundle::from_files(files, &path)
    }

    fn from_files(mut files: Vec<BundleFile>, path: &str) -> Result<Bundle, BundleError> {
        files.sort_by(|a, b| a.path.cmp(&b.path));
        for w in files.windows(2) {
            if w[0].path == w[1].path {
                return Err(BundleError::BadEntry {
                    path: path.to_string(),
                    entry: w[0].path.clone(),
                    why: "listed twice".into(),
                });
            }
            // A file and a folder of the same name cannot both be written.
            if w[1].path.starts_with(&format!("{}/", w[0].path)) {
                return Err(BundleError::BadEntry {
                    path: path.to_string(),
                    entry: w[1].path.clone(),
                    why: format!("{} is a file", w[0].path),
                });
            }
        }
        let mut h = Sha256::new();
        for f in &files {
            h.update((f.path.len() as u64).to_le_bytes());
            h.update(f.path.as_bytes());
            h.update([u8::from(f.executable)]);
            h.update((f.bytes.len() as u64).to_le_bytes());
            h.update(&f.bytes);
        }
        let digest = format!(
            "sha256:{}",
            h.finalize()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        );
        Ok(Bundle { files, digest })
    }

    /// This bundle with `path` (a top-level name) holding `bytes` instead (or added), executable;
    /// the digest follows.
    pub fn with_file(&self, path: &str, bytes: Vec<u8>) -> Result<Bundle, BundleError> {
        let mut files: Vec<BundleFile> = self
            .files
            .iter()
            .filter(|f| f.path != path)
            .cloned()
            .collect();
        files.push(BundleFile {
            path: path.to_string(),
            bytes,
            executable: true,
        });
        Bundle::from_files(files, path)
    }

    pub fn get(&self, path: &str) -> Option<&BundleFile> {
        self.files.iter().find(|f| f.path == path)
    }

    /// Writes the files under `dir` (which must exist), modes 0644 / 0755.
    pub fn write_to(&self, dir: &Path) -> std::io::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        for f in &self.files {
            let to = dir.join(&f.path);
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&to, &f.bytes)?;
            let mode = if f.executable { 0o755 } else { 0o644 };
            std::fs::set_permissions(&to, std::fs::Permissions::from_mode(mode))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Cursor, Write};
    use zip::write::SimpleFileOptions;

    fn zip_of(entries: &[(&str, &[u8], u32)]) -> Vec<u8> {
        let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
        for (name, bytes, mode) in entries {
            let opts = SimpleFileOptions::default().unix_permissions(*mode);
            if *mode == 0o120777 {
                w.add_symlink(*name, String::from_utf8_lossy(bytes), opts)
                    .unwrap();
            } else if name.ends_with('/') {
                w.add_directory(*name, opts).unwrap();
            } else {
                w.start_file(*name, opts).unwrap();
                w.write_all(bytes).unwrap();
            }
        }
        w.finish().unwrap().into_inner()
    }

    #[test]
    fn a_zip_and_its_folder_have_the_same_digest() {
        let z = zip_of(&[
            ("setup.sh", b"#!/bin/sh\n", 0o755),
            ("tests/", b"", 0o755),
            ("tests/t.py", b"x = 1\n", 0o644),
            ("run_autograder", b"#!/bin/sh\necho\n", 0o755),
            ("__MACOSX/._setup.sh", b"junk", 0o644),
        ]);
        let b = Bundle::from_zip(Cursor::new(z), "a.zip").unwrap();
        let names: Vec<&str> = b.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(names, ["run_autograder", "setup.sh", "tests/t.py"]);
        assert!(b.get("run_autograder").unwrap().executable);
        assert!(!b.get("tests/t.py").unwrap().executable);

        let t = tempfile::tempdir().unwrap();
        b.write_to(t.path()).unwrap();
        let again = Bundle::load(t.path()).unwrap();
        assert_eq!(again, b);
        // A changed byte changes the digest.
        std::fs::write(t.path().join("tests/t.py"), "x = 2\n").unwrap();
        assert_ne!(Bundle::load(t.path()).unwrap().digest, b.digest);
    }

    #[test]
    fn hostile_zips_are_refused() {
        for (entries, says) in [
            (vec![("../evil", &b"x"[..], 0o644)], "'..'"),
            (vec![("/etc/passwd", &b"x"[..], 0o644)], "absolute"),
            (vec![("a/../../b", &b"x"[..], 0o644)], "'..'"),
            (vec![("link", &b"/etc/shadow"[..], 0o120777)], "links"),
            (vec![("a\\b", &b"x"[..], 0o644)], "backslash"),
            (
                vec![("a", &b"x"[..], 0o644), ("a/b", &b"y"[..], 0o644)],
                "is a file",
            ),
        ] {
            let e = Bundle::from_zip(Cursor::new(zip_of(&entries)), "a.zip")
                .expect_err(says)
                .to_string();
            assert!(e.contains(says), "{says}: {e}");
        }
        let deep = (0..=MAX_DEPTH).map(|_| "d").collect::<Vec<_>>().join("/");
        let e = Bundle::from_zip(Cursor::new(zip_of(&[(&deep, b"x", 0o644)])), "a.zip")
            .unwrap_err()
            .to_string();
        assert!(e.contains("too deep"), "{e}");
        let e = Bundle::from_zip(Cursor::new(b"PK not really".to_vec()), "a.zip")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a zip"), "{e}");
    }

    #[test]
    fn a_zip_bomb_stops_at_the_cap() {
        // 16 MiB of zeros compress to a few KiB; with a 1 MiB cap, reading stops past it.
        let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
        let opts =
            SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
        w.start_file("zeros", opts).unwrap();
        w.write_all(&vec![0u8; 16 << 20]).unwrap();
        let z = w.finish().unwrap().into_inner();
        assert!(z.len() < 1 << 20);
        let e = Bundle::from_zip_capped(Cursor::new(z.clone()), "bomb.zip", 1 << 20).unwrap_err();
        assert!(matches!(e, BundleError::TooLarge { .. }), "{e}");
        assert!(Bundle::from_zip_capped(Cursor::new(z), "bomb.zip", 32 << 20).is_ok());
    }

    #[test]
    fn folders_with_links_are_refused() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("run_autograder"), "#!/bin/sh\n").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", t.path().join("p")).unwrap();
        let e = Bundle::load(t.path()).unwrap_err().to_string();
        assert!(e.contains("links"), "{e}");
    }
}
