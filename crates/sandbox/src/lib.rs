//! corral's sandbox core: run one untrusted command in a fresh, fully isolated Linux sandbox and
//! report what it used.
//!
//! The public surface is the vocabulary and the entry points, all at the crate root:
//! - what to run: [`RunSpec`], [`Limits`] (and their parts); what happened: [`Outcome`], [`Status`];
//! - where: [`Host`] (once per process), [`Sandbox`] and [`Execution`] (one program, driven step
//!   by step, woken by a [`Waker`]), [`Pool`] / [`Lease`] (warm sandboxes), [`run_fresh`] / [`run_in`];
//! - [`doctor`]: what this host offers; [`init_main`]: the sandbox's init, which the binary must
//!   dispatch to when its first argument is [`INIT_ARG`].
//!
//! Inside, modules depend one way: `pool` → `sandbox` → `execution` → `control` → `protocol`;
//! what runs in the sandbox lives in `inside` (see there). No HTTP, storage or async runtime
//! lives here.

mod cancel;
mod capture;
mod control;
mod cpu_clock;
pub mod doctor;
mod error;
mod execution;
mod gvisor;
mod host;
pub mod host_tree;
mod hostfs;
mod inside;
mod limits;
mod openat2;
mod outcome;
mod placement;
mod pool;
mod protocol;
mod sandbox;
mod spawner;
mod spec;
mod uids;
mod waker;

pub use cancel::Cancel;
pub use capture::{NoSink, OutputSink};
pub use corral_seccomp::{Restrictions, RestrictionsError};
pub use error::{SandboxError, SpecError};
pub use execution::Execution;
pub use host::Host;
pub use hostfs::exists as exists_beneath;
pub use inside::init::{init_main, INIT_ARG};
pub use limits::{host_open_files_max, Limits, LimitsRequest, Millis, Size};
pub use openat2::openat2_retrying;
pub use outcome::{Captured, Outcome, Status, Usage};
pub use pool::{Lease, Pool, PoolConfig};
pub use sandbox::{open_stdin_file, run_fresh, run_in, Sandbox, SandboxConfig};
pub use spawner::InitProgram;
pub use spec::{
    parse_env, validate_command, validate_env, ImageRoot, Mount, OutputOverflow, Root, RootClaim,
    RunSpec, RunSpecJson, Runtime, RuntimePolicy, Stdin, DEFAULT_PATH, MAX_ARG_BYTES,
    MAX_COMMAND_BYTES, WORKDIR,
};
pub use waker::Waker;
