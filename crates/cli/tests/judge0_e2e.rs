//! The Judge0-compatible surface on the real `corral serve`: the official Judge0 Python SDK from
//! PyPI runs its own calls against it (`scripts/judge0-sdk-test`), and the raw HTTP details are
//! checked here (`X-Auth-Token`, `wait`, `base64_encoded`, `fields`, batches, status ids).

mod server_support;

use std::path::Path;
use std::time::{Duration, Instant};

use base64::Engine;
use reqwest::StatusCode;
use serde_json::{json, Value};
use server_support::*;

#[test]
fn the_official_judge0_python_sdk_works_against_corral() {
    let s = Server::start("[submissions]\nworkers = 2\n", &[]);
    let token = rt().block_on(s.token("staff"));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/judge0-sdk-test");
    let out = std::process::Command::new(&script)
        .args([&s.base, &token])
        .output()
        .expect("run scripts/judge0-sdk-test");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the Judge0 SDK test failed:\n{stdout}\n{stderr}\nserver log:\n{}",
        s.log()
    );
    assert!(stdout.contains("passed, 0 failed"), "{stdout}");
    eprintln!("{stdout}");
}

async fn j0(
    s: &Server,
    token: Option<&str>,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut r = client().request(method, s.url(path));
    if let Some(t) = token {
        r = r.header("X-Auth-Token", t);
    }
    if let Some(b) = body {
        r = r.json(&b);
    }
    let r = r.send().await.unwrap();
    let st = r.status();
    let text = r.text().await.unwrap();
    (st, serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

#[test]
fn judge0_requests_and_answers() {
    let s = Server::start("[submissions]\nworkers = 2\n", &[]);
    rt().block_on(async {
        let t = s.token("staff").await;
        let other = s.token("staff").await;
        use reqwest::Method;
        // Authentication: X-Auth-Token (or a bearer token).
        let (st, _) = j0(&s, None, Method::GET, "/judge0/about", None).await;
        assert_eq!(st, StatusCode::UNAUTHORIZED);
        let (st, _) = j0(&s, Some("corral_nope"), Method::GET, "/judge0/about", None).await;
        assert_eq!(st, StatusCode::UNAUTHORIZED);
        let (st, about) = j0(&s, Some(&t), Method::GET, "/judge0/about", None).await;
        assert_eq!(st, StatusCode::OK);
        assert_eq!(about["version"], "1.13.1");
        let (_, langs) = j0(&s, Some(&t), Method::GET, "/judge0/languages", None).await;
        let ids: Vec<i64> = langs.as_array().unwrap().iter().map(|l| l["id"].as_i64().unwrap()).collect();
        for id in [46, 50, 52, 62, 63, 71] {
            assert!(ids.contains(&id), "{id} missing from {langs}");
        }
        let (st, c) = j0(&s, Some(&t), Method::GET, "/judge0/languages/50", None).await;
        assert_eq!(st, StatusCode::OK);
        assert_eq!(c["source_file"], "main.c");
        let (st, _) = j0(&s, Some(&t), Method::GET, "/judge0/languages/4242", None).await;
        assert_eq!(st, StatusCode::NOT_FOUND);
        let (_, cfg) = j0(&s, Some(&t), Method::GET, "/judge0/config_info", None).await;
        assert_eq!(cfg["max_cpu_time_limit"], 10.0);
        assert_eq!(cfg["enable_network"], false);

        // wait=true, plain text: the whole result at once.
        let (st, v) = j0(
            &s,
            Some(&t),
            Method::POST,
            "/judge0/submissions?base64_encoded=false&wait=true",
            Some(json!({"source_code": "print(input() * 2)", "language_id": 71, "stdin": "ab",
                        "expected_output": "abab"})),
        )
        .await;
        assert_eq!(st, StatusCode::CREATED, "{v}");
        assert_eq!(v["status"], json!({"id": 3, "description": "Accepted"}));
        assert_eq!(v["stdout"], "abab\n");
        assert!(v["time"].as_str().unwrap().parse::<f64>().is_ok(), "{v}");
        assert!(v["memory"].as_i64().unwrap() > 0);
        let token = v["token"].as_str().unwrap().to_string();
        assert_eq!(token.len(), 36);
        // Later reads, with fields and base64.
        let (st, v) = j0(
            &s,
            Some(&t),
            Method::GET,
            &format!("/judge0/submissions/{token}?base64_encoded=true&fields=stdout,status_id,language_id,stdin"),
            None,
        )
        .await;
        assert_eq!(st, StatusCode::OK);
        assert_eq!(
            v,
            json!({"stdout": b64("abab\n"), "status_id": 3, "language_id": 71, "stdin": b64("ab")})
        );
        let (_, all) = j0(&s, Some(&t), Method::GET, &format!("/judge0/submissions/{token}?fields=*"), None).await;
        for k in ["token", "stdout", "stderr", "compile_output", "message", "exit_code", "exit_signal",
                  "status", "created_at", "finished_at", "time", "wall_time", "memory", "cpu_time_limit"] {
            assert!(all.get(k).is_some(), "{k} missing: {all}");
        }
        assert!(all["created_at"].as_str().unwrap().ends_with('Z'));
        // Someone else's token is not found.
        let (st, _) = j0(&s, Some(&other), Method::GET, &format!("/judge0/submissions/{token}"), None).await;
        assert_eq!(st, StatusCode::NOT_FOUND);

        // A batch, base64 in and out, with a bad item; then the batch read.
        let (st, v) = j0(
            &s,
            Some(&t),
            Method::POST,
            "/judge0/submissions/batch?base64_encoded=true",
            Some(json!({"submissions": [
                {"source_code": b64("int main(void) { return 0 }"), "language_id": 50},
                {"source_code": b64("x = [0] * (1 << 30)"), "language_id": 71, "memory_limit": 65536},
                {"source_code": b64("print(1)"), "language_id": 9999},
                {"source_code": b64("import os; os.abort()"), "language_id": 71},
            ]})),
        )
        .await;
        assert_eq!(st, StatusCode::CREATED, "{v}");
        let items = v.as_array().unwrap();
        assert!(items[2]["error"].as_str().unwrap().contains("9999"), "{v}");
        let tokens: Vec<&str> = [0, 1, 3].iter().map(|i| items[*i]["token"].as_str().unwrap()).collect();
        let q = format!(
            "/judge0/submissions/batch?tokens={},00000000-0000-4000-8000-000000000000&base64_encoded=true&fields=status,compile_output,message,token",
            tokens.join(",")
        );
        let deadline = Instant::now() + Duration::from_secs(120);
        let got = loop {
            let (st, v) = j0(&s, Some(&t), Method::GET, &q, None).await;
            assert_eq!(st, StatusCode::OK);
            let subs = v["submissions"].as_array().unwrap().clone();
            if subs[..3].iter().all(|x| x["status"]["id"].as_i64().unwrap() > 2) {
                break subs;
            }
            assert!(Instant::now() < deadline, "{v}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(got[0]["status"]["id"], 6, "compilation error: {}", got[0]);
        let compile = base64::engine::general_purpose::STANDARD
            .decode(got[0]["compile_output"].as_str().unwrap())
            .unwrap();
        assert!(String::from_utf8_lossy(&compile).contains("error"));
        assert_eq!(got[1]["status"]["id"], 12, "memory: runtime error (other): {}", got[1]);
        let msg = base64::engine::general_purpose::STANDARD
            .decode(got[1]["message"].as_str().unwrap())
            .unwrap();
        assert!(String::from_utf8_lossy(&msg).contains("memory"), "{}", got[1]);
        assert_eq!(got[2]["status"]["id"], 10, "SIGABRT: {}", got[2]);
        assert!(got[3].is_null(), "an unknown token reads as null");

        // Refused requests say why.
        for body in [
            json!({"source_code": "x", "language_id": 71, "enable_network": true}),
            json!({"language_id": 71}),
            json!({"source_code": "x", "language_id": 71, "additional_files": "UEsDBA=="}),
        ] {
            let (st, v) = j0(&s, Some(&t), Method::POST, "/judge0/submissions", Some(body.clone())).await;
            assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{body}: {v}");
            assert!(v["error"].is_string());
        }
    });
}

/// The languages Judge0 clients know by id beyond the first seven: listed, and judged through
/// the registry's own commands (a compiled one and an interpreted one, with a prompt on stdin).
#[test]
fn judge0_ids_of_the_seed_languages() {
    let s = Server::start("[submissions]\nworkers = 2\n", &[]);
    rt().block_on(async {
        use reqwest::Method;
        let t = s.token("staff").await;
        let (_, langs) = j0(&s, Some(&t), Method::GET, "/judge0/languages", None).await;
        let ids: Vec<i64> = langs
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["id"].as_i64().unwrap())
            .collect();
        for id in [60, 65, 68, 72, 85] {
            assert!(ids.contains(&id), "{id} missing from {langs}");
        }
        let (st, go) = j0(&s, Some(&t), Method::GET, "/judge0/languages/60", None).await;
        assert_eq!(st, StatusCode::OK);
        assert_eq!(go["source_file"], "main.go");
        for (id, source) in [
            (72, "print \"Name: \"\nputs \"hi #{gets.chomp}\"\n"),
            (
                65,
                "let () = print_string \"Name: \"; Printf.printf \"hi %s\\n\" (read_line ())\n",
            ),
        ] {
            let (st, v) = j0(
                &s,
                Some(&t),
                Method::POST,
                "/judge0/submissions?base64_encoded=false&wait=true",
                Some(
                    json!({"source_code": source, "language_id": id, "stdin": "Ada\n",
                            "expected_output": "Name: hi Ada"}),
                ),
            )
            .await;
            assert_eq!(st, StatusCode::CREATED, "{v}");
            assert_eq!(
                v["status"],
                json!({"id": 3, "description": "Accepted"}),
                "{id}: {v}"
            );
        }
    });
}
