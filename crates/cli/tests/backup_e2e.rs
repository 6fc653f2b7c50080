//! `corral backup` on the data folder of a real `corral serve` that is busy (uploads and
//! submissions arriving), restored into a new folder a new server starts on.

mod server_support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::json;
use server_support::*;

/// What the load made: (upload, submission, the file's contents).
type Made = Arc<Mutex<Vec<(String, String, String)>>>;

#[test]
fn a_backup_of_a_busy_server_restores_into_a_working_server() {
    let data = tempfile::tempdir().unwrap();
    let s = Server::start_in(data.path(), "[submissions]\nworkers = 1\n", &[]);
    let (student, judged) = rt().block_on(async {
        let t = s.token("student").await;
        let (st, v) = s
            .post(
                &t,
                "/submissions",
                json!({"cmd": "cat a.txt", "files": [{"path": "a.txt", "content": "before"}],
                       "expected_output": "before"}),
            )
            .await;
        assert_eq!(st, StatusCode::ACCEPTED, "{v}");
        let id = v["id"].as_str().unwrap().to_string();
        let v = s
            .finished(&t, &id, Duration::from_secs(120), String::new)
            .await;
        assert_eq!(v["verdict"], "accepted", "{v}");
        (t, id)
    });
    // Uploads and submissions keep coming while the backup is taken.
    let stop = Arc::new(AtomicBool::new(false));
    let made: Made = Arc::default();
    let load = {
        let (stop, made, t) = (stop.clone(), made.clone(), student.clone());
        let base = s.base.clone();
        std::thread::spawn(move || {
            rt().block_on(async move {
                let c = client();
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    let content = format!("file {n}");
                    let form = reqwest::multipart::Form::new().part(
                        "files",
                        reqwest::multipart::Part::bytes(content.clone().into_bytes())
                            .file_name(format!("{n}.txt")),
                    );
                    let r = c
                        .post(format!("{base}/upload"))
                        .bearer_auth(&t)
                        .multipart(form)
                        .send()
                        .await
                        .unwrap();
                    if r.status() == StatusCode::TOO_MANY_REQUESTS {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        continue;
                    }
                    let v: serde_json::Value = r.json().await.unwrap();
                    let upload = v["id"].as_str().unwrap().to_string();
                    let r = c
                        .post(format!("{base}/submissions"))
                        .bearer_auth(&t)
                        .json(&json!({"cmd": format!("cat {n}.txt"), "upload": upload,
                                      "expected_output": content}))
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(r.status(), StatusCode::ACCEPTED);
                    let v: serde_json::Value = r.json().await.unwrap();
                    let id = v["id"].as_str().unwrap().to_string();
                    made.lock().unwrap().push((upload, id, content));
                    n += 1;
                }
            })
        })
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while made.lock().unwrap().len() < 5 {
        assert!(
            Instant::now() < deadline,
            "the load made nothing:\n{}",
            s.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let backups = tempfile::tempdir().unwrap();
    let dest = backups.path().join("b");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_corral"))
        .arg("backup")
        .arg("--data")
        .arg(data.path())
        .arg(&dest)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        said.contains("written") && said.contains("callback-secret"),
        "{said}"
    );
    stop.store(true, Ordering::Relaxed);
    load.join().unwrap();
    let made = made.lock().unwrap().clone();
    assert!(s.stop().success());

    // Restored: a copy of the backup, as the docs say, and a server on it.
    let restored = backups.path().join("restored");
    let cp = std::process::Command::new("cp")
        .arg("-a")
        .arg(&dest)
        .arg(&restored)
        .status()
        .unwrap();
    assert!(cp.success());
    assert_eq!(
        std::fs::read(restored.join("callback-secret")).unwrap(),
        std::fs::read(data.path().join("callback-secret")).unwrap(),
        "a restored server would sign callbacks with another key"
    );
    let r = Server::start_in(&restored, "[submissions]\nworkers = 1\n", &[]);
    assert!(
        !r.log().contains("first start"),
        "the restored store is not the server's: {}",
        r.log()
    );
    rt().block_on(async {
        let (st, v) = r.get(&student, "/whoami").await;
        assert_eq!(st, StatusCode::OK, "{v}");
        let v = r
            .finished(&student, &judged, Duration::from_secs(60), String::new)
            .await;
        assert_eq!(v["verdict"], "accepted", "{v}");
        // What the backup holds is whole: each submission it has is judged with its file (those
        // still queued at the backup are judged now), each upload it has runs.
        let mut held = Vec::new();
        for (upload, id, content) in &made {
            let (st, v) = r.get(&student, &format!("/submissions/{id}")).await;
            if st == StatusCode::NOT_FOUND {
                continue;
            }
            assert_eq!(st, StatusCode::OK, "{v}");
            let v = r
                .finished(&student, id, Duration::from_secs(120), String::new)
                .await;
            assert_eq!(v["verdict"], "accepted", "{content}: {v}\n{}", r.log());
            let (st, _) = r.get(&student, &format!("/uploads/{upload}")).await;
            assert_eq!(
                st,
                StatusCode::OK,
                "submission {id} without its upload {upload}"
            );
            held.push((upload, content));
        }
        let (upload, content) = held
            .last()
            .expect("the backup holds none of the load's submissions");
        let n = content.trim_start_matches("file ");
        let v = r
            .run_ok(
                &student,
                json!({"cmd": format!("cat {n}.txt"), "sandbox": {"homedir": upload}}),
            )
            .await;
        assert_eq!(v["stdout"], content.as_str(), "{v}");
    });
}
