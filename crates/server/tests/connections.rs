//! What a slow or idle client may hold (`[http]`), over raw TCP against the in-process server: a
//! request head that never ends and an idle keep-alive connection are closed after
//! `header_timeout`, a body sent a byte at a time is answered 408 after `body_timeout` and
//! closed, and connections beyond `max_connections` wait in the listen backlog until one closes
//! (a WebSocket holds its slot too, and outlives the header timeout).
//!
//! The timeouts are short here and every wait for them is generous (30 s): a test fails only
//! when the server never closes, never when it is slow.

mod support;

use std::time::Duration;

use corral_sandbox::Millis;
use corral_store::Role;
use futures_util::{SinkExt, StreamExt};
use support::TestServer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Far more than any timeout these tests set.
const GENEROUS: Duration = Duration::from_secs(30);

fn addr(s: &TestServer) -> String {
    s.base.trim_start_matches("http://").to_string()
}

/// Reads until the server closes the connection (end of file or reset); what it sent before.
/// Panics when it is still open after [`GENEROUS`].
async fn read_until_closed(sock: &mut TcpStream, what: &str) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let read_all = async {
        loop {
            match sock.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    };
    if tokio::time::timeout(GENEROUS, read_all).await.is_err() {
        panic!(
            "{what}: the connection is still open after {GENEROUS:?}; got {:?}",
            String::from_utf8_lossy(&got)
        );
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// Reads one response whose body is `Content-Length` long: its head and body.
async fn read_response(sock: &mut TcpStream) -> (String, String) {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&got[..end]).into_owned();
            let len: usize = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse().unwrap())
                })
                .unwrap_or_else(|| panic!("a response without a Content-Length: {head}"));
            if got.len() >= end + 4 + len {
                let body = String::from_utf8_lossy(&got[end + 4..end + 4 + len]).into_owned();
                return (head, body);
            }
        }
        let n = sock.read(&mut buf).await.unwrap();
        assert!(
            n > 0,
            "closed before a whole response: {:?}",
            String::from_utf8_lossy(&got)
        );
        got.extend_from_slice(&buf[..n]);
    }
}

/// Connections completed by the kernel but not yet accepted by the server, on `port`'s
/// listening socket (for a listening socket, `/proc/net/tcp`'s `rx_queue` is that count).
fn accept_queue(port: u16) -> usize {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let local = format!(":{port:04X}");
    table
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f[1].ends_with(&local) && f[3] == "0A")
        .map(|f| usize::from_str_radix(f[4].split(':').nth(1).unwrap(), 16).unwrap())
        .unwrap_or_else(|| panic!("no listening socket on port {port} in /proc/net/tcp"))
}

/// Waits until `n` connections wait in `port`'s accept queue, seen three polls in a row (a
/// connection may sit there for a moment before a server without a cap accepts it); panics when
/// any of `waiting` is answered meanwhile (the server accepted more than it may).
async fn wait_for_accept_queue(port: u16, n: usize, waiting: &mut [TcpStream]) {
    let deadline = tokio::time::Instant::now() + GENEROUS;
    let mut seen = 0;
    loop {
        let queued = accept_queue(port);
        seen = if queued == n { seen + 1 } else { 0 };
        if seen == 3 {
            return;
        }
        for (i, c) in waiting.iter_mut().enumerate() {
            let mut b = [0u8; 64];
            if let Ok(Ok(k)) = tokio::time::timeout(Duration::from_millis(10), c.read(&mut b)).await
            {
                panic!(
                    "waiting connection {i} was served beyond the cap: {:?}",
                    String::from_utf8_lossy(&b[..k])
                );
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{queued} connections wait to be accepted, not {n}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_head_that_never_ends_is_closed_after_the_header_timeout() {
    let s = TestServer::start(|c| c.http.header_timeout = Millis::ms(1000)).await;
    // The review's attack: a header line every so often, never the blank line that ends them.
    let mut slow = TcpStream::connect(addr(&s)).await.unwrap();
    slow.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let (mut r, mut w) = slow.into_split();
    let dribble = tokio::spawn(async move {
        for i in 0.. {
            tokio::time::sleep(Duration::from_millis(200)).await;
            if w.write_all(format!("X-{i}: y\r\n").as_bytes())
                .await
                .is_err()
            {
                break;
            }
        }
    });
    let mut got = Vec::new();
    let closed = tokio::time::timeout(GENEROUS, r.read_to_end(&mut got)).await;
    assert!(
        closed.is_ok(),
        "a half-sent request head is still open after {GENEROUS:?}"
    );
    dribble.abort();
    assert!(
        !String::from_utf8_lossy(&got).contains("200 OK"),
        "an unfinished request was answered"
    );

    // A connection that sends nothing at all, and one idle after a response, are closed too.
    let mut silent = TcpStream::connect(addr(&s)).await.unwrap();
    read_until_closed(&mut silent, "a silent connection").await;
    let mut idle = TcpStream::connect(addr(&s)).await.unwrap();
    idle.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let (head, _) = read_response(&mut idle).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    read_until_closed(&mut idle, "an idle keep-alive connection").await;

    assert_eq!(reqwest::get(s.url("/health")).await.unwrap().status(), 200);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_body_sent_a_byte_at_a_time_is_answered_408_and_closed() {
    let s = TestServer::start(|c| c.http.body_timeout = Millis::ms(1000)).await;
    let token = s.token(Role::Student).await;
    let mut slow = TcpStream::connect(addr(&s)).await.unwrap();
    slow.write_all(
        format!(
            "POST /run HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\
             Content-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{{"
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    // A byte every 100 ms: a timeout that restarts at each chunk would never fire.
    let (mut r, mut w) = slow.into_split();
    let dribble = tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if w.write_all(b" ").await.is_err() {
                break;
            }
        }
    });
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let read_all = async {
        loop {
            match r.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    };
    let closed = tokio::time::timeout(GENEROUS, read_all).await;
    dribble.abort();
    let text = String::from_utf8_lossy(&got).into_owned();
    assert!(
        closed.is_ok(),
        "a body sent a byte at a time is still being read after {GENEROUS:?}: {text:?}"
    );
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(
        text.to_ascii_lowercase().contains("connection: close"),
        "{text}"
    );
    let body: serde_json::Value =
        serde_json::from_str(text.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert_eq!(body["error"], "body_timeout", "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("http.body_timeout"),
        "{body}"
    );

    // A body that arrives in time is served as before.
    let (st, v) = s.post(&token, "/run", serde_json::json!({"cmd": ""})).await;
    assert_eq!(st, 422, "{v}");
    s.stop().await;
}

/// Sends `request` on a new connection, half-closes it when `half_close` (a client that gave
/// up), and reads one response: its head and its body as JSON (panics when it is not JSON).
async fn exchange(s: &TestServer, request: &[u8], half_close: bool) -> (String, serde_json::Value) {
    let mut sock = TcpStream::connect(addr(s)).await.unwrap();
    sock.write_all(request).await.unwrap();
    if half_close {
        sock.shutdown().await.unwrap();
    }
    let (head, body) = tokio::time::timeout(GENEROUS, read_response(&mut sock))
        .await
        .unwrap_or_else(|_| panic!("no answer within {GENEROUS:?}"));
    let v =
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("not JSON ({e}): {head}\n{body}"));
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/json"),
        "{head}"
    );
    (head, v)
}

/// A body that ends before its `Content-Length` (the client half-closed: it crashed, or a proxy
/// gave up mid-upload) or whose chunked encoding is malformed or unfinished is the client's
/// failure: a 400 `bad_body` on every endpoint, multipart ones included (they answered 500
/// `internal`, with an ERROR log line, as if the server had failed), Judge0's in its own shape.
#[tokio::test(flavor = "multi_thread")]
async fn a_body_cut_short_or_badly_chunked_is_a_400_bad_body_everywhere() {
    let s = TestServer::start(|_| {}).await;
    let staff = s.token(Role::Staff).await;
    let form = "multipart/form-data; boundary=b";
    let part =
        b"--b\r\nContent-Disposition: form-data; name=\"files\"; filename=\"a.txt\"\r\n\r\nhello";
    let suite_part = b"--b\r\nContent-Disposition: form-data; name=\"suite\"; filename=\"s.yaml\"\r\n\r\nname: x";
    let head = |path: &str, ct: &str, framing: &str| {
        format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {staff}\r\n\
             Content-Type: {ct}\r\n{framing}\r\n\r\n"
        )
        .into_bytes()
    };
    let short = "Content-Length: 5000";
    let chunked = "Transfer-Encoding: chunked";
    let mut ended_early = format!("{:x}\r\n", part.len()).into_bytes();
    ended_early.extend_from_slice(part);
    ended_early.extend_from_slice(b"\r\n");
    let cases: Vec<(&str, &str, &str, &str, Vec<u8>)> = vec![
        ("upload, short", "/upload", form, short, part.to_vec()),
        ("suites, short", "/suites", form, short, suite_part.to_vec()),
        (
            "run, short",
            "/run",
            "application/json",
            short,
            b"{\"cmd\": \"echo".to_vec(),
        ),
        (
            "submissions, short",
            "/submissions",
            "application/json",
            short,
            b"{\"language\": \"python\"".to_vec(),
        ),
        (
            "upload, bad chunk size",
            "/upload",
            form,
            chunked,
            b"zz\r\nhello\r\n0\r\n\r\n".to_vec(),
        ),
        (
            "run, bad chunk size",
            "/run",
            "application/json",
            chunked,
            b"zz\r\nhello\r\n0\r\n\r\n".to_vec(),
        ),
        (
            "upload, no last chunk",
            "/upload",
            form,
            chunked,
            ended_early.clone(),
        ),
    ];
    for (what, path, ct, framing, body) in cases {
        let mut req = head(path, ct, framing);
        req.extend_from_slice(&body);
        let (head, v) = exchange(&s, &req, true).await;
        assert!(head.starts_with("HTTP/1.1 400"), "{what}: {head}\n{v}");
        assert_eq!(v["error"], "bad_body", "{what}: {v}");
        assert!(
            v["message"]
                .as_str()
                .unwrap()
                .contains("ended early or was malformed"),
            "{what}: {v}"
        );
    }
    // Judge0's surface answers in Judge0's shape, `{"error": "..."}`.
    let mut req = head("/judge0/submissions", "application/json", short);
    req.extend_from_slice(b"{\"language_id\": 71");
    let (head, v) = exchange(&s, &req, true).await;
    assert!(head.starts_with("HTTP/1.1 400"), "{head}\n{v}");
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("ended early or was malformed"),
        "{v}"
    );
    assert_eq!(reqwest::get(s.url("/health")).await.unwrap().status(), 200);
    s.stop().await;
}

/// `Expect: 100-continue` with a `Content-Length` over the route's cap is answered 413 at once:
/// hyper sends `100 Continue` when a handler first reads the body, which invited a client (curl
/// does this for large bodies) to send tens of megabytes only to have them refused.
#[tokio::test(flavor = "multi_thread")]
async fn an_expected_body_over_the_cap_is_refused_before_100_continue() {
    let s = TestServer::start(|_| {}).await;
    let staff = s.token(Role::Staff).await;
    for (path, ct) in [
        ("/upload", "multipart/form-data; boundary=b"),
        ("/suites", "multipart/form-data; boundary=b"),
        ("/run", "application/json"),
        ("/judge0/submissions", "application/json"),
    ] {
        let req = format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {staff}\r\n\
             Content-Type: {ct}\r\nExpect: 100-continue\r\nContent-Length: 999999999\r\n\r\n"
        );
        // No body is sent: a server that invites it answers `100 Continue` first (a head
        // without a Content-Length, which `read_response` names).
        let (head, v) = exchange(&s, req.as_bytes(), false).await;
        assert!(head.starts_with("HTTP/1.1 413"), "{path}: {head}\n{v}");
        let message = v["message"].as_str().or(v["error"].as_str()).unwrap();
        assert!(message.contains("larger than"), "{path}: {v}");
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn connections_beyond_the_cap_wait_until_one_closes() {
    let s = TestServer::start(|c| {
        c.http.max_connections = Some(2);
        c.http.header_timeout = Millis::ms(600_000);
    })
    .await;
    let port: u16 = addr(&s).rsplit(':').next().unwrap().parse().unwrap();
    // Two connections hold the only slots with requests they never finish.
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut c = TcpStream::connect(addr(&s)).await.unwrap();
        c.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n")
            .await
            .unwrap();
        held.push(c);
    }
    // Five more, each with a whole request: none is accepted, each waits in the backlog and
    // holds no descriptor of the server.
    let mut waiting = Vec::new();
    for _ in 0..5 {
        let mut c = TcpStream::connect(addr(&s)).await.unwrap();
        c.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        waiting.push(c);
    }
    wait_for_accept_queue(port, 5, &mut waiting).await;
    // A slot freed is the next one's, in arrival order.
    drop(held.remove(0));
    let (head, _) = read_response(&mut waiting[0]).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    drop(held);
    for c in waiting.iter_mut() {
        let text = read_until_closed(c, "a waiting connection").await;
        assert!(
            text.is_empty() || text.starts_with("HTTP/1.1 200"),
            "{text}"
        );
    }
    drop(waiting);
    assert_eq!(reqwest::get(s.url("/health")).await.unwrap().status(), 200);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_websocket_keeps_its_slot_and_outlives_the_header_timeout() {
    let s = TestServer::start(|c| {
        c.http.max_connections = Some(1);
        c.http.header_timeout = Millis::ms(500);
    })
    .await;
    let token = s.token(Role::Student).await;
    let port: u16 = addr(&s).rsplit(':').next().unwrap().parse().unwrap();
    let (mut ws, _) =
        tokio_tungstenite::connect_async(format!("ws://{}/ws?token={token}", addr(&s)))
            .await
            .expect("WebSocket connect");
    // Past the header timeout, the socket still answers: the timeout is for request heads only.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    ws.send(tokio_tungstenite::tungstenite::Message::text(
        r#"{"type": "bogus"}"#,
    ))
    .await
    .unwrap();
    let reply = tokio::time::timeout(GENEROUS, ws.next())
        .await
        .expect("an answer")
        .expect("the socket is open")
        .unwrap();
    assert!(reply.to_text().unwrap().contains("bad_message"), "{reply}");
    // It holds the only slot: another connection waits until it closes.
    let mut other = TcpStream::connect(addr(&s)).await.unwrap();
    other
        .write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    wait_for_accept_queue(port, 1, std::slice::from_mut(&mut other)).await;
    ws.close(None).await.unwrap();
    drop(ws);
    let (head, _) = read_response(&mut other).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    s.stop().await;
}

/// Through a shutdown's grace period the server still accepts and answers: a request for new
/// work gets 503 `shutting_down` (JSON, `Retry-After`, `Connection: close`), `/health` 503
/// `shutting_down`, a read as usual; the request doing work when the signal came (here one whose
/// body is still arriving) is answered as usual; then the server stops, long before its grace
/// period ends. It used to close its listener at the signal: every new client was refused.
#[tokio::test(flavor = "multi_thread")]
async fn a_shutdown_answers_new_work_503_while_the_work_in_flight_finishes() {
    let mut s = TestServer::start(|c| {
        c.shutdown_grace = Millis::ms(30_000);
        c.http.body_timeout = Millis::ms(30_000);
    })
    .await;
    let admin = s.token(Role::Admin).await;
    // Work in flight: POST /tokens whose body is only half sent.
    let body = br#"{"role": "student"}"#;
    let mut working = TcpStream::connect(addr(&s)).await.unwrap();
    working
        .write_all(
            format!(
                "POST /tokens HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {admin}\r\n\
                 Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                body.len()
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    working.write_all(&body[..5]).await.unwrap();
    // A keep-alive connection opened before the signal.
    let mut kept = TcpStream::connect(addr(&s)).await.unwrap();
    kept.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let (head, _) = read_response(&mut kept).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    // The handler is reading the body (counted as work) before the signal.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = tokio::time::Instant::now();
    s.signal_stop();

    // /health: 503 shutting_down, once the signal is taken.
    let deadline = tokio::time::Instant::now() + GENEROUS;
    let health = loop {
        let r = reqwest::get(s.url("/health"))
            .await
            .expect("/health during the grace period");
        if r.status() == 503 {
            break r.json::<serde_json::Value>().await.unwrap();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "/health never said 503"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(health["status"], "shutting_down", "{health}");
    assert_eq!(health["shutting_down"], true, "{health}");

    // New work: 503 in the API's error shape, to retry later.
    let r = reqwest::Client::new()
        .post(s.url("/run"))
        .bearer_auth(&admin)
        .json(&serde_json::json!({"cmd": "true"}))
        .send()
        .await
        .expect("POST /run during the grace period");
    assert_eq!(r.status(), 503);
    assert_eq!(r.headers()["retry-after"], "5");
    assert_eq!(r.headers()["connection"], "close");
    let (_, v) = support::json_of(r).await;
    assert_eq!(v["error"], "shutting_down", "{v}");
    assert!(
        v["message"].as_str().unwrap().contains("shutting down"),
        "{v}"
    );
    // Judge0's surface answers in Judge0's shape.
    let r = reqwest::Client::new()
        .post(s.url("/judge0/submissions"))
        .bearer_auth(&admin)
        .json(&serde_json::json!({"source_code": "x", "language_id": 71}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
    assert_eq!(r.headers()["retry-after"], "5");
    let v: serde_json::Value = r.json().await.unwrap();
    assert!(
        v["error"].as_str().unwrap().contains("shutting down"),
        "{v}"
    );
    // A read: answered as usual.
    let r = reqwest::get(s.url("/metrics")).await.unwrap();
    assert_eq!(r.status(), 200);
    // The keep-alive connection: answered, then closed.
    kept.write_all(b"GET /languages HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let (head, _) = read_response(&mut kept).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase().contains("connection: close"),
        "{head}"
    );
    read_until_closed(&mut kept, "a keep-alive connection during the grace period").await;

    // The work in flight finishes as usual.
    working.write_all(&body[5..]).await.unwrap();
    let (head, created) = read_response(&mut working).await;
    assert!(head.starts_with("HTTP/1.1 201"), "{head}\n{created}");
    assert!(created.contains("\"token\""), "{created}");
    tokio::time::timeout(GENEROUS, s.stop())
        .await
        .expect("the server did not stop once its work was done");
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "{:?}",
        started.elapsed()
    );
}
