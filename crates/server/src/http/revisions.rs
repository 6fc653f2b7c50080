//! `/revisions`: the browser editor's history. Every Run and Save stores the editor's files with
//! how it went, every Check (recorded by `POST /check` itself) with its report's score; a user
//! lists and restores their own (another user's are a 404, like a missing id). Staff may list
//! everyone's (`?scope=all`) for the staff page's recent submissions.

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Extension, Json, Router};
use corral_store::{RevisionFile, RevisionKind};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::json::ApiJson;
use crate::error::{ApiError, ErrorBody};
use crate::http::path::Path;
use crate::service::caller::Caller;
use crate::service::revisions;
use crate::state::SharedState;

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
    /// Relative, `/`-separated path (the rules of `/upload`: no `.` or `..` folders either).
    #[schema(
        example = "main.c",
        min_length = 1,
        pattern = r"^[^/\\\u0000-\u001f\u007f-\u009f]+(/[^/\\\u0000-\u001f\u007f-\u009f]+)*$"
    )]
    pub path: String,
    /// The file's text.
    pub content: String,
}

/// A revision to keep.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RevisionRequest {
    /// What made it: `run` or `save`. A `check` is refused (422): the server records a check's
    /// revision itself, from its report (`POST /check?format=json` with `revision`).
    pub kind: RevisionKindName,
    /// The editor's language id (`c`, `python`, …); at most 200 bytes, no control characters.
    // The document's limits are in characters: 50 of up to 4 bytes stay within 200 bytes.
    #[schema(
        example = "c",
        max_length = 50,
        pattern = r"^[^\u0000-\u0008\u000b-\u001f\u007f-\u009f]*$"
    )]
    pub language: String,
    /// How it went: a run's status (`ok`, `time_limit`, `compile_error`, …), `passed`/`failed`
    /// for a check, `saved`. At most 200 bytes, no control characters.
    #[schema(
        example = "ok",
        max_length = 50,
        pattern = r"^[^\u0000-\u0008\u000b-\u001f\u007f-\u009f]*$"
    )]
    pub status: String,
    /// The suite a check ran (at most 200 bytes, no control characters).
    #[serde(default)]
    #[schema(
        max_length = 50,
        pattern = r"^[^\u0000-\u0008\u000b-\u001f\u007f-\u009f]*$"
    )]
    pub suite: Option<String>,
    #[serde(default)]
    pub score: Option<f64>,
    #[serde(default)]
    pub max_score: Option<f64>,
    /// One line for people (`exited with status 0`); at most 2000 bytes, no control characters.
    #[serde(default)]
    #[schema(
        max_length = 500,
        pattern = r"^[^\u0000-\u0008\u000b-\u001f\u007f-\u009f]*$"
    )]
    pub summary: Option<String>,
    /// At least one file.
    #[schema(min_items = 1)]
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
    #[param(example = 10)]
    pub limit: Option<u32>,
    /// `mine` (default) or `all` (staff: everyone's).
    #[param(value_type = Option<String>, example = "mine")]
    pub scope: Option<Scope>,
    /// Only revisions of this kind.
    #[param(value_type = Option<String>, example = "run")]
    pub kind: Option<RevisionKindName>,
}

/// Keep a revision of the editor's files.
#[utoipa::path(
    post, path = "/revisions", tag = "editor", operation_id = "create_revision",
    request_body(content = RevisionRequest, example = json!({
        "kind": "run", "language": "c", "status": "ok", "summary": "exited with status 0",
        "files": [{"path": "main.c", "content": "int main(void) { return 0; }\n"}]
    })),
    responses(
        (status = 201, description = "Stored", body = RevisionMetaDoc,
            links(("GetRevision" = (operation_id = "get_revision", parameters(("id" = "$response.body#/id")))))),
        (status = 400, description = "A bad file name, or a name both file and folder", body = ErrorBody),
        (status = 413, description = "Too many files or bytes", body = ErrorBody),
        (status = 422, description = "Bad fields, or a check's (POST /check records those)", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn create(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
    ApiJson(req): ApiJson<RevisionRequest>,
) -> Result<(StatusCode, Json<RevisionMetaDoc>), ApiError> {
    let draft = revisions::Draft {
        kind: req.kind.into(),
        language: req.language,
        status: req.status,
        suite: req.suite,
        score: req.score,
        max_score: req.max_score,
        summary: req.summary,
        files: req
            .files
            .into_iter()
            .map(|f| RevisionFile {
                path: f.path,
                content: f.content,
            })
            .collect(),
    };
    let meta = revisions::create(&st, &caller, draft).await?;
    Ok((StatusCode::CREATED, Json(meta_doc(meta))))
}

/// List revisions, newest first: the caller's own, or (staff, `scope=all`) everyone's.
#[utoipa::path(
    get, path = "/revisions", tag = "editor", operation_id = "list_revisions",
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
    let all = q.scope.unwrap_or_default() == Scope::All;
    let list = revisions::list(&st, &caller, all, q.kind.map(Into::into), q.limit).await?;
    Ok(Json(list.into_iter().map(meta_doc).collect()))
}

/// One of the caller's revisions, with its files.
#[utoipa::path(
    get, path = "/revisions/{id}", tag = "editor", operation_id = "get_revision",
    params(("id" = String, Path, description = "Revision id", example = "0123456789abcdef0123456789abcdef")),
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
    let r = revisions::get(&st, &caller, &id).await?;
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
