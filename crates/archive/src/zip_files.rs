//! A zip reader for hostile input (Judge0's `additional_files`): the `zip` crate parses, and
//! every count and size is checked here *before* anything is read or allocated: the number of
//! entries, each name's length and form (relative, no `..`, no NUL or backslash), the kind (regular
//! files and folders only: no symbolic link, no encrypted entry), the total size and the ratio of
//! each entry's size to its compressed size (a zip bomb stops at the cap, never in memory).

use std::io::{Cursor, Read};

use crate::excerpt::excerpt;

/// What one archive may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZipLimits {
    /// Entries, folders included.
    pub max_entries: u64,
    /// Bytes of all files together, unpacked.
    pub max_total: u64,
    /// Bytes of one entry's name.
    pub max_name: usize,
    /// Unpacked / compressed size allowed for one entry larger than 1 MiB.
    pub max_ratio: u64,
}

/// One regular file of the archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZipFile {
    /// The relative path, `/`-separated, without a leading `./`.
    pub path: String,
    pub data: Vec<u8>,
    /// Its Unix mode has an execute bit.
    pub executable: bool,
}

/// Why the archive was refused. Names are quoted as bounded excerpts.
#[derive(Debug, thiserror::Error)]
pub enum ZipError {
    #[error("not a zip archive: {0}")]
    NotZip(String),
    #[error("more than {0} entries")]
    TooManyEntries(u64),
    #[error("larger than {0} bytes unpacked")]
    TooLarge(u64),
    #[error("entry {name:?}: {reason}")]
    BadEntry { name: String, reason: String },
}

fn bad(name: &str, reason: impl Into<String>) -> ZipError {
    ZipError::BadEntry {
        name: excerpt(name),
        reason: reason.into(),
    }
}

/// Entries this large are checked for their compression ratio (small ones compress well
/// legitimately: a 1 KiB file of spaces).
const RATIO_FLOOR: u64 = 1 << 20;
const S_IFMT: u32 = 0o170_000;
const S_IFLNK: u32 = 0o120_000;
const S_IFREG: u32 = 0o100_000;
const S_IFDIR: u32 = 0o040_000;

/// Reads every regular file of `data` within `limits`; folders are checked and skipped.
pub fn read(data: &[u8], limits: &ZipLimits) -> Result<Vec<ZipFile>, ZipError> {
    let mut zip =
        zip::ZipArchive::new(Cursor::new(data)).map_err(|e| ZipError::NotZip(e.to_string()))?;
    // The central directory's entry count is bounded by the input's size (46 bytes each at
    // least), so the crate's index of it is too; the count is checked before any entry is read.
    if zip.len() as u64 > limits.max_entries {
        return Err(ZipError::TooManyEntries(limits.max_entries));
    }
    let mut files = Vec::new();
    let mut total = 0u64;
    for i in 0..zip.len() {
        let mut entry = zip
            .by_index(i)
            .map_err(|e| ZipError::NotZip(format!("entry {i}: {e}")))?;
        let raw = entry.name_raw().to_vec();
        if raw.len() > limits.max_name {
            return Err(bad(
                &String::from_utf8_lossy(&raw),
                format!("a name longer than {} bytes", limits.max_name),
            ));
        }
        let name = String::from_utf8(raw).map_err(|e| {
            bad(
                &String::from_utf8_lossy(e.as_bytes()),
                "a name that is not UTF-8",
            )
        })?;
        let path = check_name(&name)?;
        if entry.encrypted() {
            return Err(bad(&name, "encrypted entries are not accepted"));
        }
        let mode = entry.unix_mode();
        let kind = mode.map(|m| m & S_IFMT).filter(|k| *k != 0);
        if entry.is_dir() || kind == Some(S_IFDIR) {
            continue;
        }
        match kind {
            None | Some(S_IFREG) => {}
            Some(S_IFLNK) => {
                return Err(bad(
                    &name,
                    "a symbolic link; only regular files and folders are accepted",
                ))
            }
            Some(_) => {
                return Err(bad(
                    &name,
                    "a special file; only regular files and folders are accepted",
                ))
            }
        }
        let declared = entry.size();
        let compressed = entry.compressed_size().max(1);
        let too_dense = |size: u64| size > RATIO_FLOOR && size / compressed > limits.max_ratio;
        if too_dense(declared) {
            return Err(bad(
                &name,
                format!("compressed more than {}:1 (a zip bomb?)", limits.max_ratio),
            ));
        }
        let room = limits.max_total - total;
        if declared > room {
            return Err(ZipError::TooLarge(limits.max_total));
        }
        // The declared size is the archive's word only: read at most one byte past the room
        // left, whatever it says.
        let mut content = Vec::with_capacity(declared.min(RATIO_FLOOR) as usize);
        (&mut entry)
            .take(room + 1)
            .read_to_end(&mut content)
            .map_err(|e| bad(&name, format!("unreadable: {e}")))?;
        let got = content.len() as u64;
        if got > room {
            return Err(ZipError::TooLarge(limits.max_total));
        }
        if too_dense(got) {
            return Err(bad(
                &name,
                format!("compressed more than {}:1 (a zip bomb?)", limits.max_ratio),
            ));
        }
        total += got;
        files.push(ZipFile {
            path,
            data: content,
            executable: mode.is_some_and(|m| m & 0o111 != 0),
        });
    }
    Ok(files)
}

/// A relative path inside the archive's folder, or why not.
fn check_name(name: &str) -> Result<String, ZipError> {
    if name.contains('\0') || name.contains('\\') {
        return Err(bad(name, "a name with a NUL byte or a backslash"));
    }
    if name.starts_with('/') {
        return Err(bad(name, "an absolute path"));
    }
    let path = name
        .strip_prefix("./")
        .unwrap_or(name)
        .trim_end_matches('/');
    if path.is_empty() {
        return Err(bad(name, "an empty name"));
    }
    if path.split('/').any(|c| c == ".." || c.is_empty()) {
        return Err(bad(
            name,
            "a path that leaves its folder or has an empty part",
        ));
    }
    Ok(path.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use zip::write::SimpleFileOptions;

    const LIMITS: ZipLimits = ZipLimits {
        max_entries: 10,
        max_total: 4 << 20,
        max_name: 64,
        max_ratio: 100,
    };

    fn zip_of(entries: &[(&str, &[u8], Option<u32>)]) -> Vec<u8> {
        let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
        for (name, data, mode) in entries {
            let mut o = SimpleFileOptions::default();
            if let Some(m) = mode {
                o = o.unix_permissions(*m);
            }
            if name.ends_with('/') {
                w.add_directory(*name, o).unwrap();
            } else {
                w.start_file(*name, o).unwrap();
                w.write_all(data).unwrap();
            }
        }
        w.finish().unwrap().into_inner()
    }

    #[test]
    fn files_and_folders_are_read() {
        let z = zip_of(&[
            ("lib/", b"", None),
            ("lib/util.h", b"int f(void);\n", None),
            ("./run.sh", b"#!/bin/sh\n", Some(0o755)),
        ]);
        let files = read(&z, &LIMITS).unwrap();
        assert_eq!(files.len(), 2);
        assert_eq!(files[0].path, "lib/util.h");
        assert_eq!(files[0].data, b"int f(void);\n");
        assert!(!files[0].executable);
        assert_eq!(files[1].path, "run.sh");
        assert!(files[1].executable);
    }

    #[test]
    fn hostile_archives_are_refused() {
        let refused = |z: Vec<u8>, want: &str| {
            let e = read(&z, &LIMITS).unwrap_err().to_string();
            assert!(e.contains(want), "{e:?} should say {want:?}");
        };
        refused(zip_of(&[("../evil", b"x", None)]), "leaves its folder");
        refused(zip_of(&[("a/../../evil", b"x", None)]), "leaves its folder");
        refused(zip_of(&[("/etc/passwd", b"x", None)]), "absolute");
        refused(zip_of(&[("a\\b", b"x", None)]), "backslash");
        refused(zip_of(&[(&"n".repeat(65), b"x", None)]), "longer than 64");
        let link = {
            let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
            w.add_symlink("link", "/etc/shadow", SimpleFileOptions::default())
                .unwrap();
            w.finish().unwrap().into_inner()
        };
        refused(link, "symbolic link");
        let many: Vec<(String, &[u8], Option<u32>)> = (0..11)
            .map(|i| (format!("f{i}"), &b"x"[..], None))
            .collect();
        let many: Vec<(&str, &[u8], Option<u32>)> =
            many.iter().map(|(n, d, m)| (n.as_str(), *d, *m)).collect();
        refused(zip_of(&many), "more than 10 entries");
        // A bomb: 8 MiB of zeros deflate to a few KiB.
        let zeros = vec![0u8; 8 << 20];
        refused(zip_of(&[("bomb", &zeros, None)]), "zip bomb");
        // Within the ratio but over the total.
        let big: Vec<u8> = (0..(5u32 << 20))
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        refused(zip_of(&[("big", &big, None)]), "larger than");
        refused(b"PK\x03\x04 not really".to_vec(), "not a zip");
        refused(Vec::new(), "not a zip");
    }

    #[test]
    fn a_lying_size_in_the_directory_is_not_believed() {
        // The central directory says 1 byte; the data is 6 MiB of random-ish bytes stored.
        let big: Vec<u8> = (0..(6u32 << 20))
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
            .collect();
        let mut z = {
            let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
            let o = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
            w.start_file("liar", o).unwrap();
            w.write_all(&big).unwrap();
            w.finish().unwrap().into_inner()
        };
        // Patch the uncompressed size (offset 24 of the central directory header) to 1.
        let cd = z
            .windows(4)
            .rposition(|w| w == b"PK\x01\x02")
            .expect("a central directory header");
        z[cd + 24..cd + 28].copy_from_slice(&1u32.to_le_bytes());
        match read(&z, &LIMITS) {
            Err(e) => assert!(!e.to_string().is_empty()),
            Ok(files) => assert!(files
                .iter()
                .all(|f| f.data.len() as u64 <= LIMITS.max_total)),
        }
    }
}
