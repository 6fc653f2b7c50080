//! Host-side preparation of a check's working directory: the submission, the assignment's files
//! (protected ones always win), and the working directories dependencies left.
//!
//! Nothing here follows a link the submission contains, even one swapped in while it is copied:
//! links are recreated as links (they resolve inside the sandbox), FIFOs, sockets and devices are
//! skipped, and a path that goes through a link is replaced by a real folder before anything is
//! written under it.

use std::fs;
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

use corral_sandbox::host_tree::{host_dir_names, open_host_dir, open_host_entry, HostEntry};

use crate::report::{Integrity, IntegrityFlag};
use crate::suite::{SubmissionFiles, Suite, Take};

const MAX_DEPTH: usize = 64;

/// Copies the tree `src` into `dst` (created if missing), overwriting what is there. Links are
/// recreated as links, special files skipped. The source is read by descriptor
/// ([`corral_sandbox::host_tree`]): an entry swapped for a link, a folder link or a FIFO while
/// the copy runs is copied as that link, or skipped — never followed, never waited on.
pub fn copy_tree(src: &Path, dst: &Path) -> std::io::Result<()> {
    copy_submission(src, dst, &SubmissionFiles::default())
}

/// [`copy_tree`] of the submission's files that `files` takes (a suite's `submission`).
pub fn copy_submission(src: &Path, dst: &Path, files: &SubmissionFiles) -> std::io::Result<()> {
    fs::create_dir_all(dst)?;
    let from = open_host_dir(src)?;
    let walk = Walk {
        files,
        rel: PathBuf::new(),
        taken: Take::Yes,
    };
    copy_dir(from.as_fd(), src, dst, 0, &walk)
}

/// Where a copy is in the submission, and what its folder's verdict was.
struct Walk<'a> {
    files: &'a SubmissionFiles,
    rel: PathBuf,
    taken: Take,
}

/// `src` is the host folder open as `from` (named in errors).
fn copy_dir(
    from: BorrowedFd<'_>,
    src: &Path,
    dst: &Path,
    depth: usize,
    walk: &Walk<'_>,
) -> std::io::Result<()> {
    if depth > MAX_DEPTH {
        return Err(std::io::Error::other(format!(
            "{}: folders nested more than {MAX_DEPTH} deep",
            src.display()
        )));
    }
    for name in host_dir_names(from)? {
        let at = src.join(&name);
        let to = dst.join(&name);
        let entry = open_host_entry(from, Path::new(&name))
            .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", at.display())))?;
        let rel = walk.rel.join(&name);
        let is_dir = matches!(entry, Some(HostEntry::Dir { .. }));
        let taken = walk.files.take(&rel, is_dir, walk.taken);
        if taken == Take::No {
            continue;
        }
        match entry {
            None | Some(HostEntry::Other) => {}
            Some(HostEntry::Dir { dir, .. }) => {
                make_real_dir(&to)?;
                let inner = Walk {
                    files: walk.files,
                    rel,
                    taken,
                };
                copy_dir(dir.as_fd(), &at, &to, depth + 1, &inner)?;
            }
            Some(HostEntry::Link(target)) => {
                remove_any(&to)?;
                std::os::unix::fs::symlink(target, &to)?;
            }
            Some(HostEntry::File { mode, mut file }) => {
                remove_any(&to)?;
                let mut out = fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(mode & 0o777)
                    .open(&to)?;
                std::io::copy(&mut file, &mut out)?;
                // Exactly the file's bits (the umask took some when it was made), no setuid.
                out.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode & 0o777))?;
            }
        }
    }
    Ok(())
}

/// Removes whatever is at `p` (never following a link); fine when nothing is there.
fn remove_any(p: &Path) -> std::io::Result<()> {
    match fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => fs::remove_dir_all(p),
        Ok(_) => fs::remove_file(p),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Makes `p` a real folder: a link or file there is replaced.
fn make_real_dir(p: &Path) -> std::io::Result<()> {
    match fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => {
            fs::remove_file(p)?;
            fs::create_dir(p)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => fs::create_dir(p),
        Err(e) => Err(e),
    }
}

/// Makes every folder on the way from `root` to `rel`'s parent a real folder.
fn real_parents(root: &Path, rel: &Path) -> std::io::Result<()> {
    let mut at = root.to_path_buf();
    let comps: Vec<Component> = rel.components().collect();
    for c in &comps[..comps.len().saturating_sub(1)] {
        at.push(c);
        make_real_dir(&at)?;
    }
    Ok(())
}

/// Whether anything exists at `root/rel` without following any link on the way.
fn exists_no_follow(root: &Path, rel: &Path) -> bool {
    let mut at = root.to_path_buf();
    let comps: Vec<Component> = rel.components().collect();
    for (i, c) in comps.iter().enumerate() {
        at.push(c);
        match fs::symlink_metadata(&at) {
            Ok(m) if i + 1 < comps.len() && !m.is_dir() => return false,
            Ok(_) => {}
            Err(_) => return false,
        }
    }
    true
}

/// Puts the assignment's files into `dst`: protected ones always (replacing what is there),
/// the others only where nothing is. `protected_only`: the visible files that are not protected
/// are left out (a dependent check's folder has them from its dependencies). Files marked
/// `hidden` go only into a hidden check's folder (`for_hidden`), and all of them there: visible
/// checks' folders, which dependents start from, never had them.
pub fn place_assignment_files(
    suite: &Suite,
    dst: &Path,
    protected_only: bool,
    for_hidden: bool,
) -> std::io::Result<()> {
    for f in &suite.files {
        if f.hidden && !for_hidden {
            continue;
        }
        if protected_only && !f.protected && !f.hidden {
            continue;
        }
        let rel = Path::new(&f.path);
        if !f.protected && exists_no_follow(dst, rel) {
            continue;
        }
        real_parents(dst, rel)?;
        let to = dst.join(rel);
        remove_any(&to)?;
        let from = suite.dir.join(rel);
        let meta = fs::symlink_metadata(&from)?;
        if meta.is_dir() {
            copy_tree(&from, &to)?;
        } else {
            fs::copy(&from, &to)?;
        }
    }
    Ok(())
}

/// The protected files the submission has in another version than the assignment's.
pub fn integrity(suite: &Suite, submission: &Path) -> Integrity {
    let mut flagged = Vec::new();
    for f in suite.files.iter().filter(|f| f.protected) {
        let from = suite.dir.join(&f.path);
        let mut files = Vec::new();
        list_files(&from, Path::new(&f.path), &mut files, 0);
        for rel in files {
            if let Some(reason) = compare(&suite.dir.join(&rel), submission, &rel) {
                flagged.push(IntegrityFlag {
                    path: rel.to_string_lossy().into_owned(),
                    reason: reason.into(),
                });
            }
        }
    }
    Integrity {
        ok: flagged.is_empty(),
        flagged,
    }
}

/// Regular files under `p` (itself when it is one), as paths relative to the assignment folder.
fn list_files(p: &Path, rel: &Path, out: &mut Vec<std::path::PathBuf>, depth: usize) {
    match fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() && depth < MAX_DEPTH => {
            if let Ok(rd) = fs::read_dir(p) {
                let mut names: Vec<_> = rd.filter_map(Result::ok).map(|e| e.file_name()).collect();
                names.sort();
                for n in names {
                    list_files(&p.join(&n), &rel.join(&n), out, depth + 1);
                }
            }
        }
        Ok(m) if m.is_file() => out.push(rel.to_path_buf()),
        _ => {}
    }
}

/// How the submission's `rel` differs from the assignment's file `assignment`, or `None` when it
/// is absent or identical.
pub(crate) fn compare_file(
    assignment: &Path,
    submission: &Path,
    rel: &Path,
) -> Option<&'static str> {
    compare(assignment, submission, rel)
}

fn compare(assignment: &Path, submission: &Path, rel: &Path) -> Option<&'static str> {
    let mut at = submission.to_path_buf();
    let comps: Vec<Component> = rel.components().collect();
    for (i, c) in comps.iter().enumerate() {
        at.push(c);
        let m = fs::symlink_metadata(&at).ok()?;
        if m.file_type().is_symlink() {
            return Some("link");
        }
        let last = i + 1 == comps.len();
        if !last && !m.is_dir() {
            return Some("not_a_file");
        }
        if last && !m.is_file() {
            return Some("not_a_file");
        }
    }
    (!same_contents(assignment, &at) && !same_text(assignment, &at)).then_some("modified")
}

/// The same text in Windows form: equal once `\r\n` is `\n` and a leading UTF-8 BOM is gone
/// (a student on Windows who hands in the whole folder, the assignment's test file included,
/// replaced nothing; the assignment's copy is used anyway). Files over 4 MiB are not compared.
fn same_text(a: &Path, b: &Path) -> bool {
    const MAX: u64 = 4 << 20;
    let read = |p: &Path| -> Option<Vec<u8>> {
        let f = fs::File::open(p).ok()?;
        let mut data = Vec::new();
        std::io::Read::read_to_end(&mut std::io::Read::take(f, MAX + 1), &mut data).ok()?;
        (data.len() as u64 <= MAX).then_some(data)
    };
    let unix = |d: Vec<u8>| -> Vec<u8> {
        let d = d
            .strip_prefix(b"\xef\xbb\xbf")
            .map(<[u8]>::to_vec)
            .unwrap_or(d);
        let mut out = Vec::with_capacity(d.len());
        for (i, &c) in d.iter().enumerate() {
            if !(c == b'\r' && d.get(i + 1) == Some(&b'\n')) {
                out.push(c);
            }
        }
        out
    };
    match (read(a), read(b)) {
        (Some(x), Some(y)) => unix(x) == unix(y),
        _ => false,
    }
}

fn same_contents(a: &Path, b: &Path) -> bool {
    let (Ok(ma), Ok(mb)) = (fs::metadata(a), fs::symlink_metadata(b)) else {
        return false;
    };
    if ma.len() != mb.len() {
        return false;
    }
    let (Ok(fa), Ok(fb)) = (fs::File::open(a), fs::File::open(b)) else {
        return false;
    };
    let (mut ra, mut rb) = (std::io::BufReader::new(fa), std::io::BufReader::new(fb));
    let (mut ba, mut bb) = ([0u8; 8192], [0u8; 8192]);
    loop {
        let (Ok(na), Ok(nb)) = (read_full(&mut ra, &mut ba), read_full(&mut rb, &mut bb)) else {
            return false;
        };
        if na != nb || ba[..na] != bb[..nb] {
            return false;
        }
        if na == 0 {
            return true;
        }
    }
}

fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protected_files_win_even_through_planted_links() {
        let t = tempfile::tempdir().unwrap();
        let assignment = t.path().join("a");
        fs::create_dir_all(assignment.join("data")).unwrap();
        fs::write(assignment.join("data/expected.txt"), "right\n").unwrap();
        fs::write(assignment.join("starter.txt"), "starter\n").unwrap();
        fs::write(
            assignment.join("suite.yaml"),
            "name: t\nfiles:\n  - {path: data, protected: true}\n  - {path: starter.txt}\nchecks:\n  - id: x\n    steps: [{exists: a}]\n",
        )
        .unwrap();
        let suite = Suite::load(&assignment.join("suite.yaml")).unwrap();

        // The submission replaces the protected folder by a link to a host folder of its choice.
        let victim = t.path().join("victim");
        fs::create_dir(&victim).unwrap();
        let sub = t.path().join("sub");
        fs::create_dir(&sub).unwrap();
        std::os::unix::fs::symlink(&victim, sub.join("data")).unwrap();
        fs::write(sub.join("starter.txt"), "mine\n").unwrap();

        let integ = integrity(&suite, &sub);
        assert!(!integ.ok);
        assert_eq!(integ.flagged[0].path, "data/expected.txt");
        assert_eq!(integ.flagged[0].reason, "link");

        let stage = t.path().join("stage");
        copy_tree(&sub, &stage).unwrap();
        place_assignment_files(&suite, &stage, false, false).unwrap();
        assert_eq!(
            fs::read_to_string(stage.join("data/expected.txt")).unwrap(),
            "right\n"
        );
        assert!(!fs::symlink_metadata(stage.join("data"))
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(
            fs::read_dir(&victim).unwrap().count(),
            0,
            "wrote through the link"
        );
        // Unprotected files: the submission's copy wins.
        assert_eq!(
            fs::read_to_string(stage.join("starter.txt")).unwrap(),
            "mine\n"
        );

        // A modified regular file is flagged as such; an identical one is not.
        fs::remove_file(sub.join("data")).unwrap();
        fs::create_dir(sub.join("data")).unwrap();
        fs::write(sub.join("data/expected.txt"), "right\n").unwrap();
        assert!(integrity(&suite, &sub).ok);
        fs::write(sub.join("data/expected.txt"), "wrong\n").unwrap();
        let integ = integrity(&suite, &sub);
        assert_eq!(integ.flagged[0].reason, "modified");
        // The same text saved on Windows (CRLF, a BOM) replaced nothing; other text did.
        fs::write(sub.join("data/expected.txt"), "\u{feff}right\r\n").unwrap();
        assert!(integrity(&suite, &sub).ok);
        fs::write(sub.join("data/expected.txt"), "right\r\r\n").unwrap();
        assert!(!integrity(&suite, &sub).ok);
    }
}
