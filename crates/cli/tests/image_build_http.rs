//! `POST /images/build` through the real `corral serve`, on the Debian test image
//! (`common::image`): an admin's build file runs as a background job in real build sandboxes,
//! its progress and result are polled from `GET /images/builds/{id}`, the image it names runs
//! `/run`s, an unchanged file reruns no step, a failing step names nothing, and bad requests
//! (roles, malformed or oversized files, copy steps, a missing base, other content types) get
//! clear 4xx answers before any job exists.

mod common;
mod server_support;

use std::time::{Duration, Instant};

use common::image::NAME;
use reqwest::StatusCode;
use serde_json::{json, Value};
use server_support::*;

async fn post_file(
    s: &Server,
    token: &str,
    query: &str,
    content_type: &str,
    body: impl Into<reqwest::Body>,
) -> (StatusCode, Value) {
    let r = client()
        .post(s.url(&format!("/images/build{query}")))
        .bearer_auth(token)
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .unwrap();
    let st = r.status();
    let text = r.text().await.unwrap();
    let v = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{st}: not JSON ({e}): {text}"));
    (st, v)
}

/// Polls the build until it has finished; its last state.
async fn finished(s: &Server, token: &str, id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let (st, v) = s.get(token, &format!("/images/builds/{id}")).await;
        assert_eq!(st, StatusCode::OK, "{v}");
        if v["status"] == "succeeded" || v["status"] == "failed" {
            return v;
        }
        assert!(
            ["queued", "running"].contains(&v["status"].as_str().unwrap()),
            "{v}"
        );
        assert!(
            Instant::now() < deadline,
            "build {id} not finished: {v}\n{}",
            s.log()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[test]
fn an_admin_builds_an_image_over_http_and_runs_in_it() {
    let data = tempfile::tempdir().unwrap();
    common::image::import_into(data.path());
    let s = Server::start_in(data.path(), "", &[]);
    let file = format!(
        "from: {NAME}\nname: course/http-built:1\nsteps:\n  - run: echo built-over-http > /etc/built-by-http && echo step-output\n  - env: {{GREETING: hello}}\n"
    );
    rt().block_on(async {
        let (staff, student) = (s.token("staff").await, s.token("student").await);
        let admin = s.admin.clone();
        // Only admins build.
        for t in [&staff, &student] {
            let (st, e) = post_file(&s, t, "", "application/yaml", file.clone()).await;
            assert_eq!(st, StatusCode::FORBIDDEN, "{e}");
        }
        let (st, job) = post_file(&s, &admin, "", "application/yaml", file.clone()).await;
        assert_eq!(st, StatusCode::ACCEPTED, "{job}");
        assert_eq!(job["total"], 2, "{job}");
        assert_eq!(job["name"], "course/http-built:1", "{job}");
        let id = job["id"].as_str().unwrap().to_string();
        assert_eq!(
            s.get(&staff, &format!("/images/builds/{id}")).await.0,
            StatusCode::FORBIDDEN
        );
        let done = finished(&s, &admin, &id).await;
        assert_eq!(done["status"], "succeeded", "{done}\n{}", s.log());
        assert_eq!(done["steps"][0]["cached"], false, "{done}");
        assert!(done["steps"][0]["layer"].as_str().unwrap().starts_with("sha256:"), "{done}");
        assert!(done["steps"][1]["layer"].is_null(), "{done}");
        assert!(done["output"].as_str().unwrap().contains("step-output"), "{done}");
        let image = &done["image"];
        assert_eq!(image["names"], json!(["course/http-built:1"]), "{done}");
        let digest = image["digest"].as_str().unwrap().to_string();
        // The image is the server's now: listed, and a student's /run may name it.
        let (_, list) = s.get(&staff, "/images").await;
        assert!(list.as_array().unwrap().iter().any(|i| i["digest"] == digest.as_str()), "{list}");
        let v = s
            .run_ok(
                &student,
                json!({"cmd": "cat /etc/built-by-http; echo $GREETING", "image": "course/http-built:1"}),
            )
            .await;
        assert_eq!(v["stdout"], "built-over-http\nhello\n", "{v}");
        assert_eq!(v["image"]["digest"], digest.as_str(), "{v}");

        // The same file again: every step from the cache, the same digest. As JSON this time.
        let as_json = json!({"from": NAME, "name": "course/http-built:1", "steps": [
            {"run": "echo built-over-http > /etc/built-by-http && echo step-output"},
            {"env": {"GREETING": "hello"}}]});
        let (st, job) =
            post_file(&s, &admin, "", "application/json", as_json.to_string()).await;
        assert_eq!(st, StatusCode::ACCEPTED, "{job}");
        let again = finished(&s, &admin, job["id"].as_str().unwrap()).await;
        assert_eq!(again["status"], "succeeded", "{again}");
        assert_eq!(again["steps"][0]["cached"], true, "{again}");
        assert_eq!(again["steps"][1]["cached"], true, "{again}");
        assert_eq!(again["image"]["digest"], digest.as_str(), "{again}");

        // A failing step: the job fails naming it, and nothing is named.
        let failing = format!("from: {NAME}\nsteps:\n  - run: echo partial > /etc/partial\n  - run: exit 3\n");
        let (st, job) =
            post_file(&s, &admin, "?name=course/never:1", "text/yaml", failing).await;
        assert_eq!(st, StatusCode::ACCEPTED, "{job}");
        let failed = finished(&s, &admin, job["id"].as_str().unwrap()).await;
        assert_eq!(failed["status"], "failed", "{failed}");
        assert_eq!(failed["error"], "step 2/2 failed: exit status 3", "{failed}");
        assert!(failed["image"].is_null(), "{failed}");
        let (_, list) = s.get(&staff, "/images").await;
        assert!(!list.to_string().contains("course/never"), "{list}");

        // Refused before any job exists, each with a message saying why.
        let refused: Vec<(&str, &str, Vec<u8>, StatusCode, &str)> = vec![
            ("", "application/yaml", b"from: [unclosed\n".to_vec(), StatusCode::UNPROCESSABLE_ENTITY, "POST /images/build:"),
            ("", "application/yaml", format!("from: {NAME}\nsteps: []\nextra: 1\n").into_bytes(), StatusCode::UNPROCESSABLE_ENTITY, "extra"),
            ("", "application/yaml", format!("from: {NAME}\nsteps:\n  - copy: {{src: a, dst: /a}}\n").into_bytes(), StatusCode::UNPROCESSABLE_ENTITY, "copy step"),
            ("", "application/yaml", b"from: course/not-here:1\nsteps:\n  - run: \"true\"\n".to_vec(), StatusCode::UNPROCESSABLE_ENTITY, "pull or import the base image first"),
            ("?name=Bad..Name", "application/yaml", format!("from: {NAME}\nsteps:\n  - run: \"true\"\n").into_bytes(), StatusCode::UNPROCESSABLE_ENTITY, "name"),
            ("", "image/png", format!("from: {NAME}\nsteps: []\n").into_bytes(), StatusCode::UNSUPPORTED_MEDIA_TYPE, "application/yaml"),
            ("", "application/yaml", vec![b'#'; 300 * 1024], StatusCode::PAYLOAD_TOO_LARGE, "larger than"),
            ("", "application/yaml", vec![0xff, 0xfe, b'\n'], StatusCode::UNPROCESSABLE_ENTITY, "UTF-8"),
        ];
        for (query, ct, body, want, says) in refused {
            let (st, e) = post_file(&s, &admin, query, ct, body).await;
            assert_eq!(st, want, "{e}");
            assert!(e["message"].as_str().unwrap().contains(says), "{says}: {e}");
        }
        let (st, _) = s.get(&admin, "/images/builds/0123456789abcdef0123456789abcdef").await;
        assert_eq!(st, StatusCode::NOT_FOUND);
        // The OpenAPI document describes both endpoints.
        let (_, doc) = s.get(&admin, "/openapi.json").await;
        assert!(doc["paths"]["/images/build"]["post"].is_object(), "{}", doc["paths"]);
        assert!(doc["paths"]["/images/builds/{id}"]["get"].is_object());
    });
}
