//! The data folder is corral's alone: it holds the store (submissions, results with hidden tests'
//! expected output, token hashes), uploaded files, suites with their hidden tests and grader
//! images. A new one is made 0700; one that other users of the host may enter (as corral made
//! them before, with the umask's 0755, or a group's 0775) loses their access, saying so: a
//! group that may write it could plant an admin token or a grader, one that may read it sees
//! hidden tests. Sandboxes
//! are not in the way: their mounts of layers and folders in it are made by their privileged
//! init, which looks the paths up once.

use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::Context;

/// A command that works on a store found none where it looked: it refuses (exit 2: give it as a
/// [`crate::errors::usage`]) rather than make a new, empty one no server uses (a mistyped
/// `--data`, the wrong working directory).
#[derive(Debug)]
pub struct NoStore {
    /// What is missing: "no corral store (corral.db)", "no image store".
    pub what: &'static str,
    /// Where it was looked for.
    pub place: std::path::PathBuf,
    /// What would have made one.
    pub made_by: &'static str,
}

impl std::fmt::Display for NoStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown = std::path::absolute(&self.place).unwrap_or_else(|_| self.place.clone());
        write!(
            f,
            "{} in {} ({}); name the data folder with --data DIR, or --config FILE (its \
             data_dir), or CORRAL_DATA",
            self.what,
            shown.display(),
            self.made_by
        )
    }
}

impl std::error::Error for NoStore {}

/// The database file of a `sqlite:` URL (`sqlite://PATH`, `sqlite:PATH`, options after `?`);
/// None for another database or an in-memory one.
pub(crate) fn sqlite_file(url: &str) -> Option<PathBuf> {
    let rest = url.strip_prefix("sqlite:")?;
    let rest = rest.strip_prefix("//").unwrap_or(rest);
    let path = rest.split('?').next().unwrap_or_default();
    (!path.is_empty() && path != ":memory:").then(|| PathBuf::from(path))
}

/// Refuses (a usage error, exit 2) a SQLite store `db` that does not exist: a command working on
/// a server's store never makes a new one no server reads.
pub fn require_store(db: &Path, data_dir: &Path) -> anyhow::Result<()> {
    if db.is_file() {
        return Ok(());
    }
    Err(crate::errors::usage(NoStore {
        what: "no corral store (corral.db)",
        place: db.parent().unwrap_or(data_dir).to_path_buf(),
        made_by: "a server makes it on its first start: `corral serve --data DIR`",
    }))
}

/// Makes `dir` (and missing parents) private, or takes other users' access off it; warns about
/// one this user may not change.
pub fn prepare(dir: &Path) -> anyhow::Result<()> {
    match std::fs::metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("creating the data folder {}", dir.display())),
        Err(e) => Err(e).with_context(|| format!("the data folder {}", dir.display())),
        Ok(m) if !m.is_dir() => Err(crate::errors::usage(format!(
            "the data folder {} is not a folder",
            dir.display()
        ))),
        Ok(m) => {
            let mode = m.permissions().mode() & 0o7777;
            if mode & 0o077 == 0 {
                return Ok(());
            }
            let tightened = mode & !0o077;
            match std::fs::set_permissions(dir, std::fs::Permissions::from_mode(tightened)) {
                Ok(()) => eprintln!(
                    "corral: the data folder {} was open to other users of this host (mode \
                     {mode:o}); now {tightened:o}",
                    dir.display()
                ),
                // Another user's folder: theirs to change.
                Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => eprintln!(
                    "corral: warning: other users of this host can enter the data folder {} \
                     (mode {mode:o}, owned by uid {}): run `chmod go-rwx` on it",
                    dir.display(),
                    m.uid()
                ),
                Err(e) => {
                    return Err(e).with_context(|| {
                        format!("making the data folder {} private", dir.display())
                    })
                }
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn a_new_data_folder_is_private_with_its_parents() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("a/b");
        prepare(&d).unwrap();
        assert_eq!(mode(&d), 0o700);
        assert_eq!(mode(&t.path().join("a")), 0o700);
    }

    #[test]
    fn an_open_data_folder_loses_its_groups_and_other_users_access() {
        let t = tempfile::tempdir().unwrap();
        for open in [0o755, 0o775, 0o770, 0o710] {
            std::fs::set_permissions(t.path(), std::fs::Permissions::from_mode(open)).unwrap();
            prepare(t.path()).unwrap();
            assert_eq!(mode(t.path()), 0o700, "{open:o}");
        }
        // A private one is left as it is.
        std::fs::set_permissions(t.path(), std::fs::Permissions::from_mode(0o500)).unwrap();
        prepare(t.path()).unwrap();
        assert_eq!(mode(t.path()), 0o500);
        std::fs::set_permissions(t.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    }

    #[test]
    fn a_file_is_not_a_data_folder() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("f");
        std::fs::write(&f, "").unwrap();
        let e = prepare(&f).unwrap_err().to_string();
        assert!(e.contains("is not a folder"), "{e}");
    }

    #[test]
    fn the_file_of_a_sqlite_url() {
        let p = |s: &str| Some(PathBuf::from(s));
        assert_eq!(
            sqlite_file("sqlite://corral-data/corral.db"),
            p("corral-data/corral.db")
        );
        assert_eq!(
            sqlite_file("sqlite:///srv/corral/corral.db"),
            p("/srv/corral/corral.db")
        );
        assert_eq!(sqlite_file("sqlite:db.sqlite?mode=rwc"), p("db.sqlite"));
        assert_eq!(sqlite_file("sqlite::memory:"), None);
        assert_eq!(sqlite_file("postgres://corral@db/corral"), None);
    }
}
