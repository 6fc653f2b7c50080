//! Servers sharing one database each keep their own sandboxes between runs; a load balancer may
//! send a follow-up to any of them. Across two API nodes on one PostgreSQL database: a `/run`
//! (and a `DELETE`) naming the other node's sandbox is sent on to it and answered from it, as
//! that sandbox's owner only; a WebSocket run there is told where it is; once the node stopped,
//! its sandbox's follow-ups say so (at once when it was killed: its address refuses them). On one SQLite server, a restart says the same.

#[path = "../../store/tests/support/mod.rs"]
mod pg_support;
mod server_support;

use reqwest::StatusCode;
use serde_json::{json, Value};
use server_support::*;

/// The node id a server logs as it starts serving (just after it says where it listens).
fn node_id(s: &Server) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let log = loop {
        let log = s.log();
        if log.contains("this server's node") || std::time::Instant::now() > deadline {
            break log;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let line = log
        .lines()
        .find(|l| l.contains("this server's node"))
        .unwrap_or_else(|| panic!("no node line in the log:\n{log}"));
    let id = line
        .split("node=")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap();
    id.trim_matches('"').to_string()
}

/// The messages until one `until` accepts, as text (the socket's run goes on).
async fn ws_until(ws: &mut Ws, until: impl Fn(&Value) -> bool) -> String {
    let mut seen = String::new();
    loop {
        let m = ws_next(ws).await;
        seen.push_str(&format!("{m}\n"));
        assert_ne!(m["type"], "exit", "{seen}");
        if until(&m) {
            return seen;
        }
    }
}

/// The socket's run's `exit` message (what came before it skipped).
async fn ws_exit(ws: &mut Ws) -> Value {
    loop {
        let m = ws_next(ws).await;
        if m["type"] == "exit" || m["type"] == "error" {
            return m;
        }
    }
}

/// DELETE /sandboxes/{id}: the status, and the forwarding header of the answer.
async fn delete(s: &Server, token: &str, id: &str) -> (StatusCode, Option<String>) {
    let r = reqwest::Client::new()
        .delete(s.url(&format!("/sandboxes/{id}")))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    let by = r
        .headers()
        .get("corral-forwarded-by")
        .map(|v| v.to_str().unwrap().to_string());
    (r.status(), by)
}

/// A fresh PostgreSQL database and a blob folder for two nodes: the configuration they share,
/// the database's name (to drop at the end) and the folder (kept while it lives).
async fn shared_database() -> (String, String, tempfile::TempDir) {
    let (db_url, db_name) = pg_support::fresh_postgres_database().await;
    let blobs = tempfile::tempdir().unwrap();
    let cfg = format!(
        "database_url = \"{db_url}\"\nblobs_dir = \"{}\"\n",
        blobs.path().display()
    );
    (cfg, db_name, blobs)
}

#[test]
fn a_follow_up_on_another_node_continues_in_the_sandbox_that_node_keeps() {
    rt().block_on(async {
        let (cfg, db_name, _blobs) = shared_database().await;
        let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let a = Server::start_in(da.path(), &cfg, &[]);
        let b = Server::start_in(db.path(), &cfg, &[]);
        let (node_a, node_b) = (node_id(&a), node_id(&b));
        assert_ne!(node_a, node_b);
        assert_eq!(a.health().await["node"], node_a.as_str());
        let alice = a.token("student").await;
        let mallory = a.token("student").await;

        // Made on A: its id names A.
        let first = a
            .run_ok(
                &alice,
                json!({"cmd": "echo kept-on-a > note; echo $$ > pid"}),
            )
            .await;
        let id = first["sandbox"].as_str().unwrap().to_string();
        assert!(
            id.starts_with(&format!("{node_a}-")),
            "{id} is not of node {node_a}"
        );

        // Continued through B: sent on to A, the same working directory and the same sandbox.
        let (st, v) = b
            .run(&alice, json!({"cmd": "cat note", "sandbox": {"id": id}}))
            .await;
        assert_eq!(st, StatusCode::OK, "{v}\nB:\n{}\nA:\n{}", b.log(), a.log());
        assert_eq!(v["stdout"], "kept-on-a\n", "{v}");
        assert_eq!(v["sandbox"], id.as_str(), "{v}");

        // Another caller's request is sent on too, and A refuses it as it refuses its own.
        let (st, v) = b
            .run(&mallory, json!({"cmd": "cat note", "sandbox": {"id": id}}))
            .await;
        assert_eq!(st, StatusCode::NOT_FOUND, "{v}");
        assert_eq!(delete(&b, &mallory, &id).await.0, StatusCode::NOT_FOUND);

        // A WebSocket's run in A's sandbox through B: relayed to A, input and output both ways,
        // its exit naming the sandbox; the socket then runs on B as before.
        let mut ws = ws_connect(&b, &alice).await;
        ws_send(
            &mut ws,
            json!({"type": "run", "cmd": "cat note; cat", "sandbox": {"id": id}}),
        )
        .await;
        let seen = ws_until(&mut ws, |m| m["type"] == "stdin").await;
        assert!(seen.contains("kept-on-a"), "{seen}");
        ws_send(
            &mut ws,
            json!({"type": "stdin", "data": "typed\n", "eof": true}),
        )
        .await;
        let exit = ws_exit(&mut ws).await;
        assert_eq!(
            (&exit["code"], &exit["stdout"], &exit["sandbox"]),
            (&json!(0), &json!("kept-on-a\ntyped\n"), &json!(id)),
            "{exit}\nB:\n{}",
            b.log()
        );
        // An exit larger than a client's message may be (its output JSON-escaped: 600,000
        // control bytes are 3.6 MB) comes through whole.
        ws_send(
            &mut ws,
            json!({"type": "run", "cmd": "head -c 600000 /dev/zero | tr '\\0' '\\1'", "sandbox": {"id": id}}),
        )
        .await;
        let exit = ws_exit(&mut ws).await;
        assert_eq!(
            exit["stdout"].as_str().map(str::len),
            Some(600_000),
            "{}",
            exit.to_string().chars().take(300).collect::<String>()
        );
        ws_send(&mut ws, json!({"type": "run", "cmd": "echo on-b"})).await;
        let exit = ws_exit(&mut ws).await;
        assert_eq!(exit["stdout"], "on-b\n", "{exit}");
        assert!(
            exit["sandbox"].as_str().unwrap().starts_with(&node_b),
            "{exit}"
        );
        // Another caller's run there: A refuses it as its own, and B says so.
        let mut other = ws_connect(&b, &mallory).await;
        ws_send(
            &mut other,
            json!({"type": "run", "cmd": "cat note", "sandbox": {"id": id}}),
        )
        .await;
        let m = ws_next(&mut other).await;
        assert_eq!(
            (&m["type"], &m["error"]),
            (&json!("error"), &json!("not_found")),
            "{m}"
        );
        // Closing B's socket during a relayed run ends the run on A: its sandbox is free again.
        ws_send(
            &mut ws,
            json!({"type": "run", "cmd": "echo started; sleep 60", "sandbox": {"id": id}}),
        )
        .await;
        ws_until(&mut ws, |m| m["type"] == "stdout").await;
        drop(ws);
        let started = std::time::Instant::now();
        loop {
            let (st, v) = a
                .run(&alice, json!({"cmd": "true", "sandbox": {"id": id}}))
                .await;
            if st == StatusCode::OK {
                break;
            }
            assert!(
                started.elapsed() < std::time::Duration::from_secs(20),
                "A's sandbox stays busy after B's socket closed: {st} {v}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }

        // Deleted through B: gone on A.
        assert_eq!(
            delete(&b, &alice, &id).await,
            (StatusCode::NO_CONTENT, Some(node_a.clone()))
        );
        let (st, v) = a
            .run(&alice, json!({"cmd": "true", "sandbox": {"id": id}}))
            .await;
        assert_eq!(st, StatusCode::NOT_FOUND, "{v}");

        // A sandbox of B's, then B stops: A says the sandbox ended with its server.
        let on_b = b.run_ok(&alice, json!({"cmd": "true"})).await;
        let id_b = on_b["sandbox"].as_str().unwrap().to_string();
        assert!(id_b.starts_with(&format!("{node_b}-")), "{id_b}");
        let (st, v) = a
            .run(&alice, json!({"cmd": "true", "sandbox": {"id": id_b}}))
            .await;
        assert_eq!(st, StatusCode::OK, "{v}");
        assert!(b.stop().success());
        // A's reading of B's row is at most 2 s old.
        tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
        let (st, v) = a
            .run(&alice, json!({"cmd": "true", "sandbox": {"id": id_b}}))
            .await;
        assert_eq!(st, StatusCode::NOT_FOUND, "{v}");
        let msg = v["message"].as_str().unwrap();
        assert!(msg.contains(&node_b) && msg.contains("stopped"), "{v}");

        // A node killed (no stop written, its heartbeat still fresh): its address refuses
        // connections, which says at once that its sandboxes are gone, not "try again".
        let dc = tempfile::tempdir().unwrap();
        let c = Server::start_in(dc.path(), &cfg, &[]);
        let node_c = node_id(&c);
        let on_c = c.run_ok(&alice, json!({"cmd": "true"})).await;
        let id_c = on_c["sandbox"].as_str().unwrap().to_string();
        let (st, v) = a
            .run(&alice, json!({"cmd": "true", "sandbox": {"id": id_c}}))
            .await;
        assert_eq!(st, StatusCode::OK, "{v}");
        c.kill();
        let (st, v) = a
            .run(&alice, json!({"cmd": "true", "sandbox": {"id": id_c}}))
            .await;
        assert_eq!(st, StatusCode::NOT_FOUND, "{v}");
        let msg = v["message"].as_str().unwrap();
        assert!(msg.contains(&node_c) && msg.contains("refused"), "{v}");
        assert_eq!(delete(&a, &alice, &id_c).await.0, StatusCode::NOT_FOUND);
        drop(a);
        pg_support::drop_postgres_database(&db_name).await;
    });
}

/// A request waiting for a submission (`?wait=true`) on one node is answered when another node
/// judges it: the store tells every node of each finished job (PostgreSQL `NOTIFY`), and only
/// that job's waiters look. Node A has no workers; node B starts after A's request waits, so the
/// verdict comes from B while A waits. The wait (25 s) is shorter than A's own look-again
/// interval (30 s): only the notice can end it before its timeout. (Before, every waiter read the
/// database every 200 ms.)
#[test]
fn a_submission_waited_for_on_one_node_is_answered_when_another_judges_it() {
    rt().block_on(async {
        let (cfg, db_name, _blobs) = shared_database().await;
        let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let a = Server::start_in(da.path(), &format!("{cfg}[submissions]\nworkers = 0\n"), &[]);
        let alice = a.token("student").await;
        let (st, v) = a
            .post(
                &alice,
                "/submissions",
                json!({"language": "python", "source_code": "print(42)\n", "expected_output": "42\n"}),
            )
            .await;
        assert_eq!(st, StatusCode::ACCEPTED, "{v}");
        let id = v["id"].as_str().unwrap().to_string();
        let asked = std::time::Instant::now();
        let waiting = {
            let (url, alice) = (a.url(&format!("/submissions/{id}?wait=true&timeout=25")), alice.clone());
            tokio::spawn(async move {
                let r = reqwest::Client::new().get(url).bearer_auth(alice).send().await.unwrap();
                (r.status(), r.json::<Value>().await.unwrap())
            })
        };
        // A has read the job as queued and waits; then B comes up and judges it.
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        assert!(!waiting.is_finished());
        let b = Server::start_in(db.path(), &cfg, &[]);
        let (st, v) = waiting.await.unwrap();
        assert_eq!(st, StatusCode::OK, "{v}");
        // At its 25 s timeout the wait answers whatever the job is (by then judged too): the
        // answer must have come well before, when B's verdict was told.
        assert!(
            asked.elapsed() < std::time::Duration::from_secs(20),
            "A's waiter was answered at its timeout, not when B judged: {v}"
        );
        assert_eq!(
            (&v["status"], &v["verdict"]),
            (&json!("done"), &json!("accepted")),
            "A's waiter was not told of B's verdict: {v}\nA:\n{}\nB:\n{}",
            a.log(),
            b.log()
        );
        drop((a, b));
        pg_support::drop_postgres_database(&db_name).await;
    });
}

#[test]
fn a_sandbox_kept_before_a_restart_is_said_to_have_ended_with_it() {
    let data = tempfile::tempdir().unwrap();
    let s = Server::start_in(data.path(), "", &[]);
    let admin = s.admin.clone();
    let (id, token) = rt().block_on(async {
        let t = s.token("student").await;
        let v = s.run_ok(&t, json!({"cmd": "true"})).await;
        (v["sandbox"].as_str().unwrap().to_string(), t)
    });
    let old = node_id(&s);
    assert!(s.stop().success());
    let mut s = Server::start_in(data.path(), "", &[]);
    s.admin = admin;
    assert_ne!(node_id(&s), old);
    rt().block_on(async {
        let (st, v) = s
            .run(&token, json!({"cmd": "true", "sandbox": {"id": id}}))
            .await;
        assert_eq!(st, StatusCode::NOT_FOUND, "{v}");
        assert_eq!(v["error"], "not_found", "{v}");
        let msg = v["message"].as_str().unwrap();
        assert!(msg.contains(&old) && msg.contains("stopped"), "{v}");
    });
}

/// A server whose `blobs_dir` is not the folder the others sharing its database write says so
/// at its start (every upload they stored would be `files_lost` there, with nothing to say
/// why); servers that share it say nothing.
#[test]
fn a_server_with_its_own_blobs_dir_says_so_at_its_start() {
    rt().block_on(async {
        let (cfg, db_name, blobs) = shared_database().await;
        let (da, db, dc) = (
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
        );
        let a = Server::start_in(da.path(), &cfg, &[]);
        let node_a = node_id(&a);
        let b = Server::start_in(db.path(), &cfg, &[]);
        node_id(&b);
        let own = tempfile::tempdir().unwrap();
        let cfg_c = cfg.replace(
            &blobs.path().display().to_string(),
            &own.path().display().to_string(),
        );
        assert_ne!(cfg_c, cfg);
        let c = Server::start_in(dc.path(), &cfg_c, &[]);
        node_id(&c);
        let warned = |s: &Server| s.log().contains("blobs_dir is not the folder");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !warned(&c) && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        let log = c.log();
        let line = log
            .lines()
            .find(|l| l.contains("blobs_dir is not the folder"))
            .unwrap_or_else(|| panic!("no warning:\n{log}"));
        assert!(line.contains(&node_a), "{line}");
        assert!(
            !warned(&a) && !warned(&b),
            "A:\n{}\nB:\n{}",
            a.log(),
            b.log()
        );
        drop((a, b, c));
        pg_support::drop_postgres_database(&db_name).await;
    });
}
