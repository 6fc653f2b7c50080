//! Signed callbacks end to end: the real `corral serve` calls a receiver on loopback (allowed by
//! the operator's `callback_allow`), signs each delivery (checked with the README's own Python
//! snippet, which also rejects tampered bodies and timestamps), retries failures with backoff,
//! never follows a redirect, and refuses loopback targets unless allowed (a literal address when
//! the submission is made, a name when it is resolved). Staff send a given-up callback again,
//! its tries counted afresh.

mod server_support;

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{json, Value};
use server_support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const SECRET: &str = "test-secret-0123456789";

/// One request the receiver got.
#[derive(Debug, Clone)]
struct Received {
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Received {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A minimal HTTP/1.1 receiver on loopback that answers with the scripted responses in turn
/// (the last one repeats) and records every request.
struct Receiver {
    addr: std::net::SocketAddr,
    got: Arc<Mutex<Vec<Received>>>,
}

impl Receiver {
    async fn start(responses: Vec<String>) -> Receiver {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let got: Arc<Mutex<Vec<Received>>> = Arc::default();
        let got2 = got.clone();
        tokio::spawn(async move {
            let mut n = 0usize;
            loop {
                let Ok((mut sock, _)) = l.accept().await else {
                    return;
                };
                let resp = responses[n.min(responses.len() - 1)].clone();
                n += 1;
                let got = got2.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    let head_end = loop {
                        let k = sock.read(&mut chunk).await.unwrap_or(0);
                        if k == 0 {
                            return;
                        }
                        buf.extend_from_slice(&chunk[..k]);
                        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            break p;
                        }
                    };
                    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
                    let mut lines = head.split("\r\n");
                    let path = lines
                        .next()
                        .unwrap()
                        .split_whitespace()
                        .nth(1)
                        .unwrap()
                        .to_string();
                    let headers: Vec<(String, String)> = lines
                        .filter_map(|l| l.split_once(':'))
                        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                        .collect();
                    let len: usize = headers
                        .iter()
                        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
                        .map(|(_, v)| v.parse().unwrap())
                        .unwrap_or(0);
                    let mut body = buf[head_end + 4..].to_vec();
                    while body.len() < len {
                        let k = sock.read(&mut chunk).await.unwrap_or(0);
                        if k == 0 {
                            break;
                        }
                        body.extend_from_slice(&chunk[..k]);
                    }
                    got.lock().unwrap().push(Received {
                        path,
                        headers,
                        body,
                    });
                    let _ = sock.write_all(resp.as_bytes()).await;
                    let _ = sock.shutdown().await;
                });
            }
        });
        Receiver { addr, got }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn got(&self) -> Vec<Received> {
        self.got.lock().unwrap().clone()
    }
}

fn status(code: u16, extra: &str) -> String {
    format!("HTTP/1.1 {code} X\r\nContent-Length: 0\r\nConnection: close\r\n{extra}\r\n")
}

/// The README's verification snippet, run by python3 on each (header, body): true or false.
fn python_verify(secret: &str, cases: &[(String, Vec<u8>)]) -> Vec<bool> {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"))
            .unwrap();
    let block = readme
        .split("<!-- callback-verify -->")
        .nth(1)
        .and_then(|s| s.split("<!-- /callback-verify -->").next())
        .expect("the README has the callback verification snippet");
    let code = block
        .trim()
        .strip_prefix("```python")
        .and_then(|s| s.strip_suffix("```"))
        .expect("a python code block");
    let dir = tempfile::tempdir().unwrap();
    let mut driver = String::from(code);
    driver.push_str(
        "\nimport json, sys\nfor c in json.load(open(sys.argv[1])):\n    \
         print(verify(sys.argv[2].encode(), c[0], bytes.fromhex(c[1])))\n",
    );
    std::fs::write(dir.path().join("verify.py"), driver).unwrap();
    let cases_json: Vec<Value> = cases
        .iter()
        .map(|(h, b)| json!([h, hex_encode(b)]))
        .collect();
    let mut f = std::fs::File::create(dir.path().join("cases.json")).unwrap();
    f.write_all(serde_json::to_string(&cases_json).unwrap().as_bytes())
        .unwrap();
    corral_testkit::succeed(
        std::process::Command::new("python3")
            .arg(dir.path().join("verify.py"))
            .arg(dir.path().join("cases.json"))
            .arg(secret),
    )
    .lines()
    .map(|l| match l {
        "True" => true,
        "False" => false,
        other => panic!("verify printed {other:?}"),
    })
    .collect()
}

fn hex_encode(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

async fn submit(s: &Server, token: &str, body: Value) -> String {
    let r = client()
        .post(s.url("/submissions"))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let v: Value = r.json().await.unwrap();
    v["id"].as_str().unwrap().to_string()
}

/// Polls until the submission's callback is delivered or failed (120 s at most).
async fn callback_settled(s: &Server, token: &str, id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (_, v) = s.get(token, &format!("/submissions/{id}")).await;
        let st = v["callback"]["state"].as_str().unwrap_or("").to_string();
        if st == "delivered" || st == "failed" {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "callback never settled: {v}\n{}",
            s.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[test]
fn callbacks_are_signed_retried_and_never_redirected() {
    let cfg = format!(
        "[submissions]\nworkers = 1\ncallback_secret = \"{SECRET}\"\ncallback_allow = [\"127.0.0.1/32\"]\n\
         callback_backoff = \"100ms\"\ncallback_max_attempts = 3\n"
    );
    let s = Server::start(&cfg, &[]);
    rt().block_on(async {
        let t = s.token("student").await;
        // Fails twice, then takes it.
        let flaky = Receiver::start(vec![
            status(500, ""),
            status(503, ""),
            status(200, ""),
        ])
        .await;
        let id = submit(
            &s,
            &t,
            json!({"cmd": "echo hi", "expected_output": "hi", "callback_url": flaky.url("/hook?x=1")}),
        )
        .await;
        let v = callback_settled(&s, &t, &id).await;
        assert_eq!(v["callback"]["state"], "delivered", "{v}");
        assert_eq!(v["callback"]["attempts"], 3);
        let got = flaky.got();
        assert_eq!(got.len(), 3, "two failures, then the delivery");
        let mut cases = Vec::new();
        for (i, r) in got.iter().enumerate() {
            assert_eq!(r.path, "/hook?x=1");
            assert_eq!(r.header("content-type"), Some("application/json"));
            assert_eq!(r.header("corral-submission"), Some(id.as_str()));
            assert_eq!(
                r.header("corral-delivery-attempt"),
                Some((i + 1).to_string().as_str())
            );
            let body: Value = serde_json::from_slice(&r.body).unwrap();
            assert_eq!(body["id"], id.as_str());
            assert_eq!(body["status"], "done");
            assert_eq!(body["verdict"], "accepted");
            assert_eq!(body["run"]["stdout"], "hi\n");
            cases.push((r.header("corral-signature").unwrap().to_string(), r.body.clone()));
        }
        // Each signature verifies with the README's snippet; tampering with the body, the
        // timestamp or the secret does not.
        assert_eq!(python_verify(SECRET, &cases), vec![true, true, true]);
        let (sig, body) = cases[2].clone();
        let mut tampered = body.clone();
        let pos = tampered
            .windows(8)
            .position(|w| w == b"accepted")
            .unwrap();
        tampered[pos..pos + 8].copy_from_slice(b"rejected");
        let t0: i64 = sig
            .split(',')
            .next()
            .unwrap()
            .trim_start_matches("t=")
            .parse()
            .unwrap();
        let shifted = sig.replace(&format!("t={t0}"), &format!("t={}", t0 + 1));
        let forged = format!("t={t0},v1={}", "0".repeat(64));
        assert_eq!(
            python_verify(
                SECRET,
                &[
                    (sig.clone(), tampered),
                    (shifted, body.clone()),
                    (forged, body.clone()),
                    ("v1=abc".into(), body.clone()),
                ]
            ),
            vec![false, false, false, false]
        );
        assert_eq!(python_verify("another-secret-000", &[(sig, body)]), vec![false]);

        // A redirect is a failed try, never followed.
        let elsewhere = Receiver::start(vec![status(200, "")]).await;
        let redirecting = Receiver::start(vec![status(
            307,
            &format!("Location: {}\r\n", elsewhere.url("/stolen")),
        )])
        .await;
        let id = submit(
            &s,
            &t,
            json!({"cmd": "true", "callback_url": redirecting.url("/hook")}),
        )
        .await;
        let v = callback_settled(&s, &t, &id).await;
        assert_eq!(v["callback"]["state"], "failed", "{v}");
        assert_eq!(v["callback"]["attempts"], 3, "retried up to the limit");
        assert!(
            v["callback"]["error"].as_str().unwrap().contains("307"),
            "{v}"
        );
        assert_eq!(redirecting.got().len(), 3);
        assert!(elsewhere.got().is_empty(), "the redirect was followed");

        // A program that fails is called back like any other verdict.
        let id = submit(
            &s,
            &t,
            json!({"cmd": "exit 3", "callback_url": flaky.url("/again")}),
        )
        .await;
        let v = callback_settled(&s, &t, &id).await;
        assert_eq!(v["callback"]["state"], "delivered");
        let last = flaky.got().pop().unwrap();
        let body: Value = serde_json::from_slice(&last.body).unwrap();
        assert_eq!(body["verdict"], "runtime_error");
    });
}

#[test]
fn private_targets_are_refused_unless_allowed() {
    let cfg = format!(
        "[submissions]\nworkers = 1\ncallback_secret = \"{SECRET}\"\ncallback_backoff = \"100ms\"\n"
    );
    let s = Server::start(&cfg, &[]);
    rt().block_on(async {
        let t = s.token("student").await;
        let r = Receiver::start(vec![status(200, "")]).await;
        let port = r.addr.port();
        // A literal address is refused when the submission is made (nothing is queued), with the
        // reason a delivery would give: accepted, it was judged and only then failed, unseen by
        // the client that sent it.
        for (url, why) in [
            (r.url("/hook"), "127.0.0.1 is a loopback address"),
            (
                format!("http://[::ffff:127.0.0.1]:{port}/hook"),
                "::ffff:127.0.0.1 is a loopback address",
            ),
            (
                "http://169.254.169.254/latest/meta-data/".to_string(),
                "169.254.169.254 is a link-local address",
            ),
            (
                "http://10.1.2.3/x".to_string(),
                "10.1.2.3 is a private address",
            ),
        ] {
            let (st, v) = s
                .post_lenient(
                    &t,
                    "/submissions",
                    json!({"cmd": "true", "callback_url": url}),
                )
                .await;
            assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{url}: {v}");
            assert_eq!(
                v["message"],
                format!(
                    "callback_url: refused: {why} (allow its range in \
                     submissions.callback_allow to call it)"
                ),
                "{url}"
            );
        }
        let (_, v) = s.get(&t, "/submissions").await;
        assert_eq!(
            v["submissions"],
            json!([]),
            "a refused submission was queued"
        );
        // A host name is resolved, and refused, at each delivery (what it resolves to may change
        // after the submission is made).
        let url = format!("http://localhost:{port}/hook");
        let id = submit(&s, &t, json!({"cmd": "true", "callback_url": url})).await;
        let v = callback_settled(&s, &t, &id).await;
        assert_eq!(v["callback"]["state"], "failed", "{v}");
        assert_eq!(
            v["callback"]["attempts"], 1,
            "refused at once, not retried: {v}"
        );
        let err = v["callback"]["error"].as_str().unwrap();
        assert!(err.contains("refused: localhost resolves to"), "{err}");
        assert!(r.got().is_empty(), "a refused target was called");
    });
}

/// A receiver that refused every try of a callback (down for longer than the tries last) has it
/// given up; staff ask for it again and it is delivered, signed, as try 1 of a fresh count. A
/// student may not ask; a submission not finished, or without a callback URL, is a 409.
#[test]
fn a_given_up_callback_is_delivered_again_when_staff_ask() {
    let cfg = format!(
        "[submissions]\nworkers = 1\ncallback_secret = \"{SECRET}\"\ncallback_allow = [\"127.0.0.1/32\"]\n\
         callback_backoff = \"100ms\"\ncallback_backoff_max = \"200ms\"\ncallback_max_attempts = 3\n"
    );
    let s = Server::start(&cfg, &[]);
    rt().block_on(async {
        let t = s.token("student").await;
        let staff = s.token("staff").await;
        let down_then_up = Receiver::start(vec![
            status(503, ""),
            status(503, ""),
            status(503, ""),
            status(200, ""),
        ])
        .await;
        let id = submit(
            &s,
            &t,
            json!({"cmd": "echo hi", "expected_output": "hi", "callback_url": down_then_up.url("/hook")}),
        )
        .await;
        let v = callback_settled(&s, &t, &id).await;
        assert_eq!(v["callback"]["state"], "failed", "{v}");
        assert_eq!(v["callback"]["attempts"], 3, "{v}");
        assert!(
            v["callback"]["error"]
                .as_str()
                .unwrap()
                .ends_with("HTTP 503; gave up after 3 tries"),
            "{v}"
        );
        assert_eq!(down_then_up.got().len(), 3);

        let again = format!("/submissions/{id}/callback");
        let (st, v) = s.post_lenient(&t, &again, json!({})).await;
        assert_eq!(st, StatusCode::FORBIDDEN, "a student asked: {v}");
        let (st, v) = s
            .post_lenient(&staff, "/submissions/0123456789abcdef0123456789abcdef/callback", json!({}))
            .await;
        assert_eq!(st, StatusCode::NOT_FOUND, "{v}");
        let plain = submit(&s, &t, json!({"cmd": "true"})).await;
        s.judged(&t, &plain).await;
        let (st, v) = s
            .post_lenient(&staff, &format!("/submissions/{plain}/callback"), json!({}))
            .await;
        assert_eq!((st, v["error"].as_str()), (StatusCode::CONFLICT, Some("no_callback")), "{v}");
        let slow = submit(
            &s,
            &t,
            json!({"cmd": "sleep 30", "callback_url": down_then_up.url("/slow")}),
        )
        .await;
        let (st, v) = s
            .post_lenient(&staff, &format!("/submissions/{slow}/callback"), json!({}))
            .await;
        assert_eq!((st, v["error"].as_str()), (StatusCode::CONFLICT, Some("not_finished")), "{v}");

        // Staff: pending again, its tries counted afresh; then delivered as try 1.
        let (st, v) = s.post_lenient(&staff, &again, json!({})).await;
        assert_eq!(st, StatusCode::OK, "{v}");
        assert_eq!(v["id"], id.as_str(), "{v}");
        assert_eq!(v["verdict"], "accepted", "the submission's view: {v}");
        assert_eq!(v["callback"]["state"], "pending", "{v}");
        assert_eq!(v["callback"]["attempts"], 0, "{v}");
        let v = callback_settled(&s, &t, &id).await;
        assert_eq!(v["callback"]["state"], "delivered", "{v}");
        assert_eq!(v["callback"]["attempts"], 1, "{v}");
        let got = down_then_up.got();
        assert_eq!(got.len(), 4, "{got:?}");
        let last = &got[3];
        assert_eq!(last.path, "/hook");
        assert_eq!(last.header("corral-delivery-attempt"), Some("1"));
        assert_eq!(last.header("corral-submission"), Some(id.as_str()));
        let body: Value = serde_json::from_slice(&last.body).unwrap();
        assert_eq!((&body["id"], &body["status"]), (&json!(id), &json!("done")));
        let sig = last.header("corral-signature").unwrap().to_string();
        assert_eq!(python_verify(SECRET, &[(sig, last.body.clone())]), vec![true]);
    });
}

/// A target that accepts connections and never answers, keeping every one open; counts them.
struct Tarpit {
    addr: std::net::SocketAddr,
    accepted: Arc<Mutex<Vec<tokio::net::TcpStream>>>,
}

impl Tarpit {
    async fn start() -> Tarpit {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let accepted: Arc<Mutex<Vec<tokio::net::TcpStream>>> = Arc::default();
        let kept = accepted.clone();
        tokio::spawn(async move {
            while let Ok((sock, _)) = l.accept().await {
                kept.lock().unwrap().push(sock);
            }
        });
        Tarpit { addr, accepted }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn connections(&self) -> usize {
        self.accepted.lock().unwrap().len()
    }
}

#[test]
fn a_target_that_never_answers_does_not_hold_up_other_tokens_callbacks() {
    // Each try at the tarpit waits out a timeout longer than this test, so none of its
    // callbacks settles here: they are delivered one at a time, when they are, and another
    // token's callback goes ahead of them.
    let cfg = format!(
        "[submissions]\nworkers = 1\ncallback_secret = \"{SECRET}\"\ncallback_allow = [\"127.0.0.1/32\"]\n\
         callback_timeout = \"600s\"\ncallback_concurrency = 4\ncallback_per_owner = 1\n"
    );
    let s = Server::start(&cfg, &[]);
    rt().block_on(async {
        let slow_owner = s.token("student").await;
        let other = s.token("student").await;
        let tarpit = Tarpit::start().await;
        let receiver = Receiver::start(vec![status(200, "")]).await;
        let mut stuck = Vec::new();
        for i in 0..3 {
            let id = submit(
                &s,
                &slow_owner,
                json!({"cmd": "true", "callback_url": tarpit.url(&format!("/hook/{i}"))}),
            )
            .await;
            s.judged(&slow_owner, &id).await;
            stuck.push(id);
        }
        // The first of them is being delivered (and will be for 600 s) before the other
        // token's submission is even made.
        let deadline = Instant::now() + Duration::from_secs(120);
        while tarpit.connections() == 0 {
            assert!(
                Instant::now() < deadline,
                "the tarpit was never called\n{}",
                s.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let id = submit(
            &s,
            &other,
            json!({"cmd": "true", "callback_url": receiver.url("/hook")}),
        )
        .await;
        let v = callback_settled(&s, &other, &id).await;
        assert_eq!(v["callback"]["state"], "delivered", "{v}");
        assert_eq!(v["callback"]["attempts"], 1, "{v}");
        assert_eq!(receiver.got().len(), 1);
        // The tarpit's callbacks, due before it, are all still waiting or being tried …
        for id in &stuck {
            let (_, v) = s.get(&slow_owner, &format!("/submissions/{id}")).await;
            let state = v["callback"]["state"].as_str().unwrap().to_string();
            assert!(state == "pending" || state == "delivering", "{id}: {v}");
        }
        // … one at a time: one token holds at most `callback_per_owner` slots.
        assert_eq!(tarpit.connections(), 1, "{}", s.log());
    });
}
