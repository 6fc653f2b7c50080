//! Temporary folders that an upload's files are copied into. The store copies on a blocking
//! thread, which goes on when the request that asked goes away (its future dropped): a plain
//! `TempDir` was then removed under the copy, which re-created its folders and left them in
//! `DATA/tmp` until the next start — an abandoned `/check` or `/run` of a 30 MB upload, one
//! each, left 598 MB after 40 (a red-team finding). A [`Scratch`] is shared with each copy into
//! it and removed when the last holder lets go: after the copy, never under it.

use std::path::Path;
use std::sync::Arc;

use corral_store::{StoreError, Upload};
use tempfile::TempDir;

use crate::state::SharedState;

/// A temporary folder under the server's `tmp`, removed once nobody holds it (see the module).
#[derive(Clone)]
pub struct Scratch(Arc<TempDir>);

impl Scratch {
    /// A new folder named `PREFIX…`.
    pub fn new(st: &SharedState, prefix: &str) -> std::io::Result<Scratch> {
        let dir = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir_in(&st.tmp_dir)?;
        Ok(Scratch(Arc::new(dir)))
    }

    pub fn path(&self) -> &Path {
        self.0.path()
    }

    /// Copies `upload`'s files into `dest` (this folder or one under it), holding the folder
    /// until the copy has ended, also when the caller stops waiting.
    pub async fn materialize(
        &self,
        st: &SharedState,
        upload: &Upload,
        dest: &Path,
    ) -> Result<(), StoreError> {
        let (st, upload, dest, held) =
            (st.clone(), upload.clone(), dest.to_path_buf(), self.clone());
        tokio::spawn(async move {
            let copied = st.store.materialize(&upload, &dest).await;
            // Maybe the last holder (the caller went away): its removal is blocking work.
            tokio::task::spawn_blocking(move || drop(held));
            copied
        })
        .await
        .map_err(|e| StoreError::io("copying an upload's files", std::io::Error::other(e)))?
    }
}
