//! Judge0's languages: the ids this server maps to its languages, listed when it has them.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::doc::{Judge0Error, Judge0Language, Judge0LanguageDetail};
use super::translate::LANGUAGE_IDS;
use crate::state::SharedState;

use super::errors::j0_error;
use super::extract::J0Path;

fn language_json(st: &SharedState, id: u32, reg: &str) -> Option<Value> {
    // The commands as this server runs them by default (the memory limit filled in).
    let l = crate::service::runs::sized_by_default(st, st.languages.get(reg).ok()?)?;
    Some(json!({
        "id": id,
        "name": l.name,
        "is_archived": false,
        "source_file": l.source,
        "compile_cmd": l.compile,
        "run_cmd": l.run,
    }))
}

/// `GET /judge0/languages`: the registry's languages this host has, with Judge0's ids.
#[utoipa::path(
    get, path = "/judge0/languages", tag = "judge0", operation_id = "judge0_list_languages",
    responses((status = 200, description = "The languages this server has, under Judge0's ids (`{id, name}`)", body = Vec<Judge0Language>)),
    security(("bearer" = []), ("judge0" = []))
)]
pub async fn languages(State(st): State<SharedState>) -> Response {
    language_list(st, false).await
}

/// `GET /judge0/languages/all`: the same with `is_archived` (corral archives none).
#[utoipa::path(
    get, path = "/judge0/languages/all", tag = "judge0", operation_id = "judge0_list_all_languages",
    responses((status = 200, description = "The same languages with `is_archived` (false)", body = Vec<Judge0Language>)),
    security(("bearer" = []), ("judge0" = []))
)]
pub async fn languages_all(State(st): State<SharedState>) -> Response {
    language_list(st, true).await
}

async fn language_list(st: SharedState, all: bool) -> Response {
    let st2 = st.clone();
    // Every id this server maps is listed (52 and 54 are both C++, as Judge0 lists its two
    // compilers): a client checks an id against the list before it submits.
    let list = tokio::task::spawn_blocking(move || {
        LANGUAGE_IDS
            .iter()
            .filter(|(_, reg)| {
                // A language in an image is listed when this server has the image.
                st2.languages
                    .get(reg)
                    .is_ok_and(|l| l.root(Some(&st2.images)).is_ok())
            })
            .filter_map(|(id, reg)| {
                language_json(&st2, *id, reg).map(|mut v| {
                    if let Some(o) = v.as_object_mut() {
                        let keep: &[&str] = if all {
                            &["id", "name", "is_archived"]
                        } else {
                            &["id", "name"]
                        };
                        o.retain(|k, _| keep.contains(&k.as_str()));
                    }
                    v
                })
            })
            .collect::<Vec<_>>()
    })
    .await
    .unwrap_or_default();
    Json(list).into_response()
}

/// `GET /judge0/languages/{id}`.
#[utoipa::path(
    get, path = "/judge0/languages/{id}", tag = "judge0", operation_id = "judge0_get_language",
    params(("id" = u32, Path, description = "A Judge0 language id", example = 71)),
    responses(
        (status = 200, description = "The language with its commands as this server runs them", body = Judge0LanguageDetail),
        (status = 400, description = "The id is not UTF-8 once percent-decoded", body = Judge0Error),
        (status = 404, description = "No language of this server has that id, or it is not a number (`{\"error\": \"Not found\"}`)", body = Judge0Error),
    ),
    security(("bearer" = []), ("judge0" = []))
)]
pub async fn language(State(st): State<SharedState>, J0Path(id): J0Path<String>) -> Response {
    // Judge0 answers any id it has no language of (`-1`, `abc`) 404, not a parse error.
    let id = id.parse::<u32>().ok();
    match LANGUAGE_IDS
        .iter()
        .find(|(i, _)| Some(*i) == id)
        .and_then(|(i, reg)| language_json(&st, *i, reg))
    {
        Some(v) => Json(v).into_response(),
        None => j0_error(StatusCode::NOT_FOUND, "Not found"),
    }
}
