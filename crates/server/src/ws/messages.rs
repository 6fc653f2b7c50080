//! The WebSocket protocol's messages (documented in the OpenAPI document's schemas).

use std::collections::BTreeMap;

use corral_judge::Cmd;
use corral_sandbox::LimitsRequest;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::service::runs::{LimitsDoc, RunResponse, SandboxRef};

/// A terminal's size in character cells.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TermSize {
    pub cols: u16,
    pub rows: u16,
}

/// WebSocket messages from the client. An unknown field is an error, as in `POST /run`'s body
/// (a misspelt `limits` must not run with the defaults unnoticed).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
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
        /// The browser editor sends it. Its seccomp profile (for its `run`) is not applied, as
        /// `cmd` may be the compile: name it in `seccomp`.
        #[serde(default)]
        language: Option<String>,
        /// A container image of this server (`GET /images`) as a new sandbox's root, over the
        /// language's own image; never pulled (an image the server lacks is an error message).
        /// The `exit` message's `image` records its digest.
        #[serde(default)]
        #[schema(example = "python:3.12-slim", max_length = 400)]
        image: Option<String>,
        /// A stricter seccomp profile on top of the default one, as in `POST /run`: `no_spawn`,
        /// `no_sockets`, `allow:NAME,…`, joined by `+` (an unknown one is an `invalid` error).
        /// A call it denies ends the run as `blocked_syscall`.
        #[serde(default)]
        #[schema(example = "no_spawn", max_length = 4000)]
        seccomp: Option<String>,
        /// `"native"` or `"gvisor"` for a new sandbox; absent: the server's default. Refused
        /// (422) with `sandbox.id` (a kept sandbox keeps its own) and, on a server that runs
        /// everything under gVisor (`[runtime] force_gvisor`), when `"native"`.
        #[serde(default)]
        #[schema(value_type = Option<String>, example = "gvisor")]
        runtime: Option<corral_sandbox::Runtime>,
        /// Say `queued` when every sandbox is busy and the run waits for one, then `started`
        /// when it gets one (asked for, so clients that know only the other messages never
        /// see them). The browser editor asks.
        #[serde(default)]
        queue_notices: bool,
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
    /// Every sandbox is busy: the run waits for one (only to a `run` with `queue_notices`, and
    /// only then, right after it).
    Queued {},
    /// A run that was `queued` has a sandbox now and starts (sent only after `queued`).
    Started {},
    /// The program ended; the same object as `/run` returns.
    Exit(Box<RunResponse>),
    /// A message could not be acted on; the socket stays open. `retry_after` (seconds) when the
    /// same message may succeed later (`rate_limited`, `overloaded`).
    Error {
        error: String,
        message: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        retry_after: Option<u64>,
    },
}
