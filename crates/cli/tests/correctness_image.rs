//! The correctness suite (`correctness.rs`) again, with every sandbox in the Debian test image's root
//! instead of the host's system folders: this binary's name ends in `_image`, which is what
//! `common::image::root_args` looks at. Nothing is copied: the same tests, another root.

#[path = "correctness.rs"]
mod suite;
