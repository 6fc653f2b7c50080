//! Suites with their files registered over HTTP (`POST /suites`), then used by `/check` and the
//! submission queue: the Gradescope autograder (as a folder and as a zip), the PrairieLearn
//! grader, and — the same upload path — the pytest and check50 examples.

mod example_support;
mod server_support;

use std::path::Path;
use std::time::Duration;

use example_support::root;
use reqwest::StatusCode;
use serde_json::{json, Value};
use server_support::*;

/// Every file under `dir` (relative paths, sorted), leaving `submissions/` out.
fn files_of(dir: &Path) -> Vec<(String, Vec<u8>)> {
    fn walk(dir: &Path, rel: &str, out: &mut Vec<(String, Vec<u8>)>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let r = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            if r == "submissions" || name == "__pycache__" {
                continue;
            }
            if e.file_type().unwrap().is_dir() {
                walk(&e.path(), &r, out);
            } else {
                out.push((r, std::fs::read(e.path()).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, "", &mut out);
    out.sort();
    out
}

/// Registers `suite` (YAML text) with `files` as suite `id`.
async fn register(s: &Server, token: &str, id: &str, suite: &str, files: &[(String, Vec<u8>)]) {
    let (st, body) = s.register_suite(token, id, suite, files).await;
    assert_eq!(st, StatusCode::CREATED, "{id}: {body}\n{}", s.log());
}

async fn register_example(s: &Server, token: &str, example: &str) {
    let dir = root().join("examples").join(example);
    let files: Vec<_> = files_of(&dir)
        .into_iter()
        .filter(|(p, _)| p != "suite.yaml")
        .collect();
    let suite = std::fs::read_to_string(dir.join("suite.yaml")).unwrap();
    register(s, token, example, &suite, &files).await;
}

fn submission(example: &str, case: &str) -> Vec<(String, Vec<u8>)> {
    files_of(
        &root()
            .join("examples")
            .join(example)
            .join("submissions")
            .join(case),
    )
}

async fn check(s: &Server, token: &str, suite: &str, files: &[(String, Vec<u8>)]) -> Value {
    let files: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(p, b)| (p.as_str(), b.as_slice()))
        .collect();
    let id = s.upload(token, &files).await;
    let (st, v) = s
        .post(
            token,
            "/check?format=json",
            json!({"checks": suite, "sandbox": {"homedir": id}}),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{suite}: {v}\n{}", s.log());
    v
}

/// A zip of `dir`'s files (Python's zipfile: another implementation than ours).
fn zip_of(dir: &Path) -> Vec<u8> {
    let t = tempfile::tempdir().unwrap();
    let out = t.path().join("a.zip");
    let st = std::process::Command::new("python3")
        .args([
            "-c",
            "import os, sys, zipfile\n\
             z = zipfile.ZipFile(sys.argv[2], 'w', zipfile.ZIP_DEFLATED)\n\
             for n in sorted(os.listdir(sys.argv[1])): z.write(os.path.join(sys.argv[1], n), n)\n\
             z.close()",
        ])
        .arg(dir)
        .arg(&out)
        .status()
        .unwrap();
    assert!(st.success());
    std::fs::read(out).unwrap()
}

/// Registers `examples/gradescope-c` with its autograder as a zip, as `gradescope-zip`; the
/// suite's text.
async fn register_zip_suite(s: &Server, staff: &str) -> String {
    let zip = zip_of(&root().join("examples/gradescope-c/autograder"));
    let suite = std::fs::read_to_string(root().join("examples/gradescope-c/suite.yaml"))
        .unwrap()
        .replace("autograder: autograder", "autograder: autograder.zip");
    register(
        s,
        staff,
        "gradescope-zip",
        &suite,
        &[("autograder.zip".into(), zip)],
    )
    .await;
    suite
}

/// Queues `files` for `suite`; the 202 answer.
async fn submit(s: &Server, token: &str, suite: &str, files: &[(String, Vec<u8>)]) -> Value {
    let files: Vec<Value> = files
        .iter()
        .map(|(p, b)| json!({"path": p, "content": String::from_utf8(b.clone()).unwrap()}))
        .collect();
    let (st, v) = s
        .post(
            token,
            "/submissions",
            json!({"suite": suite, "files": files}),
        )
        .await;
    assert_eq!(st, StatusCode::ACCEPTED, "{v}");
    v
}

/// Waits until submission `id` is done or failed (120 s at most); `more` goes into a timeout's
/// message.
async fn finished(s: &Server, token: &str, id: &str, more: &str) -> Value {
    s.finished(token, id, Duration::from_secs(120), || more.to_string())
        .await
}

#[test]
fn registered_suites_grade_through_check_and_the_queue() {
    let s = Server::start("[submissions]\nworkers = 1\n", &[]);
    rt().block_on(async {
        let staff = s.token("staff").await;
        let student = s.token("student").await;
        for ex in [
            "gradescope-c",
            "prairielearn-python",
            "pycalc",
            "check50-hello",
        ] {
            register_example(&s, &staff, ex).await;
        }
        // The same autograder as a zip.
        let suite = register_zip_suite(&s, &staff).await;

        // A hostile zip (a path out of its folder) is refused with the entry named.
        let t = tempfile::tempdir().unwrap();
        let evil = t.path().join("evil.zip");
        let st = std::process::Command::new("python3")
            .args([
                "-c",
                "import sys, zipfile\n\
                 z = zipfile.ZipFile(sys.argv[1], 'w')\n\
                 z.writestr('run_autograder', '#!/bin/sh\\n')\n\
                 z.writestr('../../escaped', 'x')\n\
                 z.close()",
            ])
            .arg(&evil)
            .status()
            .unwrap();
        assert!(st.success());
        let form = reqwest::multipart::Form::new()
            .text("id", "evil")
            .part(
                "suite",
                reqwest::multipart::Part::bytes(suite.clone().into_bytes()).file_name("suite.yaml"),
            )
            .part(
                "f",
                reqwest::multipart::Part::bytes(std::fs::read(&evil).unwrap())
                    .file_name("autograder.zip"),
            );
        let r = client()
            .post(s.url("/suites"))
            .bearer_auth(&staff)
            .multipart(form)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
        let body = r.text().await.unwrap();
        assert!(
            body.contains("entry \\\"../../escaped\\\": '..' or '.' in the path"),
            "{body}"
        );

        for (suite, example, case, score, max) in [
            ("gradescope-c", "gradescope-c", "correct", 6.0, 6.0),
            ("gradescope-c", "gradescope-c", "crashing", 4.0, 6.0),
            ("gradescope-zip", "gradescope-c", "crashing", 4.0, 6.0),
            ("gradescope-zip", "gradescope-c", "wrong", 0.0, 6.0),
            (
                "prairielearn-python",
                "prairielearn-python",
                "looping",
                4.0,
                6.0,
            ),
            ("pycalc", "pycalc", "correct", 10.0, 10.0),
            ("pycalc", "pycalc", "wrong_mean", 5.0, 10.0),
            ("check50-hello", "check50-hello", "correct", 6.0, 6.0),
            ("check50-hello", "check50-hello", "wrong", 4.0, 6.0),
        ] {
            let v = check(&s, &student, suite, &submission(example, case)).await;
            assert_eq!(
                (v["score"].as_f64(), v["max_score"].as_f64()),
                (Some(score), Some(max)),
                "{suite} {case}: {v:#}"
            );
        }
        // A student sees an after_due_date test as pass/fail only.
        let v = check(
            &s,
            &student,
            "gradescope-c",
            &submission("gradescope-c", "wrong"),
        )
        .await;
        let hidden = &v["results"]["autograder/3"];
        assert_eq!(hidden["hidden"], true, "{v:#}");
        assert_eq!(hidden["message"], "hidden check failed");
        assert_eq!(hidden["script"], json!([]));

        // Through the queue.
        let v = submit(
            &s,
            &student,
            "gradescope-zip",
            &submission("gradescope-c", "crashing"),
        )
        .await;
        let v = finished(&s, &student, v["id"].as_str().unwrap(), "").await;
        assert_eq!(v["verdict"], "wrong_answer", "{v:#}");
        assert_eq!(
            (v["score"].as_f64(), v["max_score"].as_f64()),
            (Some(4.0), Some(6.0))
        );
    });
}

/// PrairieLearn's `gradable: false` over HTTP: the student's to fix, never an internal error.
/// `/check` and `GET /submissions/{id}` carry the grader's message to the student, the verdict is
/// `not_gradable` (status `done`), and the gradebook keeps the student's earlier grade, as
/// PrairieLearn does not count an invalid submission.
#[test]
fn a_not_gradable_submission_reaches_the_student_and_keeps_the_earlier_grade() {
    let s = Server::start("[submissions]\nworkers = 1\n", &[]);
    rt().block_on(async {
        let staff = s.token("staff").await;
        let student = s.token("student").await;
        register_example(&s, &staff, "prairielearn-python").await;
        let why =
            "the grader marked the submission not gradable: no file named fib.py was submitted";
        let missing = submission("prairielearn-python", "missing");

        let v = check(&s, &student, "prairielearn-python", &missing).await;
        let row = &v["results"]["fib"];
        assert_eq!(
            (&row["message"], &row["error"]),
            (&json!(why), &Value::Null),
            "{v:#}"
        );
        let id = s
            .upload(&student, &[("README.txt", &missing[0].1[..])])
            .await;
        let (st, cs50) = s
            .post(
                &student,
                "/check",
                json!({"checks": "prairielearn-python", "sandbox": {"homedir": id}}),
            )
            .await;
        assert_eq!(st, StatusCode::OK);
        assert!(
            cs50["results"]["fib"]["script"].to_string().contains(why),
            "{cs50:#}"
        );

        let good = submit(
            &s,
            &student,
            "prairielearn-python",
            &submission("prairielearn-python", "correct"),
        )
        .await;
        let good = finished(&s, &student, good["id"].as_str().unwrap(), "").await;
        assert_eq!(good["score"], 6.0, "{good:#}");
        let bad = submit(&s, &student, "prairielearn-python", &missing).await;
        let bad = finished(&s, &student, bad["id"].as_str().unwrap(), "").await;
        assert_eq!(
            (&bad["status"], &bad["verdict"], &bad["message"]),
            (&json!("done"), &json!("not_gradable"), &json!(why)),
            "{bad:#}"
        );
        assert_eq!(bad["checks"]["results"]["fib"]["message"], why);
        let (st, book) = s.get(&staff, "/suites/prairielearn-python/gradebook").await;
        assert_eq!(st, StatusCode::OK, "{book}");
        let rows = book["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 1, "{book:#}");
        assert_eq!(
            (&rows[0]["submission"], &rows[0]["score"]),
            (&good["id"], &json!(6.0)),
            "{book:#}"
        );
    });
}

/// A grader a limit stopped graded nothing: the queued submission's verdict names the limit
/// (`time_limit` for the wall clock, `memory_limit`), as a run's does, with the reason in the
/// message; never `wrong_answer`.
#[test]
fn a_grader_stopped_by_a_limit_gets_that_limits_verdict() {
    let s = Server::start("[submissions]\nworkers = 1\n", &[]);
    rt().block_on(async {
        let staff = s.token("staff").await;
        let student = s.token("student").await;
        for (id, run, limits, verdict, reason) in [
            (
                "sleeps",
                "#!/bin/sh\nsleep 30\n",
                "{}",
                "time_limit",
                "wall time limit of 2s exceeded",
            ),
            (
                "hog",
                "#!/bin/sh\nexec python3 -c 'x = bytearray(512 << 20)'\n",
                "{memory: 64M}",
                "memory_limit",
                "memory limit of 64M exceeded",
            ),
        ] {
            let suite = format!(
                "name: {id}\ntimeout: 2s\nchecks:\n  - id: autograder\n    points: 1\n    \
                 limits: {limits}\n    gradescope: {{autograder: ag}}\n"
            );
            let files = [("ag/run_autograder".to_string(), run.as_bytes().to_vec())];
            register(&s, &staff, id, &suite, &files).await;
            let v = submit(&s, &student, id, &[("a.txt".into(), b"a".to_vec())]).await;
            let v = finished(&s, &student, v["id"].as_str().unwrap(), "").await;
            assert_eq!(
                (&v["status"], &v["verdict"], v["score"].as_f64()),
                (&json!("done"), &json!(verdict), Some(0.0)),
                "{id}: {v:#}"
            );
            let m = v["message"].as_str().unwrap_or_default();
            assert_eq!(
                m,
                format!("autograder: run_autograder was stopped: {reason}"),
                "{id}: {v:#}"
            );
        }
    });
}

#[test]
fn a_remote_worker_runs_a_registered_autograder() {
    let s = Server::start("[submissions]\nworkers = 0\n", &[]);
    rt().block_on(async {
        let staff = s.token("staff").await;
        let student = s.token("student").await;
        let wt = s.token("worker").await;
        register_zip_suite(&s, &staff).await;
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_corral"));
        cmd.args(["worker", "--server", &s.base, "--name", "remote1"])
            .env("CORRAL_WORKER_TOKEN", &wt);
        let mut worker = Logged::spawn(cmd);
        let v = submit(
            &s,
            &student,
            "gradescope-zip",
            &submission("gradescope-c", "crashing"),
        )
        .await;
        let log = worker.log.lock().unwrap().clone();
        let v = finished(&s, &student, v["id"].as_str().unwrap(), &log).await;
        assert!(v["worker"].as_str().unwrap().starts_with("remote:"), "{v}");
        assert_eq!(
            (v["score"].as_f64(), v["max_score"].as_f64()),
            (Some(4.0), Some(6.0)),
            "{v:#}"
        );
        assert_eq!(
            v["checks"]["results"]["autograder/2"]["message"],
            "crashed (signal 11)"
        );
        let _ = worker.child.kill();
        let _ = worker.child.wait();
    });
}

/// A check50 problem's hidden checks are kept from the submission by Landlock, which gVisor
/// lacks: a grading request may not move such a suite onto gVisor (the review that found it
/// read the hidden check's source through a public check's output with `"runtime": "gvisor"`).
#[test]
fn a_request_cannot_grade_hidden_check50_checks_under_gvisor() {
    let s = Server::start("[submissions]\nworkers = 0\n", &[]);
    rt().block_on(async {
        let staff = s.token("staff").await;
        let student = s.token("student").await;
        register_example(&s, &staff, "check50-hello").await;
        register_example(&s, &staff, "pycalc").await;
        let hostile = submission("check50-hello", "reads_the_problem");
        let files: Vec<(&str, &[u8])> = hostile
            .iter()
            .map(|(p, b)| (p.as_str(), b.as_slice()))
            .collect();
        let inline: Vec<Value> = hostile
            .iter()
            .map(|(p, b)| json!({"path": p, "content": String::from_utf8(b.clone()).unwrap()}))
            .collect();
        for token in [&student, &staff] {
            let id = s.upload(token, &files).await;
            let (st, v) = s
                .post(
                    token,
                    "/check?format=json",
                    json!({"checks": "check50-hello", "sandbox": {"homedir": id}, "runtime": "gvisor"}),
                )
                .await;
            assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{v:#}");
            let e = v["message"].as_str().unwrap_or_default();
            assert!(
                e.contains("check \"hello\"") && e.contains("Landlock"),
                "{e}"
            );
            let (st, v) = s
                .post(
                    token,
                    "/submissions",
                    json!({"suite": "check50-hello", "files": inline, "runtime": "gvisor"}),
                )
                .await;
            assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{v:#}");
        }
        // Natively, or without a runtime, the same submission is taken (and finds the problem
        // unreadable: check50.rs covers that); a suite that hides nothing with Landlock may go
        // under gVisor.
        for (suite, runtime) in [
            ("check50-hello", json!("native")),
            ("check50-hello", Value::Null),
            ("pycalc", json!("gvisor")),
        ] {
            let (st, v) = s
                .post(
                    &student,
                    "/submissions",
                    json!({"suite": suite, "files": inline, "runtime": runtime}),
                )
                .await;
            assert_eq!(st, StatusCode::ACCEPTED, "{suite} {runtime}: {v:#}");
        }
    });
}

/// The staff page counts check revisions' scores, so the server records them from its own
/// report: a client that sent its own could claim any score (the review forged a 4/4 that way).
#[test]
fn a_checks_revision_carries_the_reports_score_and_no_client_can_write_one() {
    let s = Server::start("", &[]);
    rt().block_on(async {
        let staff = s.token("staff").await;
        let student = s.token("student").await;
        register_example(&s, &staff, "hello").await;
        let files = submission("hello", "wrong_output");
        let files: Vec<(&str, &[u8])> = files
            .iter()
            .map(|(p, b)| (p.as_str(), b.as_slice()))
            .collect();
        let id = s.upload(&student, &files).await;
        let ask =
            json!({"checks": "hello", "sandbox": {"homedir": id}, "revision": {"language": "c"}});
        let (st, v) = s.post(&student, "/check", ask.clone()).await;
        assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "CS50's shape: {v:#}");
        let (st, v) = s.post(&student, "/check?format=json", ask).await;
        assert_eq!(st, StatusCode::OK, "{v:#}");
        let rev = &v["revision"];
        assert_eq!(rev["kind"], "check", "{v:#}");
        assert_eq!(rev["suite"], "hello");
        assert_eq!(rev["status"], "failed");
        assert_eq!(rev["score"].as_f64(), v["score"].as_f64());
        assert_eq!(rev["max_score"].as_f64(), v["max_score"].as_f64());
        assert!(v["score"].as_f64() < v["max_score"].as_f64(), "{v:#}");
        let (st, full) = s
            .get(
                &student,
                &format!("/revisions/{}", rev["id"].as_str().unwrap()),
            )
            .await;
        assert_eq!(st, StatusCode::OK);
        let paths: Vec<&str> = full["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["path"].as_str().unwrap())
            .collect();
        let uploaded: Vec<&str> = files.iter().map(|(p, _)| *p).collect();
        assert_eq!(paths, uploaded);

        // A forged one is refused, and staff see only the server's.
        let forged = json!({"kind": "check", "status": "passed", "suite": "hello", "score": 4,
                            "max_score": 4, "language": "c", "summary": "4/4",
                            "files": [{"path": "hello.c", "content": "int main(){}"}]});
        let (st, e) = s.post(&student, "/revisions", forged).await;
        assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{e}");
        let (st, all) = s.get(&staff, "/revisions?scope=all&kind=check").await;
        assert_eq!(st, StatusCode::OK);
        let all = all.as_array().unwrap();
        assert_eq!(all.len(), 1, "{all:?}");
        assert_eq!(all[0]["id"], rev["id"]);
    });
}

/// What a late-penalty autograder reads: a queued submission's `submission_metadata.json` says
/// when it was handed in (Gradescope's format, which Python 3.10's `fromisoformat` reads) and by
/// whom (the token's name), and the suite's due date; a regrade after the deadline keeps the
/// original's time, so the penalty does not change when staff regrade.
#[test]
fn a_gradescope_submission_is_dated_and_named_for_its_autograder() {
    let s = Server::start("[submissions]\nworkers = 1\n", &[]);
    rt().block_on(async {
        let staff = s.token("staff").await;
        let (st, v) = s
            .post(
                &s.admin,
                "/tokens",
                json!({"role": "student", "name": "ada"}),
            )
            .await;
        assert_eq!(st, StatusCode::CREATED, "{v}");
        let ada = v["token"].as_str().unwrap().to_string();
        let grade = "import json, re\n\
             m = json.load(open('/autograder/submission_metadata.json'))\n\
             a = m['assignment']\n\
             f = r'\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{6}[+-]\\d\\d:\\d\\d$'\n\
             ok = all(re.match(f, t) for t in (m['created_at'], a['due_date'], a['release_date']))\n\
             late = m['created_at'] > a['due_date']\n\
             seen = {'created_at': m['created_at'], 'due': a['due_date'], 'late_due': a['late_due_date'],\n\
                     'total': float(a['total_points']), 'user': m['users'][0]['name'], 'formats': ok}\n\
             json.dump({'tests': [{'number': '1', 'score': 0.5 if late else 1, 'max_score': 1,\n\
                                   'output': json.dumps(seen, sort_keys=True)}]},\n\
                       open('/autograder/results/results.json', 'w'))\n";
        let files = vec![
            (
                "autograder/run_autograder".to_string(),
                b"#!/bin/sh\nexec python3 /autograder/source/grade.py\n".to_vec(),
            ),
            ("autograder/grade.py".to_string(), grade.as_bytes().to_vec()),
        ];
        let suite = "name: dated\nchecks:\n  - id: autograder\n    points: 1\n    gradescope:\n      \
                     autograder: autograder\n      due_date: 2020-01-31T23:59:00-05:00\n";
        register(&s, &staff, "dated", suite, &files).await;
        let sub = vec![("answer.txt".to_string(), b"42\n".to_vec())];
        let before = jiff::Timestamp::now();
        let first = submit(&s, &ada, "dated", &sub).await;
        let first = first["id"].as_str().unwrap().to_string();
        let v = finished(&s, &ada, &first, "").await;
        let after = jiff::Timestamp::now();
        let seen = |v: &Value| -> Value {
            let m = &v["checks"]["results"]["autograder/1"]["message"];
            serde_json::from_str(m.as_str().unwrap_or_else(|| panic!("{v}"))).unwrap()
        };
        let was = seen(&v);
        assert_eq!(was["user"], "ada", "{was}");
        assert_eq!(was["due"], "2020-02-01T04:59:00.000000+00:00", "{was}");
        assert_eq!((&was["late_due"], &was["total"]), (&Value::Null, &json!(1.0)), "{was}");
        assert_eq!(was["formats"], true, "{was}");
        let at: jiff::Timestamp = was["created_at"].as_str().unwrap().parse().unwrap();
        assert!(before.checked_sub(jiff::SignedDuration::from_secs(1)).unwrap() <= at && at <= after, "{at} not in {before}..{after}");
        assert_eq!(v["score"], 0.5, "late: {v}");

        // Regraded later: the same time, so the same penalty.
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let (st, r) = s
            .post(&staff, &format!("/submissions/{first}/regrade"), json!({}))
            .await;
        assert_eq!(st, StatusCode::ACCEPTED, "{r}");
        let again = r["id"].as_str().unwrap().to_string();
        let v = finished(&s, &ada, &again, "").await;
        assert_eq!(seen(&v)["created_at"], was["created_at"], "{v}");
        assert_eq!(seen(&v)["user"], "ada", "{v}");
    });
}
