//! corral's own Python programs in the sandbox (pytest's and check50's bootstraps, the safety
//! scanner): the interpreter, how a check runs one, and the nonces and unguessable names they use.
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

/// 32 hex digits from the kernel's random numbers: a nonce, or a name the submission cannot guess.
pub fn random_hex() -> String {
    let mut b = [0u8; 16];
    getrandom::getrandom(&mut b).expect("the kernel's random numbers");
    b.iter().map(|x| format!("{x:02x}")).collect()
}
