//! A Judge0-compatible surface (Judge0 CE 1.13.1's API) over the submission queue, so existing
//! Judge0 clients work by changing a URL: `/judge0/submissions` (+ `/batch`), `/judge0/languages`,
//! `/judge0/statuses`, `/judge0/about`, `/judge0/config_info`; `X-Auth-Token`; `base64_encoded`,
//! `wait`, `fields`; Judge0's status ids and response shape; multi-file programs
//! (`additional_files`, a zip read by corral-archive's bounded reader within the upload limits),
//! `number_of_runs`, `redirect_stderr_to_stdout`, and `enable_network` when `[judge0]` allows it.
//! Tokens are the submissions' ids written as UUIDs.
//!
//! Here: the routes. [`submissions`], [`languages`], [`about`]: the handlers; `extract`: what a
//! request carries, refused in Judge0's shape; `errors`: Judge0's error shapes; `translate`:
//! Judge0's shapes into corral's and back; [`doc`]: the shapes for the OpenAPI document.

pub mod about;
pub mod doc;
mod errors;
mod extract;
pub mod languages;
pub mod submissions;
mod translate;

use crate::state::SharedState;
use about::{about, config_info, statuses};
use languages::{language, languages, languages_all};
use submissions::{create, create_batch, delete_one, get_batch, get_one};

/// The routes, mounted under `/judge0` behind authentication (`X-Auth-Token` or a bearer token).
pub fn routes() -> axum::Router<SharedState> {
    use axum::routing::{get, post};
    axum::Router::new()
        .route("/judge0/submissions", post(create))
        .route(
            "/judge0/submissions/batch",
            post(create_batch).get(get_batch),
        )
        .route(
            "/judge0/submissions/{token}",
            get(get_one).delete(delete_one),
        )
        .route("/judge0/languages", get(languages))
        .route("/judge0/languages/all", get(languages_all))
        .route("/judge0/languages/{id}", get(language))
        .route("/judge0/statuses", get(statuses))
        .route("/judge0/about", get(about))
        .route("/judge0/config_info", get(config_info))
}
