//! Staff's grading of a whole suite: `GET /suites/{id}/gradebook` (JSON or CSV) and `POST
//! /suites/{id}/regrade`.

use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::error::{ApiError, ErrorBody};
use crate::http::path::Path;
use crate::service::caller::Caller;
use crate::service::submissions::gradebook::{self, Gradebook};
use crate::service::submissions::regrade::{self, Regraded};
use crate::state::SharedState;

#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct GradebookQuery {
    /// `json` (the default) or `csv`.
    #[param(example = "csv")]
    pub format: Option<String>,
}

/// A suite's gradebook (staff): each student's latest finished submission it graded.
///
/// A regrade stands where its original stands (regrading an older submission does not replace a
/// newer one's grade); staff's own submissions are left out. `?format=csv` answers the CSV a
/// spreadsheet or an LMS imports (`student,owner,submission,score,max_score,percent,verdict,
/// status,submitted_at,finished_at`, then a column per report row: its points, or `pass` /
/// `fail` / `skip`), with the quoting and formula defusing of `corral grade`'s `gradebook.csv`.
/// Each row has the report's rows as staff see them (`checks`), so a course's export of every
/// check's result is one request.
#[utoipa::path(
    get, path = "/suites/{id}/gradebook", tag = "suites", operation_id = "get_gradebook",
    params(("id" = String, Path, description = "Suite id", example = "hello"), GradebookQuery),
    responses(
        (status = 200, description = "The gradebook",
         content((Gradebook = "application/json"), (String = "text/csv"))),
        (status = 400, description = "An unknown format", body = ErrorBody),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 403, description = "Not a staff token", body = ErrorBody),
        (status = 404, description = "No such suite", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn get_gradebook(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    q: Result<Query<GradebookQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(q) = q.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let csv = match q.format.as_deref() {
        None | Some("json") => false,
        Some("csv") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "format {other:?}: json or csv"
            )))
        }
    };
    let book = gradebook::gradebook(&st, &caller, &id).await?;
    Ok(if csv {
        let name = format!("attachment; filename=\"gradebook-{}.csv\"", file_name(&id));
        (
            [
                (header::CONTENT_TYPE, "text/csv; charset=utf-8".to_string()),
                (header::CONTENT_DISPOSITION, name),
            ],
            gradebook::csv(&book),
        )
            .into_response()
    } else {
        Json(book).into_response()
    })
}

/// A suite id as a file name in a header: only what needs no quoting.
fn file_name(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SuiteRegraded {
    /// Per student, the regrade queued or why its submission was not regraded.
    pub submissions: Vec<Regraded>,
}

/// Judge every student's latest finished submission of a suite again (staff).
///
/// After a fix to the suite: each row of its gradebook is regraded by the suite as it is now
/// (new submissions; the old verdicts stay). A suite that no longer loads is refused before
/// anything is queued. A submission whose files retention deleted is listed with its error.
#[utoipa::path(
    post, path = "/suites/{id}/regrade", tag = "suites", operation_id = "regrade_suite",
    params(("id" = String, Path, description = "Suite id", example = "hello")),
    responses(
        (status = 202, description = "Regrades queued", body = SuiteRegraded),
        (status = 401, description = "No or unknown token", body = ErrorBody),
        (status = 403, description = "Not a staff token", body = ErrorBody),
        (status = 404, description = "No such suite", body = ErrorBody),
        (status = 422, description = "The suite does not load", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn regrade_suite(
    State(st): State<SharedState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<SuiteRegraded>), ApiError> {
    let submissions = regrade::regrade_suite(&st, &caller, &id).await?;
    Ok((StatusCode::ACCEPTED, Json(SuiteRegraded { submissions })))
}
