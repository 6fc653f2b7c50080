//! The browser editor's history: every Run, Check and Save keeps the editor's files with how it
//! went; a user lists and restores their own (another user's are missing, like a wrong id), staff
//! may list everyone's. Runs and saves are as the editor describes them; a check's revision is
//! recorded by the server from its own report ([`record_check`]), since the staff page counts
//! their scores (a client that sent its own could claim any).

use corral_checks::Report;
use corral_store::{
    NewRevision, Revision, RevisionFile, RevisionFilter, RevisionKind, RevisionMeta,
};

use crate::error::ApiError;
use crate::service::caller::Caller;
use crate::state::SharedState;

/// Text fields' limits (bytes).
const MAX_FIELD: usize = 200;
const MAX_SUMMARY: usize = 2000;
const DEFAULT_LIST: u32 = 50;
const MAX_LIST: u32 = 500;

/// A revision to keep, as the editor sent it (nothing checked yet).
pub struct Draft {
    pub kind: RevisionKind,
    pub language: String,
    pub status: String,
    pub suite: Option<String>,
    pub score: Option<f64>,
    pub max_score: Option<f64>,
    pub summary: Option<String>,
    pub files: Vec<RevisionFile>,
}

fn text(name: &str, v: &str, max: usize) -> Result<(), ApiError> {
    if v.len() > max {
        return Err(ApiError::unprocessable(format!(
            "{name} is longer than {max} bytes"
        )));
    }
    if v.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
        return Err(ApiError::unprocessable(format!(
            "{name} contains control characters"
        )));
    }
    Ok(())
}

/// Checks a client's draft (fields, file names, sizes) and keeps it as the caller's. A check's
/// is refused: `POST /check` records it from the report ([`record_check`]).
pub async fn create(st: &SharedState, caller: &Caller, d: Draft) -> Result<RevisionMeta, ApiError> {
    if d.kind == RevisionKind::Check {
        return Err(ApiError::unprocessable(
            "a check's revision is recorded by the server: send \"revision\": {\"language\": …} \
             with POST /check?format=json",
        ));
    }
    keep(st, caller, d).await
}

/// The files of the caller's upload `homedir` as a revision keeps them (text), read before a
/// check grades it so that a revision that cannot be kept is refused before the work.
pub async fn files_of_upload(
    st: &SharedState,
    caller: &Caller,
    homedir: &str,
) -> Result<Vec<RevisionFile>, ApiError> {
    let upload = crate::service::uploads::owned(st, caller, homedir).await?;
    let mut files = Vec::with_capacity(upload.files.len());
    for f in &upload.files {
        // Read from the store as they are (the grading writes its own copy).
        let bytes = st
            .store
            .read_upload_file(&upload, &f.path)
            .await?
            .ok_or_else(|| ApiError::internal(format!("upload file {:?} is gone", f.path)))?;
        let content = String::from_utf8(bytes).map_err(|_| {
            ApiError::unprocessable(format!(
                "revision: {:?} is not text (a revision keeps the editor's text files)",
                f.path
            ))
        })?;
        files.push(RevisionFile {
            path: f.path.clone(),
            content,
        });
    }
    Ok(files)
}

/// Keeps the revision of a check the server ran: its status, score and summary from `report`.
pub async fn record_check(
    st: &SharedState,
    caller: &Caller,
    language: String,
    suite: &str,
    files: Vec<RevisionFile>,
    report: &Report,
) -> Result<RevisionMeta, ApiError> {
    let count = |want: Option<bool>| report.results.iter().filter(|r| r.result == want).count();
    let (passed, failed, skipped) = (count(Some(true)), count(Some(false)), count(None));
    keep(
        st,
        caller,
        Draft {
            kind: RevisionKind::Check,
            language,
            status: if report.passed() { "passed" } else { "failed" }.into(),
            suite: Some(suite.to_string()),
            score: Some(report.score()),
            max_score: Some(report.max_score()),
            summary: Some(format!(
                "{passed} passed, {failed} failed, {skipped} skipped"
            )),
            files,
        },
    )
    .await
}

async fn keep(st: &SharedState, caller: &Caller, d: Draft) -> Result<RevisionMeta, ApiError> {
    text("language", &d.language, MAX_FIELD)?;
    text("status", &d.status, MAX_FIELD)?;
    if let Some(s) = &d.suite {
        text("suite", s, MAX_FIELD)?;
    }
    let summary = d.summary.unwrap_or_default();
    text("summary", &summary, MAX_SUMMARY)?;
    for (name, v) in [("score", d.score), ("max_score", d.max_score)] {
        if v.is_some_and(|x| !x.is_finite()) {
            return Err(ApiError::unprocessable(format!("{name} is not a number")));
        }
    }
    let limits = &st.config.upload;
    if d.files.is_empty() {
        return Err(ApiError::unprocessable(
            "a revision needs at least one file",
        ));
    }
    if d.files.len() > limits.max_files {
        return Err(ApiError::too_large(format!(
            "more than {} files",
            limits.max_files
        )));
    }
    let total: u64 = d.files.iter().map(|f| f.content.len() as u64).sum();
    if total > limits.max_bytes.bytes() {
        return Err(ApiError::too_large("the files are too large"));
    }
    let mut files = Vec::with_capacity(d.files.len());
    for f in d.files {
        let path = corral_store::validate_path(&f.path, limits.max_depth)
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
        files.push(RevisionFile {
            path,
            content: f.content,
        });
    }
    let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
    corral_store::check_tree(&paths).map_err(|e| ApiError::bad_request(e.to_string()))?;
    let meta = st
        .store
        .create_revision(NewRevision {
            owner: caller.id.clone(),
            kind: d.kind,
            language: d.language,
            status: d.status,
            suite: d.suite,
            score: d.score,
            max_score: d.max_score,
            summary,
            files,
        })
        .await?;
    tracing::info!(revision = %meta.id, caller = %caller.id, kind = meta.kind.as_str(), "revision stored");
    Ok(meta)
}

/// Revisions without their files, newest first: the caller's, or everyone's (`all`, staff).
pub async fn list(
    st: &SharedState,
    caller: &Caller,
    all: bool,
    kind: Option<RevisionKind>,
    limit: Option<u32>,
) -> Result<Vec<RevisionMeta>, ApiError> {
    let owner = if all {
        caller.require_staff()?;
        None
    } else {
        Some(caller.id.clone())
    };
    let filter = RevisionFilter {
        owner,
        kind,
        limit: limit.unwrap_or(DEFAULT_LIST).clamp(1, MAX_LIST),
    };
    Ok(st.store.list_revisions(&filter).await?)
}

/// One of the caller's revisions, with its files.
pub async fn get(st: &SharedState, caller: &Caller, id: &str) -> Result<Revision, ApiError> {
    let missing = || ApiError::not_found(format!("no revision {id:?}"));
    if id.len() > 64 {
        return Err(missing());
    }
    let r = st
        .store
        .get_revision(id)
        .await?
        .filter(|r| r.meta.owner == caller.id)
        .ok_or_else(missing)?;
    Ok(r)
}
