//! `corral serve` end to end: the real binary on a loopback port, spoken to over HTTP (reqwest) and
//! WebSocket (tokio-tungstenite). The seed's CS50 Sandbox examples literally, kept sandboxes and
//! their expiry, interactive runs with stdin prompts and SIGINT, limit caps, the worst containment
//! cases through `/run`, and graceful shutdown.
//!
//! Tests that need no sandbox (auth, bad input, OpenAPI) live in `crates/server/tests/api.rs`.

mod server_support;

use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use reqwest::StatusCode;
use serde_json::{json, Value};
use server_support::*;
use tokio_tungstenite::tungstenite::Message;

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Reads messages until `pred` matches one, returning the stdout seen on the way and that message.
async fn ws_until(ws: &mut Ws, what: &str, pred: impl Fn(&Value) -> bool) -> (String, Value) {
    let mut out = String::new();
    loop {
        let m = ws_next(ws).await;
        if pred(&m) {
            return (out, m);
        }
        match m["type"].as_str() {
            Some("stdout") => out.push_str(m["data"].as_str().unwrap()),
            Some("stderr") => {}
            Some("stdin") => {}
            Some("exit") | Some("error") => {
                panic!("waiting for {what}, got {m}\nstdout so far: {out:?}")
            }
            _ => panic!("unexpected message {m}"),
        }
    }
}

#[test]
fn seed_hello_compiles_then_runs_in_the_returned_sandbox() {
    let s = Server::start("", &[]);
    rt().block_on(async {
        assert!(
            s.admin.starts_with("corral_"),
            "the first start prints an admin token"
        );
        let t = s.token("student").await;
        let id = s.upload(&t, &[("hello.c", SEED_HELLO.as_bytes())]).await;
        let r = s
            .run_ok(
                &t,
                json!({"cmd": "cc -o hello hello.c", "sandbox": {"homedir": id}}),
            )
            .await;
        // CS50 Sandbox's keys, plus corral's.
        for k in ["code", "sandbox", "script", "stderr", "stdout", "status"] {
            assert!(r.get(k).is_some(), "{k} missing: {r}");
        }
        assert_eq!(r["code"], 0, "{r}");
        assert_eq!(r["status"], "ok");
        let sandbox = r["sandbox"]
            .as_str()
            .expect("a sandbox id to continue in")
            .to_string();
        assert!(sandbox.len() >= 32, "sandbox ids carry at least 128 bits");
        let r = s
            .run_ok(&t, json!({"cmd": "./hello", "sandbox": {"id": sandbox}}))
            .await;
        assert_eq!(r["code"], 0, "{r}");
        assert_eq!(r["stdout"], "hello, world\n");
        assert_eq!(r["script"], "hello, world\n");
        assert_eq!(r["stderr"], "");
        assert_eq!(r["sandbox"], sandbox.as_str());
        // argv form, and the upload is still pristine for a new sandbox.
        let r = s
            .run_ok(&t, json!({"cmd": ["ls"], "sandbox": {"homedir": id}}))
            .await;
        assert_eq!(r["stdout"], "hello.c\n");
        assert_ne!(
            r["sandbox"],
            sandbox.as_str(),
            "a homedir run gets a new sandbox"
        );
    });
    assert!(s.stop().success());
}

#[test]
fn seed_failing_exit_and_wrong_stdout_are_reported() {
    let s = Server::start("", &[]);
    rt().block_on(async {
        let t = s.token("student").await;
        let fails = "int main(void) { return 1; }\n";
        let r = s
            .run_uploaded(
                &t,
                &[("hello.c", fails.as_bytes())],
                "cc -o hello hello.c && ./hello",
            )
            .await;
        assert_eq!(r["code"], 1, "{r}");
        assert_eq!(r["status"], "nonzero_exit");
        let goodbye = "#include <stdio.h>\nint main(void) { printf(\"goodbye, world\\n\"); }\n";
        let r = s
            .run_uploaded(
                &t,
                &[("hello.c", goodbye.as_bytes())],
                "cc -o hello hello.c && ./hello",
            )
            .await;
        assert_eq!(r["code"], 0);
        assert_eq!(r["stdout"], "goodbye, world\n");
        // A compile error: code 1 and the compiler's message in stderr.
        let broken = "int main(void) { return }\n";
        let r = s
            .run_uploaded(&t, &[("hello.c", broken.as_bytes())], "cc -o hello hello.c")
            .await;
        assert_eq!(r["code"], 1, "{r}");
        assert!(r["stderr"].as_str().unwrap().contains("error"), "{r}");
        // stdin, and program output stays an inert JSON string.
        let r = s
            .run_ok(
                &t,
                json!({"cmd": "cat", "stdin": "<script>alert(1)</script>"}),
            )
            .await;
        assert_eq!(r["stdout"], "<script>alert(1)</script>");
    });
}

#[test]
fn interactive_run_prompts_for_stdin_over_websocket() {
    let s = Server::start("", &[]);
    rt().block_on(async {
        let t = s.token("student").await;
        let prog = "name = input('What is your name? ')\nprint('hello, ' + name)\n";
        let id = s.upload(&t, &[("hello.py", prog.as_bytes())]).await;
        let mut ws = ws_connect(&s, &t).await;
        ws_send(
            &mut ws,
            json!({"type": "run", "cmd": "python3 hello.py", "sandbox": {"homedir": id}}),
        )
        .await;
        let (out, _) = ws_until(&mut ws, "the stdin event", |m| m["type"] == "stdin").await;
        assert_eq!(out, "What is your name? ");
        ws_send(&mut ws, json!({"type": "stdin", "data": "David\n"})).await;
        let (out, exit) = ws_until(&mut ws, "exit", |m| m["type"] == "exit").await;
        assert_eq!(out, "hello, David\n");
        assert_eq!(exit["code"], 0, "{exit}");
        assert_eq!(exit["status"], "ok");
        assert_eq!(exit["stdout"], "What is your name? hello, David\n");
        let sandbox = exit["sandbox"].as_str().unwrap().to_string();
        // A second run on the same socket, in the same sandbox.
        ws_send(
            &mut ws,
            json!({"type": "run", "cmd": ["ls"], "sandbox": {"id": sandbox}}),
        )
        .await;
        let (out, exit) = ws_until(&mut ws, "exit", |m| m["type"] == "exit").await;
        assert_eq!(out, "hello.py\n");
        assert_eq!(exit["sandbox"], sandbox.as_str());
        // Standard input closed by the client: the program sees end-of-file.
        ws_send(&mut ws, json!({"type": "run", "cmd": "cat; echo done"})).await;
        ws_send(
            &mut ws,
            json!({"type": "stdin", "data": "line one\n", "eof": true}),
        )
        .await;
        let (out, exit) = ws_until(&mut ws, "exit", |m| m["type"] == "exit").await;
        assert_eq!(out, "line one\ndone\n");
        assert_eq!(exit["code"], 0);
        // Bad messages get an error and the socket stays usable.
        ws_send(&mut ws, json!({"type": "warp"})).await;
        assert_eq!(ws_next(&mut ws).await["type"], "error");
        ws_send(&mut ws, json!({"type": "stdin", "data": "x"})).await;
        assert_eq!(ws_next(&mut ws).await["error"], "not_running");
    });
}

/// A run that must wait for a sandbox says so when asked (`queue_notices`): `queued` first,
/// `started` when it gets one (the editor showed nothing while it waited); a run that starts at
/// once gets neither, and a client that did not ask sees only the messages it knows.
#[test]
fn a_websocket_run_that_waits_for_a_sandbox_says_so() {
    // One slot and none reserved for programs: the second run must wait.
    let s = Server::start("parallelism = 1\nreserved_run_slots = 0\nqueue = 4\n", &[]);
    rt().block_on(async {
        let t = s.token("student").await;
        let mut first = ws_connect(&s, &t).await;
        ws_send(
            &mut first,
            json!({"type": "run", "cmd": "read x; echo got $x", "queue_notices": true}),
        )
        .await;
        let m = ws_next(&mut first).await;
        assert_eq!(m["type"], "stdin", "a run that starts at once: {m}");
        let mut second = ws_connect(&s, &t).await;
        ws_send(
            &mut second,
            json!({"type": "run", "cmd": "echo second", "queue_notices": true}),
        )
        .await;
        assert_eq!(ws_next(&mut second).await["type"], "queued");
        let mut third = ws_connect(&s, &t).await;
        ws_send(&mut third, json!({"type": "run", "cmd": "echo third"})).await;
        // Nothing more while the first run holds the only sandbox; nothing at all to the
        // client that did not ask.
        for ws in [&mut second, &mut third] {
            let quiet = tokio::time::timeout(Duration::from_millis(500), ws.next()).await;
            assert!(quiet.is_err(), "{quiet:?}");
        }
        ws_send(
            &mut first,
            json!({"type": "stdin", "data": "it\n", "eof": true}),
        )
        .await;
        let (out, exit) = ws_until(&mut first, "exit", |m| m["type"] == "exit").await;
        assert_eq!((out.as_str(), &exit["status"]), ("got it\n", &json!("ok")));
        assert_eq!(ws_next(&mut second).await["type"], "started");
        let (out, exit) = ws_until(&mut second, "exit", |m| m["type"] == "exit").await;
        assert_eq!((out.as_str(), &exit["status"]), ("second\n", &json!("ok")));
        let (out, exit) = ws_until(&mut third, "exit", |m| m["type"] == "exit").await;
        assert_eq!((out.as_str(), &exit["status"]), ("third\n", &json!("ok")));
    });
}

/// A WebSocket client that never reads while its program floods output: the run ends at its
/// wall limit and gives its slot back (it waited on the socket, holding the server's only slot
/// until the client left), and revoking the token closes the socket while it is backed up.
#[test]
fn a_client_that_never_reads_holds_no_run_slot() {
    let s = Server::start("parallelism = 1\nreserved_run_slots = 0\nqueue = 4\n", &[]);
    rt().block_on(async {
        let (t, tid) = s.token_with_id("student").await;
        let other = s.token("student").await;
        // A small receive buffer, so the kernel's queues fill fast; the client never reads.
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(4096).unwrap();
        let stream = socket.connect(s.addr.parse().unwrap()).await.unwrap();
        let (mut ws, _) =
            tokio_tungstenite::client_async(format!("ws://{}/ws?token={t}", s.addr), stream)
                .await
                .expect("WebSocket connect");
        // NULs: six bytes of JSON each on the wire.
        let flood = json!({"type": "run", "cmd": "while :; do printf '\\0\\0\\0\\0'; done",
                           "limits": {"output": "4M", "wall_time": "3s"}});
        ws.send(Message::Text(flood.to_string().into()))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        // Another student's run gets the slot once the flood's wall limit ends it.
        let r = client()
            .post(s.url("/run"))
            .bearer_auth(&other)
            .json(&json!({"cmd": "echo other"}))
            .timeout(Duration::from_secs(25))
            .send()
            .await
            .expect("the other run waited for a slot the flooding client held");
        let v: Value = r.json().await.unwrap();
        assert_eq!(
            (&v["status"], &v["stdout"]),
            (&json!("ok"), &json!("other\n")),
            "{v}"
        );
        // Revoked: the server closes the backed-up socket (its writes can never finish).
        let r = client()
            .delete(s.url(&format!("/tokens/{tid}")))
            .bearer_auth(&s.admin)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::NO_CONTENT);
        let closed = tokio::time::timeout(Duration::from_secs(20), async {
            // Reading now drains what the server queued; the end must come.
            while let Some(Ok(m)) = ws.next().await {
                if matches!(m, Message::Close(_)) {
                    break;
                }
            }
        })
        .await;
        assert!(closed.is_ok(), "the revoked token's socket stayed open");
    });
}

#[test]
fn sigint_over_websocket_interrupts_and_closing_kills() {
    let s = Server::start("", &[]);
    rt().block_on(async {
        let t = s.token("student").await;
        // The handler writes with os.write: SIGINT may land while print() is still returning
        // from 'ready', and a second print() inside it would be a reentrant call.
        let prog = "import os, signal, sys, time\n\
            def stop(*_):\n    os.write(1, b'interrupted\\n')\n    sys.exit(3)\n\
            signal.signal(signal.SIGINT, stop)\n\
            print('ready', flush=True)\n\
            time.sleep(30)\n";
        let id = s.upload(&t, &[("wait.py", prog.as_bytes())]).await;
        let mut ws = ws_connect(&s, &t).await;
        ws_send(
            &mut ws,
            json!({"type": "run", "cmd": ["python3", "wait.py"], "sandbox": {"homedir": id}, "limits": {"wall_time": "20s"}}),
        )
        .await;
        ws_until(&mut ws, "ready", |m| m["type"] == "stdout" && m["data"].as_str().unwrap().contains("ready")).await;
        ws_send(&mut ws, json!({"type": "signal", "name": "SIGINT"})).await;
        let (out, exit) = ws_until(&mut ws, "exit", |m| m["type"] == "exit").await;
        assert!(out.contains("interrupted"), "{out:?} {exit}");
        assert_eq!(exit["code"], 3, "{exit}");

        // Closing the socket kills the run: the slot is free again and nothing is left running.
        let marker = format!("corral_ws_close_{}", std::process::id());
        let mut ws = ws_connect(&s, &t).await;
        ws_send(
            &mut ws,
            json!({"type": "run", "cmd": ["/bin/sh", "-c", "echo started; sleep 50", &marker], "limits": {"wall_time": "40s"}}),
        )
        .await;
        ws_until(&mut ws, "started", |m| m["type"] == "stdout").await;
        assert_eq!(s.health().await["runs_in_flight"], 1);
        ws.close(None).await.unwrap();
        drop(ws);
        let deadline = Instant::now() + Duration::from_secs(30);
        while s.health().await["runs_in_flight"] != 0 {
            assert!(Instant::now() < deadline, "closing the socket did not end the run");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(host_procs_with(&marker).is_empty(), "the killed run left processes");
    });
}

#[test]
fn kept_sandboxes_are_reused_then_expire() {
    let s = Server::start("sandbox_ttl = \"1s\"\n", &[]);
    rt().block_on(async {
        let t = s.token("student").await;
        let other = s.token("student").await;
        let r = s.run_ok(&t, json!({"cmd": "echo kept > note.txt"})).await;
        let id = r["sandbox"].as_str().unwrap().to_string();
        let r = s
            .run_ok(&t, json!({"cmd": "cat note.txt", "sandbox": {"id": id}}))
            .await;
        assert_eq!(r["stdout"], "kept\n");
        // Someone else cannot use it.
        let (st, _) = s
            .run(
                &other,
                json!({"cmd": "cat note.txt", "sandbox": {"id": id}}),
            )
            .await;
        assert_eq!(st, StatusCode::NOT_FOUND);
        // Idle past the TTL: gone (the files with it). Only /health is polled: a run would use it.
        let deadline = Instant::now() + Duration::from_secs(30);
        while s.health().await["held_sandboxes"] != 0 {
            assert!(Instant::now() < deadline, "the sandbox never expired");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let (st, v) = s
            .run(&t, json!({"cmd": "true", "sandbox": {"id": id}}))
            .await;
        assert_eq!(st, StatusCode::NOT_FOUND, "{v}");
        // Deleting one explicitly.
        let r = s.run_ok(&t, json!({"cmd": "true"})).await;
        let id = r["sandbox"].as_str().unwrap();
        let del = client()
            .delete(s.url(&format!("/sandboxes/{id}")))
            .bearer_auth(&t)
            .send()
            .await
            .unwrap();
        assert_eq!(del.status(), StatusCode::NO_CONTENT);
        let (st, _) = s
            .run(&t, json!({"cmd": "true", "sandbox": {"id": id}}))
            .await;
        assert_eq!(st, StatusCode::NOT_FOUND);
    });
}

#[test]
fn requests_above_the_caps_get_the_caps_and_are_told() {
    let cfg = "[caps]\nmemory = \"64M\"\npids = 16\nwall_time = \"5s\"\n[default_limits]\ncpu_time = \"2s\"\n";
    let s = Server::start(cfg, &[]);
    rt().block_on(async {
        let t = s.token("student").await;
        let r = s
            .run_ok(
                &t,
                json!({"cmd": "true", "limits": {"memory": "1G", "pids": 1000, "wall_time": "3s", "cpu_time": 1}}),
            )
            .await;
        assert_eq!(r["limits"]["memory"], "64M", "{r}");
        assert_eq!(r["limits"]["pids"], 16);
        assert_eq!(r["limits"]["wall_time"], "3s", "asking for less is fine");
        assert_eq!(r["limits"]["cpu_time"], "1s");
        let mut clamped: Vec<&str> = r["limits_clamped"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        clamped.sort();
        assert_eq!(clamped, ["memory", "pids"]);
        let r = s.run_ok(&t, json!({"cmd": "true"})).await;
        assert_eq!(r["limits"]["cpu_time"], "2s", "configured default: {r}");
        assert_eq!(r["limits"]["memory"], "64M", "defaults are capped too");
        assert_eq!(r["limits_clamped"], json!([]));
    });
}

/// An `open_files` cap above this host's hard limit on open files (which no sandbox can raise)
/// is lowered to it: a request for more gets the host's limit and is told, as above any cap,
/// instead of a sandbox error. (On a host whose hard limit is 1048576 or more nothing is
/// lowered, and the run simply gets what it asked for.)
#[test]
fn open_files_above_the_hosts_hard_limit_are_clamped_like_a_cap() {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit(2) only writes the struct it is given.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) }, 0);
    let host_max = r.rlim_max.min(1 << 20);
    let s = Server::start("[caps]\nopen_files = 1048576\n", &[]);
    rt().block_on(async {
        let t = s.token("student").await;
        let r = s
            .run_ok(
                &t,
                json!({"cmd": "ulimit -n", "limits": {"open_files": 1048576}}),
            )
            .await;
        assert_eq!(r["status"], "ok", "{r}");
        assert_eq!(r["limits"]["open_files"], host_max, "{r}");
        assert_eq!(r["stdout"], format!("{host_max}\n"), "{r}");
        let clamped = if host_max < 1 << 20 {
            json!(["open_files"])
        } else {
            json!([])
        };
        assert_eq!(r["limits_clamped"], clamped, "{r}");
    });
}

#[test]
fn worst_containment_cases_through_run() {
    let s = Server::start("", &[]);
    rt().block_on(async {
        let t = s.token("student").await;
        let marker = format!("corral_e2e_bomb_{}", std::process::id());
        // The classic shell fork bomb: only a limit can end it.
        let id = s.upload(&t, &[("forkbomb.sh", &containment("forkbomb.sh"))]).await;
        let r = s
            .run_ok(
                &t,
                json!({"cmd": ["/bin/bash", "forkbomb.sh", &marker], "sandbox": {"homedir": id},
                       "limits": {"pids": 16, "wall_time": "3s", "cpu_time": "3s", "memory": "128M"}}),
            )
            .await;
        assert!(
            ["wall_time_limit", "time_limit"].contains(&r["status"].as_str().unwrap()),
            "fork bomb: {r}"
        );
        assert!(host_procs_with(&marker).is_empty(), "the fork bomb left processes");
        // A memory bomb: compiled in the sandbox, run in the same sandbox with less memory.
        let id = s.upload(&t, &[("membomb.c", &containment("membomb.c"))]).await;
        let r = s
            .run_ok(&t, json!({"cmd": "cc -O1 -o membomb membomb.c", "sandbox": {"homedir": id}}))
            .await;
        assert_eq!(r["code"], 0, "compiling membomb.c: {r}");
        let sb = r["sandbox"].as_str().unwrap();
        let r = s
            .run_ok(
                &t,
                json!({"cmd": ["./membomb", &marker], "sandbox": {"id": sb}, "limits": {"memory": "64M"}}),
            )
            .await;
        assert_eq!(r["status"], "memory_limit", "{r}");
        assert!(!r["stdout"].as_str().unwrap().contains("ESCAPED"), "{r}");
        // An infinite loop.
        let r = s
            .run_ok(&t, json!({"cmd": "while :; do :; done", "limits": {"cpu_time": "1s", "wall_time": "10s"}}))
            .await;
        assert_eq!(r["status"], "time_limit", "{r}");
        // A sleeper.
        let r = s
            .run_ok(&t, json!({"cmd": "sleep 30", "limits": {"wall_time": "1s"}}))
            .await;
        assert_eq!(r["status"], "wall_time_limit", "{r}");
        // An output flood.
        let r = s
            .run_ok(&t, json!({"cmd": "yes", "limits": {"output": "64K"}}))
            .await;
        assert_eq!(r["status"], "output_limit", "{r}");
        assert_eq!(r["stdout_truncated"], true);
        assert!(host_procs_with(&marker).is_empty());
        let h = s.health().await;
        assert_eq!(h["runs_in_flight"], 0, "{h}");
        let m = reqwest::get(s.url("/metrics")).await.unwrap().text().await.unwrap();
        assert!(m.contains("corral_runs_total{status=\"memory_limit\"} 1"), "{m}");
        assert!(m.contains("corral_oom_total 1"), "{m}");
        assert!(m.contains("corral_timeouts_total 3"), "{m}");
    });
}

#[test]
fn sigterm_stops_cleanly_and_keeps_data() {
    let dir = tempfile::Builder::new()
        .prefix("corral-serve-keep-")
        .tempdir()
        .unwrap();
    let s = Server::start_in(dir.path(), "", &[]);
    // It says which data folder it uses.
    assert!(
        s.log().contains(&format!(
            "corral serve: data folder {}\n",
            dir.path().display()
        )),
        "{}",
        s.log()
    );
    let (t, id) = rt().block_on(async {
        let t = s.token("student").await;
        let id = s.upload(&t, &[("a.txt", b"persisted")]).await;
        let r = s.run_ok(&t, json!({"cmd": "true"})).await;
        assert!(r["sandbox"].is_string());
        (t, id)
    });
    let log = s.log();
    let status = s.stop();
    assert!(status.success(), "exit status {status}\n{log}");
    // Its stderr is a pipe here, as in `corral serve 2> server.log`: plain text, no colour codes.
    assert!(log.contains("INFO"), "the server logged nothing:\n{log}");
    assert!(
        !log.contains('\x1b'),
        "escape sequences in a piped log:\n{log:?}"
    );
    // A second server on the same data: the token and the upload are still there, and no new
    // admin token is printed.
    let s2 = Server::start_in(dir.path(), "", &[]);
    assert!(
        s2.admin.is_empty(),
        "a second start must not make another admin token"
    );
    rt().block_on(async {
        let r = s2
            .run_ok(&t, json!({"cmd": "cat a.txt", "sandbox": {"homedir": id}}))
            .await;
        assert_eq!(r["stdout"], "persisted");
    });
    assert!(s2.stop().success());
}

/// A first start that cannot listen (the port is taken) fails before it makes the first admin
/// token: the token is shown once, so a start that then failed used it up and the next, good
/// start printed none.
#[test]
fn a_failed_first_start_does_not_use_up_the_admin_token() {
    let dir = tempfile::Builder::new()
        .prefix("corral-serve-busy-")
        .tempdir()
        .unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = taken.local_addr().unwrap().to_string();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_corral"))
        .args(["serve", "--listen", &busy, "--data"])
        .arg(dir.path())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "it served on a taken port: {err}");
    assert!(err.contains(&busy), "the address is not named: {err}");
    assert!(
        !err.contains("admin token"),
        "a start that failed made the admin token: {err}"
    );
    drop(taken);
    let s = Server::start_in(dir.path(), "", &[]);
    assert!(
        s.admin.starts_with("corral_"),
        "the first good start shows the admin token:\n{}",
        s.log()
    );
    rt().block_on(async {
        let (st, v) = s.get(&s.admin, "/whoami").await;
        assert_eq!(st, StatusCode::OK, "the token works: {v}");
    });
    assert!(s.stop().success());
}

const SEED_SUITE: &str = r#"
name: hello
checks:
  - id: compiles
    description: Does hello.c compile?
    steps:
      - run: cc hello.c
      - exit: 0
  - id: runs
    description: Does a.out print "hello, world"?
    depends: [compiles]
    steps:
      - run: ./a.out
      - stdout: hello, world
      - exit: 0
  - id: secret
    description: a hidden check
    depends: [compiles]
    hidden: true
    steps:
      - run: ./a.out
      - stdout: the hidden answer
"#;

async fn register_suite(s: &Server, token: &str, id: &str, suite: &str) -> (StatusCode, Value) {
    let (st, text) = s.register_suite(token, id, suite, &[]).await;
    (st, serde_json::from_str(&text).unwrap())
}

async fn check(s: &Server, token: &str, suite: &str, upload: &str) -> (StatusCode, Value) {
    let r = client()
        .post(s.url("/check"))
        .bearer_auth(token)
        .json(&json!({"checks": suite, "sandbox": {"homedir": upload}}))
        .send()
        .await
        .unwrap();
    let st = r.status();
    (st, r.json().await.unwrap())
}

/// The last script entry of a check.
fn last_step(v: &Value, check: &str) -> Value {
    v["results"][check]["script"]
        .as_array()
        .and_then(|a| a.last().cloned())
        .unwrap_or_else(|| panic!("{check} has no script: {v}"))
}

/// A suite with every kind of step and matcher, passing and failing, a hidden check and a
/// skipped one: what `/check` answers for it is what the OpenAPI document says (`diff`'s
/// observation once carried a `match` the document did not allow, so a client validating
/// answers refused every grade of a suite with a `diff` step).
const EVERY_STEP_SUITE: &str = r#"
name: every-step
files:
  - {path: expected.txt}
  - {path: want.txt}
checks:
  - id: talks
    steps:
      - run: "printf 'Name: '; read n; echo \"hi $n\"; echo oops >&2; printf 'hi\n' > out.txt"
      - stdout: {regex: "Name: "}
      - stdin: Ada
      - stdout: hi Ada
      - stderr: {exact: "oops"}
      - exit: 0
      - exists: out.txt
      - not_exists: core
      - diff: {actual: out.txt, expected: expected.txt}
  - id: file_matcher
    steps:
      - run: cat want.txt
      - stdout: {file: want.txt}
  - id: differs
    hidden: false
    steps:
      - run: "printf 'no\n' > out.txt"
      - diff: {actual: out.txt, expected: expected.txt}
  - id: after
    depends: [differs]
    steps:
      - run: "true"
  - id: secret
    hidden: true
    steps:
      - run: echo nope
      - stdout: {exact: "yes"}
"#;

#[test]
fn check_answers_are_what_the_openapi_document_says() {
    let s = Server::start("", &[]);
    rt().block_on(async {
        let staff = s.token("staff").await;
        let student = s.token("student").await;
        let files = vec![
            ("expected.txt".to_string(), b"hi\n".to_vec()),
            ("want.txt".to_string(), b"wanted\n".to_vec()),
        ];
        let (st, text) = s
            .register_suite(&staff, "every-step", EVERY_STEP_SUITE, &files)
            .await;
        assert_eq!(st, StatusCode::CREATED, "{text}");
        let (_, doc) = s.get(&student, "/openapi.json").await;
        // The student's view and staff's (the hidden check's script included).
        for token in [&student, &staff] {
            let up = s.upload(token, &[("want.txt", b"wanted\n")]).await;
            let (st, v) = check(&s, token, "every-step", &up).await;
            assert_eq!(st, StatusCode::OK, "{v}");
            let r = &v["results"];
            let got: Vec<(&str, &Value)> = ["talks", "file_matcher", "differs", "after", "secret"]
                .iter()
                .map(|c| (*c, &r[c]["result"]))
                .collect();
            assert_eq!(
                got,
                [
                    ("talks", &json!(true)),
                    ("file_matcher", &json!(true)),
                    ("differs", &json!(false)),
                    ("after", &Value::Null),
                    ("secret", &json!(false)),
                ],
                "{v}"
            );
            let errors =
                corral_testkit::documented_answer_errors(&doc, "post", "/check", st.as_u16(), &v);
            assert!(errors.is_empty(), "{errors:?} in {v}");
        }
        // Counted as gradings, by result, not in the runs' duration (whose count had them while
        // `runs_total` did not).
        let m = reqwest::get(s.url("/metrics"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        for line in [
            "corral_checks_total{result=\"failed\"} 2",
            "corral_checks_total{result=\"passed\"} 0",
            "corral_check_duration_seconds_count 2",
            "corral_run_duration_seconds_count 0",
        ] {
            assert!(m.lines().any(|l| l == line), "{line} not in {m}");
        }
    });
}

#[test]
fn seed_check_examples_through_check() {
    let s = Server::start("", &[]);
    rt().block_on(async {
        let staff = s.token("staff").await;
        let student = s.token("student").await;
        // Only staff register suites; a broken suite is a 422 that says why.
        let (st, _) = register_suite(&s, &student, "cs50/hello", SEED_SUITE).await;
        assert_eq!(st, StatusCode::FORBIDDEN);
        let (st, v) = register_suite(&s, &staff, "cs50/hello", "name: x\nchecks: 3\n").await;
        assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
        let (st, v) = register_suite(&s, &staff, "cs50/hello", SEED_SUITE).await;
        assert_eq!(st, StatusCode::CREATED, "{v}");
        assert_eq!(v["id"], "cs50/hello");
        let (_, list) = s.get(&student, "/suites").await;
        assert!(
            list.as_array()
                .unwrap()
                .iter()
                .any(|x| x["id"] == "cs50/hello"),
            "{list}"
        );

        // Both pass.
        let id = s
            .upload(&student, &[("hello.c", SEED_HELLO.as_bytes())])
            .await;
        let (st, v) = check(&s, &student, "cs50/hello", &id).await;
        assert_eq!(st, StatusCode::OK, "{v}");
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["results"], "exactly the seed's shape: {v}");
        for c in ["compiles", "runs"] {
            let r = &v["results"][c];
            assert_eq!(r["result"], true, "{c}: {v}");
            let mut k: Vec<&String> = r.as_object().unwrap().keys().collect();
            k.sort();
            assert_eq!(k, ["dependencies", "description", "result", "script"]);
        }
        assert_eq!(v["results"]["runs"]["dependencies"], json!(["compiles"]));
        assert_eq!(
            v["results"]["compiles"]["description"],
            "Does hello.c compile?"
        );
        // The hidden check failed, but a student sees nothing of it.
        assert_eq!(v["results"]["secret"]["result"], false);
        assert_eq!(v["results"]["secret"]["script"], json!([]));
        assert!(!v.to_string().contains("the hidden answer"), "{v}");

        // Fails: an unexpected exit code.
        let exits1 =
            "#include <stdio.h>\nint main(void) { printf(\"hello, world\\n\"); return 1; }\n";
        let id = s.upload(&student, &[("hello.c", exits1.as_bytes())]).await;
        let (_, v) = check(&s, &student, "cs50/hello", &id).await;
        assert_eq!(v["results"]["compiles"]["result"], true);
        assert_eq!(v["results"]["runs"]["result"], false, "{v}");
        let step = last_step(&v, "runs");
        assert_eq!(step["expected"], json!({"type": "exit", "value": 0}), "{v}");
        assert_eq!(step["actual"], json!({"type": "exit", "value": 1}), "{v}");

        // Fails: wrong stdout.
        let goodbye = "#include <stdio.h>\nint main(void) { printf(\"goodbye, world\\n\"); }\n";
        let id = s.upload(&student, &[("hello.c", goodbye.as_bytes())]).await;
        let (_, v) = check(&s, &student, "cs50/hello", &id).await;
        assert_eq!(v["results"]["runs"]["result"], false, "{v}");
        let step = last_step(&v, "runs");
        assert_eq!(step["expected"]["type"], "stdout");
        assert_eq!(step["expected"]["value"], "hello, world");
        assert!(
            step["actual"]["value"]
                .as_str()
                .unwrap()
                .contains("goodbye, world"),
            "{step}"
        );

        // Does not compile: the dependent check is skipped (null, empty script).
        let broken = "int main(void) { return }\n";
        let id = s.upload(&student, &[("hello.c", broken.as_bytes())]).await;
        let (_, v) = check(&s, &student, "cs50/hello", &id).await;
        assert_eq!(v["results"]["compiles"]["result"], false, "{v}");
        let step = last_step(&v, "compiles");
        assert_eq!(step["expected"], json!({"type": "exit", "value": 0}));
        assert_eq!(step["actual"], json!({"type": "exit", "value": 1}));
        assert_eq!(v["results"]["runs"]["result"], Value::Null);
        assert_eq!(v["results"]["runs"]["script"], json!([]));

        // Staff see the hidden check's details (on their own upload).
        let id = s
            .upload(&staff, &[("hello.c", SEED_HELLO.as_bytes())])
            .await;
        let (_, v) = check(&s, &staff, "cs50/hello", &id).await;
        assert!(v.to_string().contains("the hidden answer"), "{v}");

        // No such upload, someone else's upload, an unknown suite: 404.
        let (st, _) = check(&s, &staff, "cs50/hello", "0123456789abcdef0123456789abcdef").await;
        assert_eq!(st, StatusCode::NOT_FOUND);
        let (st, _) = check(&s, &student, "cs50/hello", &id).await;
        assert_eq!(st, StatusCode::NOT_FOUND);
        let (st, _) = check(&s, &student, "../../etc", &id).await;
        assert_eq!(st, StatusCode::NOT_FOUND);
    });
}

/// A suite whose one check lasts until the server stops.
const SLOW_SUITE: &str = r#"
name: slow
timeout: 50s
limits: {wall_time: 50s}
checks:
  - id: waits
    description: sleeps
    steps:
      - run: sleep 45
      - exit: 0
"#;

const QUICK_SUITE: &str = r#"
name: quick
checks:
  - id: runs
    description: runs true
    steps:
      - run: "true"
      - exit: 0
"#;

/// One token's concurrent `/check` requests are capped like its busy sandboxes
/// (`max_sandboxes_per_caller`): a student's 66 concurrent ones filled the server's queue and
/// stalled everyone's runs for 92 s. The one past the cap is refused with 429 and Retry-After,
/// naming the cap, while another token's check still runs.
#[test]
fn a_tokens_concurrent_checks_are_capped_and_another_tokens_check_runs() {
    let s = Server::start(
        "parallelism = 2\nmax_sandboxes_per_caller = 1\nshutdown_grace = \"1s\"\n",
        &[],
    );
    rt().block_on(async {
        let staff = s.token("staff").await;
        let (a, b) = (s.token("student").await, s.token("student").await);
        for (id, suite) in [("slow", SLOW_SUITE), ("quick", QUICK_SUITE)] {
            let (st, v) = register_suite(&s, &staff, id, suite).await;
            assert_eq!(st, StatusCode::CREATED, "{v}");
        }
        let up_a = s.upload(&a, &[("a.txt", b"a")]).await;
        let up_b = s.upload(&b, &[("b.txt", b"b")]).await;
        // a's first grading holds a slot until the server stops.
        let (url, a2, body) = (
            s.url("/check"),
            a.clone(),
            json!({"checks": "slow", "sandbox": {"homedir": up_a}}),
        );
        let _slow = tokio::spawn(async move {
            let _ = client().post(url).bearer_auth(a2).json(&body).send().await;
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        while s.health().await["runs_in_flight"] != 1 {
            assert!(Instant::now() < deadline, "the first check never started");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let r = client()
            .post(s.url("/check"))
            .bearer_auth(&a)
            .json(&json!({"checks": "quick", "sandbox": {"homedir": up_a}}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        assert!(corral_testkit::http::retry_after(&r) >= 1);
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["error"], "too_many_checks", "{v}");
        assert!(v["message"].as_str().unwrap().contains("(1)"), "{v}");
        // b is not held back by a's checks.
        let (st, v) = check(&s, &b, "quick", &up_b).await;
        assert_eq!(st, StatusCode::OK, "{v}");
        assert_eq!(v["results"]["runs"]["result"], true, "{v}");
        assert_eq!(
            s.health().await["runs_in_flight"],
            1,
            "a's check still runs"
        );
    });
}

/// Three checks where the second fails and the third, which needs it, is skipped.
const STEPS_SUITE: &str = r#"
name: steps
checks:
  - id: first
    description: passes
    steps:
      - run: "true"
      - exit: 0
  - id: second
    description: fails
    depends: [first]
    steps:
      - run: "false"
      - exit: 0
  - id: third
    description: needs the second
    depends: [second]
    steps:
      - run: "true"
      - exit: 0
"#;

/// Reads an NDJSON answer's lines as they arrive; each is also checked against the OpenAPI
/// document's `CheckEvent`.
struct Lines {
    r: reqwest::Response,
    buf: Vec<u8>,
    doc: Value,
}

impl Lines {
    /// `POST path` with `body` asking for the progress stream, answered 200 as NDJSON.
    async fn open(s: &Server, token: &str, path: &str, body: Value, doc: &Value) -> Lines {
        let r = client()
            .post(s.url(path))
            .bearer_auth(token)
            .header("accept", "application/x-ndjson")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(
            r.headers()["content-type"].to_str().unwrap(),
            "application/x-ndjson"
        );
        Lines {
            r,
            buf: Vec::new(),
            doc: doc.clone(),
        }
    }

    async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(i) = self.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=i).collect();
                let v: Value = serde_json::from_slice(&line).expect("a JSON line");
                let errors = corral_testkit::documented_answer_errors_as(
                    &self.doc,
                    "post",
                    "/check",
                    200,
                    "application/x-ndjson",
                    &v,
                );
                assert!(errors.is_empty(), "{errors:?} in {v}");
                return Some(v);
            }
            let chunk = tokio::time::timeout(Duration::from_secs(60), self.r.chunk())
                .await
                .expect("a line within 60 s")
                .unwrap()?;
            self.buf.extend_from_slice(&chunk);
        }
    }
}

/// `POST /check` with `Accept: application/x-ndjson` answers the grading's progress as it goes
/// (a class's checks waited up to two minutes with no word, and a proxy cuts a silent request
/// after a minute): `queued` while another student's grading holds the only slot, with how many
/// go first — sent at once, not held back until the grading ends, and again when it moves up —
/// a `heartbeat` every 15 s of waiting, `started` with the suite's checks, each check as it is
/// decided (the skipped one too), and last the report, the same as without streaming. A request
/// refused before it is accepted is an ordinary error.
#[test]
fn a_check_streams_its_progress_when_asked() {
    let s = Server::start("parallelism = 1\nshutdown_grace = \"1s\"\n", &[]);
    rt().block_on(async {
        let staff = s.token("staff").await;
        let (st, v) = register_suite(&s, &staff, "steps", STEPS_SUITE).await;
        assert_eq!(st, StatusCode::CREATED, "{v}");
        let (st, v) = register_suite(
            &s,
            &staff,
            "nap",
            "name: nap\ntimeout: 30s\nlimits: {wall_time: 30s}\nchecks:\n  - id: waits\n    steps:\n      \
             - run: sleep 17\n      - exit: 0\n",
        )
        .await;
        assert_eq!(st, StatusCode::CREATED, "{v}");
        let (st, v) = register_suite(
            &s,
            &staff,
            "short_nap",
            "name: short_nap\nchecks:\n  - id: waits\n    steps:\n      - run: sleep 3\n      - exit: 0\n",
        )
        .await;
        assert_eq!(st, StatusCode::CREATED, "{v}");
        let (_, doc) = s.get(&staff, "/openapi.json").await;
        let student = s.token("student").await;
        let up = s.upload(&student, &[("a.txt", b"a")]).await;
        let ask = |suite: &str| {
            client()
                .post(s.url("/check?format=json"))
                .bearer_auth(&student)
                .header("accept", "application/x-ndjson")
                .json(&json!({"checks": suite, "sandbox": {"homedir": up}}))
        };
        // Refused before it is accepted: its status and JSON error, no stream.
        let r = ask("no-such-suite").send().await.unwrap();
        assert_eq!(r.status(), StatusCode::NOT_FOUND);
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["error"], "not_found", "{v}");

        // Another student's grading holds the only slot for 17 s, and a third's waits for it.
        let other = s.token("student").await;
        let up_other = s.upload(&other, &[("a.txt", b"a")]).await;
        let (url, body) = (
            s.url("/check"),
            json!({"checks": "nap", "sandbox": {"homedir": up_other}}),
        );
        let held = tokio::spawn(async move {
            let _ = client().post(url).bearer_auth(other).json(&body).send().await;
        });
        until_runs(&s, (1, 0)).await;
        let third = s.token("student").await;
        let up_third = s.upload(&third, &[("a.txt", b"a")]).await;
        let (url, body) = (
            s.url("/check"),
            json!({"checks": "short_nap", "sandbox": {"homedir": up_third}}),
        );
        let before = tokio::spawn(async move {
            let _ = client().post(url).bearer_auth(third).json(&body).send().await;
        });
        until_runs(&s, (1, 1)).await;
        // An image the server lacks is refused at once, not after a wait in the queue.
        let r = client()
            .post(s.url("/check?format=json"))
            .bearer_auth(&student)
            .header("accept", "application/x-ndjson")
            .json(&json!({"checks": "steps", "sandbox": {"homedir": up}, "image": "nowhere:1"}))
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .expect("answered while the slots are busy");
        assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
        let v: Value = r.json().await.unwrap();
        assert!(v["message"].as_str().unwrap().contains("nowhere:1"), "{v}");

        let body = json!({"checks": "steps", "sandbox": {"homedir": up}});
        let mut lines = Lines::open(&s, &student, "/check?format=json", body, &doc).await;
        assert_eq!(
            lines.next().await.unwrap(),
            json!({"event": "queued", "ahead": 1})
        );
        assert_eq!(
            s.health().await["runs_in_flight"],
            1,
            "`queued` came only once the other grading had ended"
        );
        let beat = lines.next().await.unwrap();
        assert_eq!(beat["event"], "heartbeat", "{beat}");
        assert!(beat["elapsed_ms"].as_u64().unwrap() >= 15_000, "{beat}");
        // The first grading ends; the one queued before runs for 3 s: this one is next.
        let mut events = Vec::new();
        while let Some(v) = lines.next().await {
            if v["event"] != "heartbeat" {
                events.push(v);
            }
        }
        held.await.unwrap();
        before.await.unwrap();
        assert_eq!(events[0], json!({"event": "queued", "ahead": 0}));
        events.remove(0);
        let n = events.len();
        assert_eq!(n, 5, "{events:#?}");
        assert_eq!(
            events[0],
            json!({"event": "started", "checks": ["first", "second", "third"]})
        );
        assert_eq!(
            events[1..4],
            [
                json!({"event": "check", "done": 1, "of": 3, "id": "first", "result": true}),
                json!({"event": "check", "done": 2, "of": 3, "id": "second", "result": false}),
                json!({"event": "check", "done": 3, "of": 3, "id": "third", "result": null}),
            ]
        );
        let report = &events[4];
        assert_eq!(report["event"], "report", "{report}");
        // The report is the answer without streaming.
        let r = client()
            .post(s.url("/check?format=json"))
            .bearer_auth(&student)
            .json(&json!({"checks": "steps", "sandbox": {"homedir": up}}))
            .send()
            .await
            .unwrap();
        let mut plain: Value = r.json().await.unwrap();
        let mut streamed = report["report"].clone();
        for v in [&mut plain, &mut streamed] {
            for id in ["first", "second", "third"] {
                v["results"][id]["time_ms"] = Value::Null;
            }
        }
        assert_eq!(streamed, plain);
        assert_eq!(plain["order"], json!(["first", "second", "third"]), "{plain}");
    });
}

/// A shutdown ends every progress stream with a last word: a check still waiting for a slot
/// leaves the queue at once (`shutting_down`, so its client can try again elsewhere), and one
/// still running past most of the grace period says it was stopped, where the connection used
/// to be cut with neither a report nor an error.
#[test]
fn a_shutdown_ends_progress_streams_with_a_reason() {
    let s = Server::start("parallelism = 1\nshutdown_grace = \"4s\"\n", &[]);
    let rt = rt();
    let (mut running, mut queued) = rt.block_on(async {
        let staff = s.token("staff").await;
        let nap = "name: nap\ntimeout: 30s\nlimits: {wall_time: 30s}\nchecks:\n  - id: waits\n    \
                   steps:\n      - run: sleep 20\n      - exit: 0\n";
        let (st, v) = register_suite(&s, &staff, "nap", nap).await;
        assert_eq!(st, StatusCode::CREATED, "{v}");
        let (_, doc) = s.get(&staff, "/openapi.json").await;
        let mut streams = Vec::new();
        for first in ["started", "queued"] {
            let t = s.token("student").await;
            let up = s.upload(&t, &[("a.txt", b"a")]).await;
            let body = json!({"checks": "nap", "sandbox": {"homedir": up}});
            let mut lines = Lines::open(&s, &t, "/check", body, &doc).await;
            assert_eq!(lines.next().await.unwrap()["event"], first);
            streams.push(lines);
        }
        let queued = streams.pop().unwrap();
        (streams.pop().unwrap(), queued)
    });
    let stopping = Instant::now();
    // SAFETY: kill(2) on the server process this test started.
    unsafe {
        libc::kill(s.pid() as i32, libc::SIGTERM);
    }
    rt.block_on(async {
        let last = queued.next().await.unwrap();
        assert_eq!(
            (&last["event"], &last["error"]),
            (&json!("error"), &json!("shutting_down")),
            "{last}"
        );
        assert!(
            stopping.elapsed() < Duration::from_secs(2),
            "the queued check waited for the grace period"
        );
        assert_eq!(queued.next().await, None, "the stream ends after its error");
        let last = loop {
            let v = running.next().await.expect("a last word before the end");
            if v["event"] != "heartbeat" && v["event"] != "check" {
                break v;
            }
        };
        assert_eq!(
            (&last["event"], &last["error"]),
            (&json!("error"), &json!("shutting_down")),
            "{last}"
        );
        assert!(
            last["message"]
                .as_str()
                .unwrap()
                .contains("stopped before this check ended"),
            "{last}"
        );
        assert_eq!(
            running.next().await,
            None,
            "the stream ends after its error"
        );
    });
    let (status, log) = s.stop_with_log();
    assert!(status.success(), "{status:?}\n{log}");
}

/// A check whose client goes away stops: the program of the check running then is killed and
/// the checks not started are not run, so its slot comes back at once, not after the whole
/// suite (30 s here), and it is counted as `cancelled`.
#[test]
fn a_check_whose_client_went_away_stops_its_checks() {
    let s = Server::start("parallelism = 1\nshutdown_grace = \"1s\"\n", &[]);
    rt().block_on(async {
        let staff = s.token("staff").await;
        // `a` is running when the client leaves (killed), `b` not started (not run): without
        // either the grading would hold its slot for 30 s more.
        let pair = "name: pair\ntimeout: 30s\nlimits: {wall_time: 30s}\nchecks:\n  - id: a\n    \
                    steps:\n      - run: sleep 20\n      - exit: 0\n  - id: b\n    depends: [a]\n    \
                    steps:\n      - run: sleep 10\n      - exit: 0\n";
        let (st, v) = register_suite(&s, &staff, "pair", pair).await;
        assert_eq!(st, StatusCode::CREATED, "{v}");
        let (_, doc) = s.get(&staff, "/openapi.json").await;
        let t = s.token("student").await;
        let up = s.upload(&t, &[("a.txt", b"a")]).await;
        let body = json!({"checks": "pair", "sandbox": {"homedir": up}});
        let mut lines = Lines::open(&s, &t, "/check", body, &doc).await;
        assert_eq!(lines.next().await.unwrap()["event"], "started");
        let left = Instant::now();
        drop(lines);
        let deadline = left + Duration::from_secs(8);
        while s.health().await["runs_in_flight"] != 0 {
            assert!(
                Instant::now() < deadline,
                "the grading went on after its client left"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let m = reqwest::get(s.url("/metrics"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let line = "corral_checks_total{result=\"cancelled\"} 1";
        assert!(m.lines().any(|l| l == line), "{line} not in {m}");
    });
}

/// A `/check` whose checks wait for a grading slot (another student's long check holds the only
/// one) stops waiting when its client leaves: its runner slot and the student's turn come back
/// at once, not when the other check ends (45 s here; a red-team trial saw 8 s of 429s).
#[test]
fn a_check_waiting_for_a_grading_slot_stops_when_its_client_leaves() {
    let s = Server::start(
        "parallelism = 2\ngrading_slots = 1\nshutdown_grace = \"1s\"\n",
        &[],
    );
    rt().block_on(async {
        let staff = s.token("staff").await;
        for (id, suite) in [("slow", SLOW_SUITE), ("quick", QUICK_SUITE)] {
            let (st, v) = register_suite(&s, &staff, id, suite).await;
            assert_eq!(st, StatusCode::CREATED, "{v}");
        }
        let (_, doc) = s.get(&staff, "/openapi.json").await;
        // A new student's streamed check of `suite`.
        let stream = |suite: &'static str| {
            let (s, doc) = (&s, &doc);
            async move {
                let t = s.token("student").await;
                let up = s.upload(&t, &[("a.txt", b"a")]).await;
                let body = json!({"checks": suite, "sandbox": {"homedir": up}});
                Lines::open(s, &t, "/check", body, doc).await
            }
        };
        let mut holder = stream("slow").await;
        assert_eq!(holder.next().await.unwrap()["event"], "started");
        until_runs(&s, (1, 0)).await;
        let lines = stream("quick").await;
        until_runs(&s, (2, 0)).await;
        drop(lines);
        let deadline = Instant::now() + Duration::from_secs(8);
        while s.health().await["runs_in_flight"] != 1 {
            assert!(
                Instant::now() < deadline,
                "the grading went on waiting after its client left"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // One that leaves while it waits in the server's queue (both runner slots taken) is
        // counted as cancelled too, as the first was.
        let _second = stream("quick").await;
        until_runs(&s, (2, 0)).await;
        let mut queued = stream("quick").await;
        assert_eq!(queued.next().await.unwrap()["event"], "queued");
        drop(queued);
        let line = "corral_checks_total{result=\"cancelled\"} 2";
        let deadline = Instant::now() + Duration::from_secs(8);
        loop {
            let m = reqwest::get(s.url("/metrics"))
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            if m.lines().any(|l| l == line) {
                break;
            }
            assert!(Instant::now() < deadline, "{line} not in {m}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        drop(holder);
    });
}

/// Waits (bounded) until the server has `(in flight, queued)` runs.
async fn until_runs(s: &Server, expected: (i64, i64)) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let h = s.health().await;
        if (h["runs_in_flight"].clone(), h["runs_queued"].clone())
            == (json!(expected.0), json!(expected.1))
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the runs never got to {expected:?}: {h}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// An editor's `echo mine` answers within 25 s (else `waited` says why not).
async fn editor_run_answers(s: &Server, editor: &str, waited: &str) {
    let r = client()
        .post(s.url("/run"))
        .bearer_auth(editor)
        .json(&json!({"cmd": "echo mine"}))
        .timeout(Duration::from_secs(25))
        .send()
        .await
        .expect(waited);
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        (&v["status"], &v["stdout"]),
        (&json!("ok"), &json!("mine\n")),
        "{v}"
    );
}

/// A storm of `/check`s does not hold back an editor's run: with one slot, two students'
/// 45-second gradings hold it and wait for it, and a third student's `/run` (and a WebSocket run)
/// still answers at once, in the slot reserved for programs (the default
/// `reserved_run_slots = 1`). With the shared slots alone a 20 ms run waited ~35 s behind 30
/// checks of mario. The gradings never take the reserved slot.
#[test]
fn an_editor_run_does_not_wait_behind_a_storm_of_checks() {
    let s = Server::start("parallelism = 1\nqueue = 1\nshutdown_grace = \"1s\"\n", &[]);
    rt().block_on(async {
        let staff = s.token("staff").await;
        let (st, v) = register_suite(&s, &staff, "slow", SLOW_SUITE).await;
        assert_eq!(st, StatusCode::CREATED, "{v}");
        let mut storm = Vec::new();
        for expected in [(1, 0), (1, 1)] {
            let t = s.token("student").await;
            let up = s.upload(&t, &[("a.txt", b"a")]).await;
            let (url, body) = (
                s.url("/check"),
                json!({"checks": "slow", "sandbox": {"homedir": up}}),
            );
            storm.push(tokio::spawn(async move {
                let _ = client().post(url).bearer_auth(t).json(&body).send().await;
            }));
            until_runs(&s, expected).await;
        }
        // The queue is full for checks; the reserved slot's place in it is not theirs to take
        // (a red-team trial: a storm that filled it got an editor's run a 503 while the
        // reserved slot idled).
        let t = s.token("student").await;
        let up = s.upload(&t, &[("a.txt", b"a")]).await;
        let (st, v) = check(&s, &t, "slow", &up).await;
        assert_eq!(st, StatusCode::SERVICE_UNAVAILABLE, "{v}");
        let editor = s.token("student").await;
        editor_run_answers(&s, &editor, "the editor's run waited behind the checks").await;
        let mut ws = ws_connect(&s, &editor).await;
        ws_send(
            &mut ws,
            json!({"type": "run", "cmd": "echo typed", "queue_notices": true}),
        )
        .await;
        let m = ws_next(&mut ws).await;
        assert_eq!(m["type"], "stdout", "a WebSocket run waited: {m}");
        // Its slot is given back after it exits (its output can come first): then the
        // gradings are as before, one in the slot and one waiting.
        while ws_next(&mut ws).await["type"] != "exit" {}
        until_runs(&s, (1, 1)).await;
        for t in storm {
            t.abort();
        }
    });
}

/// One token's long runs do not hold an editor's run: with one shared slot, a student's two
/// `sleep 30` runs take the shared slot and wait for it — never the reserved slot beside it — and
/// another student's run answers at once. Before, the second took the reserved slot and every
/// other editor's run waited ~38 s.
#[test]
fn one_tokens_long_runs_do_not_take_the_slot_reserved_for_others() {
    let s = Server::start("parallelism = 1\nshutdown_grace = \"1s\"\n", &[]);
    rt().block_on(async {
        let hog = s.token("student").await;
        let mut held = Vec::new();
        for expected in [(1, 0), (1, 1)] {
            let (url, t) = (s.url("/run"), hog.clone());
            held.push(tokio::spawn(async move {
                let body = json!({"cmd": "sleep 30", "sandbox": {"keep": false},
                                  "limits": {"wall_time": "40s"}});
                let _ = client().post(url).bearer_auth(t).json(&body).send().await;
            }));
            until_runs(&s, expected).await;
        }
        let editor = s.token("student").await;
        editor_run_answers(
            &s,
            &editor,
            "the editor's run waited behind another token's runs",
        )
        .await;
        for t in held {
            t.abort();
        }
    });
}

/// A WebSocket's runs count against its token's rate limit, as requests do: the upgrade used to
/// be the only charge, and one socket ran 13,750 programs in 30 s on a student token. Past the
/// bucket a run gets a `rate_limited` error with the wait; the socket stays open and, after the
/// wait, runs again.
#[test]
fn websocket_runs_are_rate_limited_like_requests() {
    let s = Server::start("[rate_limit.student]\nper_minute = 12\nburst = 4\n", &[]);
    rt().block_on(async {
        let t = s.token("student").await;
        // The upgrade takes one request of the four.
        let mut ws = ws_connect(&s, &t).await;
        async fn run_true(ws: &mut Ws) -> Value {
            ws_send(ws, json!({"type": "run", "cmd": ["/bin/true"]})).await;
            loop {
                let m = ws_next(ws).await;
                if !matches!(m["type"].as_str(), Some("stdout" | "stderr" | "stdin")) {
                    return m;
                }
            }
        }
        let mut ran = 0;
        let refused = loop {
            let m = run_true(&mut ws).await;
            if m["type"] != "exit" {
                break m;
            }
            assert_eq!(m["status"], "ok", "{m}");
            ran += 1;
            assert!(
                ran < 20,
                "{ran} runs on one socket with a bucket of 4 (12 a minute): runs are not rate limited"
            );
        };
        assert!(ran >= 3, "refused after {ran} runs: {refused}");
        assert_eq!(refused["type"], "error", "{refused}");
        assert_eq!(refused["error"], "rate_limited", "{refused}");
        let wait = refused["retry_after"].as_u64().expect("a retry_after");
        assert!((1..=5).contains(&wait), "{refused}");
        // Still open and answering.
        ws_send(&mut ws, json!({"type": "stdin", "data": "x"})).await;
        assert_eq!(ws_next(&mut ws).await["error"], "not_running");
        tokio::time::sleep(Duration::from_secs(wait)).await;
        let m = run_true(&mut ws).await;
        assert_eq!((&m["type"], &m["status"]), (&json!("exit"), &json!("ok")), "{m}");
    });
}

#[test]
fn overload_is_refused_with_503_and_retry_after() {
    let s = Server::start("parallelism = 1\nreserved_run_slots = 0\nqueue = 0\n", &[]);
    rt().block_on(async {
        let t = s.token("student").await;
        let url = s.url("/run");
        let t2 = t.clone();
        let busy = tokio::spawn(async move {
            client()
                .post(url)
                .bearer_auth(t2)
                .json(&json!({"cmd": "sleep 4", "limits": {"wall_time": "20s"}}))
                .send()
                .await
                .unwrap()
                .status()
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        while s.health().await["runs_in_flight"] != 1 {
            assert!(Instant::now() < deadline, "the first run never started");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let r = client()
            .post(s.url("/run"))
            .bearer_auth(&t)
            .json(&json!({"cmd": "true"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        let wait = corral_testkit::http::retry_after(&r);
        assert!(wait >= 1);
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["error"], "overloaded");
        assert_eq!(busy.await.unwrap(), StatusCode::OK);
        // Free again.
        s.run_ok(&t, json!({"cmd": "true"})).await;
        let m = corral_testkit::http::get_text(&s.url("/metrics")).await;
        assert!(
            m.contains("corral_rejected_total{reason=\"overloaded\"} 1"),
            "{m}"
        );
    });
}

#[test]
fn dev_mode_needs_no_token_and_suites_folder_is_used() {
    let dir = tempfile::Builder::new()
        .prefix("corral-serve-dev-")
        .tempdir()
        .unwrap();
    let suite = dir.path().join("suites/greet");
    std::fs::create_dir_all(&suite).unwrap();
    std::fs::write(
        suite.join("suite.yaml"),
        "name: greet\nchecks:\n  - id: says\n    steps:\n      - run: sh greet.sh\n      - stdout: hi\n      - exit: 0\n",
    )
    .unwrap();
    let s = Server::start_in(dir.path(), "", &["--dev-no-auth"]);
    assert!(s.admin.is_empty(), "no token in dev mode");
    assert!(s.log().contains("--dev-no-auth"), "dev mode must say so");
    rt().block_on(async {
        let me: Value = client()
            .get(s.url("/whoami"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(me["role"], "admin");
        let mut f = reqwest::multipart::Form::new();
        f = f.part(
            "files",
            reqwest::multipart::Part::bytes(b"echo hi\n".to_vec()).file_name("greet.sh"),
        );
        let up: Value = client()
            .post(s.url("/upload"))
            .multipart(f)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let r = client()
            .post(s.url("/check"))
            .json(&json!({"checks": "greet", "sandbox": {"homedir": up["id"]}}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["results"]["says"]["result"], true, "{v}");
        let list: Value = client()
            .get(s.url("/suites"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(
            list,
            json!([{"id": "greet", "name": "greet", "source": "folder"}])
        );
    });
}

#[test]
fn sigterm_kills_interactive_runs_and_leaves_nothing() {
    let s = Server::start("shutdown_grace = \"5s\"\n", &[]);
    let marker = format!("corral_e2e_term_{}", std::process::id());
    let rt = rt();
    let mut ws = rt.block_on(async {
        let t = s.token("student").await;
        let mut ws = ws_connect(&s, &t).await;
        ws_send(
            &mut ws,
            json!({"type": "run", "cmd": ["/bin/sh", "-c", "echo up; sleep 50", &marker], "limits": {"wall_time": "40s"}}),
        )
        .await;
        ws_until(&mut ws, "up", |m| m["type"] == "stdout").await;
        ws
    });
    let pid = s.pid();
    // SAFETY: kill(2) on the server process this test started.
    unsafe {
        libc::kill(pid as i32, libc::SIGTERM);
    }
    rt.block_on(async {
        // The client hears why, then the killed run's exit, then a close saying the server
        // goes away (1001).
        let mut seen = Vec::new();
        let mut closed = None;
        loop {
            match tokio::time::timeout(Duration::from_secs(30), ws.next()).await {
                Ok(Some(Ok(Message::Text(t)))) => {
                    seen.push(serde_json::from_str::<Value>(&t).unwrap())
                }
                Ok(Some(Ok(Message::Close(c)))) => {
                    closed = c.map(|c| u16::from(c.code));
                    break;
                }
                Ok(None) | Ok(Some(Err(_))) => break,
                Ok(Some(Ok(_))) => {}
                Err(_) => panic!("the socket stayed open after SIGTERM: {seen:?}"),
            }
        }
        assert!(
            seen.iter().any(|m| m["error"] == "shutting_down"),
            "{seen:?}"
        );
        let exit = seen
            .iter()
            .find(|m| m["type"] == "exit")
            .unwrap_or_else(|| panic!("{seen:?}"));
        // Said as a cancelled run (it read `signaled` 9), with no sandbox to continue in: the
        // shutdown destroys them all.
        assert_eq!(exit["status"], "cancelled", "{exit}");
        assert!(
            exit["reason"].as_str().unwrap().contains("shutting down"),
            "{exit}"
        );
        assert!(exit["sandbox"].is_null(), "{exit}");
        assert_eq!(closed, Some(1001), "{seen:?}");
    });
    let status = s.stop();
    assert!(status.success(), "{status}");
    assert!(
        host_procs_with(&marker).is_empty(),
        "a run outlived the server"
    );
}

/// An upload that is not multipart gets 415 (as documented), not 400; multipart without a
/// boundary stays a 400.
#[test]
fn an_upload_that_is_not_multipart_is_415() {
    let s = Server::start("", &[]);
    rt().block_on(async {
        let t = s.token("student").await;
        for (content_type, want) in [
            (Some("application/json"), 415),
            (Some("text/plain"), 415),
            (None, 415),
            (Some("multipart/form-data"), 400),
        ] {
            let mut r = client().post(s.url("/upload")).bearer_auth(&t).body("{}");
            if let Some(ct) = content_type {
                r = r.header("Content-Type", ct);
            }
            let r = r.send().await.unwrap();
            let st = r.status().as_u16();
            let v: Value = r.json().await.unwrap_or(Value::Null);
            assert_eq!(st, want, "{content_type:?}: {v}");
            assert!(v["error"].is_string(), "{content_type:?}: {v}");
        }
    });
}

/// A WebSocket message over the 1 MiB limit gets a `bad_message` error and a 1009 close frame;
/// it used to drop the TCP connection without a word.
#[test]
fn an_oversized_websocket_message_is_refused_with_a_reason() {
    let s = Server::start("", &[]);
    rt().block_on(async {
        let t = s.token("student").await;
        let mut ws = ws_connect(&s, &t).await;
        // An unknown field is refused as in `POST /run`, not ignored (the program never runs).
        ws_send(
            &mut ws,
            json!({"type": "run", "cmd": "echo ran", "limitz": {"wall_time": "1s"}}),
        )
        .await;
        let m = ws_next(&mut ws).await;
        assert!(
            m["error"] == "bad_message"
                && m["message"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("unknown field `limitz`"),
            "{m}"
        );
        let big = "a".repeat((1 << 20) + 1);
        ws_send(&mut ws, json!({"type": "stdin", "data": big})).await;
        let mut seen = Vec::new();
        loop {
            match tokio::time::timeout(Duration::from_secs(30), ws.next()).await {
                Ok(Some(Ok(Message::Text(t)))) => {
                    seen.push(serde_json::from_str::<Value>(&t).unwrap())
                }
                Ok(Some(Ok(Message::Close(frame)))) => {
                    let code = frame.map(|f| u16::from(f.code));
                    assert_eq!(code, Some(1009), "{seen:?}");
                    break;
                }
                Ok(Some(Ok(_))) => {}
                other => panic!("no close frame: {other:?}, after {seen:?}"),
            }
        }
        assert!(
            seen.iter().any(|m| m["error"] == "bad_message"
                && m["message"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("1048576 bytes")),
            "{seen:?}"
        );
    });
}

/// A frame whose header says 15 MiB is refused at its header: the server used to wait for (and
/// buffer) the whole frame before checking the message's size, so a slow sender held that much
/// of its memory. The header and a few bytes are sent and the payload never comes.
#[test]
fn an_oversized_websocket_frame_is_refused_at_its_header() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let s = Server::start("", &[]);
    rt().block_on(async {
        let t = s.token("student").await;
        let mut tcp = tokio::net::TcpStream::connect(&s.addr).await.unwrap();
        let handshake = format!(
            "GET /ws?token={t} HTTP/1.1\r\nHost: {}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
            s.addr
        );
        tcp.write_all(handshake.as_bytes()).await.unwrap();
        let mut head = Vec::new();
        while !head.ends_with(b"\r\n\r\n") {
            let mut b = [0u8; 1];
            tcp.read_exact(&mut b).await.unwrap();
            head.push(b[0]);
        }
        assert!(head.starts_with(b"HTTP/1.1 101"), "{}", String::from_utf8_lossy(&head));
        // FIN + text; masked (as a client's must be), 64-bit length 15 MiB; a mask; 10 bytes.
        let mut frame = vec![0x81, 0x80 | 127];
        frame.extend_from_slice(&(15u64 << 20).to_be_bytes());
        frame.extend_from_slice(&[1, 2, 3, 4]);
        frame.extend_from_slice(&[0u8; 10]);
        tcp.write_all(&frame).await.unwrap();
        // The answer: a text frame with the error, then a close frame with 1009.
        let mut got = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(10), async {
            let mut buf = [0u8; 4096];
            loop {
                let n = tcp.read(&mut buf).await.unwrap_or(0);
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
        })
        .await;
        assert!(read.is_ok(), "the server waited for the frame's payload: {got:?}");
        let text = String::from_utf8_lossy(&got);
        assert!(text.contains("bad_message") && text.contains("1048576 bytes"), "{text}");
        let close = got.windows(4).any(|w| w[0] == 0x88 && w[2..4] == 1009u16.to_be_bytes());
        assert!(close, "no 1009 close frame: {got:?}");
    });
}

/// A client's close frame is answered with one of the same code (RFC 6455 §5.5.1), idle and
/// mid-run: clients used to see every close they started end as 1006 (abnormal).
#[test]
fn a_clients_close_is_answered() {
    let s = Server::start("", &[]);
    rt().block_on(async {
        let t = s.token("student").await;
        for mid_run in [false, true] {
            let mut ws = ws_connect(&s, &t).await;
            if mid_run {
                ws_send(&mut ws, json!({"type": "run", "cmd": "sleep 30"})).await;
            }
            ws.send(Message::Close(Some(
                tokio_tungstenite::tungstenite::protocol::CloseFrame {
                    code: 1000.into(),
                    reason: "bye".into(),
                },
            )))
            .await
            .unwrap();
            let answer = loop {
                match tokio::time::timeout(Duration::from_secs(30), ws.next()).await {
                    Ok(Some(Ok(Message::Close(frame)))) => break frame.map(|f| u16::from(f.code)),
                    Ok(Some(Ok(_))) => {}
                    other => panic!("mid_run {mid_run}: no close frame back: {other:?}"),
                }
            };
            assert_eq!(answer, Some(1000), "mid_run {mid_run}");
        }
    });
}

/// A `POST /run` still going when `shutdown_grace` ends does not keep the server: it used to wait
/// for the program (here a 50 s sleep) on the run's thread, long after "stopped" was logged.
#[test]
fn sigterm_does_not_wait_for_a_run_past_the_grace_period() {
    let s = Server::start("shutdown_grace = \"2s\"\n", &[]);
    let marker = format!("corral_e2e_grace_{}", std::process::id());
    let rt = rt();
    let token = rt.block_on(s.token("student"));
    let url = s.url("/run");
    let body =
        json!({"cmd": ["/bin/sh", "-c", "sleep 50", &marker], "limits": {"wall_time": "60s"}});
    let request = std::thread::spawn(move || {
        rt.block_on(async {
            let _ = client()
                .post(url)
                .bearer_auth(token)
                .json(&body)
                .timeout(Duration::from_secs(90))
                .send()
                .await;
        })
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    while host_procs_with(&marker).is_empty() {
        assert!(Instant::now() < deadline, "the run did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let signalled = Instant::now();
    let status = s.stop();
    assert!(status.success(), "{status}");
    // A bound far from any speed: the sleep alone would have lasted 50 s.
    assert!(
        signalled.elapsed() < Duration::from_secs(30),
        "the server waited {:?} for a run past its 2 s grace period",
        signalled.elapsed()
    );
    assert!(
        host_procs_with(&marker).is_empty(),
        "a run outlived the server"
    );
    let _ = request.join();
}

/// Through the grace period after SIGTERM the server still listens and answers: new work gets a
/// clear 503 `shutting_down` (JSON, `Retry-After`), `/health` 503 `shutting_down` (a load
/// balancer takes the node out), reads as usual, and the run in flight finishes with its real
/// result; then it stops. It used to close its socket at the signal: every new client was
/// refused (ECONNREFUSED) until the process exited.
#[test]
fn sigterm_keeps_answering_with_503_while_runs_finish() {
    let s = Server::start("shutdown_grace = \"30s\"\n", &[]);
    let marker = format!("corral_e2e_draining_{}", std::process::id());
    let rt = rt();
    let token = rt.block_on(s.token("student"));
    let (url, t) = (s.url("/run"), token.clone());
    let body = json!({"cmd": ["/bin/sh", "-c", "sleep 3; echo finished", &marker], "limits": {"wall_time": "20s"}});
    let running = rt.spawn(async move {
        let r = client().post(url).bearer_auth(t).json(&body).send().await;
        let r = r.expect("the run in flight got no answer");
        let status = r.status();
        (status, r.json::<Value>().await.unwrap())
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    while host_procs_with(&marker).is_empty() {
        assert!(Instant::now() < deadline, "the run did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: kill(2) on the server process this test started.
    unsafe {
        libc::kill(s.pid() as i32, libc::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while !s.log().contains("shutting down") {
        assert!(
            Instant::now() < deadline,
            "no shutdown logged:\n{}",
            s.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    rt.block_on(async {
        // New work: refused, clearly, and the connection closed after the answer.
        let r = client()
            .post(s.url("/run"))
            .bearer_auth(&token)
            .json(&json!({"cmd": "true"}))
            .send()
            .await
            .unwrap_or_else(|e| panic!("a request during the grace period: {e}\n{}", s.log()));
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        let retry: u64 = r.headers()[reqwest::header::RETRY_AFTER]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(retry >= 1, "Retry-After {retry}");
        assert_eq!(r.headers()[reqwest::header::CONNECTION], "close");
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["error"], "shutting_down", "{v}");
        assert!(
            v["message"].as_str().unwrap().contains("shutting down"),
            "{v}"
        );
        // A submission and an interactive session are new work too.
        let (st, v) = s.post(&token, "/submissions", json!({})).await;
        assert_eq!(st, StatusCode::SERVICE_UNAVAILABLE, "{v}");
        assert_eq!(v["error"], "shutting_down", "{v}");
        let ws = format!("ws://{}/ws?token={token}", s.addr);
        match tokio_tungstenite::connect_async(ws).await {
            Err(tokio_tungstenite::tungstenite::Error::Http(r)) => {
                assert_eq!(r.status().as_u16(), 503)
            }
            Err(e) => panic!("a WebSocket upgrade during the grace period: {e}"),
            Ok(_) => panic!("a WebSocket upgrade during the grace period was accepted"),
        }
        // /health says so with 503, for a load balancer.
        let r = reqwest::get(s.url("/health")).await.unwrap();
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        let h: Value = r.json().await.unwrap();
        assert_eq!(h["status"], "shutting_down", "{h}");
        assert_eq!(h["shutting_down"], true, "{h}");
        assert_eq!(h["runs_in_flight"], 1, "{h}");
        // Reads are answered as usual.
        let r = reqwest::get(s.url("/metrics")).await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        // The run in flight ends with its real result.
        let (st, r) = running.await.unwrap();
        assert_eq!(st, StatusCode::OK, "{r}\n{}", s.log());
        assert_eq!(r["status"], "ok", "{r}");
        assert_eq!(r["stdout"], "finished\n", "{r}");
    });
    // Then it stops by itself, well before its 30 s grace period ends.
    let done = Instant::now();
    let (status, log) = s.stop_with_log();
    assert!(status.success(), "exit status {status}\n{log}");
    assert!(
        done.elapsed() < Duration::from_secs(15),
        "it took {:?} to stop after its work was done\n{log}",
        done.elapsed()
    );
}

#[test]
fn held_sandboxes_are_bounded_least_recently_used_first() {
    let s = Server::start("max_sandboxes = 3\nmax_sandboxes_per_caller = 2\n", &[]);
    rt().block_on(async {
        let a = s.token("student").await;
        let b = s.token("student").await;
        let mut ids = Vec::new();
        for _ in 0..3 {
            let r = s.run_ok(&a, json!({"cmd": "true"})).await;
            ids.push(r["sandbox"].as_str().unwrap().to_string());
        }
        // a holds two: the oldest made room.
        let alive = |st: StatusCode| st == StatusCode::OK;
        let (st, _) = s
            .run(&a, json!({"cmd": "true", "sandbox": {"id": ids[0]}}))
            .await;
        assert_eq!(st, StatusCode::NOT_FOUND);
        // Touch ids[1] so that ids[2] is a's least recently used.
        let (st, _) = s
            .run(&a, json!({"cmd": "true", "sandbox": {"id": ids[1]}}))
            .await;
        assert!(alive(st));
        // b's first sandbox fits (3 in all); b's second makes the server drop the LRU idle one.
        let r = s.run_ok(&b, json!({"cmd": "true"})).await;
        assert!(r["sandbox"].is_string());
        let r = s.run_ok(&b, json!({"cmd": "true"})).await;
        assert!(r["sandbox"].is_string());
        let (st, _) = s
            .run(&a, json!({"cmd": "true", "sandbox": {"id": ids[2]}}))
            .await;
        assert_eq!(
            st,
            StatusCode::NOT_FOUND,
            "the least recently used sandbox is dropped"
        );
        let (st, _) = s
            .run(&a, json!({"cmd": "true", "sandbox": {"id": ids[1]}}))
            .await;
        assert!(alive(st));
        assert_eq!(s.health().await["held_sandboxes"], 3);
    });
}

#[test]
fn uploads_past_retention_are_deleted() {
    let s = Server::start("retention = \"2s\"\n", &[]);
    rt().block_on(async {
        let t = s.token("student").await;
        let id = s.upload(&t, &[("old.txt", b"soon gone")]).await;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let st = client()
                .get(s.url(&format!("/uploads/{id}")))
                .bearer_auth(&t)
                .send()
                .await
                .unwrap()
                .status();
            if st == StatusCode::NOT_FOUND {
                break;
            }
            assert_eq!(st, StatusCode::OK);
            assert!(
                Instant::now() < deadline,
                "the upload outlived its retention"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        // Its blob went with it.
        let blobs: Vec<_> = walk(&s.data.join("blobs"));
        assert!(blobs.is_empty(), "blobs left: {blobs:?}");
    });
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            if e.file_name() != "tmp" {
                out.extend(walk(&p));
            }
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn a_terminal_run_over_websocket_shows_an_unflushed_c_prompt() {
    let s = Server::start("", &[]);
    rt().block_on(async {
        let t = s.token("student").await;
        // printf without a newline and no fflush: only a terminal shows the prompt before input.
        let prog = "#include <stdio.h>\nint main(void){char n[64]; printf(\"Name: \"); if(scanf(\"%63s\", n)!=1) return 2; printf(\"hello, %s\\n\", n); return 0;}\n";
        let id = s.upload(&t, &[("hello.c", prog.as_bytes())]).await;
        let r = s.run_ok(&t, json!({"cmd": "cc -o hello hello.c", "sandbox": {"homedir": id}})).await;
        let sandbox = r["sandbox"].as_str().unwrap().to_string();
        let mut ws = ws_connect(&s, &t).await;
        ws_send(
            &mut ws,
            json!({"type": "run", "cmd": "./hello", "sandbox": {"id": sandbox}, "tty": {"cols": 100, "rows": 30}}),
        )
        .await;
        let (out, _) = ws_until(&mut ws, "the stdin event", |m| m["type"] == "stdin").await;
        assert_eq!(out, "Name: ", "the prompt must arrive before any input");
        ws_send(&mut ws, json!({"type": "resize", "cols": 120, "rows": 40})).await;
        ws_send(&mut ws, json!({"type": "stdin", "data": "Ada\n"})).await;
        let (out, exit) = ws_until(&mut ws, "exit", |m| m["type"] == "exit").await;
        // The terminal echoes the typed line; lines end with CR LF.
        assert_eq!(out, "Ada\r\nhello, Ada\r\n");
        assert_eq!(exit["status"], "ok", "{exit}");
        // The terminal's size is what the client set.
        ws_send(&mut ws, json!({"type": "run", "cmd": "stty size", "sandbox": {"id": sandbox}, "tty": {"cols": 91, "rows": 17}})).await;
        let (out, _) = ws_until(&mut ws, "exit", |m| m["type"] == "exit").await;
        assert_eq!(out, "17 91\r\n");
    });
}

#[test]
fn a_run_can_ask_for_a_stricter_seccomp_profile() {
    let s = Server::start("", &[]);
    rt().block_on(async {
        let t = s.token("student").await;
        // A simple command still starts (exec'd without the shell); the shell's fork is stopped.
        let v = s
            .run_ok(&t, json!({"cmd": "echo hi", "seccomp": "no_spawn+no_sockets"}))
            .await;
        assert_eq!(v["status"], "ok", "{v}");
        assert_eq!(v["stdout"], "hi\n");
        let v = s
            .run_ok(&t, json!({"cmd": "true | true", "seccomp": "no_spawn"}))
            .await;
        assert_eq!(v["status"], "blocked_syscall", "{v}");
        assert_eq!(v["blocked_syscall"], "clone", "{v}");
        let v = s
            .run_ok(
                &t,
                json!({"cmd": ["python3", "-c", "import socket; socket.socket()"], "seccomp": "no_sockets"}),
            )
            .await;
        assert_eq!(v["blocked_syscall"], "socket", "{v}");
        let r = client()
            .post(s.url("/run"))
            .bearer_auth(&t)
            .json(&json!({"cmd": "true", "seccomp": "no_forks"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
        let v: Value = r.json().await.unwrap();
        assert!(v.to_string().contains("unknown seccomp profile"), "{v}");
    });
}

/// With its PostgreSQL down, a node says so: `/health` is 503 `store_unreachable` (it answered
/// 200 `ok`, so a load balancer kept sending work) once its last probe, reused for a second, is
/// stale; a request that needs the store is a quick 503 to retry (it waited 30 s for the pool,
/// then answered 500; later 5 s); with the database back, all is well again. A private cluster
/// of its own, stopped and started by the test.
#[test]
fn a_node_whose_database_is_down_says_so() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let pg = tempfile::tempdir().unwrap();
    let cluster = |arg: Option<&str>| -> String {
        let mut c = std::process::Command::new(root.join("scripts/pg-test-cluster"));
        c.env("CORRAL_PG_DIR", pg.path().join("pg"));
        if let Some(a) = arg {
            c.arg(a);
        }
        let out = c.output().expect("scripts/pg-test-cluster");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    // Stops the cluster however the test ends.
    struct Stop<F: Fn()>(F);
    impl<F: Fn()> Drop for Stop<F> {
        fn drop(&mut self) {
            (self.0)()
        }
    }
    let url = cluster(None);
    let _stop = Stop(|| {
        cluster(Some("stop"));
    });
    let s = Server::start(
        &format!("database_url = \"{url}\"\n[submissions]\nworkers = 0\n"),
        &[],
    );
    rt().block_on(async {
        let health = || async {
            let r = reqwest::get(s.url("/health")).await.unwrap();
            (r.status(), r.json::<Value>().await.unwrap())
        };
        let (st, h) = health().await;
        assert_eq!((st, &h["status"]), (StatusCode::OK, &json!("ok")), "{h}");
        cluster(Some("stop"));
        // The probe's answer is reused for a second (health is polled often; the probe writes).
        let deadline = Instant::now() + Duration::from_secs(4);
        let (st, h) = loop {
            let (st, h) = health().await;
            if st != StatusCode::OK || Instant::now() > deadline {
                break (st, h);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(st, StatusCode::SERVICE_UNAVAILABLE, "{h}");
        assert_eq!(h["status"], "store_unreachable", "{h}");
        // A token the node has not seen: its lookup needs the store.
        let asked = Instant::now();
        let r = client()
            .get(s.url("/whoami"))
            .bearer_auth("corral_not_a_token_of_this_node")
            .send()
            .await
            .unwrap();
        let (st, took) = (r.status(), asked.elapsed());
        let v: Value = r.json().await.unwrap_or(Value::Null);
        assert_eq!(st, StatusCode::SERVICE_UNAVAILABLE, "{v}\n{}", s.log());
        assert_eq!(v["error"], "overloaded", "{v}");
        assert!(took < Duration::from_secs(2), "answered after {took:?}");
        cluster(None);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let (st, h) = health().await;
            if st == StatusCode::OK {
                assert_eq!(h["status"], "ok", "{h}");
                break;
            }
            assert!(
                Instant::now() < deadline,
                "still {st} after the database came back: {h}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
}
