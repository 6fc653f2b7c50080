//! One validation of a run request at every entry point: the same bad argv or environment (NUL
//! bytes, `=` in a name, an empty command, a huge argument) is refused with 422 and the same
//! error code and message by `/run`, the WebSocket, `POST /submissions` and its batch items, with
//! Judge0's own error shape (the bad field's errors) by `/judge0/submissions`, and as an `invalid_spec` line by
//! `corral run --batch` — never accepted (202) to fail later as `internal_error`.

mod server_support;

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use reqwest::StatusCode;
use serde_json::{json, Value};
use server_support::*;
use tokio_tungstenite::tungstenite::Message;

/// (what, cmd, env): each one a request no sandbox could run.
fn bad_requests() -> Vec<(&'static str, Value, Value)> {
    let huge = "x".repeat(200_000);
    vec![
        ("NUL in argv", json!(["echo", "a\u{0}b"]), json!({})),
        (
            "NUL in an env value",
            json!(["true"]),
            json!({"A": "x\u{0}y"}),
        ),
        (
            "NUL in an env name",
            json!(["true"]),
            json!({"A\u{0}B": "x"}),
        ),
        ("'=' in an env name", json!(["true"]), json!({"A=B": "x"})),
        ("empty argv", json!([]), json!({})),
        ("empty program", json!([""]), json!({})),
        ("blank command line", json!("   "), json!({})),
        ("huge argument", json!(["echo", huge]), json!({})),
        ("huge env value", json!(["true"]), json!({"BIG": huge})),
    ]
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The next JSON message on the socket (10 s at most).
async fn ws_next(ws: &mut Ws) -> Value {
    loop {
        let m = tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .expect("no WebSocket message within 10 s")
            .expect("the socket closed")
            .expect("WebSocket error");
        if let Message::Text(t) = m {
            return serde_json::from_str(&t).unwrap();
        }
    }
}

#[test]
fn every_entry_point_refuses_the_same_bad_run_requests_the_same_way() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    // No in-process workers: whatever is accepted stays queued (and would be a failure here).
    let s = Server::start("[submissions]\nworkers = 0\n", &[]);
    rt.block_on(async {
        let t = s.token("student").await;
        let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{}/ws?token={t}", s.addr))
            .await
            .expect("WebSocket connect");
        for (what, cmd, env) in bad_requests() {
            // /run: the reference answer.
            let (st, run) = s
                .post_lenient(&t, "/run", json!({"cmd": cmd, "env": env}))
                .await;
            assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{what}: /run: {run}");
            assert_eq!(run["error"], "invalid", "{what}: /run: {run}");
            let message = run["message"].as_str().unwrap().to_string();
            assert!(message.len() < 1000, "{what}: the message quotes too much");

            // The WebSocket: the same code and message.
            ws.send(Message::Text(
                json!({"type": "run", "cmd": cmd, "env": env})
                    .to_string()
                    .into(),
            ))
            .await
            .unwrap();
            let m = ws_next(&mut ws).await;
            assert_eq!(m["type"], "error", "{what}: ws: {m}");
            assert_eq!(m["error"], run["error"], "{what}: ws: {m}");
            assert_eq!(m["message"], message.as_str(), "{what}: ws: {m}");

            // POST /submissions: 422 with the same body, nothing queued.
            let (st, sub) = s
                .post_lenient(&t, "/submissions", json!({"cmd": cmd, "env": env}))
                .await;
            assert_eq!(
                st,
                StatusCode::UNPROCESSABLE_ENTITY,
                "{what}: /submissions: {sub}"
            );
            assert_eq!(sub, run, "{what}: /submissions");

            // A batch item: its own error, the same one.
            let (st, batch) = s
                .post_lenient(
                    &t,
                    "/submissions/batch",
                    json!({"submissions": [{"cmd": cmd, "env": env}]}),
                )
                .await;
            assert_eq!(st, StatusCode::ACCEPTED, "{what}: batch: {batch}");
            let item = &batch["submissions"][0];
            assert!(item["id"].is_null(), "{what}: batch item queued: {batch}");
            assert_eq!(item["error"], run["error"], "{what}: batch: {batch}");
            assert_eq!(item["message"], message.as_str(), "{what}: batch: {batch}");
        }

        // Judge0: a language's command with bad extra arguments, in Judge0's error shape.
        for (what, args) in [
            (
                "NUL in command_line_arguments",
                json!({"command_line_arguments": "a\u{0}b"}),
            ),
            (
                "NUL in compiler_options",
                json!({"compiler_options": "-O2\u{0}"}),
            ),
            (
                "huge command_line_arguments",
                json!({"command_line_arguments": "x".repeat(200_000)}),
            ),
        ] {
            let mut body = json!({"source_code": "print(1)", "language_id": 71});
            for (k, v) in args.as_object().unwrap() {
                body[k] = v.clone();
            }
            let (st, v) = s.post_lenient(&t, "/judge0/submissions", body).await;
            assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{what}: judge0: {v}");
            // Judge0's validation errors: `{"FIELD": ["MESSAGE"]}`, the field the bad value was in.
            let field = args.as_object().unwrap().keys().next().unwrap().clone();
            assert!(v[&field][0].is_string(), "{what}: judge0's shape: {v}");
        }

        // Nothing was queued by any of them.
        let (st, v) = s.get(&t, "/submissions").await;
        if st == StatusCode::OK {
            let n = v["submissions"].as_array().map_or(0, |a| a.len());
            assert_eq!(n, 0, "bad requests were queued: {v}");
        }
    });
}

/// A struct written as an array (serde reads one from its fields in order) is refused where an
/// object is documented: `"limits": ["1s", "2s"]` was a CPU and a wall time limit.
#[test]
fn an_array_where_an_object_is_documented_is_refused_at_every_entry_point() {
    let rt = rt();
    let s = Server::start("[submissions]\nworkers = 0\n", &[]);
    rt.block_on(async {
        let t = s.token("student").await;
        let limits = json!(["1s", "2s"]);
        let (st, run) = s
            .post_lenient(&t, "/run", json!({"cmd": ["true"], "limits": limits}))
            .await;
        assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "/run: {run}");
        assert_eq!(run["error"], "invalid", "{run}");
        assert!(
            run["message"]
                .as_str()
                .unwrap()
                .contains("limits: invalid type: sequence"),
            "{run}"
        );
        // The whole body as an array.
        let (st, v) = s.post_lenient(&t, "/run", json!([["true"]])).await;
        assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
        let (st, sub) = s
            .post_lenient(&t, "/submissions", json!({"cmd": "true", "limits": limits}))
            .await;
        assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "/submissions: {sub}");
        let (st, batch) = s
            .post_lenient(
                &t,
                "/submissions/batch",
                json!({"submissions": [{"cmd": "true", "limits": limits}]}),
            )
            .await;
        assert_eq!(st, StatusCode::ACCEPTED, "{batch}");
        let item = &batch["submissions"][0];
        assert!(
            item["id"].is_null() && item["message"].as_str().unwrap().contains("sequence"),
            "{batch}"
        );
        let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{}/ws?token={t}", s.addr))
            .await
            .expect("WebSocket connect");
        for msg in [
            json!({"type": "run", "cmd": "true", "limits": limits}),
            json!({"type": "run", "cmd": "true", "tty": [80, 24]}),
            json!(["kill"]),
        ] {
            ws.send(Message::Text(msg.to_string().into()))
                .await
                .unwrap();
            let m = ws_next(&mut ws).await;
            assert_eq!(
                (&m["type"], &m["error"]),
                (&json!("error"), &json!("bad_message")),
                "{msg}: {m}"
            );
        }
    });
}

#[test]
fn batch_spec_lines_refuse_the_same_bad_runs() {
    let dir = tempfile::tempdir().unwrap();
    let lines: Vec<String> = bad_requests()
        .into_iter()
        .filter(|(_, cmd, _)| cmd.is_array())
        .map(|(_, cmd, env)| json!({"argv": cmd, "env": env}).to_string())
        // Limits written as an array, and the whole line as one: objects only, as over HTTP.
        .chain([
            json!({"argv": ["true"], "limits": ["1s", "2s"]}).to_string(),
            json!([["true"]]).to_string(),
        ])
        .collect();
    let input = dir.path().join("runs.jsonl");
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_corral"))
        .args(["run", "--batch"])
        .arg(&input)
        .output()
        .expect("corral run --batch");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let results: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(results.len(), lines.len(), "{stdout}");
    for r in &results {
        assert_eq!(r["status"], "invalid_spec", "{r}");
    }
}
