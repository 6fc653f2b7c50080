//! Pulls from a hostile registry (a hand-written server on loopback, `common::fake`): it may not
//! harvest credentials, exhaust memory or disk, or redirect a pull anywhere it likes.

mod common;

use std::path::Path;
use std::sync::{Arc, OnceLock};

use common::fake::{endless, respond, start_fake};
use common::*;
use corral_images::{pull, PullOptions, Store};

/// Options for plain HTTP with `user:password` for `registry` in an auth file under `dir`.
fn with_credentials(dir: &Path, registry: &str) -> PullOptions {
    use base64::Engine;
    let file = dir.join("auth.json");
    let auth = base64::engine::general_purpose::STANDARD.encode("staff:s3cret");
    std::fs::write(
        &file,
        serde_json::json!({"auths": {registry: {"auth": auth}}}).to_string(),
    )
    .unwrap();
    PullOptions {
        insecure: true,
        auth_file: Some(file),
        progress: None,
        insecure_registries: Vec::new(),
    }
}

/// A registry asking for a token from the realm `realm(own address)`; its own `/token` refuses.
fn bearer_registry(realm: fn(&str) -> String) -> common::fake::Fake {
    let me = Arc::new(OnceLock::<String>::new());
    let addr = me.clone();
    let fake = start_fake(move |req, s| {
        if req.path.starts_with("/token") {
            return respond(s, "401 Unauthorized", &[], b"");
        }
        let challenge = format!(
            "Bearer realm=\"{}\",service=\"reg\"",
            realm(addr.get().unwrap())
        );
        respond(
            s,
            "401 Unauthorized",
            &[("WWW-Authenticate", &challenge)],
            b"",
        )
    });
    me.set(fake.addr.clone()).unwrap();
    fake
}

#[test]
fn basic_credentials_go_to_a_plain_http_realm_on_the_registry_itself_only() {
    let tmp = scratch();
    let store = Store::open(&tmp.path().join("data")).unwrap();

    // The realm is another host:port over plain HTTP: it is asked for a token without them.
    static ELSEWHERE: OnceLock<String> = OnceLock::new();
    let harvester = start_fake(|_, s| respond(s, "401 Unauthorized", &[], b""));
    ELSEWHERE.set(harvester.addr.clone()).unwrap();
    let reg = bearer_registry(|_| format!("http://{}/token", ELSEWHERE.get().unwrap()));
    let opts = with_credentials(tmp.path(), &reg.addr);
    let e = pull(&store, &format!("{}/a/b:v1", reg.addr), &opts)
        .unwrap_err()
        .to_string();
    assert!(e.contains("credentials were not sent"), "{e}");
    let seen = harvester.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(seen[0].header("authorization").is_none(), "{seen:?}");

    // The realm is the registry's own host:port: they are sent there.
    let reg = bearer_registry(|me| format!("http://{me}/token"));
    let opts = with_credentials(tmp.path(), &reg.addr);
    assert!(pull(&store, &format!("{}/a/b:v1", reg.addr), &opts).is_err());
    let token_requests: Vec<_> = reg
        .seen()
        .into_iter()
        .filter(|r| r.path.starts_with("/token"))
        .collect();
    assert_eq!(token_requests.len(), 1);
    assert!(
        token_requests[0]
            .header("authorization")
            .is_some_and(|a| a.starts_with("Basic ")),
        "{token_requests:?}"
    );
}

/// Pulls `reference`, failing, within `secs` seconds: the error.
fn fails_quickly(store: &Store, reference: &str, opts: &PullOptions, secs: u64) -> String {
    let start = std::time::Instant::now();
    let e = pull(store, reference, opts).unwrap_err().to_string();
    assert!(
        start.elapsed() < std::time::Duration::from_secs(secs),
        "took {:?}: {e}",
        start.elapsed()
    );
    e
}

#[test]
fn endless_error_and_token_bodies_are_cut_short() {
    let tmp = scratch();
    let store = Store::open(&tmp.path().join("data")).unwrap();
    let opts = with_credentials(tmp.path(), "nowhere");

    // An error answer whose body never ends.
    let reg = start_fake(|_, s| endless(s, "500 Internal Server Error", &[]));
    let e = fails_quickly(&store, &format!("{}/a/b:v1", reg.addr), &opts, 20);
    assert!(e.contains("500") && e.contains("aaaa"), "{e}");
    assert!(e.len() < 1000, "{} bytes of error", e.len());

    // A token reply that never ends.
    let tokens = start_fake(|_, s| endless(s, "200 OK", &[("Content-Type", "application/json")]));
    static REALM: OnceLock<String> = OnceLock::new();
    REALM.set(format!("http://{}/token", tokens.addr)).unwrap();
    let reg = bearer_registry(|_| REALM.get().unwrap().clone());
    let e = fails_quickly(&store, &format!("{}/a/b:v1", reg.addr), &opts, 20);
    assert!(e.contains("the reply is larger than 1048576 bytes"), "{e}");
}
