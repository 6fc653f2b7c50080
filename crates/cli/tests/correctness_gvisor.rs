//! The correctness suite (`correctness.rs`) again, with every sandbox under gVisor: this binary's
//! name ends in `_gvisor`, which is what `common::test_runtime` looks at.

#[path = "correctness.rs"]
mod suite;
