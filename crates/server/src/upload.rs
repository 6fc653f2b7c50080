//! `/upload`: multipart files (relative names, folders allowed) and tar archives, checked strictly
//! before anything is stored.

use std::io::Read;

use axum::extract::multipart::{Field, MultipartError, MultipartRejection};
use axum::extract::Multipart;
use corral_store::NewFile;

use crate::config::UploadLimits;
use crate::error::ApiError;

fn multipart_error(e: MultipartError) -> ApiError {
    let status = e.status();
    if status.as_u16() == 413 {
        ApiError::too_large(e.body_text())
    } else {
        ApiError::new(status, "bad_multipart", e.body_text())
    }
}

pub fn rejection(e: MultipartRejection) -> ApiError {
    ApiError::new(e.status(), "bad_multipart", e.body_text())
}

struct Collector<'a> {
    limits: &'a UploadLimits,
    files: Vec<NewFile>,
    total: u64,
}

impl Collector<'_> {
    fn too_large(&self) -> ApiError {
        ApiError::too_large(format!(
            "the upload is larger than {} in total",
            self.limits.max_bytes
        ))
    }

    fn add(&mut self, name: &str, content: Vec<u8>, mode: u32) -> Result<(), ApiError> {
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

    async fn read_field(&self, field: &mut Field<'_>) -> Result<Vec<u8>, ApiError> {
        let mut buf = Vec::new();
        while let Some(chunk) = field.chunk().await.map_err(multipart_error)? {
            if self.total + (buf.len() + chunk.len()) as u64 > self.limits.max_bytes.bytes() {
                return Err(self.too_large());
            }
            buf.extend_from_slice(&chunk);
        }
        Ok(buf)
    }

    /// Unpacks a tar (optionally gzip-compressed) archive: regular files and folders only.
    fn add_archive(&mut self, data: &[u8]) -> Result<(), ApiError> {
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
    let mut c = Collector {
        limits,
        files: Vec::new(),
        total: 0,
    };
    c.add_archive(data)?;
    Ok(c.files)
}

/// Reads every part of the form into checked files.
pub async fn collect(mut form: Multipart, limits: &UploadLimits) -> Result<Vec<NewFile>, ApiError> {
    let mut c = Collector {
        limits,
        files: Vec::new(),
        total: 0,
    };
    while let Some(mut field) = form.next_field().await.map_err(multipart_error)? {
        let part = field.name().unwrap_or("").to_string();
        let file_name = field.file_name().map(str::to_string);
        if part == "archive" {
            let data = c.read_field(&mut field).await?;
            c.add_archive(&data)?;
            continue;
        }
        let Some(name) = file_name else {
            return Err(ApiError::bad_request(format!(
                "form part {part:?} is not a file: give each file a file name (its relative path)"
            )));
        };
        let data = c.read_field(&mut field).await?;
        c.add(&name, data, 0o644)?;
    }
    if c.files.is_empty() {
        return Err(ApiError::bad_request(
            "no files: send multipart/form-data with one or more file parts",
        ));
    }
    let paths: Vec<&str> = c.files.iter().map(|f| f.path.as_str()).collect();
    corral_store::check_tree(&paths).map_err(|e| ApiError::bad_request(e.to_string()))?;
    Ok(c.files)
}
