//! What a trial of corral as an AI agent's sandbox found: uploads larger than the disk limit asked,
//! stdin's end after the WebSocket's stdin cap, a language or disk limit asked of a kept sandbox,
//! revoked tokens' sandboxes, evicted and busy sandboxes, and the messages of bad requests.

mod server_support;

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{json, Value};
use server_support::*;

/// Messages until one of type `ty` (others of the listed `skip` types are passed over).
async fn ws_until_type(ws: &mut Ws, ty: &str) -> (Vec<Value>, Value) {
    let mut seen = Vec::new();
    loop {
        let m = ws_next(ws).await;
        if m["type"] == ty {
            return (seen, m);
        }
        seen.push(m);
    }
}

#[test]
fn an_upload_larger_than_the_disk_limit_is_refused_with_its_size() {
    let s = Server::start("", &[]);
    rt().block_on(async {
        let t = s.token("student").await;
        let big = vec![7u8; 20 << 20];
        let id = s.upload(&t, &[("big20.bin", &big)]).await;
        let (st, v) = s
            .run(
                &t,
                json!({"cmd": "ls -la", "sandbox": {"homedir": id}, "limits": {"disk": "8M"}}),
            )
            .await;
        assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
        let msg = v["message"].as_str().unwrap_or_default().to_string();
        assert!(msg.contains("8M") || msg.contains("8 MiB"), "{msg}");
        assert!(msg.contains("big20.bin") || msg.contains("20"), "{msg}");
        assert!(!msg.contains(s.data.to_str().unwrap()), "a host path: {msg}");
        assert!(!msg.contains("/tmp/"), "a host path: {msg}");
        // Nothing is kept.
        assert_eq!(held(&s).await, 0);

        // The same over a WebSocket.
        let mut ws = s.ws(&t).await;
        ws_send(
            &mut ws,
            json!({"type": "run", "cmd": "ls -la", "sandbox": {"homedir": id}, "limits": {"disk": "8M"}}),
        )
        .await;
        let m = ws_next(&mut ws).await;
        assert_eq!(m["type"], "error", "{m}");
        let msg = m["message"].as_str().unwrap_or_default();
        assert!(msg.contains("8M") || msg.contains("8 MiB"), "{m}");
        assert!(!msg.contains("/tmp/"), "a host path: {m}");

        // It fits the default disk limit.
        let r = s
            .run_ok(&t, json!({"cmd": "ls -la", "sandbox": {"homedir": id}}))
            .await;
        assert_eq!(r["status"], "ok", "{r}");
    });
}

#[test]
fn stdins_end_is_accepted_after_the_websockets_stdin_cap() {
    let s = Server::start("", &[]);
    rt().block_on(async {
        let t = s.token("student").await;
        let mut ws = s.ws(&t).await;
        ws_send(
            &mut ws,
            json!({"type": "run", "cmd": "wc -c", "limits": {"wall_time": "60s"}}),
        )
        .await;
        let chunk = "z".repeat(1_000_000);
        for _ in 0..17 {
            ws_send(&mut ws, json!({"type": "stdin", "data": chunk})).await;
        }
        ws_send(&mut ws, json!({"type": "stdin", "eof": true})).await;
        let (seen, exit) = ws_until_type(&mut ws, "exit").await;
        let too_large: Vec<_> = seen.iter().filter(|m| m["type"] == "error").collect();
        // The chunks past the cap are refused, the end of stdin is not.
        assert_eq!(too_large.len(), 1, "{too_large:?}");
        assert_eq!(exit["status"], "ok", "{exit}");
        assert_eq!(
            exit["stdout"].as_str().unwrap().trim(),
            "16000000",
            "{exit}"
        );
    });
}

/// `corral run` with a `--dir` whose files are larger than `--disk`: bad usage (2), said with the
/// limit, not a sandbox error (125).
#[test]
fn cli_dir_larger_than_the_disk_limit_is_bad_usage() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("big.bin"), vec![1u8; 50 << 20]).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_corral"))
        .args(["run", "--disk", "8M", "--dir"])
        .arg(d.path())
        .args(["--", "ls"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("8M") && err.contains("--disk"), "{err}");
    assert!(err.contains("big.bin"), "{err}");
}

/// The same folder as a `--batch` line's `dir`: that line is an `invalid_spec` saying the limit
/// and the file (it was a `sandbox_error` naming the folder), and the batch goes on.
#[test]
fn batch_dir_larger_than_the_disk_limit_is_an_invalid_line() {
    let d = tempfile::tempdir().unwrap();
    let files = d.path().join("files");
    std::fs::create_dir(&files).unwrap();
    std::fs::write(files.join("big.bin"), vec![1u8; 50 << 20]).unwrap();
    let batch = d.path().join("lines.jsonl");
    let line = json!({"argv": ["ls"], "dir": files, "limits": {"disk": "8M"}});
    std::fs::write(
        &batch,
        format!("{line}\n{{\"argv\": [\"echo\", \"next\"]}}\n"),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_corral"))
        .args(["run", "--batch"])
        .arg(&batch)
        .output()
        .unwrap();
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0]["status"], "invalid_spec", "{}", lines[0]);
    let err = lines[0]["error"].as_str().unwrap();
    assert!(
        err.contains("8M") && err.contains("limits.disk") && err.contains("big.bin"),
        "{err}"
    );
    assert_eq!(lines[1]["stdout"], "next\n");
}

/// The number of kept sandboxes the server holds (its `held_sandboxes` gauge).
async fn held(s: &Server) -> i64 {
    gauge(s, "corral_held_sandboxes").await
}

/// A gauge of the server's `/metrics`.
async fn gauge(s: &Server, name: &str) -> i64 {
    let m = client()
        .get(s.url("/metrics"))
        .bearer_auth(&s.admin)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let line = m
        .lines()
        .find(|l| l.starts_with(&format!("{name} ")))
        .unwrap_or_else(|| panic!("no {name} in {m}"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

#[test]
fn a_language_needs_a_sandbox_built_with_it() {
    let s = Server::start("", &[]);
    rt().block_on(async {
        let t = s.token("student").await;
        let r = s.run_ok(&t, json!({"cmd": "true"})).await;
        let sid = r["sandbox"].as_str().unwrap().to_string();
        let (st, v) = s
            .run(
                &t,
                json!({"cmd": "true", "sandbox": {"id": sid}, "language": "python"}),
            )
            .await;
        assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
        let msg = v["message"].as_str().unwrap();
        assert!(msg.contains("language") && msg.contains("new sandbox"), "{msg}");
        // The refusal leaves the sandbox usable.
        let r = s
            .run_ok(&t, json!({"cmd": "true", "sandbox": {"id": sid}}))
            .await;
        assert_eq!(r["status"], "ok", "{r}");

        // Built with the language: it may be named again.
        let r = s
            .run_ok(&t, json!({"cmd": "true", "language": "python"}))
            .await;
        let sid = r["sandbox"].as_str().unwrap().to_string();
        let r = s
            .run_ok(
                &t,
                json!({"cmd": "/usr/bin/python3 -c 'print(6*7)'", "sandbox": {"id": sid}, "language": "python"}),
            )
            .await;
        assert_eq!(r["stdout"], "42\n", "{r}");
    });
}

#[test]
fn a_disk_limit_asked_of_a_kept_sandbox_is_reported_as_fixed() {
    let s = Server::start("", &[]);
    rt().block_on(async {
        let t = s.token("student").await;
        let r = s
            .run_ok(&t, json!({"cmd": "true", "limits": {"disk": "16M"}}))
            .await;
        let sid = r["sandbox"].as_str().unwrap().to_string();
        let r = s
            .run_ok(
                &t,
                json!({"cmd": "true", "sandbox": {"id": sid}, "limits": {"disk": "128M"}}),
            )
            .await;
        assert_eq!(r["limits"]["disk"], "16M", "{r}");
        assert_eq!(r["limits_clamped"], json!(["disk"]), "{r}");
        // The same disk asked again is no change.
        let r = s
            .run_ok(
                &t,
                json!({"cmd": "true", "sandbox": {"id": sid}, "limits": {"disk": "16M"}}),
            )
            .await;
        assert_eq!(r["limits_clamped"], json!([]), "{r}");
        // And over a WebSocket.
        let mut ws = s.ws(&t).await;
        ws_send(
            &mut ws,
            json!({"type": "run", "cmd": "true", "sandbox": {"id": sid}, "limits": {"disk": "128M"}}),
        )
        .await;
        let (_, exit) = ws_until_type(&mut ws, "exit").await;
        assert_eq!(exit["limits_clamped"], json!(["disk"]), "{exit}");
    });
}

#[test]
fn revoking_a_token_destroys_its_kept_sandboxes() {
    let s = Server::start("", &[]);
    rt().block_on(async {
        let (t, tid) = s.token_with_id("student").await;
        let r = s.run_ok(&t, json!({"cmd": "true"})).await;
        assert!(r["sandbox"].is_string(), "{r}");
        assert_eq!(held(&s).await, 1);
        let st = client()
            .delete(s.url(&format!("/tokens/{tid}")))
            .bearer_auth(&s.admin)
            .send()
            .await
            .unwrap()
            .status();
        assert!(st.is_success(), "{st}");
        // Destroyed on a blocking thread: asked for a while (not a timing assertion).
        let mut left = held(&s).await;
        for _ in 0..100 {
            if left == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            left = held(&s).await;
        }
        assert_eq!(left, 0, "{}", s.log());
    });
}

#[test]
fn an_evicted_sandbox_is_said_to_be_dropped_for_a_newer_one() {
    let s = Server::start("max_sandboxes_per_caller = 1\n", &[]);
    rt().block_on(async {
        let t = s.token("student").await;
        let first = s.run_ok(&t, json!({"cmd": "true"})).await["sandbox"]
            .as_str()
            .unwrap()
            .to_string();
        let _second = s.run_ok(&t, json!({"cmd": "true"})).await;
        let (st, v) = s
            .run(&t, json!({"cmd": "true", "sandbox": {"id": first}}))
            .await;
        assert_eq!(st, StatusCode::NOT_FOUND, "{v}");
        let msg = v["message"].as_str().unwrap();
        assert!(msg.contains("dropped for a newer one"), "{msg}");
        assert!(msg.contains("max_sandboxes"), "{msg}");
        let log = s.log();
        assert!(
            log.lines()
                .any(|l| l.contains("evict") && l.contains(&first)),
            "{log}"
        );
    });
}

/// `sandbox.keep: false`: a one-off run answers no sandbox and pushes none of the caller's kept
/// ones out (with a cap of one kept sandbox, a plain second run would have); with `sandbox.id` it
/// is the session's last step, after which the id is gone. `/check` keeps none and says so.
#[test]
fn a_run_that_keeps_no_sandbox_pushes_none_out() {
    let s = Server::start("max_sandboxes_per_caller = 1\n", &[]);
    rt().block_on(async {
        let t = s.token("student").await;
        let first = s.run_ok(&t, json!({"cmd": "echo kept > f"})).await["sandbox"]
            .as_str()
            .unwrap()
            .to_string();
        let home = s.upload(&t, &[("g", b"uploaded")]).await;
        for sandbox in [
            json!({"keep": false}),
            json!({"homedir": home, "keep": false}),
        ] {
            let v = s
                .run_ok(
                    &t,
                    json!({"cmd": "cat g 2>/dev/null; ls", "sandbox": sandbox}),
                )
                .await;
            assert!(v["sandbox"].is_null(), "{v}");
        }
        // The kept one is still there, its file too; its last step drops it.
        let v = s
            .run_ok(
                &t,
                json!({"cmd": "cat f", "sandbox": {"id": first, "keep": false}}),
            )
            .await;
        assert_eq!(v["stdout"], "kept\n", "{v}");
        assert!(v["sandbox"].is_null(), "{v}");
        let (st, v) = s
            .run(&t, json!({"cmd": "true", "sandbox": {"id": first}}))
            .await;
        assert_eq!(st, StatusCode::NOT_FOUND, "{v}");
        // The same over the WebSocket: its `exit` names no sandbox.
        let mut ws = s.ws(&t).await;
        ws_send(
            &mut ws,
            json!({"type": "run", "cmd": "echo ws", "sandbox": {"keep": false}}),
        )
        .await;
        let (_, exit) = ws_until_type(&mut ws, "exit").await;
        assert_eq!(exit["stdout"], "ws\n", "{exit}");
        assert!(exit["sandbox"].is_null(), "{exit}");
        // The one-off runs left nothing behind either: a new kept sandbox starts empty.
        let v = s.run_ok(&t, json!({"cmd": "ls -A"})).await;
        assert_eq!(v["stdout"], "", "{v}");
        let (st, v) = s
            .post(
                &t,
                "/check",
                json!({"checks": "x", "sandbox": {"homedir": home, "keep": false}}),
            )
            .await;
        assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
        assert!(
            v["message"].as_str().unwrap().contains("sandbox.keep"),
            "{v}"
        );
    });
}

#[test]
fn bad_requests_say_what_is_wrong_and_websocket_runs_are_logged() {
    let s = Server::start("", &[]);
    rt().block_on(async {
        let t = s.token("student").await;
        let (st, v) = s.run(&t, json!({"cmd": 5})).await;
        assert!(st.is_client_error(), "{st} {v}");
        let msg = v["message"].as_str().unwrap();
        assert!(
            msg.contains(
                "cmd: expected a string (run by /bin/sh -c) or an array of strings (argv)"
            ),
            "{msg}"
        );
        // A body over the JSON cap names the cap and its setting, and where larger files go.
        let big = json!({"cmd": "true", "stdin": "x".repeat(3 << 20)});
        let (st, v) = s.run(&t, big).await;
        assert_eq!(st, StatusCode::PAYLOAD_TOO_LARGE, "{v}");
        let msg = v["message"].as_str().unwrap();
        assert!(
            msg.contains("max_json_bytes")
                && msg.contains("2M")
                && msg.contains(
                    "send larger files with POST /upload (multipart or an archive, up to 32M)"
                ),
            "{msg}"
        );

        // A WebSocket run is logged like an HTTP one.
        let mut ws = s.ws(&t).await;
        ws_send(&mut ws, json!({"type": "run", "cmd": "echo ws-run"})).await;
        let (_, exit) = ws_until_type(&mut ws, "exit").await;
        assert_eq!(exit["status"], "ok", "{exit}");
        let mut logged = false;
        for _ in 0..50 {
            logged = s
                .log()
                .lines()
                .filter(|l| l.contains(" run caller=") && l.contains("status=\"ok\""))
                .any(|l| l.contains("websocket"));
            if logged {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(logged, "{}", s.log());
    });
}

/// A `--batch` line whose limits are not an object: the message names the field.
#[test]
fn a_batch_lines_bad_field_is_named() {
    let d = tempfile::tempdir().unwrap();
    let batch = d.path().join("lines.jsonl");
    std::fs::write(&batch, "{\"argv\":[\"true\"],\"limits\":[\"1s\"]}\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_corral"))
        .args(["run", "--batch"])
        .arg(&batch)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("limits: invalid type: sequence"), "{text}");
}

/// Waits (at most 20 s) until the gauge `name` reads `want`.
async fn until_gauge(s: &Server, name: &str, want: i64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let now = gauge(s, name).await;
        if now == want {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{name} stayed {now}, not {want}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A `POST /run` whose HTTP client gives up (its timeout, a closed tab) is killed instead of
/// holding a run slot to its wall limit, and the sandbox built for it is not kept: its id was
/// only in the answer nobody read, and it counted against the token's kept sandboxes until the
/// TTL. A sandbox the client named stays (it knows its id); its run is killed too.
#[test]
fn a_run_whose_client_went_away_is_killed_and_its_new_sandbox_not_kept() {
    let s = Server::start("", &[]);
    rt().block_on(async {
        let t = s.token("student").await;
        let impatient = reqwest::Client::builder()
            .timeout(Duration::from_millis(1500))
            .build()
            .unwrap();
        let long = |sandbox: Value| {
            json!({"cmd": "sleep 50", "limits": {"wall_time": "55s"}, "sandbox": sandbox})
        };
        // A new kept sandbox, a one-off run, then a run in a sandbox the client named.
        let named = s.run_ok(&t, json!({"cmd": "true"})).await["sandbox"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(held(&s).await, 1);
        for (sandbox, kept_after) in [
            (json!({}), 1),
            (json!({"keep": false}), 1),
            (json!({"id": named}), 1),
        ] {
            let r = impatient
                .post(s.url("/run"))
                .bearer_auth(&t)
                .json(&long(sandbox.clone()))
                .send()
                .await;
            assert!(r.is_err_and(|e| e.is_timeout()), "{sandbox}: answered");
            until_gauge(&s, "corral_runs_in_flight", 0).await;
            until_gauge(&s, "corral_held_sandboxes", kept_after).await;
        }
        // The named sandbox is still there, and runs again.
        let r = s.run_ok(&t, json!({"cmd": "echo again", "sandbox": {"id": named}})).await;
        assert_eq!(r["stdout"], "again\n", "{r}");
        assert_eq!(gauge(&s, r#"corral_runs_total{status="cancelled"}"#).await, 3);
    });
}

/// Idle kept sandboxes hold at most `kept_memory_max` together: files a run leaves in `/tmp` are
/// memory (tmpfs) that no run limit counts once the run is over. Past the budget the least
/// recently used idle sandbox goes, and a request for it says why. Before, one token's four
/// sandboxes parked 1.5 GiB (a red-team trial), ~24 GiB within the defaults.
#[test]
fn idle_kept_sandboxes_hold_at_most_kept_memory_max() {
    let s = Server::start("kept_memory_max = \"48M\"\n", &[]);
    rt().block_on(async {
        let (a, b) = (s.token("student").await, s.token("student").await);
        let park =
            json!({"cmd": "head -c 30000000 /dev/zero > /tmp/parked", "limits": {"disk": "64M"}});
        let first = s.run_ok(&a, park.clone()).await["sandbox"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(held(&s).await, 1);
        // Another token parks as much: together over the budget, the older one goes.
        let second = s.run_ok(&b, park).await["sandbox"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(held(&s).await, 1);
        let (st, v) = s
            .run(&a, json!({"cmd": "true", "sandbox": {"id": first}}))
            .await;
        assert_eq!(st, StatusCode::NOT_FOUND, "{v}");
        assert!(
            v["message"].as_str().unwrap().contains("kept_memory_max"),
            "{v}"
        );
        // The newer one is there, its file too.
        let r = s
            .run_ok(
                &b,
                json!({"cmd": "wc -c < /tmp/parked", "sandbox": {"id": second}}),
            )
            .await;
        assert_eq!(r["stdout"], "30000000\n", "{r}");
    });
}

/// An agent whose HTTP client gave up on a step deletes the sandbox: the run in progress is
/// killed and answers `cancelled`, and the sandbox is gone.
#[test]
fn deleting_a_busy_sandbox_cancels_its_run() {
    let s = Server::start("", &[]);
    rt().block_on(async {
        let t = s.token("student").await;
        let sid = s.run_ok(&t, json!({"cmd": "true"})).await["sandbox"]
            .as_str()
            .unwrap()
            .to_string();
        // Over HTTP: the run is on its slot (runs_in_flight) before the delete.
        let (url, tok, id) = (s.url("/run"), t.clone(), sid.clone());
        let run = tokio::spawn(async move {
            let r = client()
                .post(url)
                .bearer_auth(tok)
                .json(&json!({"cmd": "sleep 50", "sandbox": {"id": id}, "limits": {"wall_time": "55s"}}))
                .send()
                .await
                .unwrap();
            (r.status(), r.json::<Value>().await.unwrap())
        });
        while gauge(&s, "corral_runs_in_flight").await == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let del = client()
            .delete(s.url(&format!("/sandboxes/{sid}")))
            .bearer_auth(&t)
            .send()
            .await
            .unwrap();
        assert_eq!(del.status(), StatusCode::NO_CONTENT, "{}", del.text().await.unwrap());
        let (st, v) = run.await.unwrap();
        assert_eq!(st, StatusCode::OK, "{v}");
        assert_eq!(v["status"], "cancelled", "{v}");
        assert!(v["sandbox"].is_null(), "{v}");
        assert!(v["wall_time_ms"].as_u64().unwrap() < 50_000, "{v}");
        // Counted as what its answer says (it was counted `signaled`, as a crash).
        assert_eq!(gauge(&s, r#"corral_runs_total{status="cancelled"}"#).await, 1);
        assert_eq!(gauge(&s, r#"corral_runs_total{status="signaled"}"#).await, 0);
        let (st, v) = s.run(&t, json!({"cmd": "true", "sandbox": {"id": sid}})).await;
        assert_eq!(st, StatusCode::NOT_FOUND, "{v}");

        // Over a WebSocket: the run has printed before the delete.
        let sid = s.run_ok(&t, json!({"cmd": "true"})).await["sandbox"]
            .as_str()
            .unwrap()
            .to_string();
        let mut ws = s.ws(&t).await;
        ws_send(
            &mut ws,
            json!({"type": "run", "cmd": "echo up; sleep 50", "sandbox": {"id": sid}, "limits": {"wall_time": "55s"}}),
        )
        .await;
        loop {
            let m = ws_next(&mut ws).await;
            if m["type"] == "stdout" {
                break;
            }
            assert_ne!(m["type"], "exit", "{m}");
        }
        let del = client()
            .delete(s.url(&format!("/sandboxes/{sid}")))
            .bearer_auth(&t)
            .send()
            .await
            .unwrap();
        assert_eq!(del.status(), StatusCode::NO_CONTENT);
        let (_, exit) = ws_until_type(&mut ws, "exit").await;
        assert_eq!(exit["status"], "cancelled", "{exit}");
        assert!(exit["sandbox"].is_null(), "{exit}");
        assert_eq!(held(&s).await, 0);
    });
}

/// `/check` copies the upload into each check's sandbox of the suite's disk limit: files that do
/// not fit fail the check with a message naming the limit and the file, never a host path.
#[test]
fn a_checks_files_that_do_not_fit_its_disk_are_named_without_host_paths() {
    let s = Server::start("", &[]);
    rt().block_on(async {
        let staff = s.token("staff").await;
        let suite = "name: small\nlimits: {disk: 1M}\nchecks:\n  - id: lists\n    steps:\n      - run: ls\n      - exit: 0\n";
        let (st, text) = s.register_suite(&staff, "small", suite, &[]).await;
        assert_eq!(st, StatusCode::CREATED, "{text}");
        let big = vec![3u8; 4 << 20];
        let id = s.upload(&staff, &[("big4.bin", &big)]).await;
        let r = client()
            .post(s.url("/check?format=json"))
            .bearer_auth(&staff)
            .json(&json!({"checks": "small", "sandbox": {"homedir": id}}))
            .send()
            .await
            .unwrap();
        let v: Value = r.json().await.unwrap();
        let text = v.to_string();
        assert!(!text.contains("/tmp/"), "a host path: {text}");
        assert!(!text.contains(s.data.to_str().unwrap()), "a host path: {text}");
        assert!(text.contains("disk limit (1M)"), "{text}");
        assert!(text.contains("big4.bin"), "{text}");
    });
}

/// Requests abandoned while the server copies their upload (`/check`, `/run`) leave no copy
/// behind: the copy runs on a blocking thread that went on after the request's temporary folder
/// was removed, re-created it and left it in `DATA/tmp` until the next start (a red-team trial:
/// 40 abandoned `/check`s of a 30 MB upload left 598 MB). The clients give up after 0 to 60 ms,
/// some during the copy; once the server is idle, `DATA/tmp` holds no request's folder.
#[test]
fn abandoned_requests_leave_no_copy_of_their_upload() {
    let s = Server::start("", &[]);
    rt().block_on(async {
        let staff = s.token("staff").await;
        let suite = "name: noop\nchecks:\n  - id: a\n    steps:\n      - run: \"true\"\n";
        let (st, v) = s.register_suite(&staff, "noop", suite, &[]).await;
        assert_eq!(st, StatusCode::CREATED, "{v}");
        let content = vec![b'x'; 24 * 1024];
        let names: Vec<String> = (0..400).map(|i| format!("d{}/f{i}.txt", i % 20)).collect();
        let mut gave_up = 0;
        for i in 0..24u64 {
            // A token each: no per-token cap refuses one before its copy.
            let t = s.token("student").await;
            let files: Vec<(&str, &[u8])> = names
                .iter()
                .map(|n| (n.as_str(), content.as_slice()))
                .collect();
            let up = s.upload(&t, &files).await;
            let (path, body) = if i % 2 == 0 {
                (
                    "/check",
                    json!({"checks": "noop", "sandbox": {"homedir": up}}),
                )
            } else {
                (
                    "/run",
                    json!({"cmd": "true", "sandbox": {"homedir": up, "keep": false}}),
                )
            };
            let impatient = reqwest::Client::builder()
                .timeout(Duration::from_millis(i * 5 / 2))
                .build()
                .unwrap();
            let r = impatient
                .post(s.url(path))
                .bearer_auth(&t)
                .json(&body)
                .send()
                .await;
            gave_up += usize::from(r.is_err());
        }
        assert!(
            gave_up > 0,
            "every request was answered before its client gave up"
        );
        until_gauge(&s, "corral_runs_in_flight", 0).await;
        let tmp = s.data.join("tmp");
        let left = || -> Vec<String> {
            std::fs::read_dir(&tmp)
                .map(|d| {
                    d.flatten()
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .filter(|n| n.starts_with("check-") || n.starts_with("home-"))
                        .collect()
                })
                .unwrap_or_default()
        };
        // Copies still in flight finish, then their folders go.
        let deadline = Instant::now() + Duration::from_secs(60);
        while !left().is_empty() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert_eq!(left(), Vec::<String>::new(), "left in {}", tmp.display());
    });
}
