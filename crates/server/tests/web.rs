//! The browser editor's side of the server, without running programs: the embedded pages and
//! assets (content types, caching, the pages' CSP that forbids inline scripts), the revisions API
//! (owner-only, staff listing, validation), `/check?format=` and the WebSocket run's `language`.
//! The server runs in this process on a loopback port (`support/mod.rs`, as for `api.rs`). The editor itself is
//! tested in a real browser by `crates/cli/tests/web_e2e.rs`.

mod support;

use corral_store::Role;
use reqwest::StatusCode;
use serde_json::{json, Value};
use support::TestServer;

fn header(r: &reqwest::Response, name: &str) -> String {
    r.headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default()
}

#[tokio::test]
async fn pages_and_assets_are_served_with_their_types_and_a_strict_csp() {
    let s = TestServer::start(|_| {}).await;
    let r = reqwest::get(s.url("/")).await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(header(&r, "content-type"), "text/html; charset=utf-8");
    let csp = header(&r, "content-security-policy");
    let script_src = csp
        .split(';')
        .map(str::trim)
        .find(|d| d.starts_with("script-src"))
        .expect("a script-src directive");
    assert_eq!(
        script_src, "script-src 'self'",
        "no inline scripts, no eval"
    );
    assert!(csp.contains("default-src 'none'") && csp.contains("connect-src 'self'"));
    assert!(csp.contains("frame-ancestors 'none'"));
    assert_eq!(header(&r, "x-content-type-options"), "nosniff");
    assert_eq!(header(&r, "cache-control"), "no-cache");
    let html = r.text().await.unwrap();
    assert!(html.contains("<title>corral"));
    // Every asset the page names is served with its type and cached for good.
    let mut seen = 0;
    for part in html.split("\"/assets/").skip(1) {
        let name = &part[..part.find('"').unwrap()];
        let r = reqwest::get(s.url(&format!("/assets/{name}")))
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{name}");
        let ct = header(&r, "content-type");
        if name.ends_with(".js") {
            assert_eq!(ct, "text/javascript; charset=utf-8");
        } else if name.ends_with(".css") {
            assert_eq!(ct, "text/css; charset=utf-8");
        }
        assert!(header(&r, "cache-control").contains("immutable"));
        assert_eq!(header(&r, "content-encoding"), "", "none unless asked for");
        let plain = r.bytes().await.unwrap();
        // A browser that takes gzip gets the copy made at build time, the same file unpacked.
        let r = reqwest::Client::new()
            .get(s.url(&format!("/assets/{name}")))
            .header("accept-encoding", "gzip, deflate, br, zstd")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{name}");
        assert_eq!(header(&r, "vary"), "accept-encoding", "{name}");
        assert_eq!(header(&r, "content-encoding"), "gzip", "{name}");
        let packed = r.bytes().await.unwrap();
        let mut unpacked = Vec::new();
        std::io::Read::read_to_end(
            &mut flate2::read::GzDecoder::new(&packed[..]),
            &mut unpacked,
        )
        .unwrap();
        assert_eq!(unpacked, plain, "{name}");
        assert!(packed.len() < plain.len(), "{name}");
        seen += 1;
    }
    assert!(seen >= 2, "the page names its script and stylesheet");
    for page in ["/staff.html", "/staff", "/index.html"] {
        let r = reqwest::get(s.url(page)).await.unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{page}");
        assert!(header(&r, "content-security-policy").contains("script-src 'self'"));
    }
    let r = reqwest::get(s.url("/favicon.svg")).await.unwrap();
    assert_eq!(header(&r, "content-type"), "image/svg+xml");
    // Missing assets and traversal are JSON 404s; the API keeps its own policy.
    for bad in [
        "/assets/nope.js",
        "/assets/..%2f..%2fetc%2fpasswd",
        "/assets/a//b",
    ] {
        let r = reqwest::get(s.url(bad)).await.unwrap();
        assert_eq!(r.status(), StatusCode::NOT_FOUND, "{bad}");
        assert!(header(&r, "content-type").starts_with("application/json"));
    }
    let r = reqwest::get(s.url("/health")).await.unwrap();
    assert_eq!(
        header(&r, "content-security-policy"),
        "default-src 'none'; frame-ancestors 'none'"
    );
    s.stop().await;
}

fn revision(kind: &str, content: &str) -> Value {
    json!({"kind": kind, "language": "c", "status": "ok", "summary": "exited with status 0",
           "files": [{"path": "main.c", "content": content}, {"path": "lib/util.h", "content": "// h"}]})
}

#[tokio::test]
async fn revisions_are_the_owners_only() {
    let s = TestServer::start(|_| {}).await;
    let alice = s.token(Role::Student).await;
    let bob = s.token(Role::Student).await;
    let staff = s.token(Role::Staff).await;

    let (st, a1) = s.post(&alice, "/revisions", &revision("run", "v1")).await;
    assert_eq!(st, StatusCode::CREATED, "{a1}");
    assert_eq!(a1["files_count"], 2);
    assert_eq!(a1["kind"], "run");
    let mut check = revision("check", "v2");
    check["suite"] = json!("hello");
    check["score"] = json!(3);
    check["max_score"] = json!(6);
    check["status"] = json!("failed");
    // A check's revision is the server's to record (`POST /check` with `revision`): the staff
    // page counts their scores, which a client's own would let it choose.
    let (st, e) = s.post(&alice, "/revisions", &check).await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("POST /check"),
        "{e}"
    );
    check["kind"] = json!("run");
    let (st, a2) = s.post(&alice, "/revisions", &check).await;
    assert_eq!(st, StatusCode::CREATED, "{a2}");
    let (st, b1) = s.post(&bob, "/revisions", &revision("save", "bob")).await;
    assert_eq!(st, StatusCode::CREATED);

    // Newest first, the caller's own only.
    let (st, list) = s.get(&alice, "/revisions").await;
    assert_eq!(st, StatusCode::OK);
    let ids: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [a2["id"].as_str().unwrap(), a1["id"].as_str().unwrap()]
    );
    assert!(list[0].get("files").is_none(), "lists carry no files");
    assert_eq!(list[0]["score"], 3.0);
    let (_, only_runs) = s.get(&alice, "/revisions?kind=run&limit=1").await;
    assert_eq!(only_runs.as_array().unwrap().len(), 1);

    // One with its files; someone else's is a 404, like a missing one.
    let id = a1["id"].as_str().unwrap();
    let (st, full) = s.get(&alice, &format!("/revisions/{id}")).await;
    assert_eq!(st, StatusCode::OK);
    // In the editor's order (its tabs).
    assert_eq!(full["files"][0], json!({"path": "main.c", "content": "v1"}));
    assert_eq!(
        full["files"][1],
        json!({"path": "lib/util.h", "content": "// h"})
    );
    let (st, e) = s.get(&bob, &format!("/revisions/{id}")).await;
    assert_eq!(st, StatusCode::NOT_FOUND, "{e}");
    let (st, _) = s.get(&staff, &format!("/revisions/{id}")).await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    let (st, _) = s.get(&alice, "/revisions/nope").await;
    assert_eq!(st, StatusCode::NOT_FOUND);

    // Everyone's: staff only.
    let (st, _) = s.get(&alice, "/revisions?scope=all").await;
    assert_eq!(st, StatusCode::FORBIDDEN);
    let (st, all) = s.get(&staff, "/revisions?scope=all&kind=save").await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(all.as_array().unwrap().len(), 1);
    assert_eq!(all[0]["id"], b1["id"]);
    let (_, all) = s.get(&staff, "/revisions?scope=all").await;
    assert_eq!(all.as_array().unwrap().len(), 3);
    assert_eq!(all[0]["id"], b1["id"]);
    let (st, _) = s.get(&staff, "/revisions?scope=everyone").await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY);

    // Bad input: clean 4xx.
    for (body, want) in [
        (
            json!({"kind": "run", "language": "c", "status": "ok", "files": []}),
            422,
        ),
        (
            json!({"kind": "nope", "language": "c", "status": "ok", "files": [{"path": "a", "content": ""}]}),
            422,
        ),
        (
            json!({"kind": "run", "language": "c", "status": "ok", "files": [{"path": "../x", "content": ""}]}),
            400,
        ),
        (
            json!({"kind": "run", "language": "c", "status": "ok", "files": [{"path": "/etc/x", "content": ""}]}),
            400,
        ),
        (
            json!({"kind": "run", "language": "c", "status": "ok",
                "files": [{"path": "a", "content": ""}, {"path": "a/b", "content": ""}]}),
            400,
        ),
        (
            json!({"kind": "run", "language": "c", "status": "ok", "extra": 1,
                "files": [{"path": "a", "content": ""}]}),
            422,
        ),
        (
            json!({"kind": "run", "language": "x".repeat(300), "status": "ok",
                "files": [{"path": "a", "content": ""}]}),
            422,
        ),
    ] {
        let (st, e) = s.post(&alice, "/revisions", &body).await;
        assert_eq!(st.as_u16(), want, "{body} → {e}");
        assert!(e["error"].is_string());
    }
    let r = reqwest::get(s.url("/revisions")).await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    s.stop().await;
}

#[tokio::test]
async fn check_format_is_cs50_or_json() {
    let s = TestServer::start(|_| {}).await;
    let t = s.token(Role::Student).await;
    let body = json!({"checks": "hello", "sandbox": {"homedir": "0123"}});
    let (st, e) = s.post(&t, "/check?format=xml", &body).await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{e}");
    // A valid format goes on to look for the upload.
    for q in ["", "?format=json", "?format=cs50"] {
        let (st, _) = s.post(&t, &format!("/check{q}"), &body).await;
        assert_eq!(st, StatusCode::NOT_FOUND, "{q}");
    }
    s.stop().await;
}

#[tokio::test]
async fn a_websocket_run_names_a_known_language() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let s = TestServer::start(|_| {}).await;
    let t = s.token(Role::Student).await;
    let url = format!("{}/ws?token={t}", s.base.replace("http://", "ws://"));
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let run = json!({"type": "run", "cmd": "./main", "language": "cobol"});
    ws.send(Message::Text(run.to_string().into()))
        .await
        .unwrap();
    let m = tokio::time::timeout(std::time::Duration::from_secs(30), ws.next())
        .await
        .expect("an answer")
        .unwrap()
        .unwrap();
    let v: Value = serde_json::from_str(m.to_text().unwrap()).unwrap();
    assert_eq!(v["type"], "error", "{v}");
    assert_eq!(v["error"], "unknown_language", "{v}");
    drop(ws);
    s.stop().await;
}
