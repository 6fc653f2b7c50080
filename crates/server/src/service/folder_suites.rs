//! A suite of the server's suites folder (`SUITES/ID/`, not registered through `/suites`) pinned
//! when a submission is accepted: its files as they are then, stored as an upload (blobs by
//! content, as a registered suite's files are), which the job names. A folder edited after a
//! student submitted does not change how that waiting submission is graded, and retention keeps
//! the upload while the job waits (`submissions.suite_upload_id`). Read from the folder when the
//! job was judged instead, the suite of the moment graded it (and remote workers and in-process
//! ones could each see another). A folder unchanged since an upload was made of it a moment ago
//! is pinned by that upload ([`crate::service::pinned_folders`]).

use std::path::{Path, PathBuf};

use corral_judge::SuiteRef;
use corral_store::NewFile;

use crate::config::UploadLimits;
use crate::error::ApiError;
use crate::service::suites::suites_dir;
use crate::state::SharedState;

/// The owner of the uploads that pin folder suites: no token's id (those are hex), so no caller
/// can name one as its own upload.
pub const OWNER: &str = "suites-folder";

/// The suite a job will be graded with: a folder suite's files stored now (a registered suite's
/// upload already pins it, and is kept as it is).
pub async fn pin(st: &SharedState, suite: SuiteRef) -> Result<SuiteRef, ApiError> {
    if suite.upload.is_some() {
        return Ok(suite);
    }
    let dir = suites_dir(st).join(&suite.id);
    let before = blocking({
        let dir = dir.clone();
        move || fingerprint(&dir)
    })
    .await?;
    // Retention deletes uploads older than it that no waiting job names: one made less than
    // half of it ago is there, whatever became of the job that made it.
    let young = st.config.retention.duration() / 2;
    if let Some(upload) =
        (before.as_ref()).and_then(|fp| st.pinned_folders.get(&suite.id, fp, young))
    {
        tracing::debug!(suite = %suite.id, upload = %upload, "folder suite unchanged: pinned by its upload");
        return Ok(SuiteRef {
            id: suite.id,
            upload: Some(upload),
        });
    }
    let limits = st.config.upload.clone();
    let files = blocking({
        let dir = dir.clone();
        move || read(&dir, &limits)
    })
    .await?
    .map_err(|e| e.api_error(&suite.id))?;
    let upload = st.store.create_upload(OWNER, files).await?;
    tracing::debug!(suite = %suite.id, upload = %upload.id, files = upload.files.len(), "folder suite pinned");
    // The upload answers for the folder's state only when the folder did not change while read.
    if let Some(fp) = before {
        if blocking(move || fingerprint(&dir)).await?.as_ref() == Some(&fp) {
            st.pinned_folders.insert(&suite.id, fp, upload.id.clone());
        }
    }
    Ok(SuiteRef {
        id: suite.id,
        upload: Some(upload.id),
    })
}

/// `f` on a blocking thread (it reads the file system).
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(ApiError::internal)
}

/// How recently an entry may have changed for its times to tell every change: a file's times
/// are the kernel's coarse clock, so a write a few milliseconds after a look may leave them as
/// they were (git's "racy" entries). A folder edited this recently is read every time.
const SETTLED: std::time::Duration = std::time::Duration::from_secs(2);

/// The state of a folder as its entries' metadata says it (never their contents): each path,
/// kind, size, mode, inode and modification and change time, without following links. `None`
/// when it cannot be read or an entry changed within [`SETTLED`].
pub fn fingerprint(root: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    use std::time::{Duration, SystemTime, UNIX_EPOCH};
    let settled = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .ok()?
        .checked_sub(SETTLED)?;
    let recent = |m: &std::fs::Metadata| {
        let at = |s: i64, ns: i64| Duration::new(s.max(0) as u64, ns.clamp(0, 999_999_999) as u32);
        at(m.mtime(), m.mtime_nsec()) > settled || at(m.ctime(), m.ctime_nsec()) > settled
    };
    let mut entries = Vec::new();
    let mut stack = vec![(root.to_path_buf(), String::new())];
    while let Some((dir, prefix)) = stack.pop() {
        for entry in std::fs::read_dir(&dir).ok()? {
            let entry = entry.ok()?;
            let name = entry.file_name().into_string().ok()?;
            let rel = format!("{prefix}/{name}");
            let m = std::fs::symlink_metadata(entry.path()).ok()?;
            if recent(&m) {
                return None;
            }
            if m.is_dir() {
                stack.push((entry.path(), rel.clone()));
            }
            entries.push(format!(
                "{rel}\0{:o}\0{}\0{}\0{}.{}\0{}.{}",
                m.mode(),
                m.len(),
                m.ino(),
                m.mtime(),
                m.mtime_nsec(),
                m.ctime(),
                m.ctime_nsec()
            ));
        }
    }
    // The folder's own times change when an entry is added, removed or renamed.
    let m = std::fs::metadata(root).ok()?;
    if recent(&m) {
        return None;
    }
    entries.sort();
    Some(corral_store::sha256_hex(entries.join("\n").as_bytes()))
}

/// Why a suite's folder could not be read into an upload.
#[derive(Debug)]
pub enum ReadError {
    /// Reading it failed.
    Io(PathBuf, std::io::Error),
    /// Something in it cannot be kept as an upload's file (a name, the count, the size).
    Unfit(String),
}

impl ReadError {
    fn api_error(self, id: &str) -> ApiError {
        match self {
            ReadError::Io(path, e) => {
                if corral_store::is_storage_full_io(&e) {
                    return ApiError::storage_full(e);
                }
                ApiError::internal(format!("reading {}: {e}", path.display()))
            }
            ReadError::Unfit(why) => ApiError::unprocessable(format!(
                "suite {id:?} of the suites folder cannot be pinned for grading: {why} (the \
                 operator can register it through POST /suites, or raise [upload]'s caps)"
            )),
        }
    }
}

/// The plain files of a suite's folder as an upload's files, within the upload limits. Links are
/// not followed and other special files are skipped, as a remote worker was always sent them.
pub fn read(root: &Path, limits: &UploadLimits) -> Result<Vec<NewFile>, ReadError> {
    use std::os::unix::fs::PermissionsExt;
    let io = |p: &Path| {
        let p = p.to_path_buf();
        move |e| ReadError::Io(p, e)
    };
    let mut out = Vec::new();
    let mut total: u64 = 0;
    let mut stack = vec![(root.to_path_buf(), String::new())];
    while let Some((dir, prefix)) = stack.pop() {
        for entry in std::fs::read_dir(&dir).map_err(io(&dir))? {
            let entry = entry.map_err(io(&dir))?;
            let name = entry.file_name().into_string().map_err(|n| {
                ReadError::Unfit(format!("the name {n:?} in {} is not UTF-8", dir.display()))
            })?;
            let rel = if prefix.is_empty() {
                name
            } else {
                format!("{prefix}/{name}")
            };
            let meta = std::fs::symlink_metadata(entry.path()).map_err(io(&entry.path()))?;
            if meta.is_dir() {
                stack.push((entry.path(), rel));
                continue;
            }
            if !meta.is_file() {
                continue;
            }
            let path = corral_store::validate_path(&rel, limits.max_depth)
                .map_err(|e| ReadError::Unfit(e.to_string()))?;
            if out.len() >= limits.max_files {
                return Err(ReadError::Unfit(format!(
                    "it holds more than {} files",
                    limits.max_files
                )));
            }
            total = total.saturating_add(meta.len());
            if total > limits.max_bytes.bytes() {
                return Err(ReadError::Unfit(format!(
                    "its files are larger than {} in total",
                    limits.max_bytes
                )));
            }
            let content = std::fs::read(entry.path()).map_err(io(&entry.path()))?;
            out.push(NewFile {
                path,
                content,
                mode: if meta.permissions().mode() & 0o111 != 0 {
                    0o755
                } else {
                    0o644
                },
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_changed_a_moment_ago_has_no_fingerprint() {
        // Its times may not tell the next change (the kernel's coarse clock): read every time.
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("tests")).unwrap();
        std::fs::write(d.path().join("tests/in.txt"), "1").unwrap();
        assert_eq!(fingerprint(d.path()), None);
        assert_eq!(fingerprint(&d.path().join("missing")), None);
    }

    #[test]
    fn a_folder_is_read_as_plain_files_within_the_limits() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("suite.yaml"), "name: x\n").unwrap();
        std::fs::create_dir_all(d.path().join("tests/more")).unwrap();
        std::fs::write(d.path().join("tests/more/in.txt"), "42\n").unwrap();
        std::fs::write(d.path().join("run.sh"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(
            d.path().join("run.sh"),
            std::fs::Permissions::from_mode(0o700),
        )
        .unwrap();
        std::os::unix::fs::symlink("/etc/passwd", d.path().join("link")).unwrap();
        let limits = UploadLimits::default();
        let mut files = read(d.path(), &limits).unwrap();
        files.sort_by(|a, b| a.path.cmp(&b.path));
        let got: Vec<(&str, u32, &[u8])> = files
            .iter()
            .map(|f| (f.path.as_str(), f.mode, f.content.as_slice()))
            .collect();
        assert_eq!(
            got,
            [
                ("run.sh", 0o755, &b"#!/bin/sh\n"[..]),
                ("suite.yaml", 0o644, b"name: x\n"),
                ("tests/more/in.txt", 0o644, b"42\n"),
            ],
            "plain files, links not followed"
        );
        let few = UploadLimits {
            max_files: 2,
            ..UploadLimits::default()
        };
        assert!(
            matches!(read(d.path(), &few), Err(ReadError::Unfit(m)) if m.contains("more than 2 files"))
        );
        let small = UploadLimits {
            max_bytes: corral_sandbox::Size(4),
            ..UploadLimits::default()
        };
        assert!(
            matches!(read(d.path(), &small), Err(ReadError::Unfit(m)) if m.contains("larger than"))
        );
        let shallow = UploadLimits {
            max_depth: 2,
            ..UploadLimits::default()
        };
        assert!(matches!(read(d.path(), &shallow), Err(ReadError::Unfit(_))));
    }
}
