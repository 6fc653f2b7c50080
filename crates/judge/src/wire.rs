//! The bodies exchanged between the server and a remote worker (`corral worker`): a claim and the
//! job it returns, lease renewals, the signed result. The result is signed with the worker token
//! (`Corral-Signature: t=UNIX,v1=HEX(HMAC-SHA256(sha256_hex(token), "{t}.{body}"))`, see
//! [`crate::signature`]), so the server checks both who sent it and that the body is the one the
//! worker signed.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::job::JobSpec;
use crate::verdict::Verdict;

/// How far a result's signature time may be from the server's clock.
pub const SIGNATURE_TOLERANCE: Duration = Duration::from_secs(300);

#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimRequest {
    /// The worker's name (shown in the submission's audit trail).
    #[serde(default)]
    pub worker: Option<String>,
    /// Seconds to wait for a job (long poll), at most 30.
    #[serde(default)]
    pub wait: Option<f64>,
}

/// One file of a claimed job.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct JobFile {
    pub path: String,
    /// Permission bits (0o644 or 0o755).
    pub mode: u32,
    pub content_base64: String,
}

/// A claimed job: everything the worker needs to judge it.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct ClaimedJob {
    pub id: String,
    /// The lease: send it with heartbeats and the result.
    pub lease: String,
    /// The lease ends this long after the last heartbeat.
    pub lease_ms: u64,
    /// Send a heartbeat this often.
    pub heartbeat_ms: u64,
    pub attempt: u32,
    #[schema(value_type = Object)]
    pub spec: JobSpec,
    pub files: Vec<JobFile>,
    /// The suite's files (suite jobs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suite_files: Option<Vec<JobFile>>,
}

#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LeaseRequest {
    pub lease: String,
}

#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResultRequest {
    pub lease: String,
    pub verdict: Verdict,
}

#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct ResultResponse {
    /// `recorded`, or `already_recorded` (this lease's result was recorded before).
    pub result: String,
}
