//! The HTTP API without running programs: the real server (router, auth, store) in this process on
//! a loopback port, spoken to over HTTP with reqwest. Authentication and ownership, tokens, rate
//! limits, every kind of bad input (malformed JSON, wrong types, oversize bodies, traversal names,
//! links in archives — all clean 4xx with a JSON body, the server still up). The OpenAPI
//! document has its own tests, in `openapi.rs`.
//!
//! Runs that build real sandboxes are tested end to end through the `corral` binary in
//! `crates/cli/tests/server_e2e.rs` (the sandbox init is that binary). The server here is
//! `support/mod.rs`'s, whose pool never runs a program.

mod support;

use corral_store::Role;
use reqwest::multipart::{Form, Part};
use reqwest::StatusCode;
use serde_json::{json, Value};
use support::{json_of, TestServer};

impl TestServer {
    /// The server still answers.
    async fn assert_up(&self) {
        let r = reqwest::get(self.url("/health")).await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
    }
}

fn client() -> reqwest::Client {
    reqwest::Client::new()
}

fn form(files: &[(&str, &[u8])]) -> Form {
    let mut f = Form::new().percent_encode_noop();
    for (name, data) in files {
        f = f.part(
            "files",
            Part::bytes(data.to_vec()).file_name(name.to_string()),
        );
    }
    f
}

async fn upload(s: &TestServer, token: &str, f: Form) -> (StatusCode, Value) {
    json_of(
        client()
            .post(s.url("/upload"))
            .bearer_auth(token)
            .multipart(f)
            .send()
            .await
            .unwrap(),
    )
    .await
}

fn tar_with(entries: &[(&str, tar::EntryType, &[u8], Option<&str>)]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (name, kind, data, link) in entries {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(*kind);
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        // Raw names, so the test can plant what a hostile archive would (`..`, absolute paths).
        let raw = &mut h.as_old_mut().name;
        raw.fill(0);
        raw[..name.len()].copy_from_slice(name.as_bytes());
        if let Some(l) = link {
            let lk = &mut h.as_old_mut().linkname;
            lk[..l.len()].copy_from_slice(l.as_bytes());
        }
        h.set_cksum();
        b.append(&h, *data).unwrap();
    }
    b.into_inner().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn auth_is_required_and_tokens_have_roles() {
    let s = TestServer::start(|_| {}).await;
    let c = client();
    // No token, a wrong scheme, an unknown token: 401 with a JSON body.
    let (st, _) = json_of(c.get(s.url("/whoami")).send().await.unwrap()).await;
    assert_eq!(st, StatusCode::UNAUTHORIZED);
    let (st, _) = json_of(
        c.get(s.url("/whoami"))
            .header("authorization", "Basic dXNlcjpwYXNz")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(st, StatusCode::UNAUTHORIZED);
    let (st, _) = s.get("corral_0000", "/whoami").await;
    assert_eq!(st, StatusCode::UNAUTHORIZED);
    // ?token= is for the WebSocket only.
    let student = s.token(Role::Student).await;
    let (st, _) = json_of(
        c.get(s.url(&format!("/whoami?token={student}")))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(st, StatusCode::UNAUTHORIZED);
    let (st, me) = s.get(&student, "/whoami").await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(me["role"], "student");
    // Students and staff cannot make tokens; admins can, and revoke them.
    let staff = s.token(Role::Staff).await;
    for t in [&student, &staff] {
        let (st, _) = s.post(t, "/tokens", json!({"role": "admin"})).await;
        assert_eq!(st, StatusCode::FORBIDDEN);
    }
    let admin = s.token(Role::Admin).await;
    let (st, made) = s
        .post(&admin, "/tokens", json!({"role": "staff", "name": "ta"}))
        .await;
    assert_eq!(st, StatusCode::CREATED, "{made}");
    let new = made["token"].as_str().unwrap();
    let (st, me) = s.get(new, "/whoami").await;
    assert_eq!((st, me["role"].as_str()), (StatusCode::OK, Some("staff")));
    let r = c
        .delete(s.url(&format!("/tokens/{}", made["id"].as_str().unwrap())))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    let (st, _) = s.get(new, "/whoami").await;
    assert_eq!(st, StatusCode::UNAUTHORIZED, "a revoked token still works");
    let (st, _) = s
        .post(&admin, "/tokens", json!({"role": "superuser"}))
        .await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY);
    s.stop().await;
}

/// `--dev-no-auth` has no tokens: a request must be for a loopback host (not a DNS-rebinding
/// name) and, from a browser, come from this server's own pages (a WebSocket or a form post from
/// any other site reached it).
#[tokio::test(flavor = "multi_thread")]
async fn dev_mode_answers_only_loopback_hosts_and_its_own_pages() {
    let s = TestServer::start(|c| c.dev_no_auth = true).await;
    let host = s.base.trim_start_matches("http://").to_string();
    let c = reqwest::Client::new();
    let get = |host: Option<&str>, origin: Option<&str>| {
        let mut r = c.get(s.url("/whoami"));
        if let Some(h) = host {
            r = r.header("host", h);
        }
        if let Some(o) = origin {
            r = r.header("origin", o);
        }
        r.send()
    };
    let own = format!("http://{host}");
    let port = host.rsplit(':').next().unwrap();
    for (h, o, want) in [
        (None, None, 200),
        (None, Some(own.as_str()), 200),
        (Some(format!("localhost:{port}")), None, 200),
        (Some(format!("[::1]:{port}")), None, 200),
        (Some(format!("rebound.example:{port}")), None, 403),
        (None, Some("http://evil.example"), 403),
        (None, Some("null"), 403),
    ] {
        let (st, v) = json_of(get(h.as_deref(), o).await.unwrap()).await;
        assert_eq!(st.as_u16(), want, "host {h:?} origin {o:?}: {v}");
        if want == 403 {
            assert!(
                v["message"].as_str().unwrap().contains("--dev-no-auth"),
                "{v}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_caller_never_sees_another_callers_upload() {
    let s = TestServer::start(|_| {}).await;
    let (a, b) = (s.token(Role::Student).await, s.token(Role::Student).await);
    let (st, up) = upload(&s, &a, form(&[("hello.c", b"int main(void){return 0;}\n")])).await;
    assert_eq!(st, StatusCode::OK, "{up}");
    assert_eq!(up["files"], json!(["hello.c"]));
    let id = up["id"].as_str().unwrap();
    assert!(id.len() >= 32, "upload ids carry at least 128 bits: {id}");
    let (st, mine) = s.get(&a, &format!("/uploads/{id}")).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(mine["files"][0]["path"], "hello.c");
    // B: not found, exactly like an id that does not exist.
    let (st, theirs) = s.get(&b, &format!("/uploads/{id}")).await;
    assert_eq!(st, StatusCode::NOT_FOUND, "{theirs}");
    let (st, _) = s
        .post(
            &b,
            "/run",
            json!({"cmd": "cat hello.c", "sandbox": {"homedir": id}}),
        )
        .await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    let (st, _) = s
        .post(
            &b,
            "/run",
            json!({"cmd": "ls", "sandbox": {"id": "0123456789abcdef0123456789abcdef"}}),
        )
        .await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    let (st, _) = s
        .delete(&b, "/sandboxes/0123456789abcdef0123456789abcdef")
        .await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn uploads_keep_folders_and_refuse_bad_names() {
    let s = TestServer::start(|c| {
        c.upload.max_files = 5;
        c.upload.max_depth = 3;
        c.upload.max_bytes = corral_sandbox::Size(64 << 10);
    })
    .await;
    let t = s.token(Role::Student).await;
    let (st, up) = upload(
        &s,
        &t,
        form(&[
            ("src/main.c", b"x"),
            ("README", b"y"),
            ("src/lib/a.h", b"z"),
        ]),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{up}");
    assert_eq!(up["files"], json!(["README", "src/lib/a.h", "src/main.c"]));
    for bad in [
        "../evil",
        "a/../../evil",
        "/etc/passwd",
        "a\\b",
        "a//b",
        "./x/./y",
        "a/b/c/d",
        "",
        "nul\0byte",
    ] {
        let (st, body) = upload(&s, &t, form(&[(bad, b"data")])).await;
        assert!(st == StatusCode::BAD_REQUEST, "name {bad:?}: {st} {body}");
    }
    // A file and a folder of the same name; the same name twice.
    let (st, _) = upload(&s, &t, form(&[("a", b"1"), ("a/b", b"2")])).await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    let (st, _) = upload(&s, &t, form(&[("a", b"1"), ("a", b"2")])).await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    // Too many files, too many bytes (in one file and in all), no files at all.
    let many: Vec<(String, Vec<u8>)> = (0..6).map(|i| (format!("f{i}"), vec![b'x'])).collect();
    let refs: Vec<(&str, &[u8])> = many
        .iter()
        .map(|(n, d)| (n.as_str(), d.as_slice()))
        .collect();
    let (st, _) = upload(&s, &t, form(&refs)).await;
    assert_eq!(st, StatusCode::PAYLOAD_TOO_LARGE);
    let big = vec![b'x'; 65 << 10];
    let (st, _) = upload(&s, &t, form(&[("big", &big)])).await;
    assert_eq!(st, StatusCode::PAYLOAD_TOO_LARGE);
    let half = vec![b'x'; 40 << 10];
    let (st, _) = upload(&s, &t, form(&[("a", &half), ("b", &half)])).await;
    assert_eq!(st, StatusCode::PAYLOAD_TOO_LARGE);
    let (st, _) = upload(&s, &t, Form::new()).await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    let (st, _) = upload(&s, &t, Form::new().text("note", "not a file")).await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    // Not multipart at all.
    let (st, _) = json_of(
        client()
            .post(s.url("/upload"))
            .bearer_auth(&t)
            .body("plain")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert!(st.is_client_error(), "{st}");
    s.assert_up().await;
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn archives_unpack_but_links_and_specials_are_refused() {
    let s = TestServer::start(|_| {}).await;
    let t = s.token(Role::Student).await;
    let arch = |data: Vec<u8>| Form::new().part("archive", Part::bytes(data).file_name("sub.tar"));
    let good = tar_with(&[
        ("dir/", tar::EntryType::Directory, b"", None),
        ("dir/a.txt", tar::EntryType::Regular, b"hello", None),
        ("./b.txt", tar::EntryType::Regular, b"world", None),
    ]);
    let (st, up) = upload(&s, &t, arch(good.clone())).await;
    assert_eq!(st, StatusCode::OK, "{up}");
    assert_eq!(up["files"], json!(["b.txt", "dir/a.txt"]));
    // gzip-compressed too.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &good).unwrap();
    let (st, up) = upload(&s, &t, arch(gz.finish().unwrap())).await;
    assert_eq!(st, StatusCode::OK, "{up}");
    for (what, entries) in [
        (
            "symlink",
            vec![(
                "link",
                tar::EntryType::Symlink,
                &b""[..],
                Some("/etc/shadow"),
            )],
        ),
        (
            "hard link",
            vec![
                ("a", tar::EntryType::Regular, &b"x"[..], None),
                ("b", tar::EntryType::Link, &b""[..], Some("a")),
            ],
        ),
        ("fifo", vec![("p", tar::EntryType::Fifo, &b""[..], None)]),
        (
            "char device",
            vec![("d", tar::EntryType::Char, &b""[..], None)],
        ),
        (
            "traversal",
            vec![("../../escape", tar::EntryType::Regular, &b"x"[..], None)],
        ),
        (
            "absolute",
            vec![("/tmp/abs", tar::EntryType::Regular, &b"x"[..], None)],
        ),
    ] {
        let (st, body) = upload(&s, &t, arch(tar_with(&entries))).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{what}: {body}");
    }
    let (st, body) = upload(&s, &t, arch(b"this is not a tar archive at all".repeat(40))).await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{body}");
    s.assert_up().await;
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_requests_are_clean_4xx_with_json() {
    let s = TestServer::start(|c| c.max_json_bytes = corral_sandbox::Size(16 << 10)).await;
    let t = s.token(Role::Student).await;
    let c = client();
    let post = |body: String, ct: &str| {
        c.post(s.url("/run"))
            .bearer_auth(&t)
            .header("content-type", ct)
            .body(body)
    };
    let cases: Vec<(&str, String, &str, u16)> = vec![
        ("bad json", "{\"cmd\": ".into(), "application/json", 400),
        (
            "not json",
            "cmd=ls".into(),
            "application/x-www-form-urlencoded",
            415,
        ),
        (
            "wrong type",
            r#"{"cmd": 42}"#.into(),
            "application/json",
            422,
        ),
        ("missing cmd", r#"{}"#.into(), "application/json", 422),
        (
            "unknown field",
            r#"{"cmd": "ls", "rm": true}"#.into(),
            "application/json",
            422,
        ),
        (
            "sandbox not object",
            r#"{"cmd": "ls", "sandbox": "x"}"#.into(),
            "application/json",
            422,
        ),
        (
            "both ids",
            r#"{"cmd": "ls", "sandbox": {"id": "a", "homedir": "b"}}"#.into(),
            "application/json",
            422,
        ),
        (
            "bad limit",
            r#"{"cmd": "ls", "limits": {"memory": "lots"}}"#.into(),
            "application/json",
            422,
        ),
        (
            "negative limit",
            r#"{"cmd": "ls", "limits": {"pids": -1}}"#.into(),
            "application/json",
            422,
        ),
        (
            "tiny memory",
            r#"{"cmd": "ls", "limits": {"memory": "1K"}}"#.into(),
            "application/json",
            422,
        ),
        (
            "unknown limit",
            r#"{"cmd": "ls", "limits": {"cpu": "1s"}}"#.into(),
            "application/json",
            422,
        ),
        (
            "empty cmd",
            r#"{"cmd": "  "}"#.into(),
            "application/json",
            422,
        ),
        (
            "empty argv",
            r#"{"cmd": []}"#.into(),
            "application/json",
            422,
        ),
        (
            "nul in argv",
            r#"{"cmd": ["a\u0000b"]}"#.into(),
            "application/json",
            422,
        ),
        (
            "bad env",
            r#"{"cmd": "ls", "env": {"1X": "y"}}"#.into(),
            "application/json",
            422,
        ),
        (
            "oversize",
            format!(r#"{{"cmd": "ls", "stdin": "{}"}}"#, "x".repeat(20 << 10)),
            "application/json",
            413,
        ),
        ("array body", "[1,2,3]".into(), "application/json", 422),
        // Refused at its first `[`: a request is an object (serde would read one from an array).
        (
            "deep nesting as the body",
            format!("{}{}", "[".repeat(5000), "]".repeat(5000)),
            "application/json",
            422,
        ),
        // Where an array may be, the parser's recursion limit: not JSON this server reads.
        (
            "deep nesting",
            format!(r#"{{"cmd": {}{}}}"#, "[".repeat(5000), "]".repeat(5000)),
            "application/json",
            400,
        ),
    ];
    for (what, body, ct, want) in cases {
        let (st, v) = json_of(post(body, ct).send().await.unwrap()).await;
        assert_eq!(st.as_u16(), want, "{what}: {v}");
    }
    // JSON shape errors are serde's words with the field's path and line, without axum's
    // "Failed to deserialize the JSON body into the target type: " before them.
    let (st, v) = json_of(
        post(r#"{"cmd": 42}"#.into(), "application/json")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    let m = v["message"].as_str().unwrap();
    assert!(m.starts_with("cmd: ") && m.contains("line 1"), "{v}");
    // A UTF-8 byte order mark before the JSON (many Windows tools write one) is ignored, as RFC
    // 8259 allows: the body is read (it was "expected value at line 1 column 1"), here and on
    // Judge0's surface.
    let (st, v) = json_of(
        post("\u{feff}{\"cmd\": 42}".into(), "application/json")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "read as JSON: {v}");
    assert!(v["message"].as_str().unwrap().starts_with("cmd: "), "{v}");
    let r = c
        .post(s.url("/judge0/submissions"))
        .bearer_auth(&t)
        .header("content-type", "application/json")
        .body("\u{feff}{\"language_id\": 71}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY, "read as JSON");
    // A compressed body is refused as such (it was read as JSON: "expected value at line 1"),
    // on JSON and upload routes alike; `identity` is no compression.
    let gz = {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut e, br#"{"cmd": 42}"#).unwrap();
        e.finish().unwrap()
    };
    for (path, ct) in [
        ("/run", "application/json"),
        ("/upload", "multipart/form-data; boundary=x"),
    ] {
        let r = c
            .post(s.url(path))
            .bearer_auth(&t)
            .header("content-type", ct)
            .header("content-encoding", "gzip")
            .body(gz.clone())
            .send()
            .await
            .unwrap();
        let (st, v) = json_of(r).await;
        assert_eq!(st, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{path}: {v}");
        assert!(
            v["message"]
                .as_str()
                .unwrap()
                .contains("Content-Encoding \"gzip\""),
            "{v}"
        );
    }
    let r = post(r#"{"cmd": 42}"#.into(), "application/json")
        .header("content-encoding", "identity")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY, "read as JSON");
    // Unknown paths and methods are JSON too.
    let (st, _) = json_of(c.get(s.url("/nope")).send().await.unwrap()).await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    let (st, _) = s.get(&t, "/run").await;
    assert_eq!(st, StatusCode::METHOD_NOT_ALLOWED);
    // /ws without an upgrade.
    let (st, _) = s.get(&t, "/ws").await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    s.assert_up().await;
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn rate_limit_answers_429_with_retry_after() {
    let s = TestServer::start(|c| {
        c.rate_limit.student = corral_server::config::Rate {
            per_minute: 6,
            burst: 3,
        };
    })
    .await;
    let t = s.token(Role::Student).await;
    let other = s.token(Role::Student).await;
    let c = client();
    for _ in 0..3 {
        let r = c
            .get(s.url("/whoami"))
            .bearer_auth(&t)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
    }
    let r = c
        .get(s.url("/whoami"))
        .bearer_auth(&t)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    let wait = corral_testkit::http::retry_after(&r);
    assert!(wait >= 1, "Retry-After {wait}");
    let (_, body) = json_of(r).await;
    assert_eq!(body["error"], "rate_limited");
    // Per token: another caller is not affected.
    let r = c
        .get(s.url("/whoami"))
        .bearer_auth(&other)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    s.stop().await;
}

/// `/health` writes (a probe, at most once a second): a database file deleted under the server,
/// whose writes then go to a file no one will open again, is a 503 `store_unwritable` saying why;
/// it answered 200 `ok` (it only read).
#[tokio::test(flavor = "multi_thread")]
async fn health_is_503_while_the_store_cannot_be_written() {
    let s = TestServer::start(|_| {}).await;
    let health = || async {
        let r = reqwest::get(s.url("/health")).await.unwrap();
        (r.status(), r.json::<Value>().await.unwrap())
    };
    let until = |want: StatusCode| async move {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let (st, v) = health().await;
            if st == want {
                return v;
            }
            assert!(std::time::Instant::now() < deadline, "still {st}: {v}");
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    };
    let v = until(StatusCode::OK).await;
    assert_eq!((&v["status"], &v["store_ok"]), (&json!("ok"), &json!(true)));
    assert!(v.get("store_error").is_none(), "{v}");
    let (db, aside) = (
        s.data_dir().join("corral.db"),
        s.data_dir().join("aside.db"),
    );
    std::fs::rename(&db, &aside).unwrap();
    let v = until(StatusCode::SERVICE_UNAVAILABLE).await;
    assert_eq!(v["status"], "store_unwritable", "{v}");
    assert_eq!(v["store_ok"], false, "{v}");
    let why = v["store_error"].as_str().unwrap();
    assert!(why.contains("deleted or replaced"), "{v}");
    std::fs::rename(&aside, &db).unwrap();
    until(StatusCode::OK).await;
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn websocket_needs_a_token_and_respects_ownership() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::{self, Message};
    let s = TestServer::start(|_| {}).await;
    let ws_url = s.base.replace("http://", "ws://") + "/ws";
    match tokio_tungstenite::connect_async(&ws_url).await {
        Err(tungstenite::Error::Http(r)) => assert_eq!(r.status(), 401),
        other => panic!("connected without a token: {:?}", other.map(|_| ())),
    }
    match tokio_tungstenite::connect_async(format!("{ws_url}?token=corral_nope")).await {
        Err(tungstenite::Error::Http(r)) => assert_eq!(r.status(), 401),
        other => panic!("connected with a bad token: {:?}", other.map(|_| ())),
    }
    let (a, b) = (s.token(Role::Student).await, s.token(Role::Student).await);
    let (_, up) = upload(&s, &a, form(&[("secret.txt", b"mine")])).await;
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("{ws_url}?token={b}"))
        .await
        .unwrap();
    let mut ask = async |msg: String| -> Value {
        ws.send(Message::Text(msg.into())).await.unwrap();
        loop {
            match ws.next().await.unwrap().unwrap() {
                Message::Text(t) => return serde_json::from_str(&t).unwrap(),
                _ => continue,
            }
        }
    };
    let v = ask(
        json!({"type": "run", "cmd": "cat secret.txt", "sandbox": {"homedir": up["id"]}})
            .to_string(),
    )
    .await;
    assert_eq!(
        (v["type"].as_str(), v["error"].as_str()),
        (Some("error"), Some("not_found")),
        "{v}"
    );
    let v = ask(
        json!({"type": "run", "cmd": "ls", "sandbox": {"id": "0123456789abcdef0123456789abcdef"}})
            .to_string(),
    )
    .await;
    assert_eq!(v["error"], "not_found", "{v}");
    let v = ask("{not json".to_string()).await;
    assert_eq!(v["error"], "bad_message", "{v}");
    let v = ask(json!({"type": "signal", "name": "SIGINT"}).to_string()).await;
    assert_eq!(v["error"], "not_running", "{v}");
    let v = ask(json!({"type": "run", "cmd": 5}).to_string()).await;
    assert_eq!(v["error"], "bad_message", "{v}");
    s.assert_up().await;
    s.stop().await;
}

/// A token may keep `max_websockets_per_caller` sockets open: past it the upgrade is a 429 with
/// Retry-After that names the cap (only the upgrade's rate limit bounded them: a token could
/// keep sockets open without end). Other tokens are not affected; a closed socket frees its place.
#[tokio::test(flavor = "multi_thread")]
async fn a_token_may_keep_only_so_many_websockets_open() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::{self, Message};
    let s = TestServer::start(|c| c.max_websockets_per_caller = 2).await;
    let ws_url = s.base.replace("http://", "ws://") + "/ws?token=";
    let (a, b) = (s.token(Role::Student).await, s.token(Role::Student).await);
    let connect = |t: &str| tokio_tungstenite::connect_async(format!("{ws_url}{t}"));
    let (mut first, _) = connect(&a).await.unwrap();
    let (_second, _) = connect(&a).await.unwrap();
    match connect(&a).await {
        Err(tungstenite::Error::Http(r)) => {
            assert_eq!(r.status(), 429);
            assert!(r.headers().contains_key("retry-after"), "{r:?}");
            let body: Value = serde_json::from_slice(r.body().as_deref().unwrap()).unwrap();
            assert_eq!(body["error"], "too_many_websockets", "{body}");
            assert!(body["message"].as_str().unwrap().contains("(2)"), "{body}");
        }
        other => panic!("a third socket opened: {:?}", other.map(|_| ())),
    }
    let (_other, _) = connect(&b).await.unwrap();
    // Closed (the server answers the close), the first socket's place is free again.
    first.send(Message::Close(None)).await.unwrap();
    while let Some(Ok(m)) = first.next().await {
        if m.is_close() {
            break;
        }
    }
    let mut tries = 0;
    let _third = loop {
        match connect(&a).await {
            Ok((ws, _)) => break ws,
            Err(tungstenite::Error::Http(r)) if r.status() == 429 && tries < 100 => {
                // The server drops its count as the session ends, just after its close reply.
                tries += 1;
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            Err(e) => panic!("no socket after one was closed: {e}"),
        }
    };
    s.assert_up().await;
    s.stop().await;
}

/// Browser pages of other origins (a Judge0 IDE, a course site's "run" widget) may call the API
/// when `http.cors_origins` names them: a preflight is answered before authentication, the
/// answer names the origin, and the headers a client reads are exposed. Other origins, and every
/// origin by default, get no CORS headers (a preflight is then an ordinary 405).
#[tokio::test(flavor = "multi_thread")]
async fn cross_origin_pages_are_let_in_only_when_named() {
    let c = client();
    let preflight = |s: &TestServer, origin: &str| {
        c.request(reqwest::Method::OPTIONS, s.url("/judge0/submissions"))
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header(
                "access-control-request-headers",
                "x-auth-token, content-type",
            )
            .send()
    };
    let acao = |r: &reqwest::Response| {
        r.headers()
            .get("access-control-allow-origin")
            .map(|v| v.to_str().unwrap().to_string())
    };
    let s =
        TestServer::start(|c| c.http.cors_origins = vec!["https://ide.example.edu".into()]).await;
    let t = s.token(Role::Student).await;
    let r = preflight(&s, "https://ide.example.edu").await.unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    assert_eq!(acao(&r).as_deref(), Some("https://ide.example.edu"));
    let methods = r.headers()["access-control-allow-methods"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(methods.contains("POST"), "{methods}");
    let headers = r.headers()["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .to_lowercase();
    assert!(headers.contains("x-auth-token"), "{headers}");
    assert!(r
        .headers()
        .get("access-control-allow-credentials")
        .is_none());
    // The actual request: the answer names the origin and exposes what a client reads.
    let r = c
        .get(s.url("/whoami"))
        .bearer_auth(&t)
        .header("origin", "https://ide.example.edu")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(acao(&r).as_deref(), Some("https://ide.example.edu"));
    let exposed = r.headers()["access-control-expose-headers"]
        .to_str()
        .unwrap()
        .to_lowercase();
    assert!(
        exposed.contains("retry-after") && exposed.contains("x-request-id"),
        "{exposed}"
    );
    // Another origin is not named.
    let r = preflight(&s, "https://evil.example").await.unwrap();
    assert_eq!(acao(&r), None);
    s.stop().await;
    // Any origin.
    let s = TestServer::start(|c| c.http.cors_origins = vec!["*".into()]).await;
    let r = preflight(&s, "https://anywhere.example").await.unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    assert_eq!(acao(&r).as_deref(), Some("*"));
    s.stop().await;
    // By default: none.
    let s = TestServer::start(|_| {}).await;
    let r = preflight(&s, "https://ide.example.edu").await.unwrap();
    assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(acao(&r), None);
    s.stop().await;
}

/// A suite file that does not load is named as it is in the suite's folder (`suite.yaml:4:15`),
/// never by the server's folders: registered (staff), checked or submitted against from the
/// suites folder (students). Before, the staff read `DATA/tmp/suite-XXXX/suite.yaml:…`, and a
/// student `DATA/suites/ID/suite.yaml:…` (`/check`) or `DATA/tmp/job-XXXX/suite/suite.yaml:…`
/// (a submission's verdict).
#[tokio::test(flavor = "multi_thread")]
async fn a_suite_that_does_not_load_is_named_without_the_servers_folders() {
    let s = TestServer::start(|_| {}).await;
    let data = s.data_dir().to_string_lossy().into_owned();
    let bad =
        "name: x\nchecks:\n  - id: a\n    depends: [nope]\n    steps:\n      - run: \"true\"\n";
    let named = |v: &Value| {
        let m = v["message"].as_str().unwrap_or_default().to_string();
        assert!(
            m.contains("suite.yaml:4:15: check \"a\": depends: unknown check \"nope\""),
            "{v}"
        );
        assert!(!m.contains(&data) && !m.contains("/tmp/"), "{v}");
    };
    let staff = s.token(Role::Staff).await;
    let register = |suite: &str| {
        let form = Form::new().text("id", "bad").part(
            "suite",
            Part::bytes(suite.as_bytes().to_vec()).file_name("suite.yaml"),
        );
        let req = client()
            .post(s.url("/suites"))
            .bearer_auth(&staff)
            .multipart(form);
        async move { json_of(req.send().await.unwrap()).await }
    };
    let (st, v) = register(bad).await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    named(&v);
    // A file the suite names but that was not sent: said without the server's folder either.
    for (suite, says) in [
        (
            "name: x\nfiles: [{path: nope.txt}]\nchecks:\n  - id: a\n    steps: [{exists: x}]\n",
            "suite.yaml:2:10: files[0].path: \"nope.txt\" is not in the assignment folder",
        ),
        (
            "name: x\nchecks:\n  - id: t\n    pytest:\n      tests: [test_x.py]\n",
            "\"test_x.py\" is not in the assignment folder",
        ),
    ] {
        let (st, v) = register(suite).await;
        assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
        let m = v["message"].as_str().unwrap_or_default();
        assert!(m.contains(says), "{v}");
        assert!(!m.contains(&data) && !m.contains("/tmp/"), "{v}");
    }

    let folder = s.data_dir().join("suites/broken");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("suite.yaml"), bad).unwrap();
    let student = s.token(Role::Student).await;
    let (st, up) = upload(&s, &student, form(&[("a.txt", b"x")])).await;
    assert_eq!(st, StatusCode::OK, "{up}");
    let (st, v) = s
        .post(
            &student,
            "/check",
            json!({"checks": "broken", "sandbox": {"homedir": up["id"]}}),
        )
        .await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    named(&v);

    let (st, v) = s
        .post(
            &student,
            "/submissions",
            json!({"suite": "broken", "files": [{"path": "a.txt", "content": "x"}]}),
        )
        .await;
    assert_eq!(st, StatusCode::ACCEPTED, "{v}");
    let (st, v) = s
        .get(
            &student,
            &format!(
                "/submissions/{}?wait=true&timeout=20",
                v["id"].as_str().unwrap()
            ),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["status"], "failed", "{v}");
    named(&v);
    s.stop().await;
}
