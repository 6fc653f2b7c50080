//! `Idempotency-Key` (the IETF draft's request header, Stripe's convention) for submissions: a
//! client that timed out and retries sends the same key, and is answered the submission its
//! first request made instead of a second one. A key is its token's own, and is remembered as
//! long as the submission it names is kept (it waits, then `retention` after it finished); the
//! same key with another request is refused (422). The store's unique index on (owner, key), not
//! a look before the insert, is what makes racing retries store one job.

use corral_store::{JobState, KeyedJob};
use serde_json::Value;

use crate::error::{ApiError, ErrorKind};

/// The longest key (Stripe's limit; a UUID is 36).
pub const MAX_KEY: usize = 255;

/// A key as a client sent it: 1 to [`MAX_KEY`] visible ASCII characters, bare (Stripe) or as a
/// structured-field string, `"…"` (the IETF draft), which names the same key. 400 otherwise.
pub fn parse_key(raw: &[u8]) -> Result<String, ApiError> {
    let bad = |why: &str| {
        ApiError::new(
            ErrorKind::BadRequest,
            "bad_idempotency_key",
            format!(
                "Idempotency-Key {why}: send 1 to {MAX_KEY} visible ASCII characters (a UUID is \
                 a good key), bare or in double quotes"
            ),
        )
    };
    let inner = match raw {
        [b'"', inner @ .., b'"'] => inner,
        _ => raw,
    };
    if inner.is_empty() {
        return Err(bad("is empty"));
    }
    if inner.len() > MAX_KEY {
        return Err(bad(&format!("is {} bytes long", inner.len())));
    }
    if let Some(b) = inner
        .iter()
        .find(|b| !b.is_ascii_graphic() || matches!(b, b'"' | b'\\'))
    {
        return Err(bad(&format!("has the byte 0x{b:02x}")));
    }
    Ok(String::from_utf8(inner.to_vec()).expect("visible ASCII is UTF-8"))
}

/// The fingerprint of a request: a sha256 of `what` (the endpoint, and whatever else changes the
/// body's meaning) and the body's JSON with every object's keys in sorted order, so a retry that
/// serialised the same request again (another key order, other spaces) is the same request.
pub fn fingerprint(what: &str, body: &Value) -> String {
    let mut text = String::from(what);
    text.push('\n');
    canonical(body, &mut text);
    corral_store::sha256_hex(text.as_bytes())
}

fn canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                canonical(&map[k], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// A retry's answer: the submission the key names, as it is now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replay {
    pub id: String,
    pub state: JobState,
}

/// The answer to a request whose key already names `found`: that submission when the request is
/// the same (a retry), else 422 — the key was reused for another request.
pub fn replay(key: &str, found: KeyedJob, fingerprint: &str) -> Result<Replay, ApiError> {
    if found.fingerprint != fingerprint {
        return Err(ApiError::new(
            ErrorKind::Invalid,
            "idempotency_key_reused",
            format!(
                "Idempotency-Key {key:?} was sent before with another request (it made \
                 submission {}): a retry must send the same request; a new submission needs a \
                 new key",
                found.id
            ),
        ));
    }
    Ok(Replay {
        id: found.id,
        state: found.state,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_are_visible_ascii_bare_or_quoted() {
        assert_eq!(parse_key(b"8e03978e-40d5").unwrap(), "8e03978e-40d5");
        assert_eq!(parse_key(b"\"8e03978e-40d5\"").unwrap(), "8e03978e-40d5");
        assert_eq!(parse_key(&[b'k'; MAX_KEY]).unwrap().len(), MAX_KEY);
        for bad in [
            &b""[..],
            b"\"\"",
            b"two words",
            b"tab\there",
            b"caf\xc3\xa9",
            b"a\"b",
            b"back\\slash",
            b"\x7f",
            &[b'k'; MAX_KEY + 1],
        ] {
            let e = parse_key(bad).unwrap_err();
            assert_eq!(
                (e.kind, e.code),
                (ErrorKind::BadRequest, "bad_idempotency_key")
            );
            assert!(e.message.contains("Idempotency-Key"), "{}", e.message);
        }
    }

    #[test]
    fn a_fingerprint_ignores_key_order_but_not_values_or_the_endpoint() {
        let a = json!({"cmd": "echo hi", "limits": {"cpu_time": "1s", "memory": "64M"}});
        let b: Value = serde_json::from_str(
            r#"{ "limits": {"memory": "64M", "cpu_time": "1s"}, "cmd": "echo hi" }"#,
        )
        .unwrap();
        assert_eq!(
            fingerprint("POST /submissions", &a),
            fingerprint("POST /submissions", &b)
        );
        let c = json!({"cmd": "echo ho", "limits": {"cpu_time": "1s", "memory": "64M"}});
        assert_ne!(
            fingerprint("POST /submissions", &a),
            fingerprint("POST /submissions", &c)
        );
        assert_ne!(
            fingerprint("POST /submissions", &a),
            fingerprint("POST /judge0", &a)
        );
        // Strings are quoted whole: a key's text cannot pass for structure.
        assert_ne!(
            fingerprint("x", &json!({"a": "b\",\"c\":\"d"})),
            fingerprint("x", &json!({"a": "b", "c": "d"}))
        );
    }

    #[test]
    fn the_same_request_is_replayed_and_another_refused() {
        let found = KeyedJob {
            id: "j1".into(),
            state: JobState::Running,
            fingerprint: "f1".into(),
        };
        assert_eq!(
            replay("k", found.clone(), "f1").unwrap(),
            Replay {
                id: "j1".into(),
                state: JobState::Running
            }
        );
        let e = replay("k", found, "f2").unwrap_err();
        assert_eq!(e.status().as_u16(), 422);
        assert_eq!(e.code, "idempotency_key_reused");
        assert!(e.message.contains("j1"), "{}", e.message);
    }
}
