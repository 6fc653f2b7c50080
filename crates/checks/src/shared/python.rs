//! corral's own Python programs in the sandbox (pytest's and check50's bootstraps, the safety
//! scanner): the interpreter and how a check runs one (its nonce and output folder name are version-4 UUIDs:
//! 122 bits from the kernel's random numbers, which the submission cannot guess).
//! Each bootstrap starts with `read_nonce.py`, next to this file.

use corral_sandbox::{RunSpec, Stdin};

use crate::shared::settings::RunSettings;

/// The Python that runs corral's helper programs inside the sandbox (Debian's, with
/// `python3-pytest`).
pub const PYTHON: &str = "/usr/bin/python3";

/// A run of one of corral's Python helpers for a check: `python3 -I -B -c SCRIPT CONFIG` (no user
/// site, no `PYTHON*` variables, no bytecode written), the one-line `nonce` on standard input,
/// the check's limits and environment.
pub fn python_helper(
    script: &str,
    config: &serde_json::Value,
    nonce: &str,
    settings: &RunSettings,
) -> RunSpec {
    let mut spec = RunSpec::new(vec![
        PYTHON.into(),
        "-I".into(),
        "-B".into(),
        "-c".into(),
        script.into(),
        config.to_string(),
    ]);
    spec.stdin = Stdin::Bytes(format!("{nonce}\n").into_bytes());
    spec.limits = settings.limits.clone();
    spec.env = settings.env.clone();
    spec.root = settings.root.clone();
    spec
}
