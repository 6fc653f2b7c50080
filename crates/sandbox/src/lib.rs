//! corral's sandbox core: run one untrusted command in a fresh, fully isolated Linux sandbox and
//! report what it used.
//!
//! - [`spec`] / [`limits`]: what to run (`RunSpec`, `Limits`) — the vocabulary every layer shares.
//! - [`outcome`]: what happened (`Outcome`, `Status`).
//! - [`host`]: once per process — cgroups, the compiled seccomp profile, the init program.
//! - [`sandbox`]: one sandbox and the supervisor loop (output, time limits, verdict).
//! - [`init`], [`rootfs`], [`exec`], [`landlock`]: what runs inside (namespaces, root, privileges).
//! - [`hostfs`]: host-side file copies that never follow what a program planted.
//! - [`doctor`]: what this host offers.
//!
//! No HTTP, storage or async runtime lives here.

pub mod capture;
pub mod doctor;
pub mod error;
pub mod exec;
pub mod execution;
pub mod host;
pub mod hostfs;
pub mod init;
pub mod landlock;
pub mod limits;
pub mod outcome;
pub mod pool;
pub mod protocol;
pub mod pty;
pub mod rootfs;
pub mod sandbox;
pub mod spec;
pub mod stdin_probe;

pub use capture::{NoSink, OutputSink};
pub use error::{SandboxError, SpecError};
pub use execution::Execution;
pub use host::{Host, InitProgram};
pub use limits::{Limits, LimitsRequest, Millis, Size};
pub use outcome::{Captured, Outcome, Status, Usage};
pub use pool::{Lease, Pool, PoolConfig};
pub use sandbox::{run_fresh, run_in, Sandbox, SandboxConfig};
pub use spec::{Mount, RunSpec, RunSpecJson, Stdin};
