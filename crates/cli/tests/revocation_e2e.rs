//! A revoked token stops working on connections opened before the revocation, within a second
//! and a half: a WebSocket's run is killed and the socket closed (1008 "token revoked"), a
//! `?wait` long-poll answers 401, a worker's claim long-poll answers 401 and its job's heartbeat
//! and result are refused, and `corral worker` stops. The jobs a revoked worker token's workers
//! hold go back to the queue at once (the claim not counted), whether it is revoked over the API
//! or with `corral token revoke`: another worker finishes them long before their leases would
//! have ended. Across two API nodes sharing one PostgreSQL database, a revocation on one node
//! closes a socket held by the other.

#[path = "../../store/tests/support/mod.rs"]
mod pg_support;
mod server_support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use reqwest::StatusCode;
use serde_json::{json, Value};
use server_support::*;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::Message;

/// How soon a revocation must reach an open connection (the watch polls every 250 ms).
const WITHIN: Duration = Duration::from_millis(1500);

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

async fn revoke(s: &Server, admin: &str, id: &str) {
    let r = client()
        .delete(s.url(&format!("/tokens/{id}")))
        .bearer_auth(admin)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "revoking: {}", r.status());
}

/// A submission's audit trail as `(kind, worker)`, read from the server's store (SQLite in its
/// data folder).
async fn events(s: &Server, id: &str) -> Vec<(String, Option<String>)> {
    let url = format!("sqlite://{}", s.data.join("corral.db").display());
    let store = corral_store::open(&url, &s.data.join("blobs"))
        .await
        .unwrap();
    let events = store.job_events(id).await.unwrap();
    store.close().await;
    events.into_iter().map(|e| (e.kind, e.worker)).collect()
}

/// A `sleep` whose command line no other test shares.
fn unique_sleep(tag: &str) -> String {
    format!(
        "300.{}{}",
        std::process::id(),
        tag.bytes()
            .map(|b| (b % 10).to_string())
            .collect::<String>()
    )
}

/// Waits until a host process's command line holds `needle`.
fn wait_for_proc(needle: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while host_procs_with(needle).is_empty() {
        assert!(Instant::now() < deadline, "the run never started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Opens a socket on `on` with `token`, starts a long `sleep`, revokes the token on `admin_node`,
/// and checks the socket is closed (1008) and the program gone within [`WITHIN`].
async fn revoked_socket_is_closed(on: &Server, admin_node: &Server, token: &str, id: &str) {
    let secs = unique_sleep(&on.addr);
    let needle = format!("sleep {secs}");
    let (mut ws, _) =
        tokio_tungstenite::connect_async(format!("ws://{}/ws?token={token}", on.addr))
            .await
            .expect("WebSocket connect");
    ws.send(Message::Text(
        json!({"type": "run", "cmd": ["sleep", secs]})
            .to_string()
            .into(),
    ))
    .await
    .unwrap();
    tokio::task::spawn_blocking({
        let needle = needle.clone();
        move || wait_for_proc(&needle)
    })
    .await
    .unwrap();
    let revoked_at = Instant::now();
    revoke(admin_node, &admin_node.admin, id).await;
    let mut told = false;
    let close = loop {
        let left = WITHIN.saturating_sub(revoked_at.elapsed());
        let m = tokio::time::timeout(left, ws.next())
            .await
            .expect("the socket was still open 1.5 s after the revocation");
        match m {
            Some(Ok(Message::Text(t))) => {
                let v: Value = serde_json::from_str(&t).unwrap();
                if v["type"] == "error" {
                    assert_eq!(v["error"], "token_revoked", "{v}");
                    told = true;
                }
            }
            Some(Ok(Message::Close(frame))) => break frame,
            Some(Ok(_)) => {}
            Some(Err(e)) => panic!("WebSocket error instead of a close: {e}"),
            None => panic!("the socket ended without a close frame"),
        }
    };
    assert!(told, "no token_revoked message before the close");
    let frame = close.expect("a close frame with a reason");
    assert_eq!(frame.code, CloseCode::Policy);
    assert_eq!(frame.reason.as_str(), "token revoked");
    while !host_procs_with(&needle).is_empty() {
        assert!(
            revoked_at.elapsed() < WITHIN,
            "the run outlived the revocation: {:?}",
            host_procs_with(&needle)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // And the token opens nothing new.
    let r = tokio_tungstenite::connect_async(format!("ws://{}/ws?token={token}", on.addr)).await;
    assert!(r.is_err(), "a revoked token opened a socket");
}

#[test]
fn a_revoked_token_closes_its_websocket_and_kills_its_run() {
    let s = Server::start("", &[]);
    rt().block_on(async {
        let (t, id) = s.token_with_id("student").await;
        revoked_socket_is_closed(&s, &s, &t, &id).await;
    });
}

#[test]
fn a_revocation_on_one_node_closes_a_socket_held_by_another() {
    rt().block_on(async {
        let (db_url, db_name) = pg_support::fresh_postgres_database().await;
        let cfg = format!("database_url = \"{db_url}\"\n");
        let blobs = tempfile::tempdir().unwrap();
        let cfg = format!("{cfg}blobs_dir = \"{}\"\n", blobs.path().display());
        let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let a = Server::start_in(da.path(), &cfg, &[]);
        let b = Server::start_in(db.path(), &cfg, &[]);
        let (t, id) = a.token_with_id("student").await;
        // Opened on B, revoked on A.
        revoked_socket_is_closed(&b, &a, &t, &id).await;
        drop((a, b));
        pg_support::drop_postgres_database(&db_name).await;
    });
}

#[test]
fn a_revoked_token_ends_its_wait_for_a_submission() {
    // No workers: the submission stays queued and the wait would last its whole timeout.
    let s = Server::start("[submissions]\nworkers = 0\n", &[]);
    rt().block_on(async {
        let (t, id) = s.token_with_id("student").await;
        let (st, v) = s
            .post_lenient(&t, "/submissions", json!({"cmd": ["true"]}))
            .await;
        assert_eq!(st, StatusCode::ACCEPTED, "{v}");
        let sub = v["id"].as_str().unwrap().to_string();
        let wait = tokio::spawn({
            let url = s.url(&format!("/submissions/{sub}?wait=true&timeout=30"));
            let t = t.clone();
            async move {
                let r = client().get(url).bearer_auth(t).send().await.unwrap();
                (Instant::now(), r.status(), r.text().await.unwrap())
            }
        });
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(!wait.is_finished(), "the wait ended early");
        let revoked_at = Instant::now();
        revoke(&s, &s.admin, &id).await;
        let (ended, status, body) = tokio::time::timeout(WITHIN, wait)
            .await
            .expect("the wait outlived the revocation by 1.5 s")
            .unwrap();
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
        assert!(body.contains("revoked"), "{body}");
        assert!(ended.duration_since(revoked_at) < WITHIN);
    });
}

#[test]
fn a_revoked_worker_token_loses_its_claim_its_job_and_its_worker() {
    // A lease longer than the test: the job can only come back by the revocation.
    let s = Server::start("[submissions]\nworkers = 0\nlease = \"10m\"\n", &[]);
    rt().block_on(async {
        let student = s.token("student").await;
        let (w, wid) = s.token_with_id("worker").await;
        let (st, v) = s
            .post_lenient(&student, "/submissions", json!({"cmd": ["true"]}))
            .await;
        assert_eq!(st, StatusCode::ACCEPTED, "{v}");
        let sub = v["id"].as_str().unwrap().to_string();
        // The worker holds the job, then long-polls for another.
        let (st, job) = s
            .post_lenient(&w, "/worker/claim", json!({"worker": "w", "wait": 5}))
            .await;
        assert_eq!(st, StatusCode::OK, "{job}");
        assert_eq!(job["id"], sub.as_str());
        let lease = job["lease"].as_str().unwrap().to_string();
        let poll = tokio::spawn({
            let (s_url, w) = (s.url("/worker/claim"), w.clone());
            async move {
                let r = client()
                    .post(s_url)
                    .bearer_auth(w)
                    .json(&json!({"worker": "w", "wait": 25}))
                    .send()
                    .await
                    .unwrap();
                (Instant::now(), r.status())
            }
        });
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(!poll.is_finished(), "the claim ended early");
        let revoked_at = Instant::now();
        revoke(&s, &s.admin, &wid).await;
        let (ended, status) = tokio::time::timeout(WITHIN, poll)
            .await
            .expect("the claim outlived the revocation by 1.5 s")
            .unwrap();
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert!(ended.duration_since(revoked_at) < WITHIN);
        // Its job's heartbeat and result are refused.
        let (st, _) = s
            .post_lenient(
                &w,
                &format!("/worker/jobs/{sub}/heartbeat"),
                json!({"lease": lease}),
            )
            .await;
        assert_eq!(st, StatusCode::UNAUTHORIZED);
        let (st, _) = s
            .post_lenient(
                &w,
                &format!("/worker/jobs/{sub}/result"),
                json!({"lease": lease, "verdict": {}}),
            )
            .await;
        assert_eq!(st, StatusCode::UNAUTHORIZED);
        // The job went back to the queue with the revocation, the claim not counted: another
        // worker gets it now, as its first attempt (it used to wait for the lease to end, and
        // count it).
        let (w2, w2id) = s.token_with_id("worker").await;
        let (st, again) = s
            .post_lenient(&w2, "/worker/claim", json!({"worker": "w2", "wait": 10}))
            .await;
        assert_eq!(st, StatusCode::OK, "{again}");
        assert_eq!(again["id"], sub.as_str());
        assert_eq!(again["attempt"], 1);
        let w1 = corral_store::remote_worker(&wid, "w");
        let w2 = corral_store::remote_worker(&w2id, "w2");
        assert_eq!(
            events(&s, &sub).await,
            [
                ("queued".to_string(), None),
                ("claimed".to_string(), Some(w1.clone())),
                ("released".to_string(), Some(w1)),
                ("claimed".to_string(), Some(w2)),
            ]
        );

        // A running `corral worker` whose token is revoked stops, saying why.
        let (w3, w3id) = s.token_with_id("worker").await;
        let mut child = Command::new(env!("CARGO_BIN_EXE_corral"))
            .args(["worker", "--server", &s.base, "--name", "revoked"])
            .env("CORRAL_WORKER_TOKEN", &w3)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start corral worker");
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(
            child.try_wait().unwrap().is_none(),
            "the worker stopped early"
        );
        revoke(&s, &s.admin, &w3id).await;
        let deadline = Instant::now() + Duration::from_secs(10);
        let status = loop {
            if let Some(st) = child.try_wait().unwrap() {
                break st;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("the worker kept running with a revoked token");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        assert!(!status.success(), "{err}");
        assert!(err.contains("revoked"), "{err}");
    });
}

/// A child process killed when the test ends, however it ends.
struct Reaped(Logged);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.child.kill();
        let _ = self.0.child.wait();
    }
}

/// A real `corral worker` judging a slow job loses it when its token is revoked with `corral
/// token revoke` (the store, not the API): the job is queued again in the same step and another
/// worker finishes it, while the first one's lease (10 minutes) would still have run; the first
/// worker's result, sent when its run ends, is refused, and it exits saying its token was
/// refused.
#[test]
fn a_job_held_by_a_revoked_worker_is_finished_by_another_at_once() {
    let s = Server::start("[submissions]\nworkers = 0\nlease = \"10m\"\n", &[]);
    rt().block_on(async {
        let student = s.token("student").await;
        let (t1, id1) = s.token_with_id("worker").await;
        let (t2, id2) = s.token_with_id("worker").await;
        let worker = |token: &str, name: &str| {
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_corral"));
            cmd.args(["worker", "--server", &s.base, "--name", name])
                .env("CORRAL_WORKER_TOKEN", token)
                .env("CORRAL_LOG", "info");
            Reaped(Logged::spawn(cmd))
        };
        let mut first = worker(&t1, "revoked");
        let (st, v) = s
            .post_lenient(
                &student,
                "/submissions",
                json!({"cmd": "sleep 4; echo done", "expected_output": "done"}),
            )
            .await;
        assert_eq!(st, StatusCode::ACCEPTED, "{v}");
        let sub = v["id"].as_str().unwrap().to_string();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let (_, v) = s.get(&student, &format!("/submissions/{sub}")).await;
            if v["status"] == "running" {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "never claimed: {v}\n{}",
                first.0.log.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let second = worker(&t2, "rescuer");
        corral_testkit::succeed(
            Command::new(env!("CARGO_BIN_EXE_corral"))
                .args(["token", "revoke", "--data"])
                .arg(&s.data)
                .arg(&id1),
        );
        let v = s
            .finished(&student, &sub, Duration::from_secs(120), || {
                format!("second worker:\n{}", second.0.log.lock().unwrap())
            })
            .await;
        assert_eq!(v["verdict"], "accepted", "{v}");
        assert_eq!(v["attempts"], 1, "the revoked claim is not counted: {v}");
        let (w1, w2) = (
            corral_store::remote_worker(&id1, "revoked/0"),
            corral_store::remote_worker(&id2, "rescuer/0"),
        );
        assert_eq!(v["worker"], w2.as_str(), "{v}");
        // The first worker ends its run, its result is refused, and it stops.
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(st) = first.0.child.try_wait().unwrap() {
                break st;
            }
            assert!(
                Instant::now() < deadline,
                "the revoked worker kept running:\n{}",
                first.0.log.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert!(!status.success(), "{}", first.0.log.lock().unwrap());
        let (_, after) = s.get(&student, &format!("/submissions/{sub}")).await;
        assert_eq!(after["worker"], w2.as_str(), "{after}");
        assert_eq!(after["finished_at"], v["finished_at"], "{after}");
        let kinds: Vec<(String, Option<String>)> = events(&s, &sub).await;
        assert_eq!(
            kinds,
            [
                ("queued".to_string(), None),
                ("claimed".to_string(), Some(w1.clone())),
                ("released".to_string(), Some(w1)),
                ("claimed".to_string(), Some(w2.clone())),
                ("completed".to_string(), Some(w2)),
            ],
            "first worker:\n{}",
            first.0.log.lock().unwrap()
        );
        drop(second);
    });
}
