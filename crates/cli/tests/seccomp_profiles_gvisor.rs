//! The stricter seccomp profiles (`seccomp_profiles.rs`) again, with every run under gVisor: this
//! binary's name ends in `_gvisor`, which is what `common::test_runtime` looks at. There PID 1
//! traces the run and names each blocked call as natively.

#[path = "seccomp_profiles.rs"]
mod suite;
