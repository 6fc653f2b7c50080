//! Images where they are named, end to end with the real binary and the Debian test image
//! (`common::image`, which has no gcc: a check that gcc is missing passes in the image and fails
//! on the host root): a suite with `image:` graded by `corral check` and `corral grade`, and a
//! `corral serve` + `corral worker` pair where `/run` runs in an image, a queued submission
//! records its digest, the worker fetches the image from the server by digest, and a student
//! naming an image the server lacks gets a 422 and nothing is pulled.

mod common;
mod server_support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::image::{data_dir, debian_tar, NAME};
use reqwest::StatusCode;
use serde_json::{json, Value};
use server_support::*;

/// A check that passes only where /usr/bin/gcc is missing: in the test image.
const IN_IMAGE: &str = "test ! -e /usr/bin/gcc";

fn suite_text(image: Option<&str>) -> String {
    let image = image.map(|i| format!("image: {i}\n")).unwrap_or_default();
    format!(
        "name: img\n{image}timeout: 20s\nchecks:\n  - id: in_image\n    steps:\n      - run: \"{IN_IMAGE}\"\n      - exit: 0\n"
    )
}

fn corral() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_corral"));
    c.env_remove("CORRAL_DATA");
    c
}

fn digest() -> String {
    common::image::image_root().digest
}

fn check(suite: &Path, sub: &Path, extra: &[&str]) -> (i32, String, String) {
    let out = corral()
        .arg("check")
        .arg(suite)
        .arg(sub)
        .args(["--json", "--data"])
        .arg(data_dir())
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_suite_naming_an_image_is_graded_in_it_and_reports_record_it() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::write(sub.join("a.txt"), "x").unwrap();
    let with = dir.path().join("with/suite.yaml");
    let without = dir.path().join("without/suite.yaml");
    let missing = dir.path().join("missing/suite.yaml");
    for (p, image) in [
        (&with, Some(NAME)),
        (&without, None),
        (&missing, Some("corral-test/not-here:1")),
    ] {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, suite_text(image)).unwrap();
    }
    let (code, out, err) = check(&with, &sub, &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["results"]["in_image"]["result"], true, "{v}");
    assert_eq!(
        v["results"]["in_image"]["image"]["digest"],
        digest().as_str()
    );
    assert_eq!(v["images"], json!([{"name": NAME, "digest": digest()}]));
    // The same check on the host root fails (the host has gcc), and passes with --image.
    let (code, out, _) = check(&without, &sub, &[]);
    assert_eq!(code, 1, "{out}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert!(v.get("images").is_none(), "{v}");
    let (code, out, err) = check(&without, &sub, &["--image", NAME]);
    assert_eq!(code, 0, "{out}\n{err}");
    // An image the store lacks: a usage error naming it, before any check runs.
    let (code, out, err) = check(&missing, &sub, &[]);
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(
        err.contains("corral-test/not-here:1") && err.contains("not in the image store"),
        "{err}"
    );
    // The text report names the image.
    let out = corral()
        .arg("check")
        .arg(&with)
        .arg(&sub)
        .arg("--data")
        .arg(data_dir())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("image: {NAME} ({})", digest())),
        "{text}"
    );

    // corral grade: the gradebook's image column.
    let subs = dir.path().join("subs");
    for s in ["ann", "bob"] {
        std::fs::create_dir_all(subs.join(s)).unwrap();
        std::fs::write(subs.join(s).join("a.txt"), s).unwrap();
    }
    let grades = dir.path().join("grades");
    corral_testkit::succeed(
        corral()
            .arg("grade")
            .arg(with.parent().unwrap())
            .arg(&subs)
            .arg("-o")
            .arg(&grades)
            .args(["--no-progress", "--data"])
            .arg(data_dir()),
    );
    let csv = std::fs::read_to_string(grades.join("gradebook.csv")).unwrap();
    let cell = format!("{NAME}@{}", digest());
    assert_eq!(csv.matches(&cell).count(), 2, "{csv}");
    assert!(csv.lines().next().unwrap().contains(",image,"), "{csv}");
}

/// Runs one WebSocket `run` message; the `exit` message.
async fn ws_run(s: &Server, token: &str, msg: Value) -> Value {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{}/ws?token={token}", s.addr))
        .await
        .unwrap();
    ws.send(Message::Text(msg.to_string().into()))
        .await
        .unwrap();
    loop {
        let m = tokio::time::timeout(Duration::from_secs(120), ws.next())
            .await
            .expect("no WebSocket message within 120 s")
            .unwrap()
            .unwrap();
        if let Message::Text(t) = m {
            let v: Value = serde_json::from_str(&t).unwrap();
            match v["type"].as_str() {
                Some("exit") => return v,
                Some("error") => panic!("{v}"),
                _ => {}
            }
        }
    }
}

/// Imports a one-file image `course/tiny:1` into the data folder and overwrites its layer blob
/// on disk with other bytes of the same length; the image's digest.
fn tampered_image(data: &Path) -> String {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f.txt"), "tiny").unwrap();
    let tar = dir.path().join("tiny.tar");
    let ok = Command::new("tar")
        .arg("-C")
        .arg(dir.path())
        .arg("-cf")
        .arg(&tar)
        .arg("f.txt")
        .status()
        .unwrap()
        .success();
    assert!(ok);
    common::image::import(data, "course/tiny:1", &tar);
    let store = corral_images::Store::open(data).unwrap();
    let (_, rec) = store.resolve("course/tiny:1").unwrap();
    let blob = store.blob_path(&rec.layers[0].blob);
    let len = std::fs::metadata(&blob).unwrap().len() as usize;
    std::fs::write(&blob, vec![b'x'; len]).unwrap();
    rec.digest.to_string()
}

struct Worker(
    std::process::Child,
    std::sync::Arc<std::sync::Mutex<String>>,
);

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn finished(s: &Server, w: &Worker, token: &str, id: &str) -> Value {
    s.finished(token, id, Duration::from_secs(300), || {
        format!("worker:\n{}", w.1.lock().unwrap())
    })
    .await
}

#[test]
fn the_server_and_a_remote_worker_run_in_images_and_record_them() {
    let data = tempfile::tempdir().unwrap();
    common::image::import(data.path(), NAME, &debian_tar());
    let suite = data.path().join("suites/img");
    std::fs::create_dir_all(&suite).unwrap();
    std::fs::write(suite.join("suite.yaml"), suite_text(Some(NAME))).unwrap();
    // A language whose toolchain is the image's.
    let langs = data.path().join("languages.toml");
    std::fs::write(
        &langs,
        format!("[languages.pyimg]\nname = \"Python in the test image\"\nsource = \"main.py\"\nrun = \"python3 main.py\"\nimage = \"{NAME}\"\n"),
    )
    .unwrap();
    let config = format!(
        "languages = {:?}\n[submissions]\nworkers = 0\n",
        langs.display().to_string()
    );
    let s = Server::start_in(data.path(), &config, &[]);
    let worker_data = tempfile::tempdir().unwrap();
    rt().block_on(async {
        let (t, staff, wt) = (
            s.token("student").await,
            s.token("staff").await,
            s.token("worker").await,
        );
        let d = digest();
        // /run in the image, and the same command on the host root.
        let (st, v) = s
            .run(
                &t,
                json!({"cmd": format!("{IN_IMAGE} && echo in-image"), "image": NAME}),
            )
            .await;
        assert_eq!(st, StatusCode::OK, "{v}");
        assert_eq!(
            (v["status"].as_str(), v["stdout"].as_str()),
            (Some("ok"), Some("in-image\n")),
            "{v}"
        );
        assert_eq!(v["image"], json!({"name": NAME, "digest": d}));
        let (_, v) = s.run(&t, json!({"cmd": IN_IMAGE})).await;
        assert_eq!(v["status"], "nonzero_exit", "{v}");
        assert!(v.get("image").is_none(), "{v}");
        // A WebSocket run in the image: its exit message records it.
        let exit = ws_run(&s, &t, json!({"type": "run", "cmd": IN_IMAGE, "image": NAME})).await;
        assert_eq!(exit["status"], "ok", "{exit}");
        assert_eq!(exit["image"], json!({"name": NAME, "digest": d}));
        // A student naming an image the server lacks: 422 naming it; nothing is pulled.
        for path in ["/run", "/submissions"] {
            let (st, e) = s
                .post(
                    &t,
                    path,
                    json!({"cmd": "true", "image": "registry.example.invalid/x:1"}),
                )
                .await;
            assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{path}: {e}");
            assert!(
                e["message"]
                    .as_str()
                    .unwrap()
                    .contains("not on this server"),
                "{e}"
            );
        }
        let (_, images) = s.get(&staff, "/images").await;
        assert_eq!(images.as_array().unwrap().len(), 1, "{images}");
        let (_, listed) = s.get(&t, "/languages").await;
        let pyimg = listed.as_array().unwrap().iter().find(|l| l["id"] == "pyimg").unwrap();
        assert_eq!(pyimg["available"], true, "{pyimg}");
        assert_eq!(pyimg["image"], json!({"name": NAME, "digest": d}));
        // /check grades in the suite's image; a missing image is a 422 there too.
        let upload = s.upload(&t, &[("a.txt", b"x")]).await;
        let (st, v) = s
            .post(&t, "/check?format=json", json!({"checks": "img", "sandbox": {"homedir": upload}}))
            .await;
        assert_eq!(st, StatusCode::OK, "{v}");
        assert_eq!(v["results"]["in_image"]["result"], true, "{v}");
        assert_eq!(v["images"], json!([{"name": NAME, "digest": d}]));
        let (st, e) = s
            .post(&t, "/check", json!({"checks": "img", "sandbox": {"homedir": upload}, "image": "registry.example.invalid/x:1"}))
            .await;
        assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{e}");

        // Submissions through the queue, judged by a remote worker whose store starts empty.
        let ids = [
            s.post(&t, "/submissions", json!({"cmd": IN_IMAGE, "image": NAME}))
                .await,
            s.post(
                &t,
                "/submissions",
                json!({"suite": "img", "files": [{"path": "a.txt", "content": "x"}]}),
            )
            .await,
            s.post(
                &t,
                "/submissions",
                json!({"language": "pyimg", "source_code": "import os\nprint(os.path.exists('/usr/bin/gcc'))\n",
                       "expected_output": "False"}),
            )
            .await,
        ]
        .map(|(st, v)| {
            assert_eq!(st, StatusCode::ACCEPTED, "{v}");
            v["id"].as_str().unwrap().to_string()
        });
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_corral"));
        cmd.args([
            "worker",
            "--server",
            &s.base,
            "--name",
            "imgworker",
            "--data",
        ])
        .arg(worker_data.path())
        .arg("--languages")
        .arg(&langs)
        .env("CORRAL_WORKER_TOKEN", &wt)
        .env("CORRAL_LOG", "info");
        let Logged { child, log, .. } = Logged::spawn(cmd);
        let w = Worker(child, log);
        for id in &ids {
            let v = finished(&s, &w, &t, id).await;
            assert_eq!(
                v["verdict"],
                "accepted",
                "{v}\nworker:\n{}",
                w.1.lock().unwrap()
            );
            assert_eq!(v["image"], json!({"name": NAME, "digest": d}), "{v}");
        }
        let v = finished(&s, &w, &t, &ids[1]).await;
        assert_eq!(v["checks"]["images"][0]["digest"], d.as_str(), "{v}");
        assert!(w
            .1
            .lock()
            .unwrap()
            .contains("image fetched from the server"));

        // A blob altered on the server's disk: the worker refuses the image and keeps nothing.
        let tiny = tampered_image(data.path());
        let (st, v) = s
            .post(&t, "/submissions", json!({"cmd": "true", "image": "course/tiny:1"}))
            .await;
        assert_eq!(st, StatusCode::ACCEPTED, "{v}");
        let v = finished(&s, &w, &t, v["id"].as_str().unwrap()).await;
        assert_eq!(v["verdict"], "internal_error", "{v}");
        let m = v["message"].as_str().unwrap();
        assert!(m.contains(&tiny) && m.contains("altered"), "{v}");
        let worker_store = corral_images::Store::open(worker_data.path()).unwrap();
        assert!(worker_store.resolve(&tiny).is_err());
    });
    // The worker's own store now holds the image, by the same digest.
    let store = corral_images::Store::open(worker_data.path()).unwrap();
    let (_, rec) = store.resolve(&digest()).unwrap();
    assert_eq!(rec.digest.to_string(), digest());
    s.stop();
}
