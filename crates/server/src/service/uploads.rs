//! Uploads: files (relative names, folders allowed) and tar archives, checked strictly before
//! anything is stored; storing them, and describing one to its owner.

use std::io::Read;

use corral_store::{NewFile, Upload};

use crate::config::UploadLimits;
use crate::error::ApiError;
use crate::service::caller::Caller;
use crate::state::SharedState;

pub struct UploadFiles<'a> {
    limits: &'a UploadLimits,
    files: Vec<NewFile>,
    total: u64,
}

impl<'a> UploadFiles<'a> {
    pub fn new(limits: &'a UploadLimits) -> Self {
        UploadFiles {
            limits,
            files: Vec::new(),
            total: 0,
        }
    }

    /// Whether `more` bytes would take the upload over its limit.
    pub fn would_exceed(&self, more: u64) -> bool {
        self.total + more > self.limits.max_bytes.bytes()
    }

    pub fn too_large(&self) -> ApiError {
        ApiError::too_large(format!(
            "the upload is larger than {} in total",
            self.limits.max_bytes
        ))
    }

    pub fn add(&mut self, name: &str, content: Vec<u8>, mode: u32) -> Result<(), ApiError> {
        let path = corral_store::validate_path(name, self.limits.max_depth)
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
        if self.files.len() >= self.limits.max_files {
            return Err(ApiError::too_large(format!(
                "more than {} files in one upload",
                self.limits.max_files
            )));
        }
        self.total += content.len() as u64;
        if self.total > self.limits.max_bytes.bytes() {
            return Err(self.too_large());
        }
        self.files.push(NewFile {
            path,
            content,
            mode,
        });
        Ok(())
    }

    /// Unpacks a tar (optionally gzip-compressed) archive: regular files and folders only.
    pub fn add_archive(&mut self, data: &[u8]) -> Result<(), ApiError> {
        let reader: Box<dyn Read> = if data.starts_with(&[0x1f, 0x8b]) {
            Box::new(flate2::read::GzDecoder::new(data))
        } else {
            Box::new(data)
        };
        let bad = |m: String| ApiError::bad_request(format!("archive: {m}"));
        let mut archive = tar::Archive::new(reader);
        let entries = archive
            .entries()
            .map_err(|e| bad(format!("not a tar archive: {e}")))?;
        for entry in entries {
            let mut entry = entry.map_err(|e| bad(format!("unreadable entry: {e}")))?;
            let raw = entry.path_bytes().into_owned();
            let name = String::from_utf8(raw)
                .map_err(|_| bad("an entry's name is not UTF-8".to_string()))?;
            let kind = entry.header().entry_type();
            let shown = name.clone();
            let name = name.strip_prefix("./").unwrap_or(&name).to_string();
            if kind.is_dir() {
                if name.is_empty() || name == "." || name == "./" {
                    continue;
                }
                corral_store::validate_path(name.trim_end_matches('/'), self.limits.max_depth)
                    .map_err(|e| bad(e.to_string()))?;
                continue;
            }
            let what = if kind.is_symlink() {
                Some("a symbolic link")
            } else if kind.is_hard_link() {
                Some("a hard link")
            } else if kind.is_character_special() || kind.is_block_special() {
                Some("a device")
            } else if kind.is_fifo() {
                Some("a FIFO")
            } else if !(kind.is_file() || kind == tar::EntryType::Continuous) {
                Some("not a regular file")
            } else {
                None
            };
            if let Some(what) = what {
                return Err(bad(format!(
                    "{shown:?} is {what}; only regular files and folders are accepted"
                )));
            }
            let size = entry.size();
            if self.total + size > self.limits.max_bytes.bytes() {
                return Err(self.too_large());
            }
            let mode = entry.header().mode().unwrap_or(0o644);
            let mut content = Vec::with_capacity(size.min(1 << 20) as usize);
            entry
                .by_ref()
                .take(size + 1)
                .read_to_end(&mut content)
                .map_err(|e| bad(format!("reading {shown:?}: {e}")))?;
            self.add(&name, content, mode)?;
        }
        Ok(())
    }
}

/// Unpacks one tar archive (optionally gzip-compressed) into checked files.
pub fn unpack_archive(data: &[u8], limits: &UploadLimits) -> Result<Vec<NewFile>, ApiError> {
    let mut c = UploadFiles::new(limits);
    c.add_archive(data)?;
    Ok(c.files)
}

impl UploadFiles<'_> {
    /// The checked files (at least one, no path both a file and a folder).
    pub fn finish(self) -> Result<Vec<NewFile>, ApiError> {
        if self.files.is_empty() {
            return Err(ApiError::bad_request(
                "no files: send multipart/form-data with one or more file parts",
            ));
        }
        let paths: Vec<&str> = self.files.iter().map(|f| f.path.as_str()).collect();
        corral_store::check_tree(&paths).map_err(|e| ApiError::bad_request(e.to_string()))?;
        Ok(self.files)
    }
}

/// Stores checked files as an upload of `caller`.
pub async fn store(
    st: &SharedState,
    caller: &Caller,
    files: Vec<NewFile>,
) -> Result<Upload, ApiError> {
    let upload = st.store.create_upload(&caller.id, files).await?;
    st.metrics.uploads.inc();
    tracing::info!(upload = %upload.id, files = upload.files.len(), bytes = upload.total_bytes, "upload stored");
    Ok(upload)
}

/// An upload of the caller's (404 for anyone else's: ids cannot be probed).
pub async fn owned(st: &SharedState, caller: &Caller, id: &str) -> Result<Upload, ApiError> {
    st.store
        .get_upload(id)
        .await?
        .filter(|u| u.owner == caller.id)
        .ok_or_else(|| ApiError::not_found(format!("no upload {id:?}")))
}
