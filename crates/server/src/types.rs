//! Request and response bodies. The OpenAPI document is generated from these types.

use std::collections::BTreeMap;

use axum::extract::{FromRequest, Request};
use corral_sandbox::{Limits, LimitsRequest, Outcome};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::ApiError;

/// A JSON body whose every rejection (bad JSON, wrong types, unknown fields, wrong content type,
/// too large) is a JSON error with a 4xx status.
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(ApiJson(v)),
            Err(r) => {
                let status = r.status();
                let code = match status.as_u16() {
                    413 => "too_large",
                    415 => "unsupported_media_type",
                    422 => "invalid",
                    _ => "bad_json",
                };
                Err(ApiError::new(status, code, r.body_text()))
            }
        }
    }
}

pub use corral_judge::Cmd;

/// Where to run: a fresh sandbox with an upload's files as `$HOME` (`homedir`), or the sandbox a
/// previous run returned (`id`). Neither: a fresh, empty sandbox.
#[derive(Debug, Clone, Default, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SandboxRef {
    /// An upload id from `/upload`.
    #[serde(default)]
    pub homedir: Option<String>,
    /// A sandbox id from an earlier `/run` (or WebSocket `exit` event).
    #[serde(default)]
    pub id: Option<String>,
}

/// One limit: a duration (`"100ms"`, `"2s"`, or a number of seconds) or a size (`"64M"`, or a
/// number of bytes), or a count.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub enum LimitValue {
    Text(String),
    Number(u64),
}

/// Resource limits, the same keys and units as `corral run` (missing keys take the server's
/// defaults; values above the server's caps are lowered to the caps).
#[derive(Debug, Clone, Serialize, ToSchema)]
#[allow(dead_code)]
pub struct LimitsDoc {
    /// CPU time of the whole process tree (`"5s"`).
    pub cpu_time: Option<LimitValue>,
    /// Wall-clock time (`"10s"`).
    pub wall_time: Option<LimitValue>,
    /// Memory of the whole process tree (`"256M"`).
    pub memory: Option<LimitValue>,
    /// Processes and threads at once.
    pub pids: Option<LimitValue>,
    /// Captured stdout + stderr (`"1M"`).
    pub output: Option<LimitValue>,
    /// Size of the working directory, `/tmp` and `/dev/shm` (`"64M"`).
    pub disk: Option<LimitValue>,
    /// Open files per process.
    pub open_files: Option<LimitValue>,
    /// Largest file a process may write (`"64M"`).
    pub file_size: Option<LimitValue>,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RunRequest {
    pub cmd: Cmd,
    #[serde(default)]
    pub sandbox: Option<SandboxRef>,
    /// Standard input, all of it (the program sees end-of-file after it).
    #[serde(default)]
    pub stdin: Option<String>,
    #[serde(default)]
    #[schema(value_type = Option<LimitsDoc>)]
    pub limits: Option<LimitsRequest>,
    /// Extra environment variables.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

/// What a run did. `code`, `sandbox`, `script`, `stderr` and `stdout` are CS50 Sandbox's; the rest
/// is corral's result object (`corral run --json`).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RunResponse {
    /// The exit code (128 + N when killed by signal N; null when the sandbox failed).
    pub code: Option<i32>,
    /// The sandbox to continue in (`{"sandbox": {"id": …}}`), null when it was not kept.
    pub sandbox: Option<String>,
    /// stdout and stderr interleaved in arrival order.
    pub script: String,
    pub stderr: String,
    pub stdout: String,
    /// ok, nonzero_exit, signaled, time_limit, wall_time_limit, memory_limit, output_limit,
    /// blocked_syscall, sandbox_error.
    #[schema(example = "ok")]
    pub status: String,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub cpu_time_ms: u64,
    pub wall_time_ms: u64,
    pub memory_peak_bytes: u64,
    pub pids_peak: Option<u64>,
    pub pids_limit_hit: bool,
    pub disk_used_bytes: u64,
    pub output_bytes: u64,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    /// The exact bytes, when stdout was not valid UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdout_base64: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr_base64: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blocked_syscall: Option<String>,
    /// What failed, for sandbox_error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Why a limit ended the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The limits in force.
    #[schema(value_type = LimitsDoc)]
    pub limits: Limits,
    /// Limits the request asked for above the server's caps, lowered to the caps.
    pub limits_clamped: Vec<String>,
}

impl RunResponse {
    pub fn new(o: &Outcome, sandbox: Option<String>, limits_clamped: Vec<String>) -> Self {
        RunResponse {
            code: (o.status != corral_sandbox::Status::SandboxError).then(|| o.shell_code()),
            sandbox,
            script: o.script.text(),
            stderr: o.stderr.text(),
            stdout: o.stdout.text(),
            status: o.status.as_str().to_string(),
            exit_code: o.exit_code,
            signal: o.signal,
            cpu_time_ms: o.usage.cpu_time_ms,
            wall_time_ms: o.usage.wall_time_ms,
            memory_peak_bytes: o.usage.memory_peak_bytes,
            pids_peak: o.usage.pids_peak,
            pids_limit_hit: o.usage.pids_limit_hit,
            disk_used_bytes: o.usage.disk_used_bytes,
            output_bytes: o.usage.output_bytes,
            stdout_truncated: o.stdout.truncated,
            stderr_truncated: o.stderr.truncated,
            stdout_base64: o.stdout.base64_if_binary(),
            stderr_base64: o.stderr.base64_if_binary(),
            blocked_syscall: o.blocked_syscall.clone(),
            error: o.error.clone(),
            reason: o.reason(),
            limits: o.limits.clone(),
            limits_clamped,
        }
    }
}

/// CS50 Sandbox's `/upload` answer.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct UploadResponse {
    /// The stored file names (relative paths), sorted.
    pub files: Vec<String>,
    /// The upload's id, for `{"sandbox": {"homedir": id}}`.
    pub id: String,
}

/// The multipart form of `/upload`: any number of file parts (their file names are the relative
/// paths, folders allowed: `src/main.c`), and optionally tar archives (`.tar`, `.tar.gz`) in parts
/// named `archive`, unpacked (links and special files are refused).
#[derive(Debug, ToSchema)]
#[allow(dead_code)]
pub struct UploadForm {
    #[schema(value_type = Vec<String>, format = Binary)]
    pub files: Vec<Vec<u8>>,
    #[schema(value_type = Option<String>, format = Binary)]
    pub archive: Option<Vec<u8>>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct FileInfo {
    pub path: String,
    pub size: u64,
    pub sha256: String,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct UploadInfo {
    pub id: String,
    pub files: Vec<FileInfo>,
    pub total_bytes: u64,
    /// Unix seconds.
    pub created_at: i64,
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, ToSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum RoleName {
    Admin,
    Staff,
    Student,
    Worker,
}

impl From<RoleName> for corral_store::Role {
    fn from(r: RoleName) -> Self {
        match r {
            RoleName::Admin => corral_store::Role::Admin,
            RoleName::Staff => corral_store::Role::Staff,
            RoleName::Student => corral_store::Role::Student,
            RoleName::Worker => corral_store::Role::Worker,
        }
    }
}

impl From<corral_store::Role> for RoleName {
    fn from(r: corral_store::Role) -> Self {
        match r {
            corral_store::Role::Admin => RoleName::Admin,
            corral_store::Role::Staff => RoleName::Staff,
            corral_store::Role::Student => RoleName::Student,
            corral_store::Role::Worker => RoleName::Worker,
        }
    }
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenRequest {
    pub role: RoleName,
    /// A label for people (who holds it).
    #[serde(default)]
    pub name: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TokenResponse {
    /// The secret: shown once, stored only as a hash.
    pub token: String,
    /// The token's public id.
    pub id: String,
    pub role: RoleName,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct WhoAmI {
    pub id: String,
    pub role: RoleName,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Health {
    #[schema(example = "ok")]
    pub status: String,
    pub version: String,
    pub shutting_down: bool,
    pub pool_idle: u64,
    pub pool_active: u64,
    pub held_sandboxes: u64,
    pub runs_in_flight: i64,
    pub runs_queued: i64,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct LanguageInfo {
    pub id: String,
    pub name: String,
    /// The conventional source file name.
    pub source: String,
    /// Builds `source` (a command run with `/bin/sh -c`).
    pub compile: Option<String>,
    pub run: String,
    /// Whether this host has the toolchain.
    pub available: bool,
    /// Why it is unavailable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A terminal's size in character cells.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TermSize {
    pub cols: u16,
    pub rows: u16,
}

/// WebSocket messages from the client.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "lowercase")]
#[allow(clippy::large_enum_variant)] // one short-lived message at a time
pub enum WsClientMessage {
    /// Start a program (one at a time per socket).
    Run {
        cmd: Cmd,
        #[serde(default)]
        sandbox: Option<SandboxRef>,
        #[serde(default)]
        #[schema(value_type = Option<LimitsDoc>)]
        limits: Option<LimitsRequest>,
        #[serde(default)]
        env: BTreeMap<String, String>,
        /// Attach the program to a terminal of this size (`{"cols": 80, "rows": 24}`) instead of
        /// pipes: prompts show without flushing, input echoes, output arrives as `stdout`.
        #[serde(default)]
        tty: Option<TermSize>,
        /// A language of `/languages` (`"rust"`): its extra read-only paths (for a new sandbox)
        /// and environment apply, and its limits when `limits` is not given (capped as usual).
        /// The browser editor sends it.
        #[serde(default)]
        language: Option<String>,
    },
    /// Resize the terminal of a run started with `tty`.
    Resize { cols: u16, rows: u16 },
    /// Type into the program's standard input; `eof: true` closes it afterwards.
    Stdin {
        #[serde(default)]
        data: String,
        #[serde(default)]
        eof: bool,
    },
    /// Send a signal to the program's process group (`SIGINT`, `SIGTERM`, `SIGKILL`, `SIGQUIT`,
    /// `SIGHUP`, `SIGUSR1`, `SIGUSR2`).
    Signal { name: String },
    /// End the program now.
    Kill,
}

/// WebSocket messages from the server.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum WsServerMessage {
    /// Output as it is produced.
    Stdout {
        data: String,
    },
    Stderr {
        data: String,
    },
    /// The program is blocked reading its standard input (asked of the kernel).
    Stdin {},
    /// The program ended; the same object as `/run` returns.
    Exit(Box<RunResponse>),
    /// A message could not be acted on; the socket stays open.
    Error {
        error: String,
        message: String,
    },
}
