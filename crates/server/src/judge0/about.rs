//! What Judge0 says of itself: its statuses, its version, its configuration (from corral's caps
//! and defaults).

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use super::doc::{Judge0About, Judge0ConfigInfo, Judge0Status};
use super::translate::STATUSES;
use crate::state::SharedState;

/// The Judge0 version this surface answers as (clients map language aliases by it).
pub const VERSION: &str = "1.13.1";

/// `GET /judge0/statuses`.
#[utoipa::path(
    get, path = "/judge0/statuses", tag = "judge0", operation_id = "judge0_list_statuses",
    responses((status = 200, description = "Judge0's 14 statuses", body = Vec<Judge0Status>)),
    security(("bearer" = []), ("judge0" = []))
)]
pub async fn statuses() -> Response {
    Json(
        STATUSES
            .iter()
            .map(|(id, d)| json!({"id": id, "description": d}))
            .collect::<Vec<_>>(),
    )
    .into_response()
}

/// `GET /judge0/about`.
#[utoipa::path(
    get, path = "/judge0/about", tag = "judge0", operation_id = "judge0_about",
    responses((status = 200, description = "The Judge0 version this surface answers as", body = Judge0About)),
    security(("bearer" = []), ("judge0" = []))
)]
pub async fn about() -> Response {
    Json(json!({
        "version": VERSION,
        "homepage": "https://example.invalid/corral",
        "source_code": "https://example.invalid/corral",
        "maintainer": concat!("corral ", env!("CARGO_PKG_VERSION"), " (a Judge0-compatible surface)"),
    }))
    .into_response()
}

/// `GET /judge0/config_info`: Judge0's configuration keys, from corral's caps and defaults.
#[utoipa::path(
    get, path = "/judge0/config_info", tag = "judge0", operation_id = "judge0_config_info",
    responses((status = 200, description = "Judge0's configuration keys, from this server's caps and defaults", body = Judge0ConfigInfo)),
    security(("bearer" = []), ("judge0" = []))
)]
pub async fn config_info(State(st): State<SharedState>) -> Response {
    let (d, c) = (&st.defaults, &st.caps);
    let q = &st.config.submissions;
    Json(json!({
        "maintenance_mode": false,
        "enable_wait_result": true,
        "enable_compiler_options": true,
        "allowed_languages_for_compile_options": [],
        "enable_command_line_arguments": true,
        "enable_submission_delete": false,
        "enable_callbacks": true,
        "callbacks_max_tries": q.callback_max_attempts,
        "callbacks_timeout": q.callback_timeout.duration().as_secs_f64(),
        "enable_additional_files": true,
        "max_queue_size": q.max_pending_per_owner,
        "cpu_time_limit": d.cpu_time.0.as_secs_f64(),
        "max_cpu_time_limit": c.cpu_time.0.as_secs_f64(),
        "cpu_extra_time": 0.0,
        "max_cpu_extra_time": 0.0,
        "wall_time_limit": d.wall_time.0.as_secs_f64(),
        "max_wall_time_limit": c.wall_time.0.as_secs_f64(),
        "memory_limit": d.memory.0 / 1024,
        "max_memory_limit": c.memory.0 / 1024,
        "stack_limit": d.memory.0 / 1024,
        "max_stack_limit": c.memory.0 / 1024,
        "max_processes_and_or_threads": d.pids,
        "max_max_processes_and_or_threads": c.pids,
        "enable_per_process_and_thread_time_limit": false,
        "allow_enable_per_process_and_thread_time_limit": false,
        "enable_per_process_and_thread_memory_limit": false,
        "allow_enable_per_process_and_thread_memory_limit": false,
        "max_file_size": d.file_size.0 / 1024,
        "max_max_file_size": c.file_size.0 / 1024,
        "number_of_runs": 1,
        "max_number_of_runs": st.config.judge0.max_number_of_runs,
        "redirect_stderr_to_stdout": false,
        // Judge0's unit (KB): what an `additional_files` zip may unpack to (the upload limit).
        "max_extract_size": st.config.upload.max_bytes.bytes() / 1024,
        "enable_batched_submissions": true,
        "max_submission_batch_size": q.batch_max,
        "submission_cache_duration": 0.0,
        "use_docs_as_homepage": false,
        // Submissions run without network unless they ask; they may ask where `[judge0]` allows.
        "enable_network": false,
        "allow_enable_network": st.config.judge0.allow_network,
    }))
    .into_response()
}
