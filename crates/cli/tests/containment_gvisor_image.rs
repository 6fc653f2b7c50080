//! The containment suite (`containment.rs`) again, with every sandbox under gVisor and in the
//! Debian test image's root: this binary's name ends in `_gvisor_image`, which
//! `common::test_runtime` (gVisor) and `common::image::root_args` (the image) both look at.
//! Nothing is copied: the same hostile programs, the other runtime and root.

#[path = "containment.rs"]
mod suite;
