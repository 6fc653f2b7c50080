//! The containment suite (`containment.rs`) again, with every sandbox under gVisor: this binary's
//! name ends in `_gvisor`, which is what `common::test_runtime` looks at. Nothing is copied: the
//! same hostile programs, the other runtime.

#[path = "containment.rs"]
mod suite;
