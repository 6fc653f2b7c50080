//! Check suites: registered by staff (a suite file plus the assignment's files, stored as an
//! upload) or kept in the server's suites folder (`SUITES/ID/suite.yaml` + files).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use corral_checks::Suite;
use corral_judge::{suite_file, SuiteRef};
use corral_store::NewFile;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::ApiError;
use crate::service::caller::Caller;
use crate::service::loaded_suites;
use crate::service::scratch::Scratch;
use crate::service::uploads::{self, UploadFiles};
use crate::state::SharedState;

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SuiteInfo {
    pub id: String,
    pub name: String,
    /// `registered` (POST /suites) or `folder` (the server's suites folder).
    pub source: String,
}

/// What a staff member sends to register a suite.
#[derive(Debug, Default)]
pub struct SuiteParts {
    /// The suite file: its name (`suite.yaml` or `suite.json`) and contents.
    pub suite: Option<(String, Vec<u8>)>,
    /// The id to register it under; default: the suite's name.
    pub id: Option<String>,
    /// The assignment's files (paths already checked).
    pub files: Vec<NewFile>,
    /// Tar archives of assignment files.
    pub archives: Vec<Vec<u8>>,
}

/// Whether `id` may name a suite: letters, digits, `-`, `_`, `.`, `/` (no `..`), at most 100.
pub fn is_valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 100
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
        && corral_store::validate_path(id, 4).is_ok()
}

fn valid_id(id: &str) -> Result<(), ApiError> {
    if is_valid_id(id) {
        Ok(())
    } else {
        Err(ApiError::unprocessable(format!(
            "suite id {id:?}: use letters, digits, '-', '_', '.' and '/' (no '..'), at most 100"
        )))
    }
}

/// The suites folder of the server.
pub fn suites_dir(st: &SharedState) -> PathBuf {
    st.config
        .suites_dir
        .clone()
        .unwrap_or_else(|| st.config.data_dir.join("suites"))
}

pub fn suite_error(e: corral_checks::SuiteError) -> ApiError {
    ApiError::unprocessable(format!("invalid suite: {e}"))
}

/// Suite `id` as a job names it: a registered suite (with the upload holding its files), else
/// one of the suites folder, which must have a suite file (404 otherwise).
pub async fn resolve(st: &SharedState, id: &str) -> Result<SuiteRef, ApiError> {
    let missing = || ApiError::not_found(format!("no suite {id:?}"));
    if !is_valid_id(id) {
        return Err(missing());
    }
    let upload = match st.store.get_suite(id).await? {
        Some(s) => Some(s.upload_id),
        None => {
            suite_file(&suites_dir(st).join(id)).ok_or_else(missing)?;
            None
        }
    };
    Ok(SuiteRef {
        id: id.to_string(),
        upload,
    })
}

/// The folder holding a resolved suite's files: a registered suite's are written in `dest`,
/// a folder of `scratch` (which must outlive their use); one of the suites folder is read in
/// place.
pub async fn folder_of(
    st: &SharedState,
    suite: &SuiteRef,
    scratch: &Scratch,
    dest: &Path,
) -> Result<PathBuf, ApiError> {
    match &suite.upload {
        Some(u) => {
            let upload = st.store.get_upload(u).await?.ok_or_else(|| {
                ApiError::internal(format!("suite {} lost its files (upload {u})", suite.id))
            })?;
            scratch.materialize(st, &upload, dest).await?;
            Ok(dest.to_path_buf())
        }
        None => Ok(suites_dir(st).join(&suite.id)),
    }
}

/// The suite file in a suite's folder (404 when it has none).
pub fn file_in(suite: &SuiteRef, folder: &Path) -> Result<PathBuf, ApiError> {
    suite_file(folder).ok_or_else(|| ApiError::not_found(format!("no suite {:?}", suite.id)))
}

/// The suite file of suite `id`: a registered suite's files are written in `dest`, a folder of
/// `scratch`, first (which must outlive the use of the file); one of the suites folder is read
/// in place.
pub async fn file_of(
    st: &SharedState,
    id: &str,
    scratch: &Scratch,
    dest: &Path,
) -> Result<PathBuf, ApiError> {
    let suite = resolve(st, id).await?;
    file_in(&suite, &folder_of(st, &suite, scratch, dest).await?)
}

/// Loads the suite file at `path` off the async workers: loading reads its files and compiles
/// a check50 problem's Python (a process per problem, up to seconds on a pathological file);
/// with a request's `image`, that image's Python compiles it when it runs (`Suite::load_in`).
pub async fn load(path: PathBuf, image: Option<String>) -> Result<Suite, ApiError> {
    tokio::task::spawn_blocking(move || {
        // Errors name the suite file as in its folder, never the server's folders (its data
        // folder, a temporary folder): students and staff read them.
        Suite::load_in(&path, image.as_deref())
            .map_err(|e| e.relative_to(path.parent().unwrap_or(&path)))
    })
    .await
    .map_err(ApiError::internal)?
    .map_err(suite_error)
}

/// Registers (or replaces) a suite (staff): checks its files, loads the suite where it will be
/// used (its folder with its files), then stores both.
pub async fn register(
    st: &SharedState,
    caller: &Caller,
    parts: SuiteParts,
) -> Result<SuiteInfo, ApiError> {
    caller.require_staff()?;
    let SuiteParts {
        suite,
        id,
        mut files,
        archives,
    } = parts;
    let limits = &st.config.upload;
    if !archives.is_empty() {
        let unpacked = uploads::unpack_archives(UploadFiles::new(limits), archives).await?;
        files.extend(unpacked.into_files());
    }
    if files.len() + 1 > limits.max_files {
        return Err(ApiError::too_large("too many files"));
    }
    let (suite_name, suite_text) = suite.ok_or_else(|| {
        ApiError::bad_request("no `suite` part: send the suite file in a form part named suite")
    })?;
    files.push(NewFile {
        path: suite_name.clone(),
        content: suite_text,
        mode: 0o644,
    });
    let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
    corral_store::check_tree(&paths).map_err(|e| ApiError::bad_request(e.to_string()))?;
    // Validate the suite where it will be used: its folder with its files.
    let dir = tempfile::Builder::new()
        .prefix("suite-")
        .tempdir_in(&st.tmp_dir)
        .map_err(ApiError::io)?;
    for f in &files {
        let p = dir.path().join(&f.path);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).map_err(ApiError::io)?;
        }
        std::fs::write(&p, &f.content).map_err(ApiError::io)?;
    }
    let parsed = load(dir.path().join(&suite_name), None).await?;
    let id = id.filter(|s| !s.is_empty()).unwrap_or(parsed.name.clone());
    valid_id(&id)?;
    let upload = st.store.create_upload(&caller.id, files).await?;
    let s = st
        .store
        .put_suite(&id, &caller.id, &parsed.name, &upload.id)
        .await?;
    tracing::info!(suite = %s.id, by = %caller.id, checks = parsed.checks.len(), "suite registered");
    Ok(SuiteInfo {
        id: s.id,
        name: s.name,
        source: "registered".into(),
    })
}

/// The registered suites and those of the suites folder, by id.
/// The ids of the suites folder's suites (folders with a suite file and a valid id).
fn folder_suite_ids(dir: &Path) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| {
            let id = e.file_name().to_string_lossy().into_owned();
            (valid_id(&id).is_ok() && suite_file(&e.path()).is_some()).then_some(id)
        })
        .collect()
}

pub async fn list(st: &SharedState) -> Result<Vec<SuiteInfo>, ApiError> {
    let mut out: Vec<SuiteInfo> = st
        .store
        .list_suites()
        .await?
        .into_iter()
        .map(|s| SuiteInfo {
            id: s.id,
            name: s.name,
            source: "registered".into(),
        })
        .collect();
    // The folder is read on a blocking thread: a slow disk must not stall the async workers.
    let dir = suites_dir(st);
    let folder = tokio::task::spawn_blocking(move || folder_suite_ids(&dir))
        .await
        .map_err(ApiError::internal)?;
    for id in folder {
        if !out.iter().any(|s| s.id == id) {
            out.push(SuiteInfo {
                name: id.clone(),
                id,
                source: "folder".into(),
            });
        }
    }
    out.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(out)
}

/// The suite `suite` names, loaded for a request's `image` (kept by its files' content:
/// [`loaded_suites`]): `Ok(Err(..))` when it cannot be
/// loaded (no suite file, a broken one: the error a grading request gets for it), `Err` when
/// its files cannot be read.
pub async fn loaded(
    st: &SharedState,
    suite: &SuiteRef,
    image: Option<&str>,
) -> Result<Result<Arc<Suite>, ApiError>, ApiError> {
    let Some(upload_id) = &suite.upload else {
        // A folder suite not yet pinned is read in place (no content to key it by).
        let folder = suites_dir(st).join(&suite.id);
        return Ok(load_from(suite, &folder, image).await);
    };
    let upload = st.store.get_upload(upload_id).await?.ok_or_else(|| {
        ApiError::internal(format!(
            "suite {} lost its files (upload {upload_id})",
            suite.id
        ))
    })?;
    let key = loaded_suites::content_key(image, &upload.files);
    if let Some(found) = st.loaded_suites.get(&key) {
        return Ok(Ok(found));
    }
    let scratch = Scratch::new(st, "suite-").map_err(ApiError::io)?;
    scratch.materialize(st, &upload, scratch.path()).await?;
    let loaded = load_from(suite, scratch.path(), image).await;
    if let Ok(found) = &loaded {
        st.loaded_suites.insert(key, found.clone());
    }
    Ok(loaded)
}

async fn load_from(
    suite: &SuiteRef,
    folder: &Path,
    image: Option<&str>,
) -> Result<Arc<Suite>, ApiError> {
    let file = file_in(suite, folder)?;
    Ok(Arc::new(load(file, image.map(str::to_string)).await?))
}
