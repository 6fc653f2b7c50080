//! The sandboxes every subcommand builds: this same binary is their init (see `main`), so a
//! host is found once per command and its pool sized by the command.

use std::sync::Arc;

use anyhow::Context;
use corral_sandbox::{Host, InitProgram, Pool, PoolConfig, SandboxError};

/// This host, with this binary as the sandboxes' init.
pub fn host() -> Result<Arc<Host>, SandboxError> {
    InitProgram::current_exe().and_then(Host::new).map(Arc::new)
}

/// [`host`] for a one-shot command: on failure, says so as `corral COMMAND: sandbox error: …`
/// and gives the exit code.
pub fn host_or_exit(command: &str) -> Result<Arc<Host>, i32> {
    host().map_err(|e| {
        eprintln!("corral {command}: sandbox error: {e}");
        crate::exit::SANDBOX_ERROR
    })
}

/// The pool of a long-running service (`serve`, `worker`) that runs `parallel` things at once:
/// two idle sandboxes a slot, so one resets while the other is ready.
pub fn service_pool(parallel: usize) -> anyhow::Result<Arc<Pool>> {
    let host =
        host().context("this host cannot build sandboxes; run `corral doctor` to see why")?;
    Ok(Pool::new(
        host,
        PoolConfig {
            max_idle: parallel * 2,
            ..PoolConfig::default()
        },
    ))
}
