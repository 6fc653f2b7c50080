//! Judge0's shapes as the OpenAPI document describes them (the handlers build them as JSON, in
//! [`super`] and `translate`): a submission as it is sent and as it is read back, batches, the
//! status object, languages, `about`, `config_info` and Judge0's error bodies. Types for the
//! document only; `crates/server/tests/openapi.rs` checks real answers against them.
#![allow(dead_code)]

use std::collections::BTreeMap;

use serde::Serialize;
use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Schema, Type};
use utoipa::openapi::RefOr;
use utoipa::ToSchema;

/// A submission as Judge0 takes it (`POST /judge0/submissions`, and each item of a batch).
/// Fields Judge0 has and corral does not use are ignored (`stack_limit`, …), as are unknown
/// ones. Numbers and booleans are also taken as their text (`"2.5"`, `"true"`), as Judge0
/// (Rails) casts them.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"source_code": "print(input()[::-1])", "language_id": 71, "stdin": "corral", "expected_output": "larroc"}))]
pub struct Judge0SubmissionRequest {
    /// The program (base64 with `base64_encoded=true`); blank is refused (`can't be blank`).
    pub source_code: String,
    /// A Judge0 language id of `GET /judge0/languages` (46 Bash, 50 C, 52 and 54 C++, 62 Java,
    /// 63 JavaScript, 71 Python, 73 Rust, …), as a number or as its digits in text (`"71"`).
    #[schema(value_type = Judge0LanguageId)]
    pub language_id: u32,
    /// Appended to the language's compile command.
    pub compiler_options: Option<String>,
    /// Appended to the language's run command.
    pub command_line_arguments: Option<String>,
    /// The program's standard input (base64 with `base64_encoded=true`).
    pub stdin: Option<String>,
    /// Compared with the output as Judge0 compares it: each line's trailing whitespace and the
    /// trailing blank lines ignored (base64 with `base64_encoded=true`).
    pub expected_output: Option<String>,
    /// Seconds of CPU time (capped by the server's caps).
    #[schema(exclusive_minimum = 0, maximum = 86400)]
    pub cpu_time_limit: Option<f64>,
    /// Seconds added to `cpu_time_limit`.
    #[schema(exclusive_minimum = 0, maximum = 86400)]
    pub cpu_extra_time: Option<f64>,
    /// Seconds of wall-clock time (capped).
    #[schema(exclusive_minimum = 0, maximum = 86400)]
    pub wall_time_limit: Option<f64>,
    /// Kilobytes (capped).
    #[schema(minimum = 4096)]
    pub memory_limit: Option<f64>,
    /// Taken and ignored (the memory limit bounds the stack).
    pub stack_limit: Option<u64>,
    /// Processes and threads (capped).
    pub max_processes_and_or_threads: Option<u64>,
    /// Kilobytes: the largest file the program may write (capped).
    pub max_file_size: Option<u64>,
    /// Refused (422) unless the server's `[judge0] allow_network` is on.
    pub enable_network: Option<bool>,
    /// A base64 zip of more files, unpacked beside the source (always base64, whatever
    /// `base64_encoded` says); within the server's upload limits, with no links, special
    /// files, encrypted entries, paths leaving the folder or the source file's own name.
    #[schema(content_encoding = "base64")]
    pub additional_files: Option<String>,
    /// Receives corral's signed callback (`POST`, `Corral-Signature`) when the submission is
    /// finished, not Judge0's `PUT`.
    #[schema(format = "uri")]
    pub callback_url: Option<String>,
    /// Standard error goes into `stdout`, in arrival order.
    pub redirect_stderr_to_stdout: Option<bool>,
    /// Run the program up to this many times (compiled once), stopping at the first run that is
    /// not accepted (at most `config_info`'s `max_number_of_runs`).
    #[schema(minimum = 1)]
    pub number_of_runs: Option<u32>,
}

/// A Judge0 language id: a number, or its digits as text.
pub struct Judge0LanguageId;

impl utoipa::PartialSchema for Judge0LanguageId {
    fn schema() -> RefOr<Schema> {
        let number = ObjectBuilder::new()
            .schema_type(Type::Integer)
            .minimum(Some(0));
        let text = ObjectBuilder::new()
            .schema_type(Type::String)
            .pattern(Some(r"^\s*[0-9]+\s*$"));
        OneOfBuilder::new()
            .item(number)
            .item(text)
            .description(Some(
                "A Judge0 language id: a number, or its digits as text",
            ))
            .examples([71, 50])
            .into()
    }
}

impl ToSchema for Judge0LanguageId {}

/// A submission as Judge0 answers it: the fields `fields=` asks for (by default `stdout`,
/// `time`, `memory`, `stderr`, `token`, `compile_output`, `message` and `status`; `*`: all).
/// `POST /judge0/submissions` without `wait=true` answers `token` alone. With
/// `base64_encoded=true` every text field is base64 (a program's output that is not UTF-8 then
/// comes back byte for byte; without it, with replacement characters).
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"stdout": "larroc\n", "time": "0.012", "memory": 3456, "stderr": null, "token": "5f0c9e4f-0b8f-4a55-a3a8-a1c64b3b8d2e", "compile_output": null, "message": null, "status": {"id": 3, "description": "Accepted"}}))]
pub struct Judge0Submission {
    /// The submission's id, written as a UUID.
    #[schema(required = false, format = "uuid")]
    pub token: String,
    /// As it was sent (the language's source file of the submission).
    pub source_code: Option<String>,
    /// The id the request named.
    pub language_id: Option<u32>,
    /// The language as `/judge0/languages` names it.
    pub language: Option<Judge0LanguageRef>,
    /// Null when none was sent.
    pub stdin: Option<String>,
    pub expected_output: Option<String>,
    pub stdout: Option<String>,
    pub stderr: Option<String>,
    /// What the compiler said (null when it said nothing).
    pub compile_output: Option<String>,
    /// Why a run was stopped, in words (which limit, for status 12).
    pub message: Option<String>,
    pub exit_code: Option<i64>,
    /// The signal that ended the program.
    pub exit_signal: Option<i64>,
    #[schema(required = false)]
    pub status: Judge0Status,
    /// `status.id`.
    #[schema(required = false, minimum = 1, maximum = 14)]
    pub status_id: u32,
    /// ISO 8601, UTC.
    #[schema(required = false, format = DateTime)]
    pub created_at: String,
    #[schema(format = DateTime)]
    pub finished_at: Option<String>,
    /// CPU seconds as text (`"0.012"`); with `number_of_runs`, the runs' mean.
    #[schema(example = "0.012")]
    pub time: Option<String>,
    /// Wall-clock seconds as text.
    #[schema(example = "0.034")]
    pub wall_time: Option<String>,
    /// Peak memory in kilobytes; with `number_of_runs`, the runs' mean.
    pub memory: Option<i64>,
    /// Seconds, as the submission was judged (after the server's caps).
    pub cpu_time_limit: Option<f64>,
    pub wall_time_limit: Option<f64>,
    /// Kilobytes.
    pub memory_limit: Option<u64>,
    pub max_processes_and_or_threads: Option<u64>,
    /// Kilobytes.
    pub max_file_size: Option<u64>,
    pub command_line_arguments: Option<String>,
    pub compiler_options: Option<String>,
    #[schema(required = false)]
    pub number_of_runs: u32,
    #[schema(required = false)]
    pub redirect_stderr_to_stdout: bool,
    #[schema(required = false)]
    pub enable_network: bool,
    pub callback_url: Option<String>,
}

/// A submission's language: `{id, name}`.
#[derive(Serialize, ToSchema)]
pub struct Judge0LanguageRef {
    pub id: u32,
    pub name: String,
}

/// One of Judge0's 14 statuses: 1 In Queue, 2 Processing, 3 Accepted, 4 Wrong Answer, 5 Time
/// Limit Exceeded, 6 Compilation Error, 7–10 Runtime Error (SIGSEGV, SIGXFSZ, SIGFPE, SIGABRT),
/// 11 Runtime Error (NZEC), 12 Runtime Error (Other: memory and output limits among them), 13
/// Internal Error, 14 Exec Format Error.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"id": 3, "description": "Accepted"}))]
pub struct Judge0Status {
    #[schema(minimum = 1, maximum = 14)]
    pub id: u32,
    pub description: String,
}

/// `POST /judge0/submissions/batch`'s body.
#[derive(Serialize, ToSchema)]
pub struct Judge0BatchRequest {
    /// At most `config_info`'s `max_submission_batch_size`; each read on its own.
    #[schema(min_items = 1)]
    pub submissions: Vec<Judge0SubmissionRequest>,
}

/// One item of a batch's answer, in the order of the request: the submission's token, or why
/// that item was refused (as a single submission's refusal: its fields' errors, or `{"error"}`).
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
pub enum Judge0BatchItem {
    // `{"error"}` before the fields' errors: a typed client tries them in this order, and a
    // map of anything reads `{"error"}` too.
    Token(Judge0Token),
    Error(Judge0Error),
    Invalid(Judge0ValidationErrors),
}

/// Why a submission was refused with 422: the fields Judge0's validations refuse, or (not
/// Judge0's) an `Idempotency-Key` this token sent before with another body, in corral's error
/// body.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
pub enum Judge0Refusal {
    // In this order for typed clients, as in `Judge0BatchItem`.
    Error(Judge0Error),
    Invalid(Judge0ValidationErrors),
}

/// A submission queued.
#[derive(Serialize, ToSchema)]
pub struct Judge0Token {
    #[schema(format = "uuid", example = "5f0c9e4f-0b8f-4a55-a3a8-a1c64b3b8d2e")]
    pub token: String,
}

/// `GET /judge0/submissions/batch`'s answer.
#[derive(Serialize, ToSchema)]
pub struct Judge0Submissions {
    /// In the order of `tokens`; null for a token that names no submission of this caller.
    pub submissions: Vec<Option<Judge0Submission>>,
}

/// The fields Judge0's validations refuse, each with its messages (`base` when no one field is
/// to blame), as Judge0 answers them.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"language_id": ["language with id 9999 doesn't exist"]}))]
pub struct Judge0ValidationErrors(pub BTreeMap<String, Vec<String>>);

/// Judge0's error body, `{"error"}`. Refusals of corral's own (a token, the rate limit, an
/// overloaded server) also carry corral's `message` beside `error`.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"error": "delete not allowed"}))]
pub struct Judge0Error {
    pub error: String,
    #[schema(required = false)]
    pub message: String,
}

/// A language of `GET /judge0/languages` (`/languages/all` adds `is_archived`).
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"id": 71, "name": "Python (3.11)"}))]
pub struct Judge0Language {
    pub id: u32,
    pub name: String,
    /// `/languages/all` only; corral archives none.
    #[schema(required = false)]
    pub is_archived: bool,
}

/// `GET /judge0/languages/{id}`: a language with its commands as this server runs them.
#[derive(Serialize, ToSchema)]
pub struct Judge0LanguageDetail {
    pub id: u32,
    pub name: String,
    pub is_archived: bool,
    /// The file the source is saved as.
    pub source_file: String,
    /// Null for an interpreted language.
    pub compile_cmd: Option<String>,
    pub run_cmd: String,
}

/// `GET /judge0/about`.
#[derive(Serialize, ToSchema)]
pub struct Judge0About {
    /// The Judge0 version this surface answers as.
    #[schema(example = "1.13.1")]
    pub version: String,
    pub homepage: String,
    pub source_code: String,
    /// corral's own version.
    pub maintainer: String,
}

/// `GET /judge0/config_info`: Judge0's configuration keys, from corral's caps and defaults
/// (times in seconds, sizes in kilobytes).
#[derive(Serialize, ToSchema)]
pub struct Judge0ConfigInfo {
    pub maintenance_mode: bool,
    pub enable_wait_result: bool,
    pub enable_compiler_options: bool,
    pub allowed_languages_for_compile_options: Vec<String>,
    pub enable_command_line_arguments: bool,
    pub enable_submission_delete: bool,
    pub enable_callbacks: bool,
    pub callbacks_max_tries: u32,
    pub callbacks_timeout: f64,
    pub enable_additional_files: bool,
    /// A token's submissions waiting at most (`submissions.max_pending_per_owner`).
    pub max_queue_size: u64,
    pub cpu_time_limit: f64,
    pub max_cpu_time_limit: f64,
    pub cpu_extra_time: f64,
    pub max_cpu_extra_time: f64,
    pub wall_time_limit: f64,
    pub max_wall_time_limit: f64,
    pub memory_limit: u64,
    pub max_memory_limit: u64,
    pub stack_limit: u64,
    pub max_stack_limit: u64,
    pub max_processes_and_or_threads: u64,
    pub max_max_processes_and_or_threads: u64,
    pub enable_per_process_and_thread_time_limit: bool,
    pub allow_enable_per_process_and_thread_time_limit: bool,
    pub enable_per_process_and_thread_memory_limit: bool,
    pub allow_enable_per_process_and_thread_memory_limit: bool,
    pub max_file_size: u64,
    pub max_max_file_size: u64,
    pub number_of_runs: u32,
    pub max_number_of_runs: u32,
    pub redirect_stderr_to_stdout: bool,
    /// Kilobytes an `additional_files` zip may unpack to.
    pub max_extract_size: u64,
    pub enable_batched_submissions: bool,
    pub max_submission_batch_size: u64,
    pub submission_cache_duration: f64,
    pub use_docs_as_homepage: bool,
    /// Whether a submission has network without asking (never).
    pub enable_network: bool,
    /// Whether a submission may ask for it (`enable_network: true`): `[judge0] allow_network`.
    pub allow_enable_network: bool,
}
