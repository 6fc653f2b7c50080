//! `Outcome`: what happened in a run, serialised the same way by every layer.

use base64::Engine;
use serde::{Deserialize, Serialize};

use crate::limits::Limits;

/// Why a run ended. The first limit that fired wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    NonzeroExit,
    Signaled,
    /// The CPU-time limit.
    TimeLimit,
    WallTimeLimit,
    MemoryLimit,
    OutputLimit,
    BlockedSyscall,
    SandboxError,
}

impl Status {
    /// Every status (for metrics that show each one from the start, at 0).
    pub const ALL: [Status; 9] = [
        Status::Ok,
        Status::NonzeroExit,
        Status::Signaled,
        Status::TimeLimit,
        Status::WallTimeLimit,
        Status::MemoryLimit,
        Status::OutputLimit,
        Status::BlockedSyscall,
        Status::SandboxError,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::NonzeroExit => "nonzero_exit",
            Status::Signaled => "signaled",
            Status::TimeLimit => "time_limit",
            Status::WallTimeLimit => "wall_time_limit",
            Status::MemoryLimit => "memory_limit",
            Status::OutputLimit => "output_limit",
            Status::BlockedSyscall => "blocked_syscall",
            Status::SandboxError => "sandbox_error",
        }
    }
}

/// One captured stream: the bytes (capped) and whether more was produced than kept.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captured {
    pub bytes: Vec<u8>,
    pub truncated: bool,
}

impl Captured {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
    /// Base64 of the exact bytes, only when they are not valid UTF-8 (so the lossy text lost something).
    pub fn base64_if_binary(&self) -> Option<String> {
        std::str::from_utf8(&self.bytes)
            .is_err()
            .then(|| base64::engine::general_purpose::STANDARD.encode(&self.bytes))
    }
}

/// Resource use of a run, reported next to the limits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Usage {
    pub cpu_time_ms: u64,
    pub wall_time_ms: u64,
    pub memory_peak_bytes: u64,
    pub pids_peak: Option<u64>,
    pub pids_limit_hit: bool,
    /// The kernel's OOM killer killed a process of the run at its memory limit: the program
    /// (then the status is `memory_limit`), or a child while the program went on (a run that
    /// still exits 0 is `ok`, and only this says a part of it died).
    pub oom_killed: bool,
    pub disk_used_bytes: u64,
    pub output_bytes: u64,
}

/// Everything a caller learns about a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub status: Status,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub usage: Usage,
    pub stdout: Captured,
    pub stderr: Captured,
    /// stdout and stderr interleaved in arrival order (capped like the streams).
    pub script: Captured,
    pub blocked_syscall: Option<String>,
    pub limits: Limits,
    /// For `sandbox_error`: what failed.
    pub error: Option<String>,
    /// Files of the working directory not copied out because they were not plain files or folders.
    pub copy_out_skipped: Vec<String>,
    /// The copy-out that failed after the run, and why. The run's own outcome stands: the
    /// program ran, and what it did is reported as usual.
    pub copy_out_error: Option<String>,
    /// Which sandbox ran it, and how many leases that sandbox had served before (0 = brand new).
    pub sandbox: Option<(String, u64)>,
    /// Which kernel ran it (or was asked to, for a `sandbox_error`).
    pub runtime: crate::spec::Runtime,
}

impl Outcome {
    pub fn sandbox_error(limits: Limits, error: String) -> Self {
        Outcome {
            status: Status::SandboxError,
            exit_code: None,
            signal: None,
            usage: Usage::default(),
            stdout: Captured::default(),
            stderr: Captured::default(),
            script: Captured::default(),
            blocked_syscall: None,
            limits,
            error: Some(error),
            copy_out_skipped: Vec::new(),
            copy_out_error: None,
            sandbox: None,
            runtime: crate::spec::Runtime::Native,
        }
    }

    /// Says which runtime this outcome belongs to.
    pub fn in_runtime(mut self, runtime: crate::spec::Runtime) -> Self {
        self.runtime = runtime;
        self
    }

    /// The exit code a shell would report: the program's code, or 128 + signal.
    pub fn shell_code(&self) -> i32 {
        match (self.exit_code, self.signal) {
            (Some(c), _) => c,
            (None, Some(s)) => 128 + s,
            (None, None) => 125,
        }
    }

    /// One line saying why a limit or the sandbox ended the run, or `None` for a normal end.
    pub fn reason(&self) -> Option<String> {
        let l = &self.limits;
        Some(match self.status {
            Status::Ok | Status::NonzeroExit | Status::Signaled => return None,
            Status::TimeLimit => format!("CPU time limit of {} exceeded", l.cpu_time),
            Status::WallTimeLimit => format!("wall time limit of {} exceeded", l.wall_time),
            Status::MemoryLimit => format!("memory limit of {} exceeded", l.memory),
            Status::OutputLimit => format!("output limit of {} exceeded", l.output),
            Status::BlockedSyscall => format!(
                "blocked system call: {}",
                self.blocked_syscall.as_deref().unwrap_or("unknown")
            ),
            Status::SandboxError => format!(
                "sandbox error: {}",
                self.error.as_deref().unwrap_or("unknown")
            ),
        })
    }

    /// When the program ended on its own, failing (a non-zero exit or a signal), after the
    /// process and thread limit refused it a fork or a thread: one line saying so. Runtimes word
    /// that refusal their own way (Go's "failed to create new OS thread", the JVM's "unable to
    /// create native thread: possibly out of memory", Rust's "failed to spawn thread", Python's
    /// "can't start new thread"), and none names the sandbox's limit.
    pub fn pids_note(&self) -> Option<String> {
        let failed = matches!(self.status, Status::NonzeroExit | Status::Signaled);
        (failed && self.usage.pids_limit_hit).then(|| {
            format!(
                "the limit of {} processes and threads was reached: a fork or a new thread was refused",
                self.limits.pids
            )
        })
    }

    /// The JSON object of `corral run --json` (and of `/run`, `--batch`, …).
    pub fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::json!({
            "status": self.status.as_str(),
            "exit_code": self.exit_code,
            "signal": self.signal,
            "cpu_time_ms": self.usage.cpu_time_ms,
            "wall_time_ms": self.usage.wall_time_ms,
            "memory_peak_bytes": self.usage.memory_peak_bytes,
            "pids_peak": self.usage.pids_peak,
            "pids_limit_hit": self.usage.pids_limit_hit,
            "oom_killed": self.usage.oom_killed,
            "disk_used_bytes": self.usage.disk_used_bytes,
            "output_bytes": self.usage.output_bytes,
            "stdout": self.stdout.text(),
            "stderr": self.stderr.text(),
            "stdout_truncated": self.stdout.truncated,
            "stderr_truncated": self.stderr.truncated,
            "script": self.script.text(),
            "limits": self.limits,
            "runtime": self.runtime.as_str(),
        });
        let o = v.as_object_mut().expect("object literal");
        if let Some(b) = self.stdout.base64_if_binary() {
            o.insert("stdout_base64".into(), b.into());
        }
        if let Some(b) = self.stderr.base64_if_binary() {
            o.insert("stderr_base64".into(), b.into());
        }
        if let Some(s) = &self.blocked_syscall {
            o.insert("blocked_syscall".into(), s.clone().into());
        }
        if let Some(e) = &self.error {
            o.insert("error".into(), e.clone().into());
        }
        if let Some(r) = self.reason() {
            o.insert("reason".into(), r.into());
        }
        if let Some((id, leases)) = &self.sandbox {
            o.insert(
                "sandbox".into(),
                serde_json::json!({"id": id, "previous_leases": leases}),
            );
        }
        if let Some(e) = &self.copy_out_error {
            o.insert("copy_out_error".into(), e.clone().into());
        }
        if !self.copy_out_skipped.is_empty() {
            o.insert(
                "copy_out_skipped".into(),
                self.copy_out_skipped.clone().into(),
            );
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Status::ALL` names every status once: as many as `as_str` has arms.
    #[test]
    fn all_holds_every_status_once() {
        let arms = include_str!("outcome.rs")
            .lines()
            .filter(|l| l.trim_start().starts_with("Status::") && l.contains(" => \""))
            .count();
        let names: std::collections::BTreeSet<_> = Status::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!((names.len(), Status::ALL.len()), (arms, arms));
    }

    #[test]
    fn binary_output_stays_valid_json() {
        let mut o = Outcome::sandbox_error(Limits::default(), "x".into());
        o.status = Status::Ok;
        o.error = None;
        o.stdout.bytes = vec![0xff, b'a', 0];
        let j = o.to_json();
        let text = serde_json::to_string(&j).unwrap();
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back["stdout_base64"], "/2EA");
        assert!(back.get("stderr_base64").is_none());
        assert_eq!(back["limits"]["memory"], "256M");
        assert!(back.get("reason").is_none());
    }
}
