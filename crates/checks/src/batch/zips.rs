//! A student's zip in the submissions folder (what an LMS's download holds): unpacked into a
//! private temporary folder only while it is graded (so at most `--jobs` at once, and removed
//! right after), without the Mac's `__MACOSX` and `.DS_Store`. A zip of one folder (what
//! "compress this folder" makes) is graded from inside that folder, unless the suite names the
//! folder itself (a `src/caesar.c` the suite expects stays where it is).

use std::path::{Path, PathBuf};

use corral_archive::zip_files::{self, ZipLimits};

/// What one student's zip may unpack to: about a server's upload limits.
const LIMITS: ZipLimits = ZipLimits {
    max_entries: 10_000,
    max_total: 128 << 20,
    max_name: 4096,
    max_ratio: 200,
};

/// The student id of a `.zip` entry of the submissions folder (its name without `.zip`, any
/// case), or `None` when it is no zip.
pub fn stem(name: &str) -> Option<&str> {
    let i = name.len().checked_sub(4)?;
    (name.is_char_boundary(i) && name[i..].eq_ignore_ascii_case(".zip") && i > 0)
        .then(|| &name[..i])
}

/// Entries of an archive made on a Mac that are no one's work.
fn mac_junk(name: &str) -> bool {
    name == "__MACOSX" || name == ".DS_Store" || name.starts_with("._")
}

/// A zip unpacked; removed when dropped.
pub struct Unpacked {
    _dir: tempfile::TempDir,
    /// What is graded: the folder, or the one folder it holds.
    pub root: PathBuf,
}

/// Unpacks `zip` (regular files only, paths, count, sizes and ratio checked by corral-archive's
/// reader). `named(folder)`: whether the suite names a top folder of that name.
pub fn unpack(zip: &Path, named: &dyn Fn(&str) -> bool) -> Result<Unpacked, String> {
    let meta = std::fs::metadata(zip).map_err(|e| e.to_string())?;
    if meta.len() > LIMITS.max_total {
        return Err(format!(
            "a zip of {} bytes, over {}",
            meta.len(),
            LIMITS.max_total
        ));
    }
    let data = std::fs::read(zip).map_err(|e| e.to_string())?;
    let files = zip_files::read(&data, &LIMITS).map_err(|e| e.to_string())?;
    drop(data);
    // 0700 whatever the umask: it holds a student's work.
    let dir = crate::shared::private_temp::private_tempdir("corral-grade-zip-")
        .map_err(|e| e.to_string())?;
    for f in files {
        if f.path.split('/').any(mac_junk) {
            continue;
        }
        let to = dir.path().join(&f.path);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", f.path))?;
        }
        std::fs::write(&to, &f.data).map_err(|e| format!("{}: {e}", f.path))?;
        if f.executable {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755));
        }
    }
    let top: Vec<std::fs::DirEntry> = std::fs::read_dir(dir.path())
        .map_err(|e| e.to_string())?
        .filter_map(Result::ok)
        .collect();
    let root = match top.as_slice() {
        [only]
            if only.file_type().is_ok_and(|t| t.is_dir())
                && !named(&only.file_name().to_string_lossy()) =>
        {
            only.path()
        }
        _ => dir.path().to_path_buf(),
    };
    Ok(Unpacked { _dir: dir, root })
}

#[cfg(test)]
mod tests {
    use super::{stem, unpack};

    /// A zip of `files` (path, contents) written by Python's zipfile.
    fn zip(dir: &std::path::Path, files: &[(&str, &str)]) -> std::path::PathBuf {
        let out = dir.join("sub.zip");
        let mut args = vec![out.display().to_string()];
        for (p, c) in files {
            args.push(p.to_string());
            args.push(c.to_string());
        }
        let st = std::process::Command::new("python3")
            .arg("-c")
            .arg("import sys, zipfile\nz = zipfile.ZipFile(sys.argv[1], 'w')\nfor i in range(2, len(sys.argv), 2): z.writestr(sys.argv[i], sys.argv[i + 1])\nz.close()")
            .args(&args)
            .status()
            .unwrap();
        assert!(st.success());
        out
    }

    /// The one folder a zip holds is entered, unless the suite names it; Mac junk is dropped;
    /// the copy is private and gone once dropped.
    #[test]
    fn a_zip_of_one_folder_is_graded_from_inside_it_unless_the_suite_names_it() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let z = zip(
            d.path(),
            &[
                ("src/caesar.c", "int main;"),
                ("__MACOSX/src/._caesar.c", "junk"),
            ],
        );
        let u = unpack(&z, &|_| false).unwrap();
        assert!(u.root.ends_with("src"), "{}", u.root.display());
        assert!(u.root.join("caesar.c").is_file());
        let top = u.root.parent().unwrap().to_path_buf();
        assert!(!top.join("__MACOSX").exists());
        assert_eq!(
            std::fs::metadata(&top).unwrap().permissions().mode() & 0o777,
            0o700
        );
        drop(u);
        assert!(!top.exists(), "removed once graded");
        let u = unpack(&z, &|f| f == "src").unwrap();
        assert!(
            u.root.join("src/caesar.c").is_file(),
            "the suite's src/ stays"
        );
    }

    #[test]
    fn a_zips_student_is_its_name_without_zip() {
        assert_eq!(stem("alice.zip"), Some("alice"));
        assert_eq!(stem("bob.ZIP"), Some("bob"));
        assert_eq!(stem(".zip"), None);
        assert_eq!(stem("notes.txt"), None);
        assert_eq!(stem("zip"), None);
    }
}
