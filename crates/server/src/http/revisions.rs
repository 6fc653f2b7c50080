//! `/revisions`: the browser editor's history. Every Run, Check and Save stores the editor's files
//! with how it went; a user lists and restores their own (another user's are a 404, like a missing
//! id). Staff may list everyone's (`?scope=all`) for the staff page's recent submissions.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Extension, Json, Router};
use corral_store::{NewRevision, RevisionFile, RevisionFilter, RevisionKind};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::json::ApiJson;
use crate::error::{ApiError, ErrorBody};
use crate::service::caller::Caller;
use crate::state::SharedState;

/// Text fields' limits (bytes).
const MAX_FIELD: usize = 200;
const MAX_SUMMARY: usize = 2000;
const DEFAULT_LIST: u32 = 50;
const MAX_LIST: u32 = 500;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum RevisionKindName {
    Run,
    Check,
    Save,
}

impl From<RevisionKindName> for RevisionKind {
    fn from(k: RevisionKindName) -> Self {
        match k {
            RevisionKindName::Run => RevisionKind::Run,
            RevisionKindName::Check => RevisionKind::Check,
            RevisionKindName::Save => RevisionKind::Save,
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RevisionFileDoc {
    /// Relative, `/`-separated path (the rules of `/upload`).
    #[schema(example = "main.c")]
    pub path: String,
    /// The file's text.
    pub content: String,
}

/// A revision to keep.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RevisionRequest {
    /// What made it: `run`, `check` or `save`.
    pub kind: RevisionKindName,
    /// The editor's language id (`c`, `python`, …).
    #[schema(example = "c")]
    pub language: String,
    /// How it went: a run's status (`ok`, `time_limit`, `compile_error`, …), `passed`/`failed`
    /// for a check, `saved`.
    #[schema(example = "ok")]
    pub status: String,
    /// The suite a check ran.
    #[serde(default)]
    pub suite: Option<String>,
    #[serde(default)]
    pub score: Option<f64>,
    #[serde(default)]
    pub max_score: Option<f64>,
    /// One line for people (`exited with status 0`).
    #[serde(default)]
    pub summary: Option<String>,
    pub files: Vec<RevisionFileDoc>,
}

/// A revision without its files.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RevisionMetaDoc {
    pub id: String,
    /// The owner's token id.
    pub owner: String,
    /// Unix seconds.
    pub created_at: i64,
    pub kind: RevisionKindName,
    pub language: String,
    pub status: String,
    pub suite: Option<String>,
    pub score: Option<f64>,
    pub max_score: Option<f64>,
    pub summary: String,
    pub files_count: u32,
    pub total_bytes: u64,
}

/// A revision with its files.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RevisionDoc {
    #[serde(flatten)]
    pub meta: RevisionMetaDoc,
    pub files: Vec<RevisionFileDoc>,
}

fn meta_doc(m: corral_store::RevisionMeta) -> RevisionMetaDoc {
    RevisionMetaDoc {
        id: m.id,
        owner: m.owner,
        created_at: m.created_at,
        kind: match m.kind {
            RevisionKind::Run => RevisionKindName::Run,
            RevisionKind::Check => RevisionKindName::Check,
            RevisionKind::Save => RevisionKindName::Save,
        },
        language: m.language,
        status: m.status,
        suite: m.suite,
        score: m.score,
        max_score: m.max_score,
        summary: m.summary,
        files_count: m.files_count,
        total_bytes: m.total_bytes,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema, Default)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// The caller's own revisions.
    #[default]
    Mine,
    /// Everyone's (staff only).
    All,
}

#[derive(Debug, Clone, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// At most this many, newest first (default 50, at most 500).
    pub limit: Option<u32>,
    /// `mine` (default) or `all` (staff: everyone's).
    #[param(value_type = Option<String>)]
    pub scope: Option<Scope>,
    /// Only revisions of this kind.
    #[param(value_type = Option<String>)]
    pub kind: Option<RevisionKindName>,
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

/// Keep a revision of the editor's files.
#[utoipa::path(
    post, path = "/revisions", tag = "editor",
    request_body = RevisionRequest,
    responses(
        (status = 201, description = "Stored", body = RevisionMetaDoc),
        (status = 400, description = "A bad file name, or a name both file and folder", body = ErrorBody),
        (status = 413, description = "Too many files or bytes", body = ErrorBody),
        (status = 422, description = "Bad fields", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn create(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
    ApiJson(req): ApiJson<RevisionRequest>,
) -> Result<(StatusCode, Json<RevisionMetaDoc>), ApiError> {
    text("language", &req.language, MAX_FIELD)?;
    text("status", &req.status, MAX_FIELD)?;
    if let Some(s) = &req.suite {
        text("suite", s, MAX_FIELD)?;
    }
    let summary = req.summary.unwrap_or_default();
    text("summary", &summary, MAX_SUMMARY)?;
    for (name, v) in [("score", req.score), ("max_score", req.max_score)] {
        if v.is_some_and(|x| !x.is_finite()) {
            return Err(ApiError::unprocessable(format!("{name} is not a number")));
        }
    }
    let limits = &st.config.upload;
    if req.files.is_empty() {
        return Err(ApiError::unprocessable(
            "a revision needs at least one file",
        ));
    }
    if req.files.len() > limits.max_files {
        return Err(ApiError::too_large(format!(
            "more than {} files",
            limits.max_files
        )));
    }
    let total: u64 = req.files.iter().map(|f| f.content.len() as u64).sum();
    if total > limits.max_bytes.bytes() {
        return Err(ApiError::too_large("the files are too large"));
    }
    let mut files = Vec::with_capacity(req.files.len());
    for f in req.files {
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
            kind: req.kind.into(),
            language: req.language,
            status: req.status,
            suite: req.suite,
            score: req.score,
            max_score: req.max_score,
            summary,
            files,
        })
        .await?;
    tracing::info!(revision = %meta.id, caller = %caller.id, kind = meta.kind.as_str(), "revision stored");
    Ok((StatusCode::CREATED, Json(meta_doc(meta))))
}

/// List revisions, newest first: the caller's own, or (staff, `scope=all`) everyone's.
#[utoipa::path(
    get, path = "/revisions", tag = "editor",
    params(ListQuery),
    responses(
        (status = 200, description = "Revisions without their files", body = Vec<RevisionMetaDoc>),
        (status = 403, description = "scope=all without a staff token", body = ErrorBody),
        (status = 422, description = "A bad query (limit, scope, kind)", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn list(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
    q: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Vec<RevisionMetaDoc>>, ApiError> {
    let Query(q) = q.map_err(|e| ApiError::unprocessable(e.body_text()))?;
    let owner = match q.scope.unwrap_or_default() {
        Scope::Mine => Some(caller.id.clone()),
        Scope::All => {
            caller.require_staff()?;
            None
        }
    };
    let filter = RevisionFilter {
        owner,
        kind: q.kind.map(Into::into),
        limit: q.limit.unwrap_or(DEFAULT_LIST).clamp(1, MAX_LIST),
    };
    let list = st.store.list_revisions(&filter).await?;
    Ok(Json(list.into_iter().map(meta_doc).collect()))
}

/// One of the caller's revisions, with its files.
#[utoipa::path(
    get, path = "/revisions/{id}", tag = "editor",
    params(("id" = String, Path, description = "Revision id")),
    responses(
        (status = 200, description = "The revision", body = RevisionDoc),
        (status = 404, description = "No such revision of this caller", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn get_one(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Json<RevisionDoc>, ApiError> {
    let missing = || ApiError::not_found(format!("no revision {id:?}"));
    if id.len() > 64 {
        return Err(missing());
    }
    let r = st
        .store
        .get_revision(&id)
        .await?
        .filter(|r| r.meta.owner == caller.id)
        .ok_or_else(missing)?;
    Ok(Json(RevisionDoc {
        meta: meta_doc(r.meta),
        files: r
            .files
            .into_iter()
            .map(|f| RevisionFileDoc {
                path: f.path,
                content: f.content,
            })
            .collect(),
    }))
}

/// The routes (behind authentication).
pub fn routes() -> Router<SharedState> {
    Router::new()
        .route("/revisions", get(list).post(create))
        .route("/revisions/{id}", get(get_one))
}
