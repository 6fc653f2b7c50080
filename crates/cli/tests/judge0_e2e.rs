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
        // Both of Judge0's C++ ids are listed: clients check an id against the list.
        for id in [46, 50, 52, 54, 62, 63, 71] {
            assert!(ids.contains(&id), "{id} missing from {langs}");
        }
        let (st, all) = j0(&s, Some(&t), Method::GET, "/judge0/languages/all", None).await;
        assert_eq!(st, StatusCode::OK, "{all}");
        let python = all.as_array().unwrap().iter().find(|l| l["id"] == 71).cloned();
        assert_eq!(
            python,
            Some(json!({"id": 71, "name": langs.as_array().unwrap().iter()
                .find(|l| l["id"] == 71).unwrap()["name"], "is_archived": false})),
            "{all}"
        );
        // A body that is not a submission object, and one over the server's JSON limit (2 MiB):
        // clear errors, in Judge0's `{"error"}` shape.
        let (st, v) = j0(&s, Some(&t), Method::POST, "/judge0/submissions", Some(json!([]))).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{v}");
        assert!(v["error"].as_str().unwrap_or("").contains("JSON object"), "{v}");
        // A batch with no valid item: 422, each item saying why (Judge0's statuses); an empty
        // batch or an empty token list: 400.
        let (st, v) = j0(&s, Some(&t), Method::POST, "/judge0/submissions/batch",
                         Some(json!({"submissions": [[]]}))).await;
        assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
        assert!(v[0]["error"].as_str().unwrap_or("").contains("JSON object"), "{v}");
        let (st, v) = j0(&s, Some(&t), Method::POST, "/judge0/submissions/batch",
                         Some(json!({"submissions": []}))).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{v}");
        assert!(v["error"].as_str().unwrap_or("").contains("at least one"), "{v}");
        let (st, v) = j0(&s, Some(&t), Method::GET, "/judge0/submissions/batch?tokens=", None).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{v}");
        let big = json!({"source_code": "#".repeat(3 << 20), "language_id": 71});
        let (st, v) = j0(&s, Some(&t), Method::POST, "/judge0/submissions", Some(big)).await;
        assert_eq!(st, StatusCode::PAYLOAD_TOO_LARGE, "{v}");
        assert!(v["error"].is_string(), "{v}");
        // Output that is not UTF-8 comes back byte for byte in base64; the language's id may
        // come as text, as Judge0 takes it.
        let (st, v) = j0(
            &s,
            Some(&t),
            Method::POST,
            "/judge0/submissions?base64_encoded=true&wait=true",
            Some(json!({"language_id": "71", "source_code": b64(
                "import sys\nsys.stdout.buffer.write(bytes([255, 254, 65]))\n")})),
        )
        .await;
        assert_eq!(st, StatusCode::CREATED, "{v}");
        assert_eq!((&v["status"]["id"], &v["stdout"]), (&json!(3), &json!("//5B")), "{v}");
        // No stdin was sent: null, as Judge0 answers it.
        let path = format!("/judge0/submissions/{}?fields=stdin", v["token"].as_str().unwrap());
        let (_, v) = j0(&s, Some(&t), Method::GET, &path, None).await;
        assert_eq!(v, json!({"stdin": null}));
        let (st, c) = j0(&s, Some(&t), Method::GET, "/judge0/languages/50", None).await;
        assert_eq!(st, StatusCode::OK);
        assert_eq!(c["source_file"], "main.c");
        // Java's command as it runs here: its memory limit filled in, no placeholder shown.
        let (st, java) = j0(&s, Some(&t), Method::GET, "/judge0/languages/62", None).await;
        assert_eq!(st, StatusCode::OK, "{java}");
        assert_eq!(java["run_cmd"], "java -XX:MaxRAM=512m -cp . Main", "{java}");
        let (st, _) = j0(&s, Some(&t), Method::GET, "/judge0/languages/4242", None).await;
        assert_eq!(st, StatusCode::NOT_FOUND);
        let (_, cfg) = j0(&s, Some(&t), Method::GET, "/judge0/config_info", None).await;
        assert_eq!(cfg["max_cpu_time_limit"], 10.0);
        assert_eq!(cfg["enable_network"], false);
        assert_eq!(cfg["allow_enable_network"], false, "{cfg}");
        // What corral takes, as clients read it: a zip of additional files, repeated runs.
        assert_eq!(cfg["enable_additional_files"], true);
        assert_eq!(cfg["max_number_of_runs"], 20);
        // In KB, what such a zip may unpack to (the upload limit): 0 told clients "nothing".
        assert!(cfg["max_extract_size"].as_u64().unwrap_or(0) > 0, "{cfg}");

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
        // `language` is Judge0's {id, name} (it came back as `{}`); a name Judge0 does not have
        // is refused as Judge0 refuses it (it was ignored).
        assert_eq!(all["language"]["id"], 71, "{all}");
        let (_, l) = j0(&s, Some(&t), Method::GET, &format!("/judge0/submissions/{token}?fields=language"), None).await;
        assert!(l["language"]["id"] == 71 && l["language"]["name"].is_string(), "{l}");
        // Judge0's two C++ ids are corral's one C++: each reads back as it was given (54 came
        // back as 52).
        for id in [52, 54] {
            let (st, v) = j0(&s, Some(&t), Method::POST, "/judge0/submissions?base64_encoded=false",
                             Some(json!({"source_code": "int main() {}", "language_id": id}))).await;
            assert_eq!(st, StatusCode::CREATED, "{v}");
            let cpp = v["token"].as_str().unwrap();
            let (_, v) = j0(&s, Some(&t), Method::GET,
                            &format!("/judge0/submissions/{cpp}?fields=language_id,language"), None).await;
            assert!(v["language_id"] == id && v["language"]["id"] == id, "{id}: {v}");
        }
        let (st, e) = j0(&s, Some(&t), Method::GET, &format!("/judge0/submissions/{token}?fields=stdout,bogus"), None).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{e}");
        assert_eq!(e["error"], "invalid fields: [bogus]", "{e}");
        // The source comes back as it was sent (clients re-run a submission from its answer).
        assert_eq!(all["source_code"], "print(input() * 2)", "{all}");
        let (_, v) = j0(
            &s,
            Some(&t),
            Method::GET,
            &format!("/judge0/submissions/{token}?base64_encoded=true&fields=source_code"),
            None,
        )
        .await;
        assert_eq!(v, json!({"source_code": b64("print(input() * 2)")}));
        // Another student's token is not found; staff read it (as through GET /submissions/{id}).
        let stranger = s.token("student").await;
        let (st, _) = j0(&s, Some(&stranger), Method::GET, &format!("/judge0/submissions/{token}"), None).await;
        assert_eq!(st, StatusCode::NOT_FOUND);
        let (st, v) = j0(&s, Some(&other), Method::GET, &format!("/judge0/submissions/{token}"), None).await;
        assert_eq!(st, StatusCode::OK, "{v}");
        // Deleting is refused as a Judge0 without ENABLE_SUBMISSION_DELETE refuses it.
        let (st, v) = j0(&s, Some(&t), Method::DELETE, &format!("/judge0/submissions/{token}"), None).await;
        assert_eq!((st, &v), (StatusCode::BAD_REQUEST, &json!({"error": "delete not allowed"})));

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
        // As Judge0's model errors: the field, then its messages.
        assert_eq!(items[2], json!({"language_id": ["language with id 9999 doesn't exist"]}), "{v}");
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

        // Refused requests say why, as Judge0's validations do: 422 `{"FIELD": ["MESSAGE"]}`.
        for (body, field) in [
            (json!({"source_code": "x", "language_id": 71, "enable_network": true}), "enable_network"),
            (json!({"language_id": 71}), "source_code"),
            (json!({"source_code": "x"}), "language_id"),
            (json!({"source_code": "x", "language_id": 71, "additional_files": "UEsDBA=="}), "additional_files"),
            (json!({"source_code": "x", "language_id": 71, "cpu_time_limit": "fast"}), "cpu_time_limit"),
            (json!({"source_code": "x", "language_id": 71, "callback_url": "ftp://x"}), "callback_url"),
        ] {
            let (st, v) = j0(&s, Some(&t), Method::POST, "/judge0/submissions", Some(body.clone())).await;
            assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{body}: {v}");
            let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
            assert_eq!(keys, [field], "{body}: {v}");
            assert!(v[field][0].as_str().is_some_and(|m| !m.is_empty()), "{body}: {v}");
        }
        let (_, v) = j0(&s, Some(&t), Method::POST, "/judge0/submissions",
                        Some(json!({"language_id": 71}))).await;
        assert_eq!(v, json!({"source_code": ["can't be blank"]}), "Judge0's own words");
        // Blank as Rails sees it: empty or only whitespace.
        for blank in ["", " \n\t"] {
            let (st, v) = j0(&s, Some(&t), Method::POST, "/judge0/submissions",
                             Some(json!({"source_code": blank, "language_id": 71}))).await;
            assert_eq!((st, v), (StatusCode::UNPROCESSABLE_ENTITY, json!({"source_code": ["can't be blank"]})));
        }
        // Numbers and booleans as text are cast, as Judge0 (Rails) casts them.
        let (st, v) = j0(&s, Some(&t), Method::POST, "/judge0/submissions",
                         Some(json!({"source_code": "print(1)", "language_id": "71", "cpu_time_limit": "2",
                                     "memory_limit": "128000", "number_of_runs": "1",
                                     "redirect_stderr_to_stdout": "true"}))).await;
        assert_eq!(st, StatusCode::CREATED, "{v}");
        // Errors of the path and the query are Judge0's JSON too, never plain text.
        for path in ["/judge0/languages/%FF", "/judge0/submissions/x?fields=stdout&fields=status",
                     "/judge0/submissions?wait=true&wait=false"] {
            let method = if path.ends_with("wait=false") { Method::POST } else { Method::GET };
            let body = (method == Method::POST).then(|| json!({"source_code": "x", "language_id": 71}));
            let (st, v) = j0(&s, Some(&t), method, path, body).await;
            assert_eq!(st, StatusCode::BAD_REQUEST, "{path}: {v}");
            assert!(v["error"].as_str().is_some_and(|m| !m.is_empty()), "{path}: {v}");
        }
        // An id that is no number is no language: Judge0's 404, not a parse error.
        let (st, v) = j0(&s, Some(&t), Method::GET, "/judge0/languages/abc", None).await;
        assert_eq!((st, v), (StatusCode::NOT_FOUND, json!({"error": "Not found"})));
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

/// A zip of `(name, bytes)` entries (a name ending in `/` is a folder; `@target` as the bytes of a
/// name starting with `link:` makes a symbolic link).
fn zip_of(entries: &[(&str, &[u8])]) -> String {
    use std::io::Write;
    use zip::write::SimpleFileOptions;
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, data) in entries {
        let o = SimpleFileOptions::default();
        if let Some(link) = name.strip_prefix("link:") {
            w.add_symlink(link, std::str::from_utf8(data).unwrap(), o)
                .unwrap();
        } else if name.ends_with('/') {
            w.add_directory(*name, o).unwrap();
        } else {
            w.start_file(*name, o).unwrap();
            w.write_all(data).unwrap();
        }
    }
    base64::engine::general_purpose::STANDARD.encode(w.finish().unwrap().into_inner())
}

/// `POST /judge0/submissions?wait=true&fields=*` → (status code, body).
async fn j0_wait(s: &Server, t: &str, body: Value) -> (StatusCode, Value) {
    j0(
        s,
        Some(t),
        reqwest::Method::POST,
        "/judge0/submissions?base64_encoded=false&wait=true&fields=*",
        Some(body),
    )
    .await
}

#[test]
fn multi_file_programs_repeated_runs_and_merged_output() {
    let s = Server::start("[submissions]\nworkers = 2\n", &[]);
    rt().block_on(async {
        let t = s.token("staff").await;
        // A C program whose header comes in the zip, in a folder.
        let files = zip_of(&[
            ("lib/", b""),
            ("lib/answer.h", b"#define ANSWER 42\n"),
            ("data.txt", b"from the zip\n"),
        ]);
        let (st, v) = j0_wait(
            &s,
            &t,
            json!({"language_id": 50, "additional_files": files,
                   "source_code": "#include <stdio.h>\n#include \"lib/answer.h\"\nint main(void){char b[64]; FILE *f = fopen(\"data.txt\", \"r\"); fgets(b, sizeof b, f); printf(\"%d %s\", ANSWER, b); return 0;}\n"}),
        )
        .await;
        assert_eq!(st, StatusCode::CREATED, "{v}");
        assert_eq!(v["status"]["id"], 3, "{v}");
        assert_eq!(v["stdout"], "42 from the zip\n", "{v}");
        // A Python module beside the source.
        let files = zip_of(&[("greet.py", b"def greet(n):\n    return 'hello, ' + n\n")]);
        let (_, v) = j0_wait(
            &s,
            &t,
            json!({"language_id": 71, "additional_files": files, "stdin": "zip",
                   "source_code": "import greet\nprint(greet.greet(input()))\n"}),
        )
        .await;
        assert_eq!(v["stdout"], "hello, zip\n", "{v}");

        // number_of_runs: every run made, the means reported; a failing run ends the series.
        let (_, v) = j0_wait(
            &s,
            &t,
            json!({"language_id": 71, "number_of_runs": 3, "source_code": "print(sum(range(10**5)))\n",
                   "expected_output": "4999950000"}),
        )
        .await;
        assert_eq!(v["status"]["id"], 3, "{v}");
        assert_eq!(v["number_of_runs"], 3, "{v}");
        assert!(v["time"].as_str().is_some() && v["memory"].as_i64().unwrap() > 0, "{v}");
        let (_, v) = j0_wait(
            &s,
            &t,
            json!({"language_id": 71, "number_of_runs": 3,
                   "source_code": "import os\nn = len(os.listdir('.'))\nopen(f'run{n}', 'w').close()\nprint(n)\n",
                   "expected_output": "1"}),
        )
        .await;
        // The first run sees main.py only and is accepted; the second sees run1 and is not: the
        // series stops there and reports it.
        assert_eq!(v["status"]["id"], 4, "{v}");
        assert_eq!(v["stdout"], "2\n", "{v}");
        let (st, v) = j0_wait(
            &s,
            &t,
            json!({"language_id": 71, "number_of_runs": 21, "source_code": "print(1)"}),
        )
        .await;
        assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
        assert!(v["number_of_runs"][0].as_str().unwrap().contains("at most 20"), "{v}");

        // redirect_stderr_to_stdout: both streams, in order, as the output judged.
        let src = "import sys\nprint('out', flush=True)\nsys.stderr.write('err\\n')\n";
        let (_, v) = j0_wait(
            &s,
            &t,
            json!({"language_id": 71, "redirect_stderr_to_stdout": true, "source_code": src,
                   "expected_output": "out\nerr"}),
        )
        .await;
        assert_eq!(v["status"]["id"], 3, "{v}");
        assert_eq!(v["stdout"], "out\nerr\n", "{v}");
        assert_eq!(v["stderr"], Value::Null, "{v}");
        let (_, v) = j0_wait(&s, &t, json!({"language_id": 71, "source_code": src})).await;
        assert_eq!(v["stdout"], "out\n", "{v}");
        assert_eq!(v["stderr"], "err\n", "{v}");
    });
}

#[test]
fn hostile_additional_files_are_refused() {
    let s = Server::start("[submissions]\nworkers = 1\n[upload]\nmax_files = 5\n", &[]);
    rt().block_on(async {
        let t = s.token("staff").await;
        let bomb = vec![0u8; 16 << 20];
        let many: Vec<(String, Vec<u8>)> =
            (0..100).map(|i| (format!("f{i}"), vec![b'x'])).collect();
        let many: Vec<(&str, &[u8])> = many.iter().map(|(n, d)| (n.as_str(), &d[..])).collect();
        let cases: Vec<(String, &str)> = vec![
            (zip_of(&[("../escape.txt", b"x")]), "leaves its folder"),
            (zip_of(&[("a/../../escape.txt", b"x")]), "leaves its folder"),
            (zip_of(&[("/etc/cron.d/x", b"x")]), "absolute"),
            (zip_of(&[("link:shadow", b"/etc/shadow")]), "symbolic link"),
            (zip_of(&[("bomb", &bomb)]), "zip bomb"),
            (zip_of(&many), "entries"),
            (zip_of(&[("main.py", b"print('replaced')")]), "source file"),
            (
                base64::engine::general_purpose::STANDARD.encode(b"PK\x03\x04junk"),
                "not a zip",
            ),
            ("%%%".to_string(), "base64"),
        ];
        for (zip, want) in cases {
            let (st, v) = j0_wait(
                &s,
                &t,
                json!({"language_id": 71, "source_code": "print(1)", "additional_files": zip}),
            )
            .await;
            assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{want}: {v}");
            assert!(
                v["additional_files"][0]
                    .as_str()
                    .unwrap_or_default()
                    .contains(want),
                "{want}: {v}"
            );
        }
        // Nothing was written outside the data folder, and the server is still up.
        assert!(!Path::new("/etc/cron.d/x").exists());
        s.health().await;
    });
}

#[test]
fn enable_network_is_refused_unless_the_operator_allows_it() {
    // Interfaces the run sees: /proc/net/dev has two header lines, then one per interface.
    let src = "tail -n +3 /proc/net/dev | wc -l";
    let offline = Server::start("[submissions]\nworkers = 1\n", &[]);
    let sandboxed = rt().block_on(async {
        let t = offline.token("staff").await;
        let (st, v) = j0_wait(
            &offline,
            &t,
            json!({"language_id": 46, "source_code": src, "enable_network": true}),
        )
        .await;
        assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
        assert!(
            v["enable_network"][0]
                .as_str()
                .unwrap()
                .contains("allow_network"),
            "{v}"
        );
        let (_, v) = j0_wait(&offline, &t, json!({"language_id": 46, "source_code": src})).await;
        assert_eq!(v["status"]["id"], 3, "{v}");
        v["stdout"].as_str().unwrap().trim().parse::<u32>().unwrap()
    });
    assert_eq!(sandboxed, 1, "only the sandbox's own loopback");
    drop(offline);
    let online = Server::start(
        "[submissions]\nworkers = 1\n[judge0]\nallow_network = true\n",
        &[],
    );
    rt().block_on(async {
        let t = online.token("staff").await;
        // Clients read whether they may ask for the network here.
        let (_, cfg) = j0(
            &online,
            Some(&t),
            reqwest::Method::GET,
            "/judge0/config_info",
            None,
        )
        .await;
        assert_eq!(
            (&cfg["enable_network"], &cfg["allow_enable_network"]),
            (&json!(false), &json!(true)),
            "{cfg}"
        );
        let (st, v) = j0_wait(
            &online,
            &t,
            json!({"language_id": 46, "source_code": src, "enable_network": true}),
        )
        .await;
        assert_eq!(st, StatusCode::CREATED, "{v}");
        assert_eq!(v["enable_network"], true, "{v}");
        let host = std::fs::read_to_string("/proc/net/dev")
            .unwrap()
            .lines()
            .count() as u32
            - 2;
        assert_eq!(
            v["stdout"].as_str().unwrap().trim().parse::<u32>().unwrap(),
            host,
            "{v}"
        );
    });
}

/// The per-token cap on waiting submissions holds on the Judge0 surface too (it was ignored
/// there, so a token could flood the queue through it), answered as Judge0 answers a full
/// queue: 503 "queue is full"; a batch that would pass it is refused whole.
#[test]
fn a_full_queue_is_judge0s_503() {
    use reqwest::Method;
    let s = Server::start(
        "[submissions]\nworkers = 0\nmax_pending_per_owner = 2\n",
        &[],
    );
    rt().block_on(async {
        let t = s.token("student").await;
        let one = json!({"source_code": "print(1)", "language_id": 71});
        for _ in 0..2 {
            let (st, v) = j0(
                &s,
                Some(&t),
                Method::POST,
                "/judge0/submissions",
                Some(one.clone()),
            )
            .await;
            assert_eq!(st, StatusCode::CREATED, "{v}");
        }
        let (st, v) = j0(
            &s,
            Some(&t),
            Method::POST,
            "/judge0/submissions",
            Some(one.clone()),
        )
        .await;
        assert_eq!(
            (st, &v),
            (
                StatusCode::SERVICE_UNAVAILABLE,
                &json!({"error": "queue is full"})
            )
        );
        let batch = json!({"submissions": [one.clone(), one]});
        let (st, v) = j0(
            &s,
            Some(&t),
            Method::POST,
            "/judge0/submissions/batch",
            Some(batch),
        )
        .await;
        assert_eq!(st, StatusCode::SERVICE_UNAVAILABLE, "{v}");
    });
}
