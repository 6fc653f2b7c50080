//! Shared by the tests that grade the repository's `examples/` with the real `corral` binary
//! (check.rs, check50.rs, grade.rs, pytest.rs).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The workspace root, where `examples/` lives.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `corral`, ignoring an operator's language registry in the environment.
pub fn corral_cmd() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_corral"));
    cmd.env_remove("CORRAL_LANGUAGES");
    cmd
}

/// `corral check --json EXTRA SUITE SUBMISSION`: the exit code, the report, stdout as printed.
pub fn check_json(suite: &Path, sub: &Path, extra: &[&str]) -> (i32, serde_json::Value, String) {
    corral_testkit::json_output(
        corral_cmd()
            .args(["check", "--json"])
            .args(extra)
            .arg(suite)
            .arg(sub),
    )
}

/// A report's rows by id, each as `row` reads it.
pub fn results<T>(
    json: &serde_json::Value,
    row: impl Fn(&serde_json::Value) -> T,
) -> std::collections::BTreeMap<String, T> {
    json["results"]
        .as_object()
        .expect("results object")
        .iter()
        .map(|(k, v)| (k.clone(), row(v)))
        .collect()
}

/// Runs `corral ARGS` to its end.
pub fn corral(args: &[&str]) -> Output {
    corral_cmd().args(args).output().expect("run corral")
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}
