//! Remote workers on loopback with the real binary: a `corral serve` with no in-process workers
//! and a `corral worker` that holds only a worker token. The worker judges languages, commands
//! and suites; the worker endpoints check roles, leases and the result's signature; a worker
//! killed with `kill -9` mid-run loses its lease and another finishes the job; a server's
//! `force_gvisor` travels with the job, so a remote worker grades a suite that names `native`
//! under gVisor. A verdict the server refuses is followed by an internal-error verdict saying
//! why, so the job ends at once rather than after its lease ran out. A worker whose token the
//! server refuses (unknown, or another role's) exits 1 saying so instead of claiming for ever.

mod server_support;

use std::process::{Child, Command};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{json, Value};
use server_support::*;

struct Worker {
    child: Child,
    log: Arc<Mutex<String>>,
}

impl Worker {
    fn start(s: &Server, token: &str, name: &str, jobs: usize) -> Worker {
        Worker::start_at(&s.base, token, name, jobs)
    }

    /// A worker that talks to `base` (the server, or a proxy in front of it).
    fn start_at(base: &str, token: &str, name: &str, jobs: usize) -> Worker {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_corral"));
        cmd.args(["worker", "--server", base, "--name", name])
            .args(["--jobs", &jobs.to_string()])
            .env("CORRAL_WORKER_TOKEN", token)
            .env("CORRAL_LOG", "info");
        let Logged { child, log, .. } = Logged::spawn(cmd);
        Worker { child, log }
    }

    fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    fn kill9(mut self) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGKILL);
        }
        let _ = self.child.wait();
    }

    /// SIGTERM: it finishes what it holds and exits 0.
    fn stop(mut self) -> std::process::ExitStatus {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st;
            }
            assert!(
                Instant::now() < deadline,
                "the worker did not stop:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn submit(s: &Server, token: &str, body: Value) -> String {
    let (st, v) = s.post_lenient(token, "/submissions", body).await;
    assert_eq!(st, StatusCode::ACCEPTED, "{v}");
    v["id"].as_str().unwrap().to_string()
}

async fn view(s: &Server, token: &str, id: &str) -> Value {
    let (st, v) = s.get(token, &format!("/submissions/{id}")).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    v
}

async fn finished(s: &Server, w: &Worker, token: &str, id: &str) -> Value {
    s.finished(token, id, Duration::from_secs(120), || {
        format!("worker:\n{}", w.log())
    })
    .await
}

#[test]
fn a_remote_worker_judges_what_the_server_queues() {
    let data = data_with_hello_suite();
    let ex = hello_example();
    let s = Server::start_in(data.path(), "[submissions]\nworkers = 0\n", &[]);
    rt().block_on(async {
        let t = s.token("student").await;
        let wt = s.token("worker").await;
        let w = Worker::start(&s, &wt, "remote1", 2);
        let hello = std::fs::read_to_string(ex.join("submissions/correct/hello.c")).unwrap();
        let ids = [
            submit(&s, &t, json!({"language": "c", "source_code": "#include <stdio.h>\nint main(void){int a,b;scanf(\"%d %d\",&a,&b);printf(\"%d\\n\",a*b);}\n",
                                  "stdin": "6 7", "expected_output": "42"})).await,
            submit(&s, &t, json!({"language": "python", "source_code": "print(undefined)\n"})).await,
            submit(&s, &t, json!({"suite": "hello", "files": [{"path": "hello.c", "content": hello}]})).await,
            submit(&s, &t, json!({"cmd": "./x.sh", "files": [{"path": "x.sh", "content": "#!/bin/sh\necho from a file\n", "executable": true}],
                                  "expected_output": "from a file"})).await,
        ];
        let want = ["accepted", "runtime_error", "accepted", "accepted"];
        for (id, want) in ids.iter().zip(want) {
            let v = finished(&s, &w, &t, id).await;
            assert_eq!(v["verdict"], want, "{v}\nworker:\n{}", w.log());
            assert!(
                v["worker"].as_str().unwrap().starts_with("remote:"),
                "judged by the remote worker: {v}"
            );
            assert!(v["worker"].as_str().unwrap().ends_with(":remote1/0") || v["worker"].as_str().unwrap().ends_with(":remote1/1"));
        }
        let suite_v = finished(&s, &w, &t, &ids[2]).await;
        assert_eq!(suite_v["score"], suite_v["max_score"]);
        assert_eq!(finished(&s, &w, &t, &ids[0]).await["run"]["stdout"], "42\n");
        // A batch, all judged remotely.
        let items: Vec<Value> = (0..10)
            .map(|i| json!({"cmd": format!("echo {i}"), "expected_output": i.to_string()}))
            .collect();
        let (st, v) = s.post_lenient(&t, "/submissions/batch", json!({"submissions": items})).await;
        assert_eq!(st, StatusCode::ACCEPTED);
        for item in v["submissions"].as_array().unwrap() {
            let v = finished(&s, &w, &t, item["id"].as_str().unwrap()).await;
            assert_eq!(v["verdict"], "accepted", "{v}");
        }
        // SIGTERM: a clean exit.
        assert!(w.stop().success());
    });
}

#[test]
fn a_remote_worker_obeys_the_servers_force_gvisor_over_a_suites_runtime() {
    let data = tempfile::tempdir().unwrap();
    let suite = data.path().join("suites/hostkernel");
    std::fs::create_dir_all(&suite).unwrap();
    // Passes only on the host's kernel (gVisor's answers `uname -r` with 4.4.0).
    std::fs::write(
        suite.join("suite.yaml"),
        "name: hostkernel\nruntime: native\nchecks:\n  - id: host\n    runtime: native\n    steps:\n      - run: uname -r\n      - stdout: {regex: \"^([5-9]|[1-9][0-9])\\\\.\"}\n      - exit: 0\n",
    )
    .unwrap();
    let s = Server::start_in(
        data.path(),
        "[submissions]\nworkers = 0\n[runtime]\nforce_gvisor = true\n",
        &[],
    );
    rt().block_on(async {
        let t = s.token("student").await;
        let wt = s.token("worker").await;
        let w = Worker::start(&s, &wt, "remote1", 1);
        let id = submit(
            &s,
            &t,
            json!({"suite": "hostkernel", "files": [{"path": "readme.txt", "content": "x"}]}),
        )
        .await;
        let v = finished(&s, &w, &t, &id).await;
        assert!(v["worker"].as_str().unwrap().starts_with("remote:"), "{v}");
        assert_eq!(v["verdict"], "wrong_answer", "{v}\nworker:\n{}", w.log());
        let host = &v["checks"]["results"]["host"];
        assert_eq!(host["runtime"], "gvisor", "{v}");
        assert_eq!(host["result"], false, "{v}");
        // A command job too.
        let id = submit(&s, &t, json!({"cmd": "uname -r"})).await;
        let v = finished(&s, &w, &t, &id).await;
        assert_eq!(v["run"]["runtime"], "gvisor", "{v}");
        assert_eq!(v["run"]["stdout"], "4.4.0\n", "{v}");
        assert!(w.stop().success());
    });
}

#[test]
fn worker_endpoints_check_roles_leases_and_signatures() {
    let s = Server::start("[submissions]\nworkers = 0\n", &[]);
    rt().block_on(async {
        let t = s.token("student").await;
        let wt = s.token("worker").await;
        // Students cannot claim; workers can do nothing else.
        let (st, _) = s.post_lenient(&t, "/worker/claim", json!({"wait": 0})).await;
        assert_eq!(st, StatusCode::FORBIDDEN);
        let (st, _) = s.get(&wt, "/submissions/0123456789abcdef0123456789abcdef").await;
        assert_eq!(st, StatusCode::FORBIDDEN);
        let (st, _) = s.post_text(&wt, "/worker/claim", json!({"wait": 0})).await;
        assert_eq!(st, StatusCode::NO_CONTENT, "nothing queued");
        let id = submit(&s, &t, json!({"cmd": "cat in.txt", "files": [{"path": "in.txt", "content": "data"}]})).await;
        let (st, job) = s.post_lenient(&wt, "/worker/claim", json!({"worker": "manual", "wait": 5})).await;
        assert_eq!(st, StatusCode::OK, "{job}");
        assert_eq!(job["id"], id.as_str());
        assert_eq!(job["attempt"], 1);
        assert_eq!(job["files"][0]["path"], "in.txt");
        assert_eq!(job["files"][0]["content_base64"], "ZGF0YQ==");
        assert_eq!(job["spec"]["cmd"], "cat in.txt");
        let lease = job["lease"].as_str().unwrap().to_string();
        let (st, _) = s.post_lenient(&wt, &format!("/worker/jobs/{id}/heartbeat"), json!({"lease": "nope"})).await;
        assert_eq!(st, StatusCode::CONFLICT);
        let heartbeat = format!("/worker/jobs/{id}/heartbeat");
        let (st, _) = s.post_text(&wt, &heartbeat, json!({"lease": lease})).await;
        assert_eq!(st, StatusCode::NO_CONTENT);

        let key = corral_store::sha256_hex(wt.as_bytes());
        let verdict = json!({"verdict": "accepted", "score": 1.0, "max_score": 1.0, "run": {"stdout": "data"}});
        let send = |body: Vec<u8>, sig: Option<String>| {
            let s_url = s.url(&format!("/worker/jobs/{id}/result"));
            let wt = wt.clone();
            async move {
                let mut r = client()
                    .post(s_url)
                    .bearer_auth(&wt)
                    .header("content-type", "application/json")
                    .body(body);
                if let Some(sig) = sig {
                    r = r.header("Corral-Signature", sig);
                }
                let r = r.send().await.unwrap();
                let st = r.status();
                (st, r.json::<Value>().await.unwrap_or(Value::Null))
            }
        };
        let sign = |key: &str, body: &[u8]| {
            corral_judge::signature_header(
                key.as_bytes(),
                corral_store::now(),
                body,
            )
        };
        let good = serde_json::to_vec(&json!({"lease": lease, "verdict": verdict})).unwrap();
        // No signature; a signature by another key; a body changed after signing; an old one.
        assert_eq!(send(good.clone(), None).await.0, StatusCode::UNAUTHORIZED);
        let other = corral_store::sha256_hex(b"another token");
        assert_eq!(send(good.clone(), Some(sign(&other, &good))).await.0, StatusCode::UNAUTHORIZED);
        let changed = String::from_utf8(good.clone()).unwrap().replace("accepted", "wrong_answer").into_bytes();
        assert_eq!(send(changed, Some(sign(&key, &good))).await.0, StatusCode::UNAUTHORIZED);
        let old = corral_judge::signature_header(
            key.as_bytes(),
            corral_store::now() - 3600,
            &good,
        );
        assert_eq!(send(good.clone(), Some(old)).await.0, StatusCode::UNAUTHORIZED);
        // Signed, but not a valid verdict, or not the current lease. (A score above the maximum
        // is extra credit, a grader's to give, as in-process: `Verdict::unusable`.)
        let bad = serde_json::to_vec(&json!({"lease": lease, "verdict": {"verdict": "accepted", "score": 5.0, "max_score": -1.0}})).unwrap();
        assert_eq!(send(bad.clone(), Some(sign(&key, &bad))).await.0, StatusCode::UNPROCESSABLE_ENTITY);
        let bogus = serde_json::to_vec(&json!({"lease": lease, "verdict": {"verdict": "great", "score": 1.0, "max_score": 1.0}})).unwrap();
        assert_eq!(send(bogus.clone(), Some(sign(&key, &bogus))).await.0, StatusCode::UNPROCESSABLE_ENTITY);
        let stale = serde_json::to_vec(&json!({"lease": "0000", "verdict": verdict})).unwrap();
        assert_eq!(send(stale.clone(), Some(sign(&key, &stale))).await.0, StatusCode::CONFLICT);
        // The real one, then the same again (a retry): recorded once.
        let (st, v) = send(good.clone(), Some(sign(&key, &good))).await;
        assert_eq!((st, v["result"].as_str()), (StatusCode::OK, Some("recorded")), "{v}");
        let (st, v) = send(good.clone(), Some(sign(&key, &good))).await;
        assert_eq!((st, v["result"].as_str()), (StatusCode::OK, Some("already_recorded")));
        let v = view(&s, &t, &id).await;
        assert_eq!(v["status"], "done");
        assert_eq!(v["verdict"], "accepted");
        assert_eq!(v["run"]["stdout"], "data");
        assert!(v["worker"].as_str().unwrap().ends_with(":manual"), "{v}");
    });
}

/// A claim the server cannot prepare (its temporary folder is not a folder; a full disk fails
/// the same step) gives the job back at once: the worker gets a 503 and the job is queued with
/// no attempt used. It used to answer 500 and leave the job leased to nobody until the lease ran
/// out, then blame the worker ("stopped answering") after three such claims.
#[test]
fn a_claim_the_server_cannot_prepare_gives_the_job_back() {
    let data = tempfile::tempdir().unwrap();
    let s = Server::start_in(data.path(), "[submissions]\nworkers = 0\n", &[]);
    let tmp = data.path().join("tmp");
    rt().block_on(async {
        let t = s.token("student").await;
        let wt = s.token("worker").await;
        let id = submit(
            &s,
            &t,
            json!({"cmd": "cat in.txt", "files": [{"path": "in.txt", "content": "data"}]}),
        )
        .await;
        std::fs::remove_dir_all(&tmp).unwrap();
        std::fs::write(&tmp, "not a folder").unwrap();
        let (st, body) = s
            .post_lenient(&wt, "/worker/claim", json!({"worker": "manual", "wait": 5}))
            .await;
        assert_eq!(st, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        assert!(
            body["message"]
                .as_str()
                .unwrap()
                .contains("a temporary folder"),
            "{body}"
        );
        let (_, v) = s.get(&t, &format!("/submissions/{id}")).await;
        assert_eq!(v["status"], "queued", "{v}");
        assert_eq!(v["attempts"], 0, "{v}");
        std::fs::remove_file(&tmp).unwrap();
        std::fs::create_dir(&tmp).unwrap();
        let (st, job) = s
            .post_lenient(&wt, "/worker/claim", json!({"worker": "manual", "wait": 5}))
            .await;
        assert_eq!(st, StatusCode::OK, "{job}");
        assert_eq!(job["id"], id.as_str());
        assert_eq!(job["attempt"], 1);
        assert_eq!(job["files"][0]["content_base64"], "ZGF0YQ==");
    });
}

#[test]
fn a_worker_killed_mid_run_loses_the_job_to_another() {
    let s = Server::start("[submissions]\nworkers = 0\nlease = \"1s\"\n", &[]);
    rt().block_on(async {
        let t = s.token("student").await;
        let wt = s.token("worker").await;
        let w1 = Worker::start(&s, &wt, "doomed", 1);
        let id = submit(
            &s,
            &t,
            json!({"cmd": "sleep 2; echo survived", "expected_output": "survived"}),
        )
        .await;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let v = view(&s, &t, &id).await;
            if v["status"] == "running" {
                assert!(v["worker"].as_str().unwrap().ends_with(":doomed/0"));
                break;
            }
            assert!(
                Instant::now() < deadline,
                "never claimed: {v}\n{}",
                w1.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        w1.kill9();
        let w2 = Worker::start(&s, &wt, "rescuer", 1);
        let v = finished(&s, &w2, &t, &id).await;
        assert_eq!(v["verdict"], "accepted", "{v}");
        assert_eq!(v["attempts"], 2);
        assert!(v["worker"].as_str().unwrap().ends_with(":rescuer/0"), "{v}");
    });
}

/// A worker given a token the server refuses for claims exits 1 at its first claim, saying why:
/// an unknown token, and a student's (403: it looped for ever, logging the refusal every 4 s).
#[test]
fn a_worker_whose_token_is_refused_exits_saying_why() {
    let s = Server::start("[submissions]\nworkers = 0\n", &[]);
    rt().block_on(async {
        let student = s.token("student").await;
        for (token, says) in [
            (
                student.as_str(),
                "the server refused the claim (403): this token is not a worker token",
            ),
            (
                "corral_00000000000000000000000000000000",
                "the server refused the worker token (revoked or unknown)",
            ),
        ] {
            // Two claim loops: both stop.
            let mut w = Worker::start(&s, token, "refused", 2);
            let deadline = Instant::now() + Duration::from_secs(60);
            let status = loop {
                if let Some(st) = w.child.try_wait().unwrap() {
                    break st;
                }
                assert!(
                    Instant::now() < deadline,
                    "the worker kept claiming with a refused token:\n{}",
                    w.log()
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            };
            // Its last line is the reason, after the log's own lines.
            let log = w.log();
            let last = log.lines().last().unwrap_or_default();
            assert_eq!(status.code(), Some(1), "{log}");
            assert!(last.starts_with("corral worker: "), "{log}");
            assert!(last.contains(says), "{log}");
            assert!(last.contains("corral token create --role worker"), "{log}");
        }
    });
}

/// Forwards every request to `server` unchanged, except the first verdict a worker posts, which
/// it refuses with a 422 as a server with stricter rules would; records every verdict posted.
async fn refusing_proxy(server: String) -> (String, Arc<Mutex<Vec<Value>>>) {
    use axum::body::{to_bytes, Body};
    use axum::http::{Request, Response};
    let posted = Arc::new(Mutex::new(Vec::new()));
    let seen = posted.clone();
    let app = axum::Router::new().fallback(move |req: Request<Body>| {
        let (server, seen) = (server.clone(), seen.clone());
        async move {
            let (parts, body) = req.into_parts();
            let body = to_bytes(body, 64 << 20).await.unwrap();
            let path = parts.uri.path_and_query().unwrap().as_str().to_string();
            if path.ends_with("/result") {
                let mut seen = seen.lock().unwrap();
                seen.push(serde_json::from_slice::<Value>(&body).unwrap());
                if seen.len() == 1 {
                    return Response::builder()
                        .status(422)
                        .header("content-type", "application/json")
                        .body(Body::from(r#"{"error":"invalid","code":"stricter_rules","message":"this verdict breaks a rule of this server"}"#))
                        .unwrap();
                }
            }
            let mut r = client().request(parts.method, format!("{server}{path}"));
            for (k, v) in &parts.headers {
                if k != "host" && k != "content-length" {
                    r = r.header(k, v);
                }
            }
            let resp = r.body(body).send().await.unwrap();
            let mut out = Response::builder().status(resp.status());
            for (k, v) in resp.headers() {
                if k != "content-length" && k != "transfer-encoding" {
                    out = out.header(k, v);
                }
            }
            out.body(Body::from(resp.bytes().await.unwrap())).unwrap()
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), posted)
}

#[test]
fn a_refused_verdict_ends_the_job_with_the_reason_instead_of_running_out_its_lease() {
    // A long lease: had the worker given up after the refusal, the job would still be running
    // (or claimed again) long after the test's wait.
    let s = Server::start("[submissions]\nworkers = 0\nlease = \"10m\"\n", &[]);
    rt().block_on(async {
        let t = s.token("student").await;
        let wt = s.token("worker").await;
        let (proxy, posted) = refusing_proxy(s.base.clone()).await;
        let w = Worker::start_at(&proxy, &wt, "refused", 1);
        let id = submit(&s, &t, json!({"cmd": "echo hi", "expected_output": "hi"})).await;
        let v = finished(&s, &w, &t, &id).await;
        assert_eq!(v["verdict"], "internal_error", "{v}");
        let message = v["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("the server refused this worker's verdict (422")
                && message.contains("this verdict breaks a rule of this server"),
            "{v}"
        );
        assert_eq!(v["attempts"], 1, "judged once, not claimed again: {v}");
        let posted = posted.lock().unwrap().clone();
        assert_eq!(posted.len(), 2, "{posted:?}");
        assert_eq!(posted[0]["verdict"]["verdict"], "accepted", "{posted:?}");
        assert_eq!(posted[1]["verdict"]["verdict"], "internal_error");
        assert_eq!(posted[0]["lease"], posted[1]["lease"]);
    });
}
