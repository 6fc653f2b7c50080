//! corral's own Python programs in the sandbox (pytest's and check50's bootstraps, the safety
//! scanner): the interpreter and how a check runs one (its nonce and output folder name are version-4 UUIDs:
//! 122 bits from the kernel's random numbers, which the submission cannot guess).
//! Each bootstrap starts with `read_nonce.py`, next to this file.

use corral_sandbox::{RunSpec, Stdin};

use crate::shared::settings::RunSettings;

/// The Python that runs corral's helper programs inside the sandbox (Debian's, with
/// `python3-pytest`); a suite's check50 problems are compiled with it at load.
pub use crate::python_syntax::PYTHON;

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

/// Why a helper's sealed summary was not accepted.
#[derive(Debug, PartialEq)]
pub enum Unsealed {
    /// Not JSON.
    Malformed(String),
    /// Not the `{"summary", "mac"}` that `_corral_sealed` writes, or a MAC not the nonce's:
    /// someone else wrote or changed it.
    NotOurs,
}

/// The summary JSON a helper sealed with `_corral_sealed` (`read_nonce.py`): returned only when
/// its HMAC-SHA256 under `nonce` matches (compared in constant time).
pub fn unseal(sealed: &[u8], nonce: &str) -> Result<Vec<u8>, Unsealed> {
    use hmac::{Hmac, Mac};
    #[derive(serde::Deserialize)]
    struct Sealed {
        summary: String,
        mac: String,
    }
    let v: serde_json::Value =
        serde_json::from_slice(sealed).map_err(|e| Unsealed::Malformed(e.to_string()))?;
    // JSON of another shape (a summary carrying a nonce, say) was not written by the helper.
    let s: Sealed = serde_json::from_value(v).map_err(|_| Unsealed::NotOurs)?;
    let mac = hex::decode(&s.mac).map_err(|_| Unsealed::NotOurs)?;
    let mut check =
        Hmac::<sha2::Sha256>::new_from_slice(nonce.as_bytes()).expect("HMAC takes any key");
    check.update(s.summary.as_bytes());
    check.verify_slice(&mac).map_err(|_| Unsealed::NotOurs)?;
    Ok(s.summary.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `_corral_sealed` writes, made by Python's own hmac module.
    fn sealed_by_python(nonce: &str, summary: &str) -> Vec<u8> {
        let out = std::process::Command::new(PYTHON)
            .args([
                "-I",
                "-c",
                &format!(
                    "{}\nimport sys, json\nsys.stdout.buffer.write(_corral_sealed(sys.argv[1], \
                     json.loads(sys.argv[2])))",
                    include_str!("read_nonce.py")
                ),
                nonce,
                summary,
            ])
            .output()
            .expect("python3");
        assert!(out.status.success(), "{out:?}");
        out.stdout
    }

    #[test]
    fn a_summary_sealed_with_the_nonce_opens_and_no_other() {
        let sealed = sealed_by_python("abc123", r#"{"exit": 0, "b": [1]}"#);
        let body = unseal(&sealed, "abc123").expect("ours");
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["exit"], 0);
        assert_eq!(unseal(&sealed, "abc124"), Err(Unsealed::NotOurs));
        // The nonce is not in what was written.
        assert!(!String::from_utf8_lossy(&sealed).contains("abc123"));
        // A changed summary under the old MAC is refused.
        let mut v: serde_json::Value = serde_json::from_slice(&sealed).unwrap();
        v["summary"] = r#"{"b": [1], "exit": 1}"#.into();
        let changed = serde_json::to_vec(&v).unwrap();
        assert_eq!(unseal(&changed, "abc123"), Err(Unsealed::NotOurs));
        assert_eq!(
            unseal(b"{\"nonce\": \"abc123\"}", "abc123"),
            Err(Unsealed::NotOurs)
        );
        assert!(matches!(
            unseal(b"{", "abc123"),
            Err(Unsealed::Malformed(_))
        ));
    }
}
