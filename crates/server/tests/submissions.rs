//! The submission queue over HTTP, without running programs (no in-process workers: what is
//! accepted stays queued, or is claimed by a test speaking the remote workers' protocol):
//! `Idempotency-Key` retries, folder suites pinned when a submission is accepted, and writes on
//! a full disk.

mod support;

use corral_store::Role;
use reqwest::header::{HeaderMap, HeaderValue};
use reqwest::StatusCode;
use serde_json::{json, Value};
use support::{json_of, TestServer};

/// A server whose submissions wait (no in-process workers).
async fn queue_only(edit: impl FnOnce(&mut corral_server::Config)) -> TestServer {
    TestServer::start(|c| {
        c.submissions.workers = Some(0);
        edit(c);
    })
    .await
}

/// `POST path` with `token`, these extra headers and this raw JSON text: status, the
/// `Idempotent-Replayed` header, JSON body.
async fn post_raw(
    s: &TestServer,
    token: &str,
    path: &str,
    headers: &[(&str, &[u8])],
    body: &str,
) -> (StatusCode, Option<String>, Value) {
    let mut h = HeaderMap::new();
    for (name, value) in headers {
        h.append(
            reqwest::header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_bytes(value).unwrap(),
        );
    }
    let r = reqwest::Client::new()
        .post(s.url(path))
        .bearer_auth(token)
        .header("content-type", "application/json")
        .headers(h)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let replayed = r
        .headers()
        .get("idempotent-replayed")
        .map(|v| v.to_str().unwrap().to_string());
    if path.starts_with("/judge0/") {
        // Judge0's own error shapes (`{"error"}`, a model's errors) are not corral's.
        let st = r.status();
        return (st, replayed, r.json().await.unwrap());
    }
    let (st, v) = json_of(r).await;
    (st, replayed, v)
}

/// Submissions in the store, in any state.
async fn stored(s: &TestServer) -> u64 {
    let q = s.store.queue_stats().await.unwrap();
    q.queued + q.running + q.done + q.failed
}

/// A client that retries with its `Idempotency-Key` gets the submission its first request made
/// (the same id, 202, `replayed` and `Idempotent-Replayed: true`), whatever the key order or
/// spacing of the body it sends again, and the key bare or quoted; never a second job. The same
/// key with another body is a 422 naming the key; another token's key is its own; malformed
/// keys are 400s; a batch refuses a key. Without the header every request made a job.
#[tokio::test(flavor = "multi_thread")]
async fn a_retry_with_its_idempotency_key_makes_no_second_submission() {
    let s = queue_only(|_| {}).await;
    let t = s.token(Role::Student).await;
    let body = r#"{"cmd": "echo hi", "stdin": "x", "limits": {"cpu_time": "1s", "memory": "64M"}}"#;
    let key: &[(&str, &[u8])] = &[("idempotency-key", b"8e03978e-40d5-43e8-bc93-6894a57f9324")];
    let (st, replayed, first) = post_raw(&s, &t, "/submissions", key, body).await;
    assert_eq!(st, StatusCode::ACCEPTED, "{first}");
    assert_eq!(replayed, None, "the first request is no replay");
    assert_eq!(first["status"], "queued");
    assert!(first.get("replayed").is_none(), "{first}");
    let id = first["id"].as_str().unwrap().to_string();
    let again = [
        body.to_string(),
        // The same request serialised again: other key order, other spaces.
        r#"{"limits":{"memory":"64M","cpu_time":"1s"},"stdin":"x","cmd":"echo hi"}"#.into(),
    ];
    for (i, b) in again.iter().enumerate() {
        let (st, replayed, v) = post_raw(&s, &t, "/submissions", key, b).await;
        assert_eq!(st, StatusCode::ACCEPTED, "retry {i}: {v}");
        assert_eq!(
            v["id"],
            id.as_str(),
            "retry {i} made another submission: {v}"
        );
        assert_eq!(v["replayed"], true, "{v}");
        assert_eq!(v["status"], "queued", "{v}");
        assert_eq!(replayed.as_deref(), Some("true"));
    }
    // The IETF draft's form: a structured-field string names the same key.
    let quoted: &[(&str, &[u8])] = &[(
        "idempotency-key",
        b"\"8e03978e-40d5-43e8-bc93-6894a57f9324\"",
    )];
    let (st, _, v) = post_raw(&s, &t, "/submissions", quoted, body).await;
    assert_eq!(
        (st, v["id"].as_str()),
        (StatusCode::ACCEPTED, Some(id.as_str())),
        "{v}"
    );
    assert_eq!(stored(&s).await, 1, "retries made no job");
    // The key reused for another request: refused, nothing stored.
    let (st, replayed, v) = post_raw(&s, &t, "/submissions", key, r#"{"cmd": "echo bye"}"#).await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(v["error"], "idempotency_key_reused", "{v}");
    let message = v["message"].as_str().unwrap();
    assert!(
        message.contains("8e03978e-40d5-43e8-bc93-6894a57f9324"),
        "{v}"
    );
    assert!(message.contains(&id), "{v}");
    assert_eq!(replayed, None);
    // Another token's key is another key.
    let other = s.token(Role::Student).await;
    let (st, _, v) = post_raw(&s, &other, "/submissions", key, body).await;
    assert_eq!(st, StatusCode::ACCEPTED, "{v}");
    assert_ne!(v["id"], id.as_str());
    assert!(v.get("replayed").is_none(), "{v}");
    // Without a key, every request is a submission of its own.
    let (_, _, a) = post_raw(&s, &t, "/submissions", &[], body).await;
    let (_, _, b) = post_raw(&s, &t, "/submissions", &[], body).await;
    assert_ne!(a["id"], b["id"]);
    assert_eq!(stored(&s).await, 4);
    // Malformed keys: 400 with a JSON error that says what a key is; nothing stored.
    let long = vec![b'k'; 256];
    let malformed: [&[u8]; 5] = [b"", b"two words", b"caf\xc3\xa9", b"\"unterminated", &long];
    for bad in malformed {
        let (st, _, v) = post_raw(&s, &t, "/submissions", &[("idempotency-key", bad)], body).await;
        assert_eq!(
            st,
            StatusCode::BAD_REQUEST,
            "{:?}: {v}",
            String::from_utf8_lossy(bad)
        );
        assert_eq!(v["error"], "bad_idempotency_key", "{v}");
        assert!(
            v["message"].as_str().unwrap().contains("visible ASCII"),
            "{v}"
        );
    }
    let twice: &[(&str, &[u8])] = &[("idempotency-key", b"a"), ("idempotency-key", b"b")];
    let (st, _, v) = post_raw(&s, &t, "/submissions", twice, body).await;
    assert_eq!(
        (st, &v["error"]),
        (StatusCode::BAD_REQUEST, &json!("bad_idempotency_key"))
    );
    // A batch is not made again as a whole: a key there is refused, not ignored.
    let (st, _, v) = post_raw(
        &s,
        &t,
        "/submissions/batch",
        &[("idempotency-key", b"batch-1")],
        &json!({"submissions": [serde_json::from_str::<Value>(body).unwrap()]}).to_string(),
    )
    .await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(v["error"], "idempotency_key_unsupported", "{v}");
    assert_eq!(stored(&s).await, 4, "nothing stored by refused requests");
    s.stop().await;
}

/// Retries sent at once (the first still being accepted when the others arrive) make one
/// submission between them, and each is answered its id.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_retries_with_one_idempotency_key_make_one_submission() {
    let s = queue_only(|_| {}).await;
    let t = s.token(Role::Student).await;
    for round in 0..3 {
        let tasks: Vec<_> = (0..12)
            .map(|_| {
                let (url, t) = (s.url("/submissions"), t.clone());
                tokio::spawn(async move {
                    let r = reqwest::Client::new()
                        .post(url)
                        .bearer_auth(t)
                        .header("idempotency-key", format!("deadline-night-{round}"))
                        .json(&json!({"cmd": "echo hi",
                                      "files": [{"path": "a.txt", "content": "a"}]}))
                        .send()
                        .await
                        .unwrap();
                    json_of(r).await
                })
            })
            .collect();
        let mut ids = std::collections::BTreeSet::new();
        for task in tasks {
            let (st, v) = task.await.unwrap();
            assert_eq!(st, StatusCode::ACCEPTED, "{v}");
            ids.insert(v["id"].as_str().unwrap().to_string());
        }
        assert_eq!(ids.len(), 1, "round {round}: {ids:?}");
    }
    assert_eq!(stored(&s).await, 3);
    s.stop().await;
}

/// A retry of a submission still waiting is answered it, not refused as one submission too many
/// for the token's cap.
#[tokio::test(flavor = "multi_thread")]
async fn a_retry_is_not_refused_by_the_pending_cap() {
    let s = queue_only(|c| c.submissions.max_pending_per_owner = 1).await;
    let t = s.token(Role::Student).await;
    let key: &[(&str, &[u8])] = &[("idempotency-key", b"only-one")];
    let body = r#"{"cmd": "true"}"#;
    let (st, _, first) = post_raw(&s, &t, "/submissions", key, body).await;
    assert_eq!(st, StatusCode::ACCEPTED, "{first}");
    let (st, replayed, v) = post_raw(&s, &t, "/submissions", key, body).await;
    assert_eq!(st, StatusCode::ACCEPTED, "{v}");
    assert_eq!(
        (&v["id"], replayed.as_deref()),
        (&first["id"], Some("true"))
    );
    let (st, _, v) = post_raw(&s, &t, "/submissions", &[], body).await;
    assert_eq!(
        st,
        StatusCode::TOO_MANY_REQUESTS,
        "a new submission is over the cap: {v}"
    );
    s.stop().await;
}

/// The Judge0 surface takes the key too (its `base64_encoded` is part of the request); its batch
/// refuses one.
#[tokio::test(flavor = "multi_thread")]
async fn judge0_submissions_take_an_idempotency_key() {
    let s = queue_only(|_| {}).await;
    let t = s.token(Role::Student).await;
    let key: &[(&str, &[u8])] = &[("idempotency-key", b"j0-1")];
    let body = r#"{"language_id": 71, "source_code": "print(1)"}"#;
    let (st, replayed, first) = post_raw(&s, &t, "/judge0/submissions", key, body).await;
    assert_eq!(st, StatusCode::CREATED, "{first}");
    assert_eq!(replayed, None);
    let (st, replayed, v) = post_raw(&s, &t, "/judge0/submissions", key, body).await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    assert_eq!(
        (&v["token"], replayed.as_deref()),
        (&first["token"], Some("true"))
    );
    let path = "/judge0/submissions?base64_encoded=true";
    let b64 = r#"{"language_id": 71, "source_code": "cHJpbnQoMSk="}"#;
    let (st, _, v) = post_raw(&s, &t, path, key, b64).await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(stored(&s).await, 1);
    let batch = json!({"submissions": [serde_json::from_str::<Value>(body).unwrap()]});
    let (st, _, v) = post_raw(&s, &t, "/judge0/submissions/batch", key, &batch.to_string()).await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{v}");
    assert!(
        v["error"].as_str().unwrap().contains("Idempotency-Key"),
        "{v}"
    );
    assert_eq!(stored(&s).await, 1);
    s.stop().await;
}

/// A small file system of the test's own (tmpfs of `size`; tests run as root), unmounted when
/// dropped, a panic included.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn new(size: &str) -> SmallDisk {
        let dir = tempfile::tempdir().unwrap();
        let out = std::process::Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "mounting a tmpfs (as root): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        SmallDisk { dir }
    }

    fn path(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// Takes every byte left: a file written until the disk refuses more (ENOSPC).
    fn fill(&self) -> std::path::PathBuf {
        use std::io::Write;
        let path = self.path().join("filler");
        let mut f = std::fs::File::create(&path).unwrap();
        let chunk = vec![0u8; 64 << 10];
        let e = loop {
            if let Err(e) = f.write_all(&chunk) {
                break e;
            }
        };
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}");
        // What is left is less than a chunk: a few bytes more, until not one fits.
        while f.write(&[0u8; 512]).is_ok_and(|n| n > 0) {}
        path
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// While the disk is full, a write is a 503 `storage_full` with `Retry-After` and a JSON error
/// that says so (it was a 500 "internal error"): a blob (an upload's file, a submission's inline
/// files) that cannot be written (ENOSPC), and a database write SQLite refuses (SQLITE_FULL).
/// Reads still answer; once there is room, the same writes succeed.
#[tokio::test(flavor = "multi_thread")]
async fn writes_on_a_full_disk_answer_503_storage_full() {
    let disk = SmallDisk::new("24m");
    let data = disk.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let s = queue_only(|c| c.data_dir = data.clone()).await;
    let t = s.token(Role::Student).await;
    let (st, before) = s.post(&t, "/submissions", json!({"cmd": "true"})).await;
    assert_eq!(st, StatusCode::ACCEPTED, "{before}");
    let filler = disk.fill();
    let upload = || async {
        let form = reqwest::multipart::Form::new().part(
            "files",
            reqwest::multipart::Part::bytes(vec![b'x'; 256 << 10]).file_name("big.txt"),
        );
        reqwest::Client::new()
            .post(s.url("/upload"))
            .bearer_auth(&t)
            .multipart(form)
            .send()
            .await
            .unwrap()
    };
    let with_files = json!({"cmd": "cat big.txt", "files": [{"path": "big.txt", "content": "y".repeat(256 << 10)}]});
    // SQLite's write (the job's row, its spec holding the standard input) needs pages the disk
    // no longer has.
    let big_row = json!({"cmd": "true", "stdin": "z".repeat(1536 << 10)});
    let full = [
        ("an upload's blob", upload().await),
        (
            "a submission's inline files",
            reqwest::Client::new()
                .post(s.url("/submissions"))
                .bearer_auth(&t)
                .json(&with_files)
                .send()
                .await
                .unwrap(),
        ),
        (
            "a submission's row",
            reqwest::Client::new()
                .post(s.url("/submissions"))
                .bearer_auth(&t)
                .json(&big_row)
                .send()
                .await
                .unwrap(),
        ),
    ];
    for (what, r) in full {
        let retry_after = r
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap().parse::<u64>().unwrap());
        let (st, v) = json_of(r).await;
        assert_eq!(st, StatusCode::SERVICE_UNAVAILABLE, "{what}: {v}");
        assert_eq!(v["error"], "storage_full", "{what}: {v}");
        assert!(
            v["message"].as_str().unwrap().contains("storage is full"),
            "{what}: {v}"
        );
        assert!(retry_after.is_some_and(|s| s > 0), "{what}: no Retry-After");
    }
    // The Judge0 surface says it in Judge0's shape, `Retry-After` included.
    let r = reqwest::Client::new()
        .post(s.url("/judge0/submissions"))
        .bearer_auth(&t)
        .json(&json!({"language_id": 71, "source_code": "print(1)\n".repeat(30_000)}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(r.headers().contains_key("retry-after"), "{:?}", r.headers());
    let v: Value = r.json().await.unwrap();
    assert!(
        v["error"].as_str().unwrap().contains("storage is full"),
        "{v}"
    );
    // Reads still answer.
    let id = before["id"].as_str().unwrap();
    let (st, v) = s.get(&t, &format!("/submissions/{id}")).await;
    assert_eq!(
        (st, &v["status"]),
        (StatusCode::OK, &json!("queued")),
        "{v}"
    );
    // Room again: the same writes are taken.
    std::fs::remove_file(filler).unwrap();
    let (st, v) = json_of(upload().await).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    for body in [with_files, big_row] {
        let (st, v) = s.post(&t, "/submissions", body).await;
        assert_eq!(st, StatusCode::ACCEPTED, "{v}");
    }
    s.stop().await;
    drop(disk);
}

/// Writes `files` (path, content) under the suites folder's suite `id`, replacing what is there.
fn write_folder_suite(s: &TestServer, id: &str, files: &[(&str, &str)]) {
    let dir = s.data_dir().join("suites").join(id);
    let _ = std::fs::remove_dir_all(&dir);
    for (path, content) in files {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }
}

/// A folder suite: prints its data file, expects `want`.
fn folder_suite(want: &str) -> String {
    format!(
        "name: echo\nfiles:\n  - {{path: data.txt, protected: true}}\nchecks:\n  - id: says\n    \
         steps:\n      - run: cat data.txt\n      - stdout: \"{want}\"\n      - exit: 0\n"
    )
}

/// An unchanged folder suite is pinned by the upload made of it a moment ago (reading and
/// hashing a folder with an autograder's data in it was most of what accepting cost); any change
/// pins it anew: a same-size edit in place, at once or after the folder settled. The folder's
/// times are trusted only once they are 2 s old, so the test waits that long where it must.
#[tokio::test(flavor = "multi_thread")]
async fn an_unchanged_folder_suite_is_pinned_by_one_upload() {
    let s = queue_only(|_| {}).await;
    let t = s.token(Role::Student).await;
    let body = json!({"suite": "echo", "files": [{"path": "answer.txt", "content": "42"}]});
    let settle = || std::thread::sleep(std::time::Duration::from_millis(2100));
    // The upload a new submission's suite is pinned by, and its data file.
    let submit = || async {
        let (st, v) = s.post(&t, "/submissions", &body).await;
        assert_eq!(st, StatusCode::ACCEPTED, "{v}");
        let job = s
            .store
            .get_job(v["id"].as_str().unwrap())
            .await
            .unwrap()
            .unwrap();
        let spec: Value = serde_json::from_str(&job.spec).unwrap();
        let id = spec["suite"]["upload"].as_str().unwrap().to_string();
        let upload = s.store.get_upload(&id).await.unwrap().unwrap();
        let data = s
            .store
            .read_upload_file(&upload, "data.txt")
            .await
            .unwrap()
            .unwrap();
        (id, String::from_utf8(data).unwrap())
    };
    write_folder_suite(
        &s,
        "echo",
        &[("suite.yaml", &folder_suite("v1")), ("data.txt", "v1")],
    );
    let data = s.data_dir().join("suites/echo/data.txt");
    // Just written: read at every submission until it settles.
    let (fresh1, _) = submit().await;
    let (fresh2, _) = submit().await;
    assert_ne!(fresh1, fresh2);
    settle();
    let (u1, d1) = submit().await;
    assert_eq!(d1, "v1");
    for _ in 0..3 {
        assert_eq!(
            submit().await,
            (u1.clone(), d1.clone()),
            "unchanged: the same upload"
        );
    }
    // The same size, edited in place and submitted at once.
    std::fs::write(&data, "v2").unwrap();
    let (u2, d2) = submit().await;
    assert_ne!(u2, u1);
    assert_eq!(d2, "v2");
    settle();
    let (u3, d3) = submit().await;
    assert_eq!(d3, "v2");
    assert_eq!(
        submit().await,
        (u3.clone(), d3),
        "settled: pinned once more, then kept"
    );
    // The same size again, edited in place, submitted after it settled.
    std::fs::write(&data, "v4").unwrap();
    settle();
    let (u4, d4) = submit().await;
    assert_ne!(u4, u3);
    assert_eq!(d4, "v4");
    // A file added, the others untouched.
    std::fs::write(s.data_dir().join("suites/echo/extra.txt"), "x").unwrap();
    settle();
    let (u5, _) = submit().await;
    assert_ne!(u5, u4);
    let five = s.store.get_upload(&u5).await.unwrap().unwrap();
    assert!(five.files.iter().any(|f| f.path == "extra.txt"), "{five:?}");
    s.stop().await;
}

/// A submission's suite is read as its files are when the submission is accepted, though the
/// server keeps suites it loaded (by their content: loading a check50 problem compiles its
/// Python): an edit naming an image the server lacks is refused at once, an edit back accepted
/// again, and a request's `image` is its own load (the suite's checks run in it).
#[tokio::test(flavor = "multi_thread")]
async fn a_suite_edited_between_submissions_is_read_as_it_is_now() {
    let s = queue_only(|_| {}).await;
    let t = s.token(Role::Student).await;
    let suite = |image: &str| {
        format!("name: imgs\nchecks:\n  - id: a\n{image}    steps: [{{run: \"true\"}}]\n")
    };
    let body = json!({"suite": "imgs", "files": [{"path": "a.txt", "content": "1"}]});
    let missing = |v: &Value, image: &str| {
        let m = v["message"].as_str().unwrap_or_default();
        m.contains("not on this server") && m.contains(image)
    };
    write_folder_suite(&s, "imgs", &[("suite.yaml", &suite(""))]);
    for _ in 0..2 {
        let (st, v) = s.post(&t, "/submissions", &body).await;
        assert_eq!(st, StatusCode::ACCEPTED, "{v}");
    }
    write_folder_suite(
        &s,
        "imgs",
        &[("suite.yaml", &suite("    image: course/none:1\n"))],
    );
    let (st, v) = s.post(&t, "/submissions", &body).await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert!(missing(&v, "course/none:1"), "{v}");
    write_folder_suite(&s, "imgs", &[("suite.yaml", &suite(""))]);
    let (st, v) = s.post(&t, "/submissions", &body).await;
    assert_eq!(st, StatusCode::ACCEPTED, "{v}");
    let mut with_image = body.clone();
    with_image["image"] = json!("course/other:2");
    let (st, v) = s.post(&t, "/submissions", &with_image).await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert!(missing(&v, "course/other:2"), "{v}");
    let (st, v) = s.post(&t, "/submissions", &body).await;
    assert_eq!(st, StatusCode::ACCEPTED, "{v}");
    s.stop().await;
}

/// What a worker claims next: the job's id and its suite's files (path → text).
async fn claim_suite_files(
    s: &TestServer,
    worker: &str,
) -> (String, std::collections::BTreeMap<String, String>) {
    let (st, v) = s.post(worker, "/worker/claim", json!({"wait": 0})).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    use base64::Engine;
    let files = v["suite_files"]
        .as_array()
        .unwrap_or_else(|| panic!("a suite job's claim has its suite's files: {v}"))
        .iter()
        .map(|f| {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(f["content_base64"].as_str().unwrap())
                .unwrap();
            (
                f["path"].as_str().unwrap().to_string(),
                String::from_utf8(bytes).unwrap(),
            )
        })
        .collect();
    (v["id"].as_str().unwrap().to_string(), files)
}

/// A suite of the suites folder is pinned when a submission is accepted: edited while the
/// submission waits (its suite file, its data file, a file added, one removed), the submission
/// is still judged with the suite as it was — a worker's claim carries those files, and the
/// in-process workers read the same upload — and retention keeps them while it waits. A
/// submission accepted after the edit is judged with the new suite. The folder used to be read
/// when the job was judged: the edit changed how the waiting submission was graded.
#[tokio::test(flavor = "multi_thread")]
async fn a_folder_suite_is_pinned_when_a_submission_is_accepted() {
    let s = queue_only(|_| {}).await;
    let t = s.token(Role::Student).await;
    let worker = s.token(Role::Worker).await;
    let v1 = folder_suite("v1");
    write_folder_suite(
        &s,
        "echo",
        &[
            ("suite.yaml", &v1),
            ("data.txt", "v1"),
            ("notes/old.md", "old"),
        ],
    );
    let body = json!({"suite": "echo", "files": [{"path": "answer.txt", "content": "42"}]});
    let (st, before) = s.post(&t, "/submissions", &body).await;
    assert_eq!(st, StatusCode::ACCEPTED, "{before}");
    // The course's staff change the assignment while the submission waits.
    let v2 = folder_suite("v2");
    write_folder_suite(
        &s,
        "echo",
        &[
            ("suite.yaml", &v2),
            ("data.txt", "v2"),
            ("notes/new.md", "new"),
        ],
    );
    let (st, after) = s.post(&t, "/submissions", &body).await;
    assert_eq!(st, StatusCode::ACCEPTED, "{after}");
    // Retention (every upload old enough): what waiting jobs pin stays.
    s.store.delete_uploads_before(i64::MAX).await.unwrap();
    let (id, files) = claim_suite_files(&s, &worker).await;
    assert_eq!(id, before["id"].as_str().unwrap());
    let want = |suite: &str, data: &str, note: (&str, &str)| {
        [
            ("data.txt".to_string(), data.to_string()),
            (note.0.to_string(), note.1.to_string()),
            ("suite.yaml".to_string(), suite.to_string()),
        ]
        .into_iter()
        .collect::<std::collections::BTreeMap<_, _>>()
    };
    assert_eq!(
        files,
        want(&v1, "v1", ("notes/old.md", "old")),
        "the suite as it was when the submission was accepted"
    );
    let (id, files) = claim_suite_files(&s, &worker).await;
    assert_eq!(id, after["id"].as_str().unwrap());
    assert_eq!(files, want(&v2, "v2", ("notes/new.md", "new")));
    // The pinned files (hidden tests, expected outputs) are no upload of the student's: it can
    // neither read them nor submit them as its own files.
    let job = s.store.get_job(&id).await.unwrap().unwrap();
    let spec: Value = serde_json::from_str(&job.spec).unwrap();
    let pinned = spec["suite"]["upload"].as_str().unwrap();
    let (st, v) = s.get(&t, &format!("/uploads/{pinned}")).await;
    assert_eq!(st, StatusCode::NOT_FOUND, "{v}");
    let (st, v) = s
        .post(&t, "/submissions", json!({"cmd": "true", "upload": pinned}))
        .await;
    assert_eq!(st, StatusCode::NOT_FOUND, "{v}");
    s.stop().await;
}

/// A suite's checks give their own input, expected output, limits and environment: a suite
/// submission that also sends `stdin`, `expected_output`, `limits` or `env` is refused (422,
/// naming them) like one with `seccomp`, in a batch too, and nothing is stored. Before, they
/// were accepted and silently ignored: a student's `limits` or `stdin` did nothing.
#[tokio::test(flavor = "multi_thread")]
async fn a_suite_submission_refuses_what_only_a_run_reads() {
    let s = queue_only(|_| {}).await;
    let t = s.token(Role::Student).await;
    let files = json!([{"path": "a.txt", "content": "x"}]);
    for (extra, named) in [
        (json!({"stdin": "2 40"}), "stdin is"),
        (json!({"expected_output": "42"}), "expected_output is"),
        (json!({"limits": {"cpu_time": "1s"}}), "limits is"),
        (json!({"env": {"K": "V"}}), "env is"),
        (
            json!({"stdin": "1", "limits": {"memory": "1G"}}),
            "stdin, limits are",
        ),
    ] {
        let mut body = json!({"suite": "nope", "files": files});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        refused_alone_and_in_a_batch(&s, &t, body, |m| {
            m.starts_with(named) && m.contains("a suite's checks")
        })
        .await;
    }
    // An empty `stdin` and `env`, as a client filling every field sends them, say nothing.
    let (st, v) = s
        .post(
            &t,
            "/submissions",
            json!({"suite": "nope", "files": files, "stdin": "", "env": {}}),
        )
        .await;
    assert_eq!(st, StatusCode::NOT_FOUND, "no suite \"nope\": {v}");
    assert_eq!(stored(&s).await, 0);
    s.stop().await;
}

/// `body` is a 422 whose message `says` so on its own, and an `invalid` item in a batch.
async fn refused_alone_and_in_a_batch(
    s: &TestServer,
    t: &str,
    body: Value,
    says: impl Fn(&str) -> bool,
) {
    let (st, v) = s.post(t, "/submissions", &body).await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{body} -> {v}");
    assert!(says(v["message"].as_str().unwrap()), "{body} -> {v}");
    let (st, v) = s
        .post(t, "/submissions/batch", json!({"submissions": [body]}))
        .await;
    assert_eq!(st, StatusCode::ACCEPTED, "{v}");
    assert_eq!(v["submissions"][0]["error"], "invalid", "{v}");
}

/// A language submission without its program (no `source_code`, `files` or `upload`: an LMS
/// that lost a field) is refused at once (422, saying what to give), in a batch too, as Judge0's
/// surface refuses a blank `source_code`; it was queued and then graded the student's
/// `runtime_error` ("can't open file '/home/sandbox/main.py'"). Nothing is stored.
#[tokio::test(flavor = "multi_thread")]
async fn a_language_submission_without_its_program_is_refused() {
    let s = queue_only(|_| {}).await;
    let t = s.token(Role::Student).await;
    for body in [
        json!({"language": "python"}),
        json!({"language": "python", "files": [], "stdin": "1"}),
    ] {
        refused_alone_and_in_a_batch(&s, &t, body, |m| {
            m.contains("give source_code, files or upload")
        })
        .await;
    }
    assert_eq!(stored(&s).await, 0);
    let (st, v) = s
        .post(
            &t,
            "/submissions",
            json!({"language": "python", "source_code": "print(1)"}),
        )
        .await;
    assert_eq!(st, StatusCode::ACCEPTED, "{v}");
    s.stop().await;
}

/// A request waiting for a submission (`?wait=true`) is answered when its verdict is recorded
/// (here by a remote worker's result), not at its timeout: each finish wakes that job's waiters,
/// and a waiter no longer reads the database every 200 ms meanwhile (300 waiters cost ~21 % of a
/// core). The wait (25 s) is shorter than the server's look-again interval (30 s): only the
/// wake-up can end it before its timeout. A waiter for another job keeps waiting.
#[tokio::test(flavor = "multi_thread")]
async fn a_waiting_request_is_answered_when_its_verdict_is_recorded() {
    let s = queue_only(|_| {}).await;
    let t = s.token(Role::Student).await;
    let worker = s.token(Role::Worker).await;
    let mut ids = Vec::new();
    for _ in 0..2 {
        let (st, v) = s.post(&t, "/submissions", json!({"cmd": "true"})).await;
        assert_eq!(st, StatusCode::ACCEPTED, "{v}");
        ids.push(v["id"].as_str().unwrap().to_string());
    }
    let (st, claim) = s.post(&worker, "/worker/claim", json!({"wait": 0})).await;
    assert_eq!(st, StatusCode::OK, "{claim}");
    assert_eq!(claim["id"], ids[0].as_str());
    // A wait of no sense is refused (a negative one was taken as the longest).
    for bad in ["-1", "NaN", "inf"] {
        let path = format!("/submissions/{}?wait=true&timeout={bad}", ids[0]);
        let (st, v) = s.get(&t, &path).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{bad}: {v}");
    }
    let asked = std::time::Instant::now();
    let wait = |id: &str| {
        let (url, t) = (
            s.url(&format!("/submissions/{id}?wait=true&timeout=25")),
            t.clone(),
        );
        tokio::spawn(async move {
            let r = reqwest::Client::new()
                .get(url)
                .bearer_auth(t)
                .send()
                .await
                .unwrap();
            json_of(r).await
        })
    };
    let (judged, other) = (wait(&ids[0]), wait(&ids[1]));
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert!(!judged.is_finished() && !other.is_finished());

    let body = serde_json::to_vec(&json!({
        "lease": claim["lease"],
        "verdict": {"verdict": "accepted", "score": 1.0, "max_score": 1.0},
    }))
    .unwrap();
    let key = corral_store::sha256_hex(worker.as_bytes());
    let sig = corral_judge::signature_header(key.as_bytes(), corral_store::now(), &body);
    let r = reqwest::Client::new()
        .post(s.url(&format!("/worker/jobs/{}/result", ids[0])))
        .bearer_auth(&worker)
        .header("content-type", "application/json")
        .header("Corral-Signature", sig)
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);

    let (st, v) = judged.await.unwrap();
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(
        (&v["status"], &v["verdict"]),
        (&json!("done"), &json!("accepted")),
        "{v}"
    );
    // At its 25 s timeout the wait answers whatever the job is (judged by then too): the answer
    // must have come well before, when the verdict was recorded.
    assert!(
        asked.elapsed() < std::time::Duration::from_secs(20),
        "the waiter was answered at its timeout, not when its verdict was recorded: {v}"
    );
    assert!(!other.is_finished(), "another job's waiter was answered");
    other.abort();
    s.stop().await;
}

/// `GET path` with `token`: the status and the body as text, with its content type.
async fn get_text(s: &TestServer, token: &str, path: &str) -> (StatusCode, String, String) {
    let r = reqwest::Client::new()
        .get(s.url(path))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    let st = r.status();
    let ct = r
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    (st, ct, r.text().await.unwrap())
}

/// The ids of a `GET /submissions` answer.
fn ids_of(v: &Value) -> Vec<&str> {
    v["submissions"]
        .as_array()
        .unwrap_or_else(|| panic!("not a page: {v}"))
        .iter()
        .map(|x| x["id"].as_str().unwrap())
        .collect()
}

/// Staff see the queue through the server: every token's submissions by the page (a student
/// only its own), any student's submission, a suite's gradebook (JSON, and CSV with a name a
/// spreadsheet would run as a formula defused), and regrades after the suite was fixed — one
/// submission, or the whole gradebook, each by the suite as it is now; a student can do none of
/// it, an unfinished submission is not regraded (409) and one whose files retention deleted is
/// said to be gone (410). Before, staff got 404 for a student's submission and had no list, no
/// gradebook and no regrade (only `corral grade` on local folders).
#[tokio::test(flavor = "multi_thread")]
async fn staff_list_read_grade_and_regrade_students_submissions() {
    let s = queue_only(|_| {}).await;
    write_folder_suite(
        &s,
        "echo",
        &[("suite.yaml", &folder_suite("v1")), ("data.txt", "v1")],
    );
    let ada = s.store.create_token(Role::Student, "ada").await.unwrap();
    let bob = s.store.create_token(Role::Student, "=bob").await.unwrap();
    let staff = s.token(Role::Staff).await;
    let (ada_t, bob_t) = (ada.secret.clone(), bob.secret.clone());
    let submit = |t: String, body: Value| {
        let s = &s;
        async move {
            let (st, v) = s.post(&t, "/submissions", &body).await;
            assert_eq!(st, StatusCode::ACCEPTED, "{v}");
            v["id"].as_str().unwrap().to_string()
        }
    };
    let suite_body = json!({"suite": "echo", "files": [{"path": "answer.txt", "content": "42"}]});
    let a1 = submit(ada_t.clone(), suite_body.clone()).await;
    let a2 = submit(ada_t.clone(), suite_body.clone()).await;
    let b1 = submit(bob_t.clone(), suite_body.clone()).await;
    let a3 = submit(ada_t.clone(), json!({"cmd": "true"})).await;

    // A student lists its own; another's only through staff.
    let (st, v) = s.get(&ada_t, "/submissions").await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(ids_of(&v), [a3.as_str(), a2.as_str(), a1.as_str()]);
    assert!(v.get("next_cursor").is_none(), "{v}");
    let (st, v) = s
        .get(&ada_t, &format!("/submissions?owner={}", bob.info.id))
        .await;
    assert_eq!(st, StatusCode::FORBIDDEN, "{v}");
    let (st, v) = s.get(&bob_t, &format!("/submissions/{a1}")).await;
    assert_eq!(st, StatusCode::NOT_FOUND, "{v}");
    // Staff: everyone's, two a page; filtered by suite, owner and status.
    let mut seen: Vec<String> = Vec::new();
    let mut path = "/submissions?limit=2".to_string();
    loop {
        let (st, v) = s.get(&staff, &path).await;
        assert_eq!(st, StatusCode::OK, "{v}");
        seen.extend(ids_of(&v).into_iter().map(str::to_string));
        match v["next_cursor"].as_str() {
            Some(c) => path = format!("/submissions?limit=2&cursor={c}"),
            None => break,
        }
    }
    assert_eq!(seen, [a3.as_str(), b1.as_str(), a2.as_str(), a1.as_str()]);
    let (_, v) = s.get(&staff, "/submissions?suite=echo").await;
    assert_eq!(ids_of(&v), [b1.as_str(), a2.as_str(), a1.as_str()]);
    assert_eq!(v["submissions"][0]["owner_name"], "=bob", "{v}");
    assert_eq!(v["submissions"][0]["suite"], "echo", "{v}");
    let (_, v) = s
        .get(
            &staff,
            &format!("/submissions?suite=echo&owner={}", ada.info.id),
        )
        .await;
    assert_eq!(ids_of(&v), [a2.as_str(), a1.as_str()]);
    let (_, v) = s.get(&staff, "/submissions?status=queued&limit=500").await;
    assert_eq!(ids_of(&v).len(), 4);
    for bad in [
        "limit=0",
        "limit=501",
        "cursor=abc",
        "status=finished",
        "state=done",
    ] {
        let (st, v) = s.get(&staff, &format!("/submissions?{bad}")).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{bad}: {v}");
    }
    let (st, v) = s.get(&staff, &format!("/submissions/{a1}")).await;
    assert_eq!(
        (st, &v["status"]),
        (StatusCode::OK, &json!("queued")),
        "{v}"
    );

    // Judged: ada's first passes, her second fails the test; bob's passes; staff's try of the
    // suite passes too (a try, not a grade).
    let tried = submit(staff.clone(), suite_body.clone()).await;
    let mut leases = std::collections::HashMap::new();
    while let Some(c) = s
        .store
        .claim_job("w", std::time::Duration::from_secs(60))
        .await
        .unwrap()
    {
        leases.insert(c.job.id.clone(), c.lease);
    }
    let verdict = |kind: &str, score: f64| {
        json!({"verdict": kind, "score": score, "max_score": 1.0}).to_string()
    };
    // A suite's verdict carries its report: the student's view as `checks`, staff's (with the
    // hidden check's row) as `staff_checks`.
    let row = |result: Value, points: f64, max: f64| json!({"result": result, "points": points, "max_points": max});
    let graded = |kind: &str, score: f64, answers: Value, hidden: Value| {
        let student = json!({"results": {"exists": row(json!(true), 0.0, 0.0),
                                         "answers": answers.clone()}});
        let staff = json!({"results": {"exists": row(json!(true), 0.0, 0.0),
                                       "answers": answers, "hidden_case": hidden}});
        json!({"verdict": kind, "score": score, "max_score": 1.0,
               "checks": student, "staff_checks": staff})
        .to_string()
    };
    for (id, v) in [
        (&a1, verdict("accepted", 1.0)),
        (
            &a2,
            graded(
                "wrong_answer",
                0.0,
                row(json!(false), 0.0, 1.0),
                row(Value::Null, 0.0, 0.0),
            ),
        ),
        (
            &b1,
            graded(
                "accepted",
                1.0,
                row(json!(true), 1.0, 1.0),
                row(json!(false), 0.0, 0.0),
            ),
        ),
        (&tried, verdict("accepted", 1.0)),
    ] {
        s.store
            .complete_job(id, &leases[id], corral_store::JobState::Done, &v, None)
            .await
            .unwrap();
    }

    // The gradebook: each student's latest judged submission, by name.
    let (st, v) = s.get(&staff, "/suites/echo/gradebook").await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let rows: Vec<(&str, &str, f64)> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["student"].as_str().unwrap(),
                r["submission"].as_str().unwrap(),
                r["score"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [("=bob", b1.as_str(), 1.0), ("ada", a2.as_str(), 0.0)]
    );
    // Each row's report rows, as staff see them (the hidden check's included), in the suite's
    // order.
    assert_eq!(
        v["rows"][0]["checks"],
        json!([
            {"id": "exists", "result": true, "points": 0.0, "max_points": 0.0},
            {"id": "answers", "result": true, "points": 1.0, "max_points": 1.0},
            {"id": "hidden_case", "result": false, "points": 0.0, "max_points": 0.0},
        ]),
        "{v}"
    );
    let (st, ct, csv) = get_text(&s, &staff, "/suites/echo/gradebook?format=csv").await;
    assert_eq!(st, StatusCode::OK, "{csv}");
    assert!(ct.starts_with("text/csv"), "{ct}");
    let lines: Vec<&str> = csv.lines().collect();
    // Then a column per report row in the suite's order, as `corral grade`'s gradebook: points
    // for a row worth points, else pass / fail / skip.
    assert_eq!(
        lines[0],
        "student,owner,submission,score,max_score,percent,verdict,status,submitted_at,\
         finished_at,exists,answers,hidden_case"
    );
    assert!(
        lines[1].starts_with(&format!(
            "'=bob,{},{b1},1,1,100.0,accepted,done,",
            bob.info.id
        )) && lines[1].ends_with(",pass,1,fail"),
        "{csv}"
    );
    assert!(
        lines[2].starts_with(&format!(
            "ada,{},{a2},0,1,0.0,wrong_answer,done,",
            ada.info.id
        )) && lines[2].ends_with(",pass,0,skip"),
        "{csv}"
    );
    // Times a spreadsheet reads: `2026-12-01T01:02:03.456Z`, the JSON's milliseconds.
    let a2_job = s.store.get_job(&a2).await.unwrap().unwrap();
    let when = |ms: i64| {
        humantime::format_rfc3339_millis(
            std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms as u64),
        )
        .to_string()
    };
    assert!(
        lines[2].ends_with(&format!(
            ",{},{},pass,0,skip",
            when(a2_job.created_ms),
            when(a2_job.finished_ms.unwrap())
        )),
        "{csv}"
    );
    for (token, path, want) in [
        (&ada_t, "/suites/echo/gradebook", StatusCode::FORBIDDEN),
        (&staff, "/suites/nope/gradebook", StatusCode::NOT_FOUND),
        (
            &staff,
            "/suites/echo/gradebook?format=xml",
            StatusCode::BAD_REQUEST,
        ),
    ] {
        let (st, v) = s.get(token, path).await;
        assert_eq!(st, want, "{path}: {v}");
    }

    // The suite is fixed; ada's failed submission is regraded by it as it is now.
    write_folder_suite(
        &s,
        "echo",
        &[("suite.yaml", &folder_suite("v2")), ("data.txt", "v2")],
    );
    let (st, v) = s
        .post(&ada_t, &format!("/submissions/{a2}/regrade"), json!({}))
        .await;
    assert_eq!(st, StatusCode::FORBIDDEN, "{v}");
    let (st, v) = s
        .post(&staff, &format!("/submissions/{a2}/regrade"), json!({}))
        .await;
    assert_eq!(st, StatusCode::ACCEPTED, "{v}");
    assert_eq!(v["regrade_of"], a2.as_str(), "{v}");
    let r = v["id"].as_str().unwrap().to_string();
    // A second click while it waits answers that regrade (two at once too): one is queued.
    let before = stored(&s).await;
    let again = format!("/submissions/{a2}/regrade");
    let ((st1, v1), (st2, v2)) = tokio::join!(
        s.post(&staff, &again, json!({})),
        s.post(&staff, &again, json!({}))
    );
    assert_eq!((st1, st2), (StatusCode::ACCEPTED, StatusCode::ACCEPTED));
    assert_eq!(
        (v1["id"].as_str(), v2["id"].as_str()),
        (Some(r.as_str()), Some(r.as_str())),
        "{v1} {v2}"
    );
    assert_eq!(stored(&s).await, before, "a second click queued a regrade");
    let (old, new) = (
        s.store.get_job(&a2).await.unwrap().unwrap(),
        s.store.get_job(&r).await.unwrap().unwrap(),
    );
    assert_eq!(
        (new.owner.as_str(), &new.upload_id),
        (ada.info.id.as_str(), &old.upload_id)
    );
    let suite_upload = |spec: &str| {
        serde_json::from_str::<Value>(spec).unwrap()["suite"]["upload"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let pinned = suite_upload(&new.spec);
    assert_ne!(
        pinned,
        suite_upload(&old.spec),
        "the regrade is graded by the suite as it is now"
    );
    let (_, v) = s.get(&ada_t, &format!("/submissions/{r}")).await;
    assert_eq!(
        (&v["regrade_of"], &v["submitted_at"]),
        (&json!(a2), &json!(old.created_ms)),
        "the regrade names its original and when that was handed in: {v}"
    );
    let data = s.store.get_upload(&pinned).await.unwrap().unwrap();
    assert_eq!(
        s.store
            .read_upload_file(&data, "data.txt")
            .await
            .unwrap()
            .as_deref(),
        Some(&b"v2"[..])
    );
    let (st, v) = s
        .post(&staff, &format!("/submissions/{r}/regrade"), json!({}))
        .await;
    assert_eq!(st, StatusCode::CONFLICT, "{v}");
    // The old verdict stays, and the regrade waits in the list.
    let (_, v) = s.get(&ada_t, &format!("/submissions/{a2}")).await;
    assert_eq!(v["verdict"], "wrong_answer", "{v}");
    let (_, v) = s.get(&ada_t, "/submissions?limit=1").await;
    assert_eq!(ids_of(&v), [r.as_str()]);

    // Retention deleted bob's files (his submission is judged; ada's stay for her regrade).
    s.store.delete_uploads_before(i64::MAX).await.unwrap();
    let (st, v) = s
        .post(&staff, &format!("/submissions/{b1}/regrade"), json!({}))
        .await;
    assert_eq!(st, StatusCode::GONE, "{v}");
    let (st, v) = s.post(&staff, "/suites/echo/regrade", json!({})).await;
    assert_eq!(st, StatusCode::ACCEPTED, "{v}");
    let items = v["submissions"].as_array().unwrap();
    assert_eq!(items.len(), 2, "{v}");
    let bobs = items
        .iter()
        .find(|i| i["regrade_of"] == b1.as_str())
        .unwrap();
    assert_eq!(bobs["error"], "gone", "{v}");
    let adas = items
        .iter()
        .find(|i| i["regrade_of"] == a2.as_str())
        .unwrap();
    assert_eq!(adas["id"], r.as_str(), "the pending regrade stands: {v}");
    let (st, v) = s.post(&bob_t, "/suites/echo/regrade", json!({})).await;
    assert_eq!(st, StatusCode::FORBIDDEN, "{v}");
    // A suite that no longer loads: nothing is queued (the grade is not replaced by a failure);
    // a suite no longer on the server: said so, not "no such submission".
    let before = stored(&s).await;
    write_folder_suite(
        &s,
        "echo",
        &[("suite.yaml", "checks: [ {id: x"), ("data.txt", "v2")],
    );
    for path in [
        format!("/submissions/{a2}/regrade"),
        "/suites/echo/regrade".to_string(),
    ] {
        let (st, v) = s.post(&staff, &path, json!({})).await;
        assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{path}: {v}");
    }
    assert_eq!(
        stored(&s).await,
        before,
        "a refused regrade queued something"
    );
    std::fs::remove_dir_all(s.data_dir().join("suites/echo")).unwrap();
    let (st, v) = s
        .post(&staff, &format!("/submissions/{a2}/regrade"), json!({}))
        .await;
    assert_eq!(st, StatusCode::CONFLICT, "{v}");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("no longer on this server"),
        "{v}"
    );
    s.stop().await;
}

/// The value of one series of `/metrics` (`name{labels}` as it is printed).
async fn series(s: &TestServer, name: &str) -> Option<f64> {
    let m = corral_testkit::http::get_text(&s.url("/metrics")).await;
    m.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// What an operator alerts on is there from the start: every labelled counter at 0 before its
/// first event (an alert on a rate saw "no data"), how long the oldest queued submission has
/// waited (nothing claims work: it grows), the servers sharing the store and the workers, local
/// and remote. Before, a node with no workers showed only `corral_submissions{state="queued"}`.
#[tokio::test(flavor = "multi_thread")]
async fn metrics_show_every_series_the_queues_wait_and_the_live_nodes() {
    let s = queue_only(|c| c.submissions.lease = corral_sandbox::Millis::ms(400)).await;
    for name in [
        r#"corral_runs_total{status="sandbox_error"}"#,
        r#"corral_rejected_total{reason="rate_limited"}"#,
        r#"corral_submissions_judged_total{verdict="internal_error"}"#,
        r#"corral_callbacks_total{outcome="gave_up"}"#,
        r#"corral_submission_leases_expired_total{outcome="failed"}"#,
        r#"corral_submissions{state="queued"}"#,
    ] {
        assert_eq!(series(&s, name).await, Some(0.0), "{name}");
    }
    let t = s.token(Role::Student).await;
    let (st, v) = s.post(&t, "/submissions", json!({"cmd": "true"})).await;
    assert_eq!(st, StatusCode::ACCEPTED, "{v}");
    // The reaper refreshes the queue's gauges every lease/4 (100 ms here).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let waited = series(&s, "corral_submissions_oldest_queued_seconds").await;
        let live = series(&s, "corral_nodes_live").await;
        if waited.is_some_and(|w| w >= 0.3) && live == Some(1.0) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "oldest queued {waited:?}, live nodes {live:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(
        series(&s, r#"corral_submissions{state="queued"}"#).await,
        Some(1.0)
    );

    // Who could judge it: no in-process worker here, and a remote one once it asks for work
    // (its claim takes the submission; the count is of workers, not of claims).
    assert_eq!(series(&s, "corral_local_workers").await, Some(0.0));
    assert_eq!(series(&s, "corral_remote_workers").await, Some(0.0));
    let w = s.token(Role::Worker).await;
    for want in [StatusCode::OK, StatusCode::NO_CONTENT] {
        let r = reqwest::Client::new()
            .post(s.url("/worker/claim"))
            .bearer_auth(&w)
            .json(&json!({"worker": "lab-1", "wait": 0}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), want);
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while series(&s, "corral_remote_workers").await != Some(1.0) {
        assert!(
            std::time::Instant::now() < deadline,
            "no remote worker counted"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
