//! One interface over cgroup v1 and cgroup v2 for corral's per-run resource control.
//!
//! The supervisor (host side, root) calls [`detect()`] once to get a [`Manager`] rooted at corral's
//! base cgroup, then for every sandboxed run [`Manager::create`]s a fresh leaf with memory and pids
//! limits, hands [`Cgroup::procs_files`] to the child (which joins by writing `"0"` to each fd
//! right after fork, before it loses access to the host's cgroupfs), reads [`Cgroup::cpu_time`]
//! while it runs and [`Cgroup::usage`] afterwards, and finally [`Cgroup::destroy`]s it.
//!
//! Both backends only ever open control files the kernel already provides (no file creation in
//! cgroupfs), write each value in one `write(2)`, and name the path in every error.
//!
//! Moving a process into a cgroup is expensive on some kernels (a `cgroup.procs` write waits for
//! an RCU grace period, ~24 ms on 6.18; v1 joins use `tasks`, which does not — see
//! [`Cgroup::procs_files`]), so a long-lived sandbox can instead keep ONE cgroup that its
//! init joins once, and measure each run inside it: [`Cgroup::set_limits`] for the run's limits,
//! [`Cgroup::begin_run`] to reset/snapshot the counters, then [`Cgroup::cpu_time_since`] and
//! [`Cgroup::usage_since`].

// The layers, each using only those above it: `error` and `model` (the vocabulary), `options`,
// `parse` and `fs` (cgroupfs text and files), `open_files`, `detect` (what the host mounts),
// `leaf` (what both backends share), `v1` and `v2` (the backends), `entry` (the public entry
// points). This root only declares and re-exports.
mod detect;
mod entry;
mod error;
mod fs;
mod leaf;
mod model;
mod open_files;
mod options;
mod parse;
#[cfg(test)]
mod testfs;
#[cfg(test)]
mod tests;
mod v1;
mod v2;

pub use detect::{Probe, V1Hierarchy, V2Hierarchy};
pub use entry::{detect, detect_from, detect_with, probe, probe_from};
pub use error::Error;
pub use model::{Baseline, Cgroup, Limits, Manager, Usage, Version};
pub use options::{normalize_parent, Options, ENV_PARENT, ENV_VERSION};
