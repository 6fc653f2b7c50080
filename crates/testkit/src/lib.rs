//! Test-only helpers shared by corral's crates (a dev-dependency, never built into corral). Each
//! was once written in two test trees:
//!
//! - [`debian`]: the real minimal Debian root that image tests run in, an OCI layout around it.
//! - [`file_lock`]: locks that order test processes.
//! - [`command`]: running a command that must succeed, or that prints JSON.
//! - [`schema`]: validating documents against the workspace's JSON schemas.
//! - [`http`]: one request to a corral server under test, its status and its answer.
//! - [`registry`]: a real container registry on a loopback port.
//! - [`tar`]: tar headers written by hand.

pub mod command;
pub mod debian;
pub mod file_lock;
pub mod http;
pub mod registry;
pub mod schema;
pub mod tar;

pub use command::{json_output, succeed};
pub use debian::{debian_tar, oci_layout_of_tar, sha256_file};
pub use file_lock::{lock, lock_fair, lock_shared_fair};
pub use schema::{
    documented_answer_errors, documented_answer_errors_as, schema, schema_errors, workspace_root,
};
