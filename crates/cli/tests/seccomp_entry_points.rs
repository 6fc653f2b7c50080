//! A request's stricter seccomp profile at the server's other entry points than `POST /run`
//! (server_e2e covers that one): a WebSocket run and `POST /submissions` take the same `seccomp`
//! field. Hostile programs try to start processes (tests/containment/spawn.c, a shell pipeline,
//! Python's fork) and open sockets; under the profile each is stopped as `blocked_syscall` naming
//! the call, with a control run under the default profile showing the same program does escape
//! there. A submission's profile only adds to its language's own.

mod server_support;

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use server_support::*;
use tokio_tungstenite::tungstenite::Message;

/// Runs `run` (a WebSocket `run` message's fields) to its end; the `exit` message.
async fn ws_run(ws: &mut Ws, mut run: Value) -> Value {
    run["type"] = json!("run");
    ws.send(Message::Text(run.to_string().into()))
        .await
        .unwrap();
    loop {
        let m = tokio::time::timeout(Duration::from_secs(120), ws.next())
            .await
            .expect("no WebSocket message within 120 s")
            .expect("the socket closed")
            .expect("WebSocket error");
        let Message::Text(t) = m else { continue };
        let v: Value = serde_json::from_str(&t).unwrap();
        match v["type"].as_str() {
            Some("exit") | Some("error") => return v,
            _ => {}
        }
    }
}

#[track_caller]
fn assert_blocked(v: &Value, syscall: &str) {
    assert_eq!(v["status"], "blocked_syscall", "{v}");
    assert_eq!(v["blocked_syscall"], syscall, "{v}");
    assert!(
        !v["stdout"].as_str().unwrap_or("").contains("ESCAPED"),
        "{v}"
    );
}

#[test]
fn a_websocket_run_takes_a_stricter_seccomp_profile() {
    let s = Server::start("", &[]);
    rt().block_on(async {
        let t = s.token("student").await;
        // spawn.c, compiled in a sandbox the runs below continue in.
        let upload = s.upload(&t, &[("spawn.c", &containment("spawn.c"))]).await;
        let built = s
            .run_ok(
                &t,
                json!({"cmd": "cc -O1 -o spawn spawn.c -lpthread", "sandbox": {"homedir": upload}}),
            )
            .await;
        assert_eq!(built["status"], "ok", "{built}");
        let kept = built["sandbox"].as_str().unwrap().to_string();
        let mut ws = s.ws(&t).await;
        for (way, syscall) in [("fork", "clone"), ("vfork", "vfork"), ("exec", "execve")] {
            let marker = format!("corral-ws-nospawn-{way}-{}", std::process::id());
            let argv = json!(["./spawn", marker, way]);
            let v = ws_run(
                &mut ws,
                json!({"cmd": argv, "sandbox": {"id": kept}, "seccomp": "no_spawn"}),
            )
            .await;
            assert_blocked(&v, syscall);
            assert!(
                host_procs_with(&marker).is_empty(),
                "{marker} outlived its run"
            );
            // The control: the default profile lets the same program start a process.
            let v = ws_run(&mut ws, json!({"cmd": argv, "sandbox": {"id": kept}})).await;
            assert_eq!(v["status"], "ok", "{way}: {v}");
            assert!(
                v["stdout"].as_str().unwrap().contains("ESCAPED"),
                "{way}: {v}"
            );
        }
        // A shell pipeline needs new processes: its first fork is the blocked call.
        let v = ws_run(
            &mut ws,
            json!({"cmd": "true | true", "seccomp": "no_spawn"}),
        )
        .await;
        assert_blocked(&v, "clone");
        // A simple command runs without the shell under no_spawn, so it works.
        let v = ws_run(
            &mut ws,
            json!({"cmd": "echo fine", "seccomp": "no_spawn+no_sockets"}),
        )
        .await;
        assert_eq!(v["status"], "ok", "{v}");
        assert_eq!(v["stdout"], "fine\n", "{v}");
        // Sockets of any family.
        let sock = json!([
            "python3",
            "-c",
            "import socket; socket.socket(socket.AF_UNIX); print('ESCAPED')"
        ]);
        let v = ws_run(&mut ws, json!({"cmd": sock, "seccomp": "no_sockets"})).await;
        assert_blocked(&v, "socket");
        let v = ws_run(&mut ws, json!({"cmd": sock})).await;
        assert_eq!(v["status"], "ok", "{v}");
        // An unknown profile is refused before anything runs, the same way as `/run`.
        let v = ws_run(&mut ws, json!({"cmd": "true", "seccomp": "no_forks"})).await;
        assert_eq!(v["type"], "error", "{v}");
        assert_eq!(v["error"], "invalid", "{v}");
        assert!(
            v["message"]
                .as_str()
                .unwrap()
                .contains("unknown seccomp profile"),
            "{v}"
        );
        s.health().await;
    });
}

/// Submits `body` and waits for its verdict.
async fn judged(s: &Server, token: &str, body: Value) -> Value {
    let (st, v) = s.post(token, "/submissions", body.clone()).await;
    assert_eq!(st, 202, "{body}: {v}");
    s.judged(token, v["id"].as_str().unwrap()).await
}

#[track_caller]
fn assert_verdict_blocked(v: &Value, syscall: &str) {
    assert_eq!(v["verdict"], "runtime_error", "{v}");
    assert_blocked(&v["run"], syscall);
}

#[test]
fn a_submission_takes_a_stricter_seccomp_profile_on_top_of_its_languages() {
    let s = Server::start("[submissions]\nworkers = 2\n", &[]);
    rt().block_on(async {
        let t = s.token("student").await;
        // Bash's own profile is the default one: a script that runs a program works...
        let script = "ls > /dev/null && echo ESCAPED\n";
        let v = judged(&s, &t, json!({"language": "bash", "source_code": script})).await;
        assert_eq!(v["verdict"], "accepted", "{v}");
        assert!(v["run"]["stdout"].as_str().unwrap().contains("ESCAPED"), "{v}");
        // ...and is stopped at its first fork under no_spawn.
        let v = judged(
            &s,
            &t,
            json!({"language": "bash", "source_code": script, "seccomp": "no_spawn"}),
        )
        .await;
        assert_verdict_blocked(&v, "clone");

        // Python's own profile is no_sockets; the request's no_spawn adds to it, never replaces.
        let fork = "import os\nif os.fork() == 0:\n    os._exit(0)\nprint('ESCAPED')\n";
        let v = judged(&s, &t, json!({"language": "python", "source_code": fork})).await;
        assert_eq!(v["verdict"], "accepted", "{v}");
        let v = judged(
            &s,
            &t,
            json!({"language": "python", "source_code": fork, "seccomp": "no_spawn"}),
        )
        .await;
        assert_verdict_blocked(&v, "clone");
        let sock = "import socket\nsocket.socket(socket.AF_INET6)\nprint('ESCAPED')\n";
        let v = judged(
            &s,
            &t,
            json!({"language": "python", "source_code": sock, "seccomp": "no_spawn"}),
        )
        .await;
        assert_verdict_blocked(&v, "socket");

        // A command: the same profile for its program.
        let cmd = json!(["python3", "-c", "import os; os.fork(); print('ESCAPED')"]);
        let v = judged(&s, &t, json!({"cmd": cmd, "seccomp": "no_spawn"})).await;
        assert_verdict_blocked(&v, "clone");
        let v = judged(&s, &t, json!({"cmd": cmd})).await;
        assert_eq!(v["verdict"], "accepted", "{v}");

        // Refused at once: an unknown profile (the same 422 as `/run`), and a suite with one.
        for (body, needle) in [
            (json!({"cmd": "true", "seccomp": "allow:"}), "needs at least one syscall"),
            // A grant is configuration's (a language, suite or check), never a request's.
            (
                json!({"cmd": "true", "seccomp": "no_spawn+list_interfaces"}),
                "list_interfaces is a grant",
            ),
            (
                json!({"suite": "hello", "files": [{"path": "a", "content": "b"}], "seccomp": "no_spawn"}),
                "a suite's checks name their own",
            ),
        ] {
            let (st, v) = s.post(&t, "/submissions", body.clone()).await;
            assert_eq!(st, 422, "{body}: {v}");
            assert!(v["message"].as_str().unwrap().contains(needle), "{body}: {v}");
            let (st, run) = s.run(&t, json!({"cmd": "true", "seccomp": body["seccomp"]})).await;
            if body.get("suite").is_none() {
                assert_eq!(st, 422, "/run: {run}");
                assert_eq!(run["message"], v["message"], "the same message as /run");
            }
        }
        s.health().await;
    });
}
