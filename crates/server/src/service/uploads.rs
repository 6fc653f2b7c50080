//! Uploads: files (relative names, folders allowed) and tar archives, checked strictly before
//! anything is stored; storing them, and describing one to its owner.
//!
//! Archives are hostile input: they are read with corral-archive's bounded tar reader (every
//! extended header capped before it is allocated) behind a capped decompressor, every entry and
//! byte counted against [`UploadLimits`] before it is read, and on a blocking thread
//! ([`unpack_archives`]) so a slow archive never holds an async worker. Errors quote names as
//! bounded excerpts.

use std::io::Read;

use corral_archive::decompress::{self, Compression};
use corral_archive::excerpt::excerpt;
use corral_archive::tar_stream::{Header, Kind, TarError, TarStream};
use corral_store::{NewFile, Upload};

use crate::config::UploadLimits;
use crate::error::ApiError;
use crate::service::caller::Caller;
use crate::state::SharedState;

/// Bytes of one GNU long-name/long-link or PAX header (a stored name is at most 1 KiB anyway;
/// PAX headers of ordinary tars carry a few records).
const MAX_HEADER: u64 = 64 << 10;
/// Decompressed/compressed ratio allowed once past the first 64 MiB (as for image layers).
pub(crate) const MAX_RATIO: u64 = 200;

pub struct UploadFiles {
    /// Owned, so the files can move to a blocking thread for unpacking.
    limits: UploadLimits,
    files: Vec<NewFile>,
    total: u64,
}

impl UploadFiles {
    pub fn new(limits: &UploadLimits) -> Self {
        UploadFiles {
            limits: limits.clone(),
            files: Vec::new(),
            total: 0,
        }
    }

    /// Whether `more` bytes would take the upload over its limit.
    pub fn would_exceed(&self, more: u64) -> bool {
        self.total
            .checked_add(more)
            .is_none_or(|t| t > self.limits.max_bytes.bytes())
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

    /// Entries one archive may hold: every file with, at most, a folder entry for each level
    /// above it (folder entries are only checked, never stored).
    fn max_entries(&self) -> u64 {
        (self.limits.max_files as u64).saturating_mul(self.limits.max_depth as u64 + 1)
    }

    /// Unpacks a tar (optionally gzip-compressed) archive: regular files and folders only.
    /// Blocking (decompression and parsing): call it through [`unpack_archives`] from async code.
    pub fn add_archive(&mut self, data: &[u8]) -> Result<(), ApiError> {
        let bad = |m: String| ApiError::bad_request(format!("archive: {m}"));
        let max_entries = self.max_entries();
        // The content plus at most 3 KiB of headers and padding per entry: a bomb stops here.
        let max_stream = self
            .limits
            .max_bytes
            .bytes()
            .saturating_add(max_entries.saturating_mul(3 << 10))
            .saturating_add(1 << 20);
        let (stream, compression) = decompress::open(data, max_stream, MAX_RATIO)
            .map_err(|e| bad(format!("not a tar archive: {e}")))?;
        if compression == Compression::Zstd {
            return Err(bad(
                "zstd compression is not accepted: send a .tar or .tar.gz".to_string(),
            ));
        }
        let mut tar = TarStream::new(stream, MAX_HEADER);
        let mut entries = 0u64;
        loop {
            let header = match tar.next_entry() {
                Ok(Some(h)) => h,
                Ok(None) => return Ok(()),
                Err(TarError::Io(e)) => return Err(bad(format!("unreadable entry: {e}"))),
                Err(TarError::Bad { entry, reason }) => {
                    return Err(bad(format!("entry {entry:?}: {reason}")))
                }
            };
            entries += 1;
            if entries > max_entries {
                return Err(ApiError::too_large(format!(
                    "archive: more than {max_entries} entries"
                )));
            }
            self.add_entry(&mut tar, header, &bad)?;
        }
    }

    /// Checks one entry and, if it is a regular file, reads and adds it.
    fn add_entry<R: Read>(
        &mut self,
        tar: &mut TarStream<R>,
        header: Header,
        bad: &impl Fn(String) -> ApiError,
    ) -> Result<(), ApiError> {
        let name = String::from_utf8(header.path)
            .map_err(|_| bad("an entry's name is not UTF-8".to_string()))?;
        let shown = excerpt(&name);
        let name = name.strip_prefix("./").unwrap_or(&name);
        let what = match header.kind {
            Kind::Dir => {
                if name.is_empty() || name == "." || name == "./" {
                    return Ok(());
                }
                corral_store::validate_path(name.trim_end_matches('/'), self.limits.max_depth)
                    .map_err(|e| bad(e.to_string()))?;
                return Ok(());
            }
            Kind::File => None,
            Kind::Symlink => Some("a symbolic link"),
            Kind::HardLink => Some("a hard link"),
            Kind::CharDevice | Kind::BlockDevice => Some("a device"),
            Kind::Fifo => Some("a FIFO"),
        };
        if let Some(what) = what {
            return Err(bad(format!(
                "{shown:?} is {what}; only regular files and folders are accepted"
            )));
        }
        let size = header.size;
        if self.would_exceed(size) {
            return Err(self.too_large());
        }
        let mut content = Vec::with_capacity(size.min(1 << 20) as usize);
        tar.data(size)
            .read_to_end(&mut content)
            .map_err(|e| bad(format!("reading {shown:?}: {e}")))?;
        if (content.len() as u64) < size {
            return Err(bad(format!(
                "reading {shown:?}: the archive ends inside it"
            )));
        }
        self.add(name, content, header.mode)
    }
}

/// Unpacks `archives` into `files` on a blocking thread (decompressing and parsing hostile input
/// must not hold an async worker), all counted against one set of limits.
pub async fn unpack_archives(
    mut files: UploadFiles,
    archives: Vec<Vec<u8>>,
) -> Result<UploadFiles, ApiError> {
    tokio::task::spawn_blocking(move || {
        for a in &archives {
            files.add_archive(a)?;
        }
        Ok(files)
    })
    .await
    .map_err(ApiError::internal)?
}

impl UploadFiles {
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

    /// The files so far, unchecked as a whole (for a caller that adds more and checks the tree).
    pub fn into_files(self) -> Vec<NewFile> {
        self.files
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

#[cfg(test)]
mod tests {
    use super::*;

    use corral_testkit::tar::ustar_header as header;

    /// A tar of one file `f` whose size a PAX header states as `size` (its data absent).
    fn pax_sized(size: u64) -> Vec<u8> {
        let body = format!(" size={size}\n");
        let mut len = body.len() + 1;
        while format!("{len}{body}").len() != len {
            len += 1;
        }
        let rec = format!("{len}{body}");
        let mut tar = header(b"pax", b'x', rec.len() as u64);
        let mut data = rec.into_bytes();
        data.resize(512, 0);
        tar.extend(data);
        tar.extend(header(b"f", b'0', 0));
        tar.extend(vec![0u8; 1024]);
        tar
    }

    #[test]
    fn sizes_near_u64_max_are_refused_without_overflow() {
        let mut files = UploadFiles::new(&UploadLimits::default());
        files.add("a.txt", b"hello".to_vec(), 0o644).unwrap();
        assert!(files.would_exceed(u64::MAX));
        assert!(files.would_exceed(u64::MAX - 4));

        // A PAX size over what a file can have: a 400 naming it.
        for size in [u64::MAX, u64::MAX - 5] {
            let e = files.add_archive(&pax_sized(size)).unwrap_err();
            assert!(
                e.message.contains("is over the largest a file can have"),
                "{}",
                e.message
            );
        }

        // A size a file can have, added to a total that would overflow: too large.
        files.total = u64::MAX - 1;
        let e = files.add_archive(&pax_sized(1 << 40)).unwrap_err();
        assert!(e.message.contains("larger than"), "{}", e.message);
    }
}
