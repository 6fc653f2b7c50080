//! Judging for corral's submission queue, shared by the server's in-process workers and
//! `corral worker` on other hosts (which need nothing of the server but its HTTP API):
//!
//! - [`job`]: what a queued submission runs ([`JobSpec`]) and where its files are.
//! - [`verdict`]: what judging it gives ([`Verdict`]).
//! - [`execute`]: the judging itself (blocking).
//! - [`wire`]: the remote workers' protocol bodies (claim, lease, result).
//! - [`signature`]: `Corral-Signature` signing and checking (results and callbacks).
//! - [`heartbeat`]: renewing a lease while a job is judged.
//! - [`images`]: the container images a job names (what a worker must have before judging it).

pub mod execute;
pub mod heartbeat;
pub mod images;
pub mod job;
pub mod signature;
pub mod verdict;
pub mod wire;

pub use execute::{execute, judge_run};
pub use heartbeat::Heartbeat;
pub use images::{images_needed, suite_images};
pub use job::{suite_file, validate_extra_args, Cmd, JobFiles, JobSpec, SuiteRef};
pub use signature::{signature_header, verify};
pub use verdict::{ImageDoc, Verdict, VerdictKind};
pub use wire::{
    ClaimRequest, ClaimedJob, JobFile, LeaseRequest, ResultRequest, ResultResponse,
    SIGNATURE_TOLERANCE,
};
