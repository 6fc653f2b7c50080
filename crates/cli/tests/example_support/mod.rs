//! Shared by the tests that grade the repository's `examples/` with the real `corral` binary
//! (check.rs, check50.rs, grade.rs, pytest.rs).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The workspace root, where `examples/` lives.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `corral ARGS` to its end, ignoring an operator's language registry in the environment.
pub fn corral(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_corral"))
        .args(args)
        .env_remove("CORRAL_LANGUAGES")
        .output()
        .expect("run corral")
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}
