//! The runtime through the real `corral serve`: `runtime` in `/run`, the WebSocket's run message,
//! `/check` and `/submissions` (the queue), the server's default runtime, and the public-instance switch
//! (`[runtime] force_gvisor`) under which no request runs natively — a request for `native` is
//! refused with 422, and every run that happens says `"runtime": "gvisor"`.

mod server_support;

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use reqwest::StatusCode;
use serde_json::{json, Value};
use server_support::*;
use tokio_tungstenite::tungstenite::Message;

async fn finished(s: &Server, token: &str, id: &str) -> Value {
    s.judged(token, id).await
}

/// The next text message of the socket, as JSON.
async fn ws_next<S>(ws: &mut S) -> Value
where
    S: StreamExt<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    loop {
        let m = tokio::time::timeout(Duration::from_secs(30), ws.next())
            .await
            .expect("no WebSocket message within 30 s")
            .expect("the socket closed")
            .expect("WebSocket error");
        if let Message::Text(t) = m {
            return serde_json::from_str(&t).unwrap();
        }
    }
}

/// A data folder whose suite `kernel` passes only on gVisor's kernel (it answers `uname -r`
/// with 4.4.0), so a graded check shows where it ran; suite `hostkernel` (`runtime: native`,
/// and one check naming it again) passes only on the host's kernel.
fn data_with_kernel_suite() -> tempfile::TempDir {
    let data = tempfile::tempdir().unwrap();
    let suite = data.path().join("suites/kernel");
    std::fs::create_dir_all(&suite).unwrap();
    std::fs::write(
        suite.join("suite.yaml"),
        "name: kernel\nchecks:\n  - id: gvisor\n    description: runs on gVisor's kernel\n    steps:\n      - run: uname -r\n      - stdout: \"4.4.0\"\n      - exit: 0\n",
    )
    .unwrap();
    let suite = data.path().join("suites/hostkernel");
    std::fs::create_dir_all(&suite).unwrap();
    let host_check = |id: &str, runtime: &str| {
        format!("  - id: {id}\n{runtime}    steps:\n      - run: uname -r\n      - stdout: {{regex: \"^([5-9]|[1-9][0-9])\\\\.\"}}\n      - exit: 0\n")
    };
    std::fs::write(
        suite.join("suite.yaml"),
        format!(
            "name: hostkernel\nruntime: native\nchecks:\n{}{}",
            host_check("suite_native", ""),
            host_check("check_native", "    runtime: native\n")
        ),
    )
    .unwrap();
    data
}

/// Every row of a report (`/check?format=json`, a suite verdict's `checks`) as (result, runtime).
fn rows(report: &Value) -> Vec<(String, Value, Value)> {
    report["results"]
        .as_object()
        .unwrap_or_else(|| panic!("no results in {report}"))
        .iter()
        .map(|(id, r)| (id.clone(), r["result"].clone(), r["runtime"].clone()))
        .collect()
}

#[test]
fn the_public_instance_switch_runs_every_request_under_gvisor() {
    let rt = rt();
    let data = data_with_kernel_suite();
    let s = Server::start_in(data.path(), "[runtime]\nforce_gvisor = true\n", &[]);
    rt.block_on(async {
        let t = s.token("student").await;

        // /check: native is refused; the suite grades under gVisor.
        let up = s.upload(&t, &[("readme.txt", b"nothing\n")]).await;
        let (st, v) = s
            .post(
                &t,
                "/check",
                json!({"checks": "kernel", "sandbox": {"homedir": up}, "runtime": "native"}),
            )
            .await;
        assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
        let (st, v) = s
            .post(
                &t,
                "/check",
                json!({"checks": "kernel", "sandbox": {"homedir": up}}),
            )
            .await;
        assert_eq!(st, StatusCode::OK, "{v}\n{}", s.log());
        assert_eq!(v["results"]["gvisor"]["result"], true, "{v}");
        // A suite and a check that name native run under gVisor all the same (and so fail:
        // they pass only on the host's kernel).
        let (st, v) = s
            .post(
                &t,
                "/check?format=json",
                json!({"checks": "hostkernel", "sandbox": {"homedir": up}}),
            )
            .await;
        assert_eq!(st, StatusCode::OK, "{v}\n{}", s.log());
        for (id, result, runtime) in rows(&v) {
            assert_eq!(
                (result, runtime),
                (json!(false), json!("gvisor")),
                "{id}: {v}"
            );
        }

        // /run: native is refused; no runtime and gvisor both run under gVisor.
        let (st, v) = s
            .run(&t, json!({"cmd": "echo hi", "runtime": "native"}))
            .await;
        assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
        assert!(
            v["message"].as_str().unwrap_or("").contains("gVisor"),
            "{v}"
        );
        for body in [
            json!({"cmd": "echo hi"}),
            json!({"cmd": "echo hi", "runtime": "gvisor"}),
        ] {
            let v = s.run_ok(&t, body.clone()).await;
            assert_eq!(v["status"], "ok", "{body}: {v}\n{}", s.log());
            assert_eq!(v["stdout"], "hi\n", "{v}");
            assert_eq!(v["runtime"], "gvisor", "{body}: {v}");
        }

        // The WebSocket: the same refusal, and a run under gVisor.
        let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{}/ws?token={t}", s.addr))
            .await
            .expect("WebSocket connect");
        ws.send(Message::Text(
            json!({"type": "run", "cmd": "echo hi", "runtime": "native"})
                .to_string()
                .into(),
        ))
        .await
        .unwrap();
        let m = ws_next(&mut ws).await;
        assert_eq!(m["type"], "error", "{m}");
        assert!(
            m["message"].as_str().unwrap_or("").contains("gVisor"),
            "{m}"
        );
        // A terminal run under gVisor: the pty is gVisor's, relayed by the sandbox's PID 1.
        ws.send(Message::Text(
            json!({"type": "run", "cmd": "stty size; read n; echo \"hello, $n\"", "tty": {"cols": 91, "rows": 17}})
                .to_string()
                .into(),
        ))
        .await
        .unwrap();
        let mut out = String::new();
        let exit = loop {
            let m = ws_next(&mut ws).await;
            match m["type"].as_str() {
                Some("stdout") => {
                    out.push_str(m["data"].as_str().unwrap());
                    if out == "17 91\r\n" {
                        ws.send(Message::Text(
                            json!({"type": "stdin", "data": "Ada\n"}).to_string().into(),
                        ))
                        .await
                        .unwrap();
                    }
                }
                Some("exit") => break m,
                Some("stderr") | Some("stdin") => {}
                _ => panic!("unexpected message {m}\nstdout so far: {out:?}\n{}", s.log()),
            }
        };
        assert_eq!(exit["status"], "ok", "{exit}");
        assert_eq!(exit["runtime"], "gvisor", "{exit}");
        assert_eq!(out, "17 91\r\nAda\r\nhello, Ada\r\n");

        // /submissions (the queue): native is refused and nothing is queued; a job without a
        // runtime is judged under gVisor.
        let (st, v) = s
            .post(
                &t,
                "/submissions",
                json!({"cmd": "echo hi", "runtime": "native"}),
            )
            .await;
        assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
        let (st, v) = s
            .post(&t, "/submissions", json!({"cmd": "cat /proc/version"}))
            .await;
        assert_eq!(st, StatusCode::ACCEPTED, "{v}\n{}", s.log());
        let id = v["id"].as_str().unwrap().to_string();
        let done = finished(&s, &t, &id).await;
        assert_eq!(done["status"], "done", "{done}\n{}", s.log());
        assert_eq!(done["run"]["status"], "ok", "{done}");
        assert_eq!(done["run"]["runtime"], "gvisor", "{done}");
        // gVisor's kernel answered, not the host's.
        assert!(
            done["run"]["stdout"]
                .as_str()
                .unwrap_or("")
                .contains("4.4.0"),
            "{done}"
        );
        // A suite job: every check graded under gVisor.
        let (st, v) = s
            .post(
                &t,
                "/submissions",
                json!({"suite": "kernel", "files": [{"path": "readme.txt", "content": "x"}]}),
            )
            .await;
        assert_eq!(st, StatusCode::ACCEPTED, "{v}\n{}", s.log());
        let done = finished(&s, &t, v["id"].as_str().unwrap()).await;
        assert_eq!(done["verdict"], "accepted", "{done}\n{}", s.log());
        assert_eq!(
            done["checks"]["results"]["gvisor"]["result"], true,
            "{done}"
        );
        // A suite job whose suite and check name native: judged under gVisor all the same.
        let (st, v) = s
            .post(
                &t,
                "/submissions",
                json!({"suite": "hostkernel", "files": [{"path": "readme.txt", "content": "x"}]}),
            )
            .await;
        assert_eq!(st, StatusCode::ACCEPTED, "{v}\n{}", s.log());
        let done = finished(&s, &t, v["id"].as_str().unwrap()).await;
        assert_eq!(done["verdict"], "wrong_answer", "{done}\n{}", s.log());
        for (id, result, runtime) in rows(&done["checks"]) {
            assert_eq!(
                (result, runtime),
                (json!(false), json!("gvisor")),
                "{id}: {done}"
            );
        }
    });
}

#[test]
fn a_suites_runtime_beats_the_requests_and_the_servers_default() {
    let rt = rt();
    let data = data_with_kernel_suite();
    let s = Server::start_in(data.path(), "[runtime]\ndefault = \"gvisor\"\n", &[]);
    rt.block_on(async {
        let t = s.token("student").await;
        let up = s.upload(&t, &[("readme.txt", b"nothing\n")]).await;
        // The server's default (gVisor) for a suite that names none; the suite's native wins
        // over the default and over the request's own choice.
        for (suite, runtime, want) in [
            ("kernel", None, "gvisor"),
            ("hostkernel", None, "native"),
            ("hostkernel", Some("gvisor"), "native"),
        ] {
            let mut body = json!({"checks": suite, "sandbox": {"homedir": up}});
            if let Some(r) = runtime {
                body["runtime"] = json!(r);
            }
            let (st, v) = s.post(&t, "/check?format=json", body).await;
            assert_eq!(st, StatusCode::OK, "{v}\n{}", s.log());
            for (id, result, got) in rows(&v) {
                assert_eq!((result, got), (json!(true), json!(want)), "{suite} {id}: {v}");
            }
        }
        // The same through the queue.
        let (st, v) = s
            .post(
                &t,
                "/submissions",
                json!({"suite": "hostkernel", "runtime": "gvisor", "files": [{"path": "readme.txt", "content": "x"}]}),
            )
            .await;
        assert_eq!(st, StatusCode::ACCEPTED, "{v}\n{}", s.log());
        let done = finished(&s, &t, v["id"].as_str().unwrap()).await;
        assert_eq!(done["verdict"], "accepted", "{done}\n{}", s.log());
        for (id, _, runtime) in rows(&done["checks"]) {
            assert_eq!(runtime, json!("native"), "{id}: {done}");
        }
    });
}

/// An operator's language registry with a language that runs under gVisor.
const LANGUAGES: &str = "[languages.shg]\nname = \"sh on gVisor\"\nsource = \"main.sh\"\nrun = \"sh main.sh\"\nruntime = \"gvisor\"\n";

#[test]
fn a_request_chooses_its_runtime_and_the_default_is_the_servers() {
    let rt = rt();
    let data = tempfile::tempdir().unwrap();
    let langs = data.path().join("languages.toml");
    std::fs::write(&langs, LANGUAGES).unwrap();
    let config = format!(
        "languages = {:?}\n[runtime]\ndefault = \"native\"\n",
        langs.display().to_string()
    );
    let s = Server::start_in(data.path(), &config, &[]);
    rt.block_on(async {
        let t = s.token("student").await;
        // A language's runtime is its programs' default; the request's own choice wins.
        for (runtime, want) in [(None, "gvisor"), (Some("native"), "native")] {
            let mut body = json!({"language": "shg", "source_code": "uname -r"});
            if let Some(r) = runtime {
                body["runtime"] = json!(r);
            }
            let (st, v) = s.post(&t, "/submissions", body).await;
            assert_eq!(st, StatusCode::ACCEPTED, "{v}\n{}", s.log());
            let done = finished(&s, &t, v["id"].as_str().unwrap()).await;
            assert_eq!(done["run"]["runtime"], want, "{runtime:?}: {done}");
        }
        let v = s.run_ok(&t, json!({"cmd": "true"})).await;
        assert_eq!(v["runtime"], "native", "{v}");
        let v = s.run_ok(&t, json!({"cmd": "true", "runtime": "gvisor"})).await;
        assert_eq!(v["status"], "ok", "{v}\n{}", s.log());
        assert_eq!(v["runtime"], "gvisor", "{v}");
        // A kept sandbox keeps its runtime: naming one with sandbox.id is refused.
        let (st, v) = s
            .run(
                &t,
                json!({"cmd": "true", "sandbox": {"id": "0123456789abcdef0123456789abcdef"}, "runtime": "gvisor"}),
            )
            .await;
        assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
        // A submission asking for gVisor is judged there.
        let (st, v) = s
            .post(
                &t,
                "/submissions",
                json!({"cmd": "echo hi", "runtime": "gvisor"}),
            )
            .await;
        assert_eq!(st, StatusCode::ACCEPTED, "{v}");
        let done = finished(&s, &t, v["id"].as_str().unwrap()).await;
        assert_eq!(done["run"]["runtime"], "gvisor", "{done}");
        // An unknown runtime is a 422, like any bad field.
        let (st, v) = s.run(&t, json!({"cmd": "true", "runtime": "kvm"})).await;
        assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    });
}
