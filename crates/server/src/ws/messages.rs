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

/// The fields of a `run` message that hold an object. Serde reads an internally tagged enum's
/// struct from an array too (and the whole message from `["kill"]`), beyond the reach of
/// [`crate::http::objects_only`]: these are checked by name instead.
const RUN_OBJECTS: &[&str] = &["sandbox", "limits", "tty"];

impl WsClientMessage {
    /// A client's message: a JSON object, and in a `run` an object wherever one is documented
    /// (an array there was read as the fields in order).
    pub fn parse(text: &str) -> Result<Self, String> {
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let Some(o) = v.as_object() else {
            return Err("a message is a JSON object ({\"type\": …})".into());
        };
        if o.get("type").and_then(|t| t.as_str()) == Some("run") {
            for f in RUN_OBJECTS {
                if o.get(*f).is_some_and(|x| !x.is_object() && !x.is_null()) {
                    return Err(format!("{f}: invalid type: expected an object"));
                }
            }
        }
        serde_json::from_value(v).map_err(|e| e.to_string())
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structs_are_objects_and_so_is_the_message() {
        assert!(matches!(
            WsClientMessage::parse(r#"{"type": "kill"}"#),
            Ok(WsClientMessage::Kill)
        ));
        let run = WsClientMessage::parse(
            r#"{"type": "run", "cmd": "cat", "limits": {"cpu_time": "1s"}, "tty": {"cols": 80, "rows": 24}, "sandbox": null}"#,
        );
        assert!(
            matches!(
                run,
                Ok(WsClientMessage::Run {
                    limits: Some(_),
                    tty: Some(_),
                    ..
                })
            ),
            "{run:?}"
        );
        for (text, says) in [
            (r#"["kill"]"#, "JSON object"),
            (
                r#"{"type": "run", "cmd": "cat", "limits": ["1s", "2s"]}"#,
                "limits: invalid type",
            ),
            (
                r#"{"type": "run", "cmd": "cat", "tty": [80, 24]}"#,
                "tty: invalid type",
            ),
            (
                r#"{"type": "run", "cmd": "cat", "sandbox": ["abc"]}"#,
                "sandbox: invalid type",
            ),
        ] {
            let e = WsClientMessage::parse(text).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
        // Without the check serde takes them: what the check is for.
        assert!(serde_json::from_str::<WsClientMessage>(r#"["kill"]"#).is_ok());
        assert!(serde_json::from_str::<WsClientMessage>(
            r#"{"type": "run", "cmd": "cat", "limits": ["1s", "2s"]}"#
        )
        .is_ok());
    }
}
