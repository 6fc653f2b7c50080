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

/// Signatures one header may carry (`v1=` several times, as while a key is rotated); more, or
/// one that is not a SHA-256 MAC, and the header is refused before any MAC is computed.
const MAX_SIGNATURES: usize = 4;

/// Checks a `Corral-Signature` header against `body`: the MAC (in constant time) and that `t` is
/// within `tolerance` of `now` (replays of old messages are refused). The body is hashed once
/// whatever the header holds: a header of thousands of `v1=` parts made as many passes over a
/// body of up to 64 MiB.
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
                if sigs.len() == MAX_SIGNATURES {
                    return Err("too many signatures in the header");
                }
                match hex::decode(v) {
                    Ok(b) if b.len() == 32 => sigs.push(b),
                    _ => return Err("a signature is not 64 hex digits"),
                }
            }
            _ => {}
        }
    }
    let t = t.ok_or("no timestamp in the signature header")?;
    if (now - t).unsigned_abs() > tolerance.as_secs() {
        return Err("the signature's timestamp is too old or in the future");
    }
    let mut mac = HmacSha256::new_from_slice(secret).expect("any key length");
    mac.update(t.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    if sigs.iter().any(|s| mac.clone().verify_slice(s).is_ok()) {
        return Ok(());
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
        // Several signatures (a key being rotated): any one may match; many, or a short or
        // empty one, are refused before the body is hashed.
        let good = h.split_once(",v1=").unwrap().1;
        let other = signature_header(b"old key", 1_700_000_000, body);
        let other = other.split_once(",v1=").unwrap().1;
        let two = format!("t=1700000000,v1={other},v1={good}");
        assert_eq!(verify(secret, &two, body, 1_700_000_010, tol), Ok(()));
        let many = format!("t=1700000000{}", format!(",v1={good}").repeat(5));
        assert_eq!(
            verify(secret, &many, body, 1_700_000_010, tol),
            Err("too many signatures in the header")
        );
        for bad in ["v1=", "v1=00", "v1=zz"] {
            let h = format!("t=1700000000,{bad},v1={good}");
            assert_eq!(
                verify(secret, &h, body, 1_700_000_010, tol),
                Err("a signature is not 64 hex digits"),
                "{bad}"
            );
        }
        // Known answer: HMAC-SHA256("key", "1.") from any HMAC implementation.
        assert_eq!(
            signature_header(b"key", 1, b""),
            format!("t=1,v1={}", hex::encode(sign(b"key", 1, b"")))
        );
    }
}
