//! A Gradescope autograder on a `base` image, end to end through the real `corral serve`: the
//! suite registered over HTTP (`POST /suites` with the autograder's files), submissions queued
//! (`POST /submissions`) and judged by the server's own workers, then by a remote `corral
//! worker` whose data folder starts empty — it fetches the base image from the server by digest
//! and builds the autograder's environment (its `setup.sh`) itself, once.

mod common;
mod server_support;

use std::time::{Duration, Instant};

use common::image::NAME;
use reqwest::StatusCode;
use serde_json::{json, Value};
use server_support::*;

const SETUP: &str =
    "#!/bin/bash\nset -e\necho \"built-on-base $(cat /etc/debian_version)\" > /opt/marker\n";

/// Two points when `answer.txt` says 42; the output says what setup.sh left in the image.
const RUN: &str = r#"#!/bin/sh
set -e
marker=$(cat /opt/marker)
if grep -qx 42 /autograder/submission/answer.txt 2>/dev/null; then s=2; st=passed; else s=0; st=failed; fi
printf '{"tests": [{"name": "answer", "number": "1", "score": %s, "max_score": 2, "status": "%s", "output": "%s"}]}' \
  "$s" "$st" "$marker" > /autograder/results/results.json
"#;

fn suite() -> String {
    format!(
        "name: gsbase\nchecks:\n  - id: autograder\n    points: 2\n    gradescope:\n      autograder: autograder\n      base: {NAME}\n"
    )
}

async fn register(s: &Server, token: &str) {
    let form = reqwest::multipart::Form::new()
        .text("id", "gsbase")
        .part(
            "suite",
            reqwest::multipart::Part::bytes(suite().into_bytes()).file_name("suite.yaml"),
        )
        .part(
            "f1",
            reqwest::multipart::Part::bytes(SETUP.as_bytes().to_vec())
                .file_name("autograder/setup.sh"),
        )
        .part(
            "f2",
            reqwest::multipart::Part::bytes(RUN.as_bytes().to_vec())
                .file_name("autograder/run_autograder"),
        );
    let r = client()
        .post(s.url("/suites"))
        .bearer_auth(token)
        .multipart(form)
        .send()
        .await
        .unwrap();
    let st = r.status();
    let body = r.text().await.unwrap();
    assert_eq!(st, StatusCode::CREATED, "{body}\n{}", s.log());
}

async fn submit(s: &Server, token: &str, answer: &str) -> String {
    let (st, v) = s
        .post(
            token,
            "/submissions",
            json!({"suite": "gsbase", "files": [{"path": "answer.txt", "content": answer}]}),
        )
        .await;
    assert_eq!(st, StatusCode::ACCEPTED, "{v}");
    v["id"].as_str().unwrap().to_string()
}

async fn finished(s: &Server, token: &str, id: &str, more: &dyn Fn() -> String) -> Value {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let (st, v) = s
            .get(token, &format!("/submissions/{id}?wait=true&timeout=10"))
            .await;
        assert_eq!(st, StatusCode::OK, "{v}");
        if v["status"] == "done" || v["status"] == "failed" {
            return v;
        }
        assert!(Instant::now() < deadline, "{v}\n{}\n{}", s.log(), more());
    }
}

/// What setup.sh reported for the autograder check: `ran on …` or `cached: …`.
fn setup_line(v: &Value) -> String {
    v["checks"]["results"]["autograder"]["script"][0]["actual"]["value"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn assert_graded(v: &Value, score: f64) {
    assert_eq!(v["status"], "done", "{v:#}");
    assert_eq!(
        (v["score"].as_f64(), v["max_score"].as_f64()),
        (Some(score), Some(2.0)),
        "{v:#}"
    );
    let text = v["checks"].to_string();
    assert!(text.contains("built-on-base 12."), "{v:#}");
}

#[test]
fn a_gradescope_suite_on_a_base_image_grades_through_the_queue_and_a_remote_worker() {
    let data = tempfile::tempdir().unwrap();
    common::image::import_into(data.path());
    let base_digest = corral_images::Store::open(data.path())
        .unwrap()
        .resolve(NAME)
        .unwrap()
        .1
        .digest
        .to_string();

    // The server's own workers.
    let s = Server::start_in(data.path(), "", &[]);
    let (environment, student, wt) = rt().block_on(async {
        let (staff, student) = (s.token("staff").await, s.token("student").await);
        // The tokens outlive this server (the database stays): the next start prints no admin
        // token.
        let wt = s.token("worker").await;
        register(&s, &staff).await;
        let id = submit(&s, &student, "42\n").await;
        let v = finished(&s, &student, &id, &String::new).await;
        assert_graded(&v, 2.0);
        let first = setup_line(&v);
        assert!(first.starts_with(&format!("ran on {NAME}")), "{v:#}");
        let id = submit(&s, &student, "41\n").await;
        let v = finished(&s, &student, &id, &String::new).await;
        assert_graded(&v, 0.0);
        // The second submission starts no build.
        let second = setup_line(&v);
        assert!(second.starts_with("cached"), "{v:#}");
        (first.rsplit(' ').next().unwrap().to_string(), student, wt)
    });
    assert!(environment.starts_with("sha256:"), "{environment}");
    s.stop();

    // A remote worker with an empty data folder: the base comes from the server by digest, the
    // environment is built there (the same key: the autograder's and the base's digests).
    let s = Server::start_in(data.path(), "[submissions]\nworkers = 0\n", &[]);
    let worker_data = tempfile::tempdir().unwrap();
    rt().block_on(async {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_corral"));
        cmd.args([
            "worker", "--server", &s.base, "--name", "gsremote", "--data",
        ])
        .arg(worker_data.path())
        .env("CORRAL_WORKER_TOKEN", &wt)
        .env("CORRAL_LOG", "info");
        let mut worker = Logged::spawn(cmd);
        let log = worker.log.clone();
        let more = move || log.lock().unwrap().clone();
        for (answer, score, setup) in [("42\n", 2.0, "ran on"), ("7\n", 0.0, "cached")] {
            let id = submit(&s, &student, answer).await;
            let v = finished(&s, &student, &id, &more).await;
            assert!(
                v["worker"]
                    .as_str()
                    .unwrap_or_default()
                    .starts_with("remote:"),
                "{v:#}"
            );
            assert_graded(&v, score);
            let line = setup_line(&v);
            assert!(line.starts_with(setup), "{v:#}\n{}", more());
            assert!(line.ends_with(&environment), "{line} vs {environment}");
        }
        assert!(
            more().contains("image fetched from the server"),
            "{}",
            more()
        );
        let _ = worker.child.kill();
        let _ = worker.child.wait();
    });
    let worker_store = corral_images::Store::open(worker_data.path()).unwrap();
    assert_eq!(
        worker_store
            .resolve(&base_digest)
            .unwrap()
            .1
            .digest
            .to_string(),
        base_digest
    );
    s.stop();
}
