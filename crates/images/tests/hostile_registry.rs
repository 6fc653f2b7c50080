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
        stall: None,
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

/// A registry that answers and then goes silent, or sends its manifest a byte at a time, fails
/// the pull once it has stalled for the stall time (a minute by default; a second here), not
/// after the hour a whole request may take: the store's writer lock, which `env gc` waits for,
/// is not held for as long as a registry likes.
#[test]
fn a_stalling_registry_fails_the_pull_within_the_stall_time() {
    let tmp = scratch();
    let store = Store::open(&tmp.path().join("data")).unwrap();
    let opts = PullOptions {
        stall: Some(std::time::Duration::from_secs(1)),
        ..with_credentials(tmp.path(), "nowhere")
    };
    let silent = start_fake(|_, s| {
        use std::io::Write;
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n{");
        std::thread::sleep(std::time::Duration::from_secs(30));
    });
    let e = fails_quickly(&store, &format!("{}/a/b:v1", silent.addr), &opts, 10);
    assert!(e.contains("sent nothing for 1 s: it is stalling"), "{e}");
    let drip = start_fake(|_, s| {
        use std::io::Write;
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n");
        for _ in 0..5000 {
            if s.write_all(b" ").and_then(|()| s.flush()).is_err() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    });
    let e = fails_quickly(&store, &format!("{}/a/b:v1", drip.addr), &opts, 10);
    assert!(e.contains("it is stalling"), "{e}");
    // The store is free again: a gc runs at once.
    store.gc().unwrap();
}

/// A registry serving one image, `v1`: a manifest with one layer stated as `stated` bytes (its
/// diff-id that of an empty tar), its config, and for the layer blob an endless body.
fn sized_registry(stated: u64) -> common::fake::Fake {
    let layer_digest = sha(b"the layer");
    let config = serde_json::to_vec(&serde_json::json!({
        "architecture": "amd64", "os": "linux",
        "config": {"Env": ["PATH=/usr/bin:/bin"], "Cmd": ["sh"]},
        "rootfs": {"type": "layers", "diff_ids": [sha(&[0u8; 1024])]}
    }))
    .unwrap();
    let config_digest = sha(&config);
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest, "size": config.len()},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layer_digest, "size": stated}]
    }))
    .unwrap();
    start_fake(move |req, s| {
        if req.path.ends_with("/manifests/v1") {
            let mt = "application/vnd.oci.image.manifest.v1+json";
            respond(s, "200 OK", &[("Content-Type", mt)], &manifest);
        } else if req.path.ends_with(&config_digest) {
            respond(s, "200 OK", &[], &config);
        } else {
            endless(s, "200 OK", &[]);
        }
    })
}

#[test]
fn a_layer_over_the_limit_is_refused_before_any_download_and_a_longer_blob_is_cut_off() {
    let tmp = scratch();
    let store = Store::open(&tmp.path().join("data")).unwrap();
    let opts = with_credentials(tmp.path(), "nowhere");
    for stated in [(16 << 30) + 1, u64::MAX] {
        let reg = sized_registry(stated);
        let e = fails_quickly(&store, &format!("{}/a/b:v1", reg.addr), &opts, 20);
        assert!(
            e.contains(&format!("{stated} bytes, over the 17179869184-byte limit")),
            "{e}"
        );
        let seen = reg.seen();
        assert!(
            seen.iter().all(|r| !r.path.contains("/blobs/")),
            "nothing fetched: {seen:?}"
        );
    }

    // Within the limit, a blob longer than stated is cut off and its part file removed.
    let reg = sized_registry(1 << 20);
    let e = fails_quickly(&store, &format!("{}/a/b:v1", reg.addr), &opts, 20);
    assert!(
        e.contains("is larger than the 1048576 bytes its descriptor says"),
        "{e}"
    );
    let left: Vec<_> = std::fs::read_dir(store.tmp_dir()).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

/// A registry redirecting every `/v2/` request to `target(own address)`; anything else is 404.
fn redirecting_registry(target: fn(&str) -> String) -> common::fake::Fake {
    let me = Arc::new(OnceLock::<String>::new());
    let addr = me.clone();
    let fake = start_fake(move |req, s| {
        if req.path.starts_with("/v2/") {
            let to = target(addr.get().unwrap());
            respond(s, "307 Temporary Redirect", &[("Location", &to)], b"");
        } else {
            respond(s, "404 Not Found", &[], b"moved here");
        }
    });
    me.set(fake.addr.clone()).unwrap();
    fake
}

#[test]
fn redirects_go_to_https_or_the_registry_itself_only() {
    let tmp = scratch();
    let store = Store::open(&tmp.path().join("data")).unwrap();
    let opts = with_credentials(tmp.path(), "nowhere");

    // To another host:port over plain HTTP: refused, the target never asked.
    static TARGET: OnceLock<String> = OnceLock::new();
    let target = start_fake(|_, s| respond(s, "200 OK", &[], b"TARGET-SECRET-BODY"));
    TARGET.set(target.addr.clone()).unwrap();
    let reg = redirecting_registry(|_| format!("http://{}/secret", TARGET.get().unwrap()));
    let e = fails_quickly(&store, &format!("{}/a/b:v1", reg.addr), &opts, 20);
    assert!(e.contains("refused: only https"), "{e}");
    assert!(!e.contains("TARGET-SECRET-BODY"), "{e}");
    assert!(target.seen().is_empty(), "{:?}", target.seen());

    // To `file://`: refused, and the error says where it pointed.
    let reg = redirecting_registry(|_| "file:///etc/shadow".into());
    let e = fails_quickly(&store, &format!("{}/a/b:v1", reg.addr), &opts, 20);
    assert!(
        e.contains("a redirect to file:///etc/shadow, not followed"),
        "{e}"
    );

    // Within the registry's own address: followed.
    let reg = redirecting_registry(|me| format!("http://{me}/moved"));
    let e = fails_quickly(&store, &format!("{}/a/b:v1", reg.addr), &opts, 20);
    assert!(e.contains("404") && e.contains("moved here"), "{e}");
}
