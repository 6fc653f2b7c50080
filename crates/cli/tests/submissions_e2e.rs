//! The submission queue end to end, on the real `corral serve` binary: every verdict from real
//! sandboxed runs, batches with per-item errors, suites, ownership, and durability — a 202
//! submission survives `kill -9` of the server, before and during its run.

mod server_support;

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{json, Value};
use server_support::*;

async fn post(s: &Server, token: &str, path: &str, body: Value) -> (StatusCode, Value) {
    s.post(token, path, body).await
}

async fn get(s: &Server, token: &str, path: &str) -> (StatusCode, Value) {
    s.get(token, path).await
}

async fn submit(s: &Server, token: &str, body: Value) -> String {
    let (st, v) = post(s, token, "/submissions", body).await;
    assert_eq!(st, StatusCode::ACCEPTED, "{v}\n{}", s.log());
    assert_eq!(v["status"], "queued");
    v["id"].as_str().unwrap().to_string()
}

async fn finished(s: &Server, token: &str, id: &str) -> Value {
    s.finished(token, id, Duration::from_secs(120), String::new)
        .await
}

const SUM_C: &str = "#include <stdio.h>\nint main(void) { long a, b; if (scanf(\"%ld %ld\", &a, &b) != 2) return 1; printf(\"%ld\\n\", a + b); return 0; }\n";

#[test]
fn every_verdict_from_real_runs() {
    let s = Server::start("[submissions]\nworkers = 2\n", &[]);
    rt().block_on(async {
        let t = s.token("student").await;
        let cases: Vec<(&str, Value)> = vec![
            (
                "accepted",
                json!({"language": "c", "source_code": SUM_C, "stdin": "2 40\n", "expected_output": "42"}),
            ),
            (
                "wrong_answer",
                json!({"language": "c", "source_code": SUM_C, "stdin": "2 2\n", "expected_output": "5\n"}),
            ),
            (
                "compile_error",
                json!({"language": "c", "source_code": "int main(void) { return 0 }\n"}),
            ),
            (
                "runtime_error",
                json!({"language": "python", "source_code": "raise SystemExit(3)\n"}),
            ),
            (
                "time_limit",
                json!({"cmd": "while :; do :; done", "limits": {"cpu_time": "500ms", "wall_time": "5s"}}),
            ),
            (
                "memory_limit",
                json!({"language": "python", "source_code": "x = bytearray(200 << 20)\n", "limits": {"memory": "64M"}}),
            ),
            (
                "output_limit",
                json!({"cmd": ["yes"], "limits": {"output": "64K"}}),
            ),
            (
                "accepted",
                json!({"cmd": "cat data.bin | od -An -tx1 | tr -d ' \\n'; ./run.sh",
                       "files": [{"path": "data.bin", "content": "AAH/", "encoding": "base64"},
                                 {"path": "run.sh", "content": "#!/bin/sh\necho ok\n", "executable": true}],
                       "expected_output": "0001ffok\n"}),
            ),
        ];
        let mut ids = Vec::new();
        for (_, body) in &cases {
            ids.push(submit(&s, &t, body.clone()).await);
        }
        for ((want, _), id) in cases.iter().zip(&ids) {
            let v = finished(&s, &t, id).await;
            assert_eq!(v["verdict"], *want, "{v}");
            assert_eq!(v["status"], "done", "{v}");
            assert_eq!(v["attempts"], 1);
            assert!(v["queue_wait_ms"].as_i64().unwrap() >= 0);
            assert!(v["finished_at"].as_i64().unwrap() >= v["created_at"].as_i64().unwrap());
            match *want {
                "accepted" => {
                    assert_eq!(v["score"], 1.0);
                    assert_eq!(v["run"]["status"], "ok");
                }
                "compile_error" => {
                    assert!(v["run"].is_null());
                    assert!(
                        v["compile"]["stderr"].as_str().unwrap().contains("error"),
                        "{v}"
                    );
                }
                _ => assert_eq!(v["score"], 0.0),
            }
        }
        let first = finished(&s, &t, &ids[0]).await;
        assert_eq!(first["run"]["stdout"], "42\n");
        assert_eq!(first["compile"]["status"], "ok");
        let tl = finished(&s, &t, &ids[4]).await;
        assert_eq!(tl["run"]["status"], "time_limit", "{tl}");
        let ml = finished(&s, &t, &ids[5]).await;
        assert_eq!(ml["run"]["status"], "memory_limit", "{ml}");
        // Prometheus: the verdicts this node recorded, and the store's submissions by state.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let m = reqwest::get(s.url("/metrics")).await.unwrap().text().await.unwrap();
            assert!(m.contains("corral_submissions_judged_total{verdict=\"accepted\"} 2"), "{m}");
            assert!(m.contains("corral_submissions_judged_total{verdict=\"compile_error\"} 1"), "{m}");
            // The limit counters cover the queue too (they stayed 0: only `/run` counted).
            assert!(m.contains("corral_oom_total 1"), "{m}");
            assert!(m.contains("corral_timeouts_total 1"), "{m}");
            if m.contains("corral_submissions{state=\"done\"} 8") {
                break;
            }
            assert!(Instant::now() < deadline, "{m}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
}

#[test]
fn batches_ownership_and_validation() {
    let s = Server::start(
        "[submissions]\nworkers = 1\nbatch_max = 5\nmax_pending_per_owner = 8\n[caps]\ncpu_time = \"2s\"\n",
        &[],
    );
    rt().block_on(async {
        let a = s.token("student").await;
        let b = s.token("student").await;
        let (st, v) = post(
            &s,
            &a,
            "/submissions/batch",
            json!({"submissions": [
                {"cmd": "echo one", "expected_output": "one"},
                {"language": "cobol", "source_code": "x"},
                {"cmd": "echo two", "language": "c"},
                {"cmd": "echo three", "limits": {"cpu_time": "1h"}},
                {"cmd": "x", "callback_url": "ftp://example.invalid/"},
            ]}),
        )
        .await;
        assert_eq!(st, StatusCode::ACCEPTED, "{v}");
        let items = v["submissions"].as_array().unwrap();
        assert_eq!(items.len(), 5);
        assert!(items[0]["id"].is_string());
        assert_eq!(items[1]["error"], "invalid");
        assert!(
            items[1]["message"].as_str().unwrap().contains("cobol"),
            "{v}"
        );
        assert!(items[2]["message"]
            .as_str()
            .unwrap()
            .contains("exactly one of"));
        assert!(
            items[3]["id"].is_string(),
            "limits above the caps are lowered"
        );
        assert!(items[4]["message"].as_str().unwrap().contains("http"));
        let one = finished(&s, &a, items[0]["id"].as_str().unwrap()).await;
        assert_eq!(one["verdict"], "accepted");
        let three = finished(&s, &a, items[3]["id"].as_str().unwrap()).await;
        assert_eq!(three["limits_clamped"], json!(["cpu_time"]));
        assert_eq!(three["run"]["limits"]["cpu_time"], "2s");
        // Someone else's submission is as missing as a made-up id.
        let (st, _) = get(
            &s,
            &b,
            &format!("/submissions/{}", items[0]["id"].as_str().unwrap()),
        )
        .await;
        assert_eq!(st, StatusCode::NOT_FOUND);
        let (st, _) = get(&s, &a, "/submissions/0123456789abcdef0123456789abcdef").await;
        assert_eq!(st, StatusCode::NOT_FOUND);
        // Batches are bounded; so are one token's waiting submissions.
        let six: Vec<Value> = (0..6).map(|_| json!({"cmd": "true"})).collect();
        let (st, _) = post(&s, &a, "/submissions/batch", json!({"submissions": six})).await;
        assert_eq!(st, StatusCode::PAYLOAD_TOO_LARGE);
        for (body, code) in [
            (
                json!({"cmd": "true", "suite": "nope"}),
                StatusCode::UNPROCESSABLE_ENTITY,
            ),
            (
                json!({"suite": "nope", "source_code": "x"}),
                StatusCode::UNPROCESSABLE_ENTITY,
            ),
            (
                json!({"suite": "nope", "files": [{"path": "a", "content": ""}]}),
                StatusCode::NOT_FOUND,
            ),
            (
                json!({"cmd": "true", "upload": "0123456789abcdef0123456789abcdef"}),
                StatusCode::NOT_FOUND,
            ),
            (
                json!({"cmd": "true", "files": [{"path": "../x", "content": ""}]}),
                StatusCode::UNPROCESSABLE_ENTITY,
            ),
            (
                json!({"cmd": "true", "callback_url": "http://user:pw@example.invalid/"}),
                StatusCode::UNPROCESSABLE_ENTITY,
            ),
            (json!({"cmd": ""}), StatusCode::UNPROCESSABLE_ENTITY),
            (
                json!({"cmd": "true", "bogus": 1}),
                StatusCode::UNPROCESSABLE_ENTITY,
            ),
        ] {
            let (st, v) = post(&s, &a, "/submissions", body.clone()).await;
            assert_eq!(st, code, "{body} -> {v}");
            assert!(v["error"].is_string() && v["message"].is_string(), "{v}");
        }
        // An upload of the caller's can be submitted; another caller's cannot.
        let up = s.upload(&a, &[("in.txt", b"hi\n")]).await;
        let id = submit(
            &s,
            &a,
            json!({"cmd": "cat in.txt", "upload": up, "expected_output": "hi"}),
        )
        .await;
        assert_eq!(finished(&s, &a, &id).await["verdict"], "accepted");
        let (st, _) = post(
            &s,
            &b,
            "/submissions",
            json!({"cmd": "cat in.txt", "upload": up}),
        )
        .await;
        assert_eq!(st, StatusCode::NOT_FOUND);
        // A worker token cannot use the rest of the API.
        let w = s.token("worker").await;
        let (st, v) = post(&s, &w, "/submissions", json!({"cmd": "true"})).await;
        assert_eq!(st, StatusCode::FORBIDDEN, "{v}");
        // Flooding: at most 8 waiting per token (a slow job holds the only worker).
        let slow: Vec<Value> = (0..5).map(|_| json!({"cmd": "sleep 1"})).collect();
        let (st, _) = post(
            &s,
            &a,
            "/submissions/batch",
            json!({"submissions": slow.clone()}),
        )
        .await;
        assert_eq!(st, StatusCode::ACCEPTED);
        let (st, v) = post(&s, &a, "/submissions/batch", json!({"submissions": slow})).await;
        assert_eq!(st, StatusCode::TOO_MANY_REQUESTS, "{v}");
        assert_eq!(v["error"], "queue_full");
        // The message says the batch's own size was what did not fit.
        assert!(
            v["message"].as_str().unwrap().contains("this batch adds 5"),
            "{v}"
        );
        // The other token is not held back by it.
        let id = submit(&s, &b, json!({"cmd": "echo b"})).await;
        assert_eq!(finished(&s, &b, &id).await["verdict"], "accepted");
    });
}

/// The cap on waiting submissions holds when a token sends many at once (it was checked, then
/// the row inserted, with nothing between: 20 parallel requests with a cap of 3 all got 202).
#[test]
fn the_pending_cap_holds_under_parallel_requests() {
    let s = Server::start(
        "[submissions]\nworkers = 0\nmax_pending_per_owner = 3\n",
        &[],
    );
    rt().block_on(async {
        let t = s.token("student").await;
        let tasks: Vec<_> = (0..20)
            .map(|i| {
                let (url, t) = (s.url("/submissions"), t.clone());
                tokio::spawn(async move {
                    client()
                        .post(url)
                        .bearer_auth(t)
                        .json(&json!({"cmd": format!("echo r{i}")}))
                        .send()
                        .await
                        .unwrap()
                        .status()
                })
            })
            .collect();
        let mut accepted = 0;
        for task in tasks {
            let st = task.await.unwrap();
            assert!(
                st == StatusCode::ACCEPTED || st == StatusCode::TOO_MANY_REQUESTS,
                "{st}"
            );
            accepted += usize::from(st == StatusCode::ACCEPTED);
        }
        assert_eq!(accepted, 3, "a cap of 3 waiting submissions\n{}", s.log());
        let (st, v) = post(&s, &t, "/submissions", json!({"cmd": "true"})).await;
        assert_eq!(st, StatusCode::TOO_MANY_REQUESTS, "{v}");
        assert!(
            v["message"]
                .as_str()
                .unwrap()
                .contains("has 3 submissions waiting"),
            "{v}"
        );
    });
}

#[test]
fn suites_grade_submissions() {
    let data = data_with_hello_suite();
    // The language's own compile command is a compilation too.
    let lang = data.path().join("suites/c-main");
    std::fs::create_dir_all(&lang).unwrap();
    std::fs::write(
        lang.join("suite.yaml"),
        "name: c-main\nlanguage: c\nchecks:\n  - id: builds\n    steps:\n      - run: \"{compile}\"\n      - exit: 0\n",
    )
    .unwrap();
    // A pytest suite: examples/pycalc's.
    let pycalc = data.path().join("suites/pycalc");
    std::fs::create_dir_all(&pycalc).unwrap();
    let pycalc_example = hello_example().join("../pycalc");
    for f in ["suite.yaml", "test_public.py", "test_hidden.py"] {
        std::fs::copy(pycalc_example.join(f), pycalc.join(f)).unwrap();
    }
    let ex = hello_example();
    let s = Server::start_in(data.path(), "[submissions]\nworkers = 2\n", &[]);
    rt().block_on(async {
        let t = s.token("student").await;
        // Its tests' run stopped by the memory limit (calc.py fills memory as it is imported).
        let hog = "x = bytearray(1 << 30)\n";
        let hogging = submit(
            &s,
            &t,
            json!({"suite": "pycalc", "files": [{"path": "calc.py", "content": hog}]}),
        )
        .await;
        let files = |case: &str| {
            let dir = ex.join("submissions").join(case);
            let mut out = Vec::new();
            for e in std::fs::read_dir(&dir).unwrap().flatten() {
                out.push(json!({"path": e.file_name().to_string_lossy(),
                                "content": std::fs::read_to_string(e.path()).unwrap()}));
            }
            Value::Array(out)
        };
        let good = submit(&s, &t, json!({"suite": "hello", "files": files("correct")})).await;
        let bad = submit(
            &s,
            &t,
            json!({"suite": "hello", "files": files("wrong_output")}),
        )
        .await;
        let looping = submit(
            &s,
            &t,
            json!({"suite": "hello", "files": files("infinite_loop")}),
        )
        .await;
        let broken = submit(
            &s,
            &t,
            json!({"suite": "hello", "files": files("no_compile")}),
        )
        .await;
        // A program that never prints its prompt: the check's timeout ends the wait for it.
        let silent = "#include <unistd.h>\nint main(void) { sleep(100); return 0; }\n";
        let sleeping = submit(
            &s,
            &t,
            json!({"suite": "hello", "files": [{"path": "hello.c", "content": silent}]}),
        )
        .await;
        let via_language = submit(
            &s,
            &t,
            json!({"suite": "c-main", "files": [{"path": "main.c", "content": "int main(void) { return }"}]}),
        )
        .await;
        let v = finished(&s, &t, &good).await;
        assert_eq!(v["verdict"], "accepted", "{v}");
        assert_eq!(v["score"], v["max_score"]);
        assert_eq!(v["checks"]["results"]["compiles"]["result"], true);
        // It failed on its `compile` step's program: a compile error, and the check's message
        // (the compiler's first lines) says why.
        let v = finished(&s, &t, &broken).await;
        assert_eq!(v["verdict"], "compile_error", "{v}");
        let m = v["message"].as_str().unwrap_or("");
        assert!(m.starts_with("compiles: ") && m.contains("error"), "{v}");
        let v = finished(&s, &t, &via_language).await;
        assert_eq!(v["verdict"], "compile_error", "{v}");
        assert!(v["message"].as_str().unwrap_or("").starts_with("builds: "), "{v}");
        // The first check that failed failed because its program ran out of time: the verdict
        // says so (it said `wrong_answer`), and which check in its message.
        let v = finished(&s, &t, &looping).await;
        assert_eq!(v["verdict"], "time_limit", "{v}");
        assert!(
            v["message"].as_str().unwrap_or("").starts_with("greets: "),
            "{v}"
        );
        // So does one whose output the check's timeout ended the wait for (it said
        // `wrong_answer`, without a message).
        let v = finished(&s, &t, &sleeping).await;
        assert_eq!(v["verdict"], "time_limit", "{v}");
        let m = v["message"].as_str().unwrap_or("");
        assert!(m.starts_with("greets: timed out after 5s"), "{v}");
        // A pytest check whose run a limit stopped: that limit's verdict (it said `wrong_answer`).
        let v = finished(&s, &t, &hogging).await;
        assert_eq!(v["verdict"], "memory_limit", "{v}");
        let m = v["message"].as_str().unwrap_or("");
        // The stop said once (the first failure repeated it).
        assert_eq!(
            m,
            "tests: the tests were stopped: memory limit of 256M exceeded\n0 of 8 tests passed",
            "{v}"
        );
        let v = finished(&s, &t, &bad).await;
        assert_eq!(v["verdict"], "wrong_answer", "{v}");
        assert_eq!(v["score"], 2.0);
        assert_eq!(v["max_score"], 6.0);
        let hidden_steps = |v: &Value| {
            let results = v["checks"]["results"].as_object().unwrap();
            let hidden = results.values().find(|r| r["hidden"] == true);
            hidden.expect("the suite has a hidden check")["script"].clone()
        };
        // Students see hidden checks as pass/fail only.
        assert_eq!(hidden_steps(&v), json!([]));
        assert!(v.get("staff_checks").is_none(), "{v}");
        // Staff reading the student's submission see the hidden check's steps (they saw the
        // student's view: nothing of a hidden check but its result).
        let staff = s.token("staff").await;
        let v = finished(&s, &staff, &bad).await;
        assert_ne!(hidden_steps(&v), json!([]), "{v}");
        assert!(v.get("staff_checks").is_none(), "{v}");
    });
}

/// Suite `answer` of the suites folder: `answer.txt` must say `want`.
fn answer_suite(want: &str) -> String {
    format!(
        "name: answer\nchecks:\n  - id: answers\n    steps:\n      - run: cat answer.txt\n      \
         - stdout: \"{want}\"\n      - exit: 0\n"
    )
}

/// A suite of the suites folder edited while a submission waits grades that submission as it
/// was when it was accepted (its files are pinned then); one accepted after the edit is graded
/// with the new suite. The folder used to be read when the job was judged, so the edit decided
/// the waiting submission's verdict.
#[test]
fn a_folder_suite_edited_while_a_submission_waits_grades_it_as_it_was() {
    let data = tempfile::tempdir().unwrap();
    let dir = data.path().join("suites/answer");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("suite.yaml"), answer_suite("v1")).unwrap();
    let body = json!({"suite": "answer", "files": [{"path": "answer.txt", "content": "v1"}]});
    // No workers: the submission waits while the course's staff edit the suite.
    let s = Server::start_in(data.path(), "[submissions]\nworkers = 0\n", &[]);
    let (t, waiting) = rt().block_on(async {
        let t = s.token("student").await;
        let id = submit(&s, &t, body.clone()).await;
        (t, id)
    });
    assert!(s.stop().success());
    std::fs::write(dir.join("suite.yaml"), answer_suite("v2")).unwrap();
    let s = Server::start_in(data.path(), "[submissions]\nworkers = 1\n", &[]);
    rt().block_on(async {
        let v = finished(&s, &t, &waiting).await;
        assert_eq!(
            v["verdict"], "accepted",
            "graded with the suite it was accepted with: {v}"
        );
        let later = submit(&s, &t, body).await;
        let v = finished(&s, &t, &later).await;
        assert_eq!(
            v["verdict"], "wrong_answer",
            "graded with the suite as it is now: {v}"
        );
    });
}

/// A suite fixed after the deadline: staff regrade each student's latest submission and the
/// workers judge them by the suite as it is now (a student who had the right answer under the
/// wrong test passes), while the old verdicts stay; the gradebook then shows the new grades.
#[test]
fn a_regrade_after_the_suite_was_fixed_is_judged_by_the_fixed_suite() {
    let data = tempfile::tempdir().unwrap();
    let dir = data.path().join("suites/answer");
    std::fs::create_dir_all(&dir).unwrap();
    // The course's test expects the wrong answer.
    std::fs::write(dir.join("suite.yaml"), answer_suite("41")).unwrap();
    let s = Server::start_in(data.path(), "[submissions]\nworkers = 1\n", &[]);
    rt().block_on(async {
        let t = s.token("student").await;
        let staff = s.token("staff").await;
        let body = json!({"suite": "answer", "files": [{"path": "answer.txt", "content": "42"}]});
        let first = submit(&s, &t, body).await;
        let v = finished(&s, &t, &first).await;
        assert_eq!(v["verdict"], "wrong_answer", "{v}");
        std::fs::write(dir.join("suite.yaml"), answer_suite("42")).unwrap();
        let (st, v) = s.post(&staff, "/suites/answer/regrade", json!({})).await;
        assert_eq!(st, StatusCode::ACCEPTED, "{v}");
        assert_eq!(v["submissions"][0]["regrade_of"], first.as_str(), "{v}");
        let again = v["submissions"][0]["id"].as_str().unwrap().to_string();
        let v = finished(&s, &t, &again).await;
        assert_eq!(v["verdict"], "accepted", "graded by the fixed suite: {v}");
        let v = finished(&s, &t, &first).await;
        assert_eq!(v["verdict"], "wrong_answer", "the old verdict stays: {v}");
        let (st, v) = s.get(&staff, "/suites/answer/gradebook").await;
        assert_eq!(st, StatusCode::OK, "{v}");
        assert_eq!(v["rows"][0]["submission"], again.as_str(), "{v}");
        assert_eq!(v["rows"][0]["verdict"], "accepted", "{v}");
    });
}

fn kill9(s: Server) {
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(s.pid() as i32, libc::SIGKILL);
    }
    drop(s);
}

#[test]
fn a_submission_survives_kill_9_of_the_server() {
    let data = tempfile::tempdir().unwrap();
    // No workers: the submissions are only stored when the server dies.
    let s = Server::start_in(data.path(), "[submissions]\nworkers = 0\n", &[]);
    let (t, queued) = rt().block_on(async {
        let t = s.token("student").await;
        let mut ids = Vec::new();
        for i in 0..3 {
            ids.push(
                submit(
                    &s,
                    &t,
                    json!({"cmd": format!("echo {i}"), "expected_output": i.to_string()}),
                )
                .await,
            );
        }
        (t, ids)
    });
    kill9(s);
    // Now one that dies with the server in the middle of its run.
    let cfg = "[submissions]\nworkers = 1\nlease = \"1s\"\n";
    let s = Server::start_in(data.path(), cfg, &[]);
    let running = rt().block_on(async {
        for id in &queued {
            assert_eq!(finished(&s, &t, id).await["verdict"], "accepted");
        }
        let id = submit(
            &s,
            &t,
            json!({"cmd": "sleep 3; echo late", "expected_output": "late"}),
        )
        .await;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let (_, v) = get(&s, &t, &format!("/submissions/{id}")).await;
            if v["status"] == "running" {
                break;
            }
            assert!(Instant::now() < deadline, "never started: {v}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        id
    });
    kill9(s);
    let s = Server::start_in(data.path(), cfg, &[]);
    rt().block_on(async {
        let v = finished(&s, &t, &running).await;
        assert_eq!(v["verdict"], "accepted", "{v}");
        assert_eq!(
            v["attempts"], 2,
            "claimed again after the lease expired: {v}"
        );
        assert_eq!(v["run"]["stdout"], "late\n");
    });
}

/// A graceful restart (SIGTERM) whose grace period ends before a job's run gives the job back to
/// the queue at once, without using an attempt. Before, its lease was left to expire: a lease of
/// latency per restart, and `max_attempts` restarts during one job failed it as `internal_error`
/// ("its worker stopped answering").
#[test]
fn graceful_restarts_give_running_jobs_back_without_using_attempts() {
    let data = tempfile::tempdir().unwrap();
    // A lease far longer than the test waits: only a job given back is claimed again in time.
    let cfg = "shutdown_grace = \"500ms\"\n[submissions]\nworkers = 1\nlease = \"120s\"\nmax_attempts = 2\n";
    let mut s = Server::start_in(data.path(), cfg, &[]);
    let (t, id) = rt().block_on(async {
        let t = s.token("student").await;
        let id = submit(
            &s,
            &t,
            json!({"cmd": "sleep 4; echo done-ok", "expected_output": "done-ok"}),
        )
        .await;
        (t, id)
    });
    let started = |s: &Server| {
        rt().block_on(async {
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                let (_, v) = get(s, &t, &format!("/submissions/{id}")).await;
                if v["status"] == "running" && s.log().contains(&format!("submission={id}")) {
                    break v;
                }
                assert!(
                    Instant::now() < deadline,
                    "not claimed again within 30 s: {v}\n{}",
                    s.log()
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    // Three restarts in the middle of the run, more than max_attempts.
    for restart in 0..3 {
        let v = started(&s);
        assert_eq!(v["attempts"], 1, "restart {restart}: {v}");
        std::thread::sleep(Duration::from_millis(500));
        let (status, log) = s.stop_with_log();
        assert!(status.success(), "restart {restart}: {status}");
        assert!(
            log.contains("queued again (no attempt used)"),
            "restart {restart}: the job was not given back:\n{log}"
        );
        s = Server::start_in(data.path(), cfg, &[]);
    }
    rt().block_on(async {
        let v = s
            .finished(&t, &id, Duration::from_secs(60), String::new)
            .await;
        assert_eq!(v["status"], "done", "{v}");
        assert_eq!(v["verdict"], "accepted", "{v}");
        assert_eq!(v["attempts"], 1, "{v}");
        assert_eq!(v["run"]["stdout"], "done-ok\n");
    });
}

/// A host that cannot prepare a job — here its temporary folder is not a folder; a full disk
/// fails the same step — gives the job back to the queue instead of failing it, waits before
/// claiming again, and judges it once the host is whole. Every such job used to end `failed`
/// with `internal_error` at once, a whole backlog within seconds. One that can never be
/// prepared fails after five tries, naming the host's error.
#[test]
fn a_job_the_host_cannot_prepare_waits_for_the_host() {
    let data = tempfile::tempdir().unwrap();
    let cfg = "[submissions]\nworkers = 1\n";
    let s = Server::start_in(data.path(), cfg, &[]);
    let tmp = data.path().join("tmp");
    let break_tmp = |tmp: &std::path::Path| {
        std::fs::remove_dir_all(tmp).unwrap();
        std::fs::write(tmp, "not a folder").unwrap();
    };
    break_tmp(&tmp);
    rt().block_on(async {
        let t = s.token("student").await;
        let id = submit(&s, &t, json!({"cmd": "echo ok", "expected_output": "ok"})).await;
        let deadline = Instant::now() + Duration::from_secs(30);
        while !s
            .log()
            .contains("the host could not prepare a job; queued again")
        {
            assert!(Instant::now() < deadline, "not given back:\n{}", s.log());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let (_, v) = get(&s, &t, &format!("/submissions/{id}")).await;
        assert!(
            v["status"] == "queued" || v["status"] == "running",
            "{v}\n{}",
            s.log()
        );
        std::fs::remove_file(&tmp).unwrap();
        std::fs::create_dir(&tmp).unwrap();
        let v = finished(&s, &t, &id).await;
        assert_eq!(v["status"], "done", "{v}");
        assert_eq!(v["verdict"], "accepted", "{v}");
        assert_eq!(v["attempts"], 1, "given back without using an attempt: {v}");
    });
    drop(s);
    // Five workers: five tries within a second, then the job fails with the host's reason.
    let data = tempfile::tempdir().unwrap();
    let s = Server::start_in(data.path(), "[submissions]\nworkers = 5\n", &[]);
    break_tmp(&data.path().join("tmp"));
    rt().block_on(async {
        let t = s.token("student").await;
        let id = submit(&s, &t, json!({"cmd": "echo ok"})).await;
        let v = finished(&s, &t, &id).await;
        assert_eq!(v["status"], "failed", "{v}");
        let message = v.to_string();
        assert!(
            message.contains("the host could not prepare the job 5 times")
                && message.contains("a temporary folder"),
            "{v}"
        );
    });
}

/// Every blob file in a data folder's blob store (not its scratch folder).
fn blob_files(data: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for shard in std::fs::read_dir(data.join("blobs")).unwrap().flatten() {
        if shard.file_name().len() == 2 {
            for f in std::fs::read_dir(shard.path()).unwrap().flatten() {
                out.push(f.path());
            }
        }
    }
    out
}

/// Files the store names but its blob folder lost (a restore that missed some, a file deleted by
/// hand): a run in such an upload says which file is lost and to upload again (500 `files_lost`,
/// not a bare `internal`), and a queued submission whose files are lost fails at once, saying
/// so. It used to be taken for a passing trouble of the host: given back to the queue five
/// times, the worker waiting longer after each, before it failed as "the host could not prepare
/// the job 5 times".
#[test]
fn files_lost_from_the_blob_store_are_said_and_fail_their_submission_at_once() {
    let data = tempfile::tempdir().unwrap();
    let s = Server::start_in(data.path(), "[submissions]\nworkers = 0\n", &[]);
    let (t, id, upload) = rt().block_on(async {
        let t = s.token("student").await;
        let id = submit(
            &s,
            &t,
            json!({"cmd": "cat kept.txt", "files": [{"path": "kept.txt", "content": "kept"}]}),
        )
        .await;
        let upload = s.upload(&t, &[("notes/lost.txt", b"soon lost")]).await;
        (t, id, upload)
    });
    let blobs = blob_files(data.path());
    assert_eq!(blobs.len(), 2, "{blobs:?}");
    for b in blobs {
        std::fs::remove_file(b).unwrap();
    }
    rt().block_on(async {
        let (status, v) = s
            .run(&t, json!({"cmd": "ls", "sandbox": {"homedir": upload}}))
            .await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{v}");
        assert_eq!(v["error"], "files_lost", "{v}");
        let m = v["message"].as_str().unwrap();
        assert!(
            m.contains("\"notes/lost.txt\"")
                && m.contains(&upload)
                && m.contains("upload the files again"),
            "{m}"
        );
        assert!(
            !m.contains(&data.path().display().to_string()),
            "a server path in {m}"
        );
    });
    drop(s);
    let s = Server::start_in(data.path(), "[submissions]\nworkers = 1\n", &[]);
    rt().block_on(async {
        let v = finished(&s, &t, &id).await;
        assert_eq!(v["status"], "failed", "{v}");
        assert_eq!(v["verdict"], "internal_error", "{v}");
        let m = v["message"].as_str().unwrap_or_default();
        assert!(
            m.contains("\"kept.txt\"") && m.contains("missing from the server's file store"),
            "{v}"
        );
        assert!(
            !s.log().contains("queued again"),
            "a lost file was taken for the host's trouble:\n{}",
            s.log()
        );
    });
}

#[test]
fn old_submissions_are_deleted_after_the_retention_period() {
    let s = Server::start("retention = \"1s\"\n[submissions]\nworkers = 1\n", &[]);
    rt().block_on(async {
        let t = s.token("student").await;
        let id = submit(
            &s,
            &t,
            json!({"cmd": "echo old", "files": [{"path": "f.txt", "content": "x"}]}),
        )
        .await;
        assert_eq!(finished(&s, &t, &id).await["verdict"], "accepted");
        // Deleted by the housekeeping within a few of its rounds (bounded wait).
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let (st, v) = get(&s, &t, &format!("/submissions/{id}")).await;
            if st == StatusCode::NOT_FOUND {
                break;
            }
            assert_eq!(v["status"], "done");
            assert!(Instant::now() < deadline, "still there after 60 s: {v}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // A submission still waiting is never deleted, however old.
        let s2 = submit(&s, &t, json!({"cmd": "sleep 3"})).await;
        let blocked = submit(&s, &t, json!({"cmd": "echo later"})).await;
        tokio::time::sleep(Duration::from_millis(2500)).await;
        let (st, v) = get(&s, &t, &format!("/submissions/{blocked}")).await;
        assert_eq!(
            st,
            StatusCode::OK,
            "a queued submission outlived the retention: {v}"
        );
        assert_eq!(finished(&s, &t, &blocked).await["verdict"], "accepted");
        let _ = s2;
    });
}

/// A data folder whose suites folder holds suite `id` (its `suite.yaml`).
fn data_with_suite(id: &str, yaml: &str) -> tempfile::TempDir {
    let data = tempfile::tempdir().unwrap();
    let dir = data.path().join("suites").join(id);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("suite.yaml"), yaml).unwrap();
    data
}

/// A server grades at most `grading_slots` checks at once across its queue workers (and
/// `/check`): more CPU-bound programs than CPUs stretch each one's wall clock until a correct
/// program fails its check's timeout, and its grade depends on the load. Here one slot, three
/// workers and three submissions of a suite of two independent checks (up to six at once
/// without the cap): the pool never has more than one sandbox leased, and all are judged.
#[test]
fn checks_wait_for_a_grading_slot() {
    let data = data_with_suite(
        "naps",
        "name: naps\nchecks:\n  - id: a\n    steps:\n      - run: sleep 0.3\n      - exit: 0\n  \
         - id: b\n    steps:\n      - run: sleep 0.3\n      - exit: 0\n",
    );
    let s = Server::start_in(
        data.path(),
        "grading_slots = 1\n[submissions]\nworkers = 3\n",
        &[],
    );
    rt().block_on(async {
        let t = s.token("student").await;
        let mut ids = Vec::new();
        for _ in 0..3 {
            let body = json!({"suite": "naps", "files": [{"path": "a.txt", "content": "a"}]});
            ids.push(submit(&s, &t, body).await);
        }
        // Staff read the submissions (a student's rate limit would refuse this many reads).
        let staff = s.token("staff").await;
        let mut most = 0;
        let started = std::time::Instant::now();
        for round in 0.. {
            most = most.max(s.health().await["pool_active"].as_u64().unwrap());
            if round % 10 == 9 {
                let mut done = 0;
                for id in &ids {
                    let (_, v) = s.get(&staff, &format!("/submissions/{id}")).await;
                    if v["status"] == "done" {
                        assert_eq!(v["verdict"], "accepted", "{v}");
                        done += 1;
                    }
                }
                if done == ids.len() {
                    break;
                }
            }
            assert!(
                started.elapsed() < std::time::Duration::from_secs(120),
                "not judged:\n{}",
                s.log()
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert_eq!(most, 1, "more than one check graded at once");
    });
}

/// A server killed while judging (`kill -9`): the one that starts next on its data folder (a
/// SQLite store is one server's) puts the job back in the queue at once and judges it, where it
/// used to wait for the dead worker's lease to run out (here 10 minutes, past this test's wait).
#[test]
fn a_job_a_killed_server_held_is_judged_at_the_next_start() {
    let data = data_with_suite(
        "nap",
        "name: nap\nchecks:\n  - id: a\n    steps:\n      - run: sleep 2\n      - exit: 0\n",
    );
    let config = "[submissions]\nworkers = 1\nlease = \"10m\"\n";
    let s = Server::start_in(data.path(), config, &[]);
    let (t, id) = rt().block_on(async {
        let t = s.token("student").await;
        let body = json!({"suite": "nap", "files": [{"path": "a.txt", "content": "a"}]});
        let id = submit(&s, &t, body).await;
        for _ in 0..500 {
            let (_, v) = s.get(&t, &format!("/submissions/{id}")).await;
            if v["status"] == "running" {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        (t, id)
    });
    s.kill();
    let s = Server::start_in(data.path(), config, &[]);
    rt().block_on(async {
        let (st, v) = s
            .get(&t, &format!("/submissions/{id}?wait=true&timeout=30"))
            .await;
        assert_eq!(st, StatusCode::OK, "{v}");
        assert_eq!(
            (&v["status"], &v["verdict"], &v["attempts"]),
            (&json!("done"), &json!("accepted"), &json!(2)),
            "{v}\n{}",
            s.log()
        );
    });
}
