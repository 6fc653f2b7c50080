//! The OpenAPI document (`GET /openapi.json`) against the server it describes: every route the
//! router serves is in it (or deliberately left out), what a client needs is there (operations,
//! schemas, a server, the security schemes), the Judge0 surface's and a callback redelivery's
//! real answers are what their operations say, and the WebSocket's messages are described in a form code generators take.
//!
//! The server is `support/mod.rs`'s (the real router, auth and store in this process), whose
//! pool never runs a program.

mod support;

use std::collections::{BTreeMap, BTreeSet};

use corral_store::Role;
use reqwest::StatusCode;
use serde_json::{json, Value};
use support::{json_of, TestServer};

#[tokio::test(flavor = "multi_thread")]
async fn openapi_document_is_complete() {
    let s = TestServer::start(|_| {}).await;
    let (st, doc) = json_of(reqwest::get(s.url("/openapi.json")).await.unwrap()).await;
    assert_eq!(st, StatusCode::OK);
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    for p in [
        "/upload",
        "/run",
        "/ws",
        "/uploads/{id}",
        "/sandboxes/{id}",
        "/tokens",
        "/health",
        "/metrics",
        "/languages",
        "/openapi.json",
        "/check",
        "/suites",
        "/images",
        "/images/import",
        "/images/build",
        "/images/builds/{id}",
        "/images/{reference}",
        "/worker/images/{reference}",
        "/worker/blobs/{digest}",
        "/judge0/submissions",
        "/judge0/submissions/batch",
        "/judge0/submissions/{token}",
        "/judge0/languages",
        "/judge0/statuses",
        "/judge0/about",
        "/judge0/config_info",
    ] {
        assert!(
            doc["paths"][p].is_object(),
            "{p} missing from the OpenAPI document"
        );
    }
    for schema in [
        "RunRequest",
        "RunResponse",
        "UploadResponse",
        "ErrorBody",
        "WsClientMessage",
        "WsServerMessage",
        "ImageInfo",
        "ImageDoc",
        "BuildJob",
        "Judge0SubmissionRequest",
        "Judge0Submission",
        "Judge0Status",
        "Judge0Error",
    ] {
        assert!(
            doc["components"]["schemas"][schema].is_object(),
            "schema {schema} missing"
        );
    }
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
    // A generated client is pointed at the server the document came from.
    assert_eq!(doc["servers"][0]["url"], "/", "{}", doc["servers"]);
    // A late body is a 408 wherever a body is read against the deadline; image archives are
    // exempt from it.
    assert!(doc["paths"]["/run"]["post"]["responses"]["408"].is_object());
    assert!(doc["paths"]["/submissions"]["post"]["responses"]["408"].is_object());
    assert!(doc["paths"]["/images/import"]["post"]["responses"]["408"].is_null());
    assert!(doc["paths"]["/uploads/{id}"]["get"]["responses"]["408"].is_null());
    // A submission names exactly one of language, cmd and suite, and the schema says so.
    let sub = &doc["components"]["schemas"]["SubmissionRequest"]["allOf"];
    assert!(sub[0]["properties"]["cmd"].is_object(), "{sub}");
    let modes: Vec<&Value> = sub[1]["oneOf"]
        .as_array()
        .unwrap_or_else(|| panic!("no oneOf: {sub}"))
        .iter()
        .map(|m| &m["required"][0])
        .collect();
    assert_eq!(modes, ["language", "cmd", "suite"]);
    // Every path and query parameter has an example, so the examples phase of a fuzzer (and a
    // reader) has something to send.
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            for p in op["parameters"].as_array().into_iter().flatten() {
                if p["in"] == "header" || p["in"] == "path" || p["in"] == "query" {
                    assert!(
                        p.get("example").is_some() || p["schema"].get("example").is_some(),
                        "{method} {path}: parameter {} has no example",
                        p["name"]
                    );
                }
            }
        }
    }
    // Every operation has an operationId of its own (OpenAPI requires them unique; code
    // generators fail or make colliding methods: `GET /images` and `GET /revisions` were both
    // `list`), and every link names one of them.
    let mut ids: BTreeMap<String, String> = Default::default();
    let mut linked = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let id = op["operationId"]
                .as_str()
                .unwrap_or_else(|| panic!("{method} {path} has no operationId"));
            if let Some(other) = ids.insert(id.to_string(), format!("{method} {path}")) {
                panic!("operationId {id:?} of {method} {path} is also {other}'s");
            }
            for resp in op["responses"].as_object().into_iter().flatten() {
                for (name, link) in resp.1["links"].as_object().into_iter().flatten() {
                    linked.push((format!("{method} {path}: link {name}"), link.clone()));
                }
            }
        }
    }
    for (at, link) in linked {
        let target = link["operationId"].as_str().unwrap_or_default();
        assert!(ids.contains_key(target), "{at} names no operation: {link}");
    }
    // What plain HTTP cannot do is said where a client reads it.
    let about = doc["info"]["description"].as_str().unwrap();
    assert!(
        about.contains("WebSocket") && about.contains("Corral-Signature"),
        "{about}"
    );
    // Every $ref points at a schema that exists.
    fn refs(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(r)) = m.get("$ref") {
                    out.push(r.clone());
                }
                m.values().for_each(|x| refs(x, out));
            }
            Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
            _ => {}
        }
    }
    let mut all = Vec::new();
    refs(&doc, &mut all);
    for r in all {
        let name = r.strip_prefix("#/components/schemas/").unwrap();
        assert!(
            doc["components"]["schemas"][name].is_object(),
            "dangling {r}"
        );
    }
    // Metrics are Prometheus text, health is JSON.
    let m = corral_testkit::http::get_text(&s.url("/metrics")).await;
    assert!(m.contains("corral_runs_in_flight"), "{m}");
    let (st, h) = json_of(reqwest::get(s.url("/health")).await.unwrap()).await;
    assert_eq!((st, h["status"].as_str()), (StatusCode::OK, Some("ok")));
    let (st, langs) = json_of(reqwest::get(s.url("/languages")).await.unwrap()).await;
    assert_eq!(st, StatusCode::OK);
    assert!(langs.as_array().unwrap().iter().any(|l| l["id"] == "c"));
    s.stop().await;
}

/// Routes the router serves that are not API operations, and so not in the document: the
/// browser editor's pages and assets (`http::web`).
const NOT_API: &[&str] = &[
    "/",
    "/index.html",
    "/staff",
    "/staff.html",
    "/favicon.svg",
    "/assets/{path}",
];

/// The routes the router serves, each with its methods (HEAD, which axum adds to every GET,
/// left out), `{*rest}` written `{rest}` as OpenAPI writes it. Read from the routers' `Debug`
/// text, the only list of its routes axum gives: `RouteId(N): MethodRouter(MethodRouter { …,
/// allow_header: Bytes(b"GET,HEAD") })` and, in its node, `RouteId(N): "/path"`.
fn served_routes() -> BTreeMap<String, BTreeSet<String>> {
    use corral_server::router::{protected_routes, public_routes};
    let router = protected_routes(1 << 20).merge(public_routes());
    let text = format!("{router:?}");
    // The path router only (the fallback router has routes of its own ids).
    let text = text
        .split_once("path_router:")
        .and_then(|(_, rest)| rest.split_once("fallback_router:"))
        .map(|(paths, _)| paths)
        .unwrap_or_else(|| panic!("axum's Debug text of a Router changed: {text:.2000}"));
    let mut paths = BTreeMap::new();
    let mut methods = BTreeMap::new();
    for part in text.split("RouteId(").skip(1) {
        let (id, rest) = part.split_once(')').unwrap();
        let rest = rest.trim_start_matches(':').trim_start();
        if let Some(path) = rest.strip_prefix('"') {
            let path = &path[..path.find('"').unwrap()];
            paths.insert(id.to_string(), path.replace("{*", "{"));
        } else if rest.starts_with("MethodRouter") {
            let allow = rest
                .split_once("allow_header: Bytes(b\"")
                .and_then(|(_, a)| a.split_once('"'))
                .map(|(a, _)| a)
                .unwrap_or_else(|| panic!("route {id} has no Allow header: {rest:.500}"));
            let set: BTreeSet<String> = allow
                .split(',')
                .filter(|m| *m != "HEAD")
                .map(str::to_ascii_lowercase)
                .collect();
            methods.insert(id.to_string(), set);
        }
    }
    assert_eq!(
        paths.keys().collect::<Vec<_>>(),
        methods.keys().collect::<Vec<_>>(),
        "axum's Debug text of a Router changed: {text:.2000}"
    );
    let routes: BTreeMap<String, BTreeSet<String>> = paths
        .into_iter()
        .map(|(id, path)| (path, methods.remove(&id).unwrap()))
        .collect();
    assert!(
        routes.len() > 40 && routes.contains_key("/judge0/submissions/{token}"),
        "axum's Debug text of a Router changed (routes read: {routes:?})"
    );
    routes
}

/// Every route the router serves is in the OpenAPI document, with each of its methods, unless
/// it is one of the editor's pages; and the document describes nothing the router does not
/// serve. A new route fails here until it is documented (or, not being API, listed in
/// [`NOT_API`]).
#[test]
fn every_route_is_documented() {
    let served = served_routes();
    let doc = serde_json::to_value(corral_server::openapi::document()).unwrap();
    let documented: BTreeMap<String, BTreeSet<String>> = doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(path, item)| {
            let methods = item
                .as_object()
                .unwrap()
                .keys()
                .filter(|k| ["get", "put", "post", "delete", "patch"].contains(&k.as_str()))
                .cloned()
                .collect();
            (path.clone(), methods)
        })
        .collect();
    let mut missing = Vec::new();
    for (path, methods) in &served {
        if NOT_API.contains(&path.as_str()) {
            assert!(
                !documented.contains_key(path),
                "{path} is documented: take it out of NOT_API"
            );
            continue;
        }
        for m in methods {
            if !documented.get(path).is_some_and(|d| d.contains(m)) {
                missing.push(format!("{} {path}", m.to_uppercase()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "served but not in the OpenAPI document: {missing:?}"
    );
    let mut unserved = Vec::new();
    for (path, methods) in &documented {
        for m in methods {
            if !served.get(path).is_some_and(|s| s.contains(m)) {
                unserved.push(format!("{} {path}", m.to_uppercase()));
            }
        }
    }
    assert!(
        unserved.is_empty(),
        "in the OpenAPI document but not served: {unserved:?}"
    );
    for page in NOT_API {
        assert!(served.contains_key(*page), "{page} is no longer served");
    }
}

/// A path parameter that is not UTF-8 once percent-decoded (`GET /submissions/%FF`: an id
/// pasted with mangled bytes) is answered with the documented JSON error on every route that
/// takes one, not axum's `text/plain` "Invalid URL": a 400 `bad_request` `ErrorBody` on the
/// native API, Judge0's `{"error"}` on its surface. Every served route is tried, so a new
/// handler that takes axum's own `Path` fails here.
#[tokio::test(flavor = "multi_thread")]
async fn a_path_parameter_that_is_not_utf8_is_a_json_error_everywhere() {
    let s = TestServer::start(|_| {}).await;
    let doc = serde_json::to_value(corral_server::openapi::document()).unwrap();
    let admin = s.token(Role::Admin).await;
    let worker = s.token(Role::Worker).await;
    let c = reqwest::Client::new();
    let mut tried = 0;
    for (path, methods) in served_routes() {
        if !path.contains('{') {
            continue;
        }
        let mut url = String::new();
        for (i, piece) in path.split('{').enumerate() {
            match piece.split_once('}') {
                Some((_, rest)) if i > 0 => url.push_str(&format!("%FF{rest}")),
                _ => url.push_str(piece),
            }
        }
        let token = if path.starts_with("/worker/") {
            &worker
        } else {
            &admin
        };
        for m in &methods {
            let method = reqwest::Method::from_bytes(m.to_uppercase().as_bytes()).unwrap();
            let r = c
                .request(method, s.url(&url))
                .bearer_auth(token)
                .send()
                .await
                .unwrap();
            let status = r.status();
            let ct = r
                .headers()
                .get("content-type")
                .map(|v| v.to_str().unwrap().to_string());
            let text = r.text().await.unwrap();
            let what = format!("{} {url}: {status} {ct:?} {text}", m.to_uppercase());
            assert!(
                ct.as_deref()
                    .is_some_and(|c| c.starts_with("application/json")),
                "{what}"
            );
            let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {what}"));
            assert!(status.is_client_error(), "{what}");
            if path.starts_with("/judge0/") {
                assert!(v["error"].is_string(), "{what}");
                answers_as_documented(&doc, m, &path, status, &v);
                continue;
            }
            assert_eq!(status, StatusCode::BAD_REQUEST, "{what}");
            assert_eq!(v["error"], "bad_request", "{what}");
            assert!(
                v["message"].as_str().unwrap().contains("not UTF-8"),
                "{what}"
            );
            if !NOT_API.contains(&path.as_str()) {
                answers_as_documented(&doc, m, &path, status, &v);
            }
            tried += 1;
        }
    }
    assert!(
        tried >= 13,
        "only {tried} native routes with a path parameter"
    );
    s.stop().await;
}

/// A validator of `schema` (a JSON Schema of the document: `$ref`s into its components).
fn validator(doc: &Value, schema: &Value) -> jsonschema::Validator {
    let mut schema = schema.clone();
    schema["components"] = doc["components"].clone();
    jsonschema::validator_for(&schema).unwrap()
}

/// The properties a component schema declares.
fn properties(doc: &Value, name: &str) -> BTreeSet<String> {
    doc["components"]["schemas"][name]["properties"]
        .as_object()
        .unwrap_or_else(|| panic!("{name} has no properties"))
        .keys()
        .cloned()
        .collect()
}

/// Asserts that `body`, answered `status` by `method path` (`path` as the document writes it),
/// is what the document says that operation answers with that status, keys included: an
/// object of a declared schema has no key the schema does not declare.
fn answers_as_documented(doc: &Value, method: &str, path: &str, status: StatusCode, body: &Value) {
    let errors = corral_testkit::documented_answer_errors(doc, method, path, status.as_u16(), body);
    assert!(errors.is_empty(), "{errors:?} in {body}");
}

/// The Judge0 surface answers what its operations in the document say: each status it gave is
/// documented, and each body matches that status' schema (a submission read back with every
/// field declares every field; `config_info` every key).
#[tokio::test(flavor = "multi_thread")]
async fn judge0_answers_are_what_the_document_says() {
    let s = TestServer::start(|c| {
        // `wait=true` answers within this whatever becomes of the submission (no program runs
        // here).
        c.submissions.wait_max = corral_sandbox::Millis::ms(500);
    })
    .await;
    let (_, doc) = json_of(reqwest::get(s.url("/openapi.json")).await.unwrap()).await;
    let token = s.token(Role::Staff).await;
    let client = reqwest::Client::new();
    let call = async |method: &str, path: &str, body: Option<Value>| -> (StatusCode, Value) {
        let url = s.url(path);
        let mut req = match method {
            "get" => client.get(url),
            "post" => client.post(url),
            "delete" => client.delete(url),
            _ => unreachable!(),
        }
        .header("X-Auth-Token", &token);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let r = req.send().await.unwrap();
        let status = r.status();
        let text = r.text().await.unwrap();
        let v = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{method} {path}: {status}, not JSON ({e}): {text}"));
        (status, v)
    };

    let (st, langs) = call("get", "/judge0/languages", None).await;
    answers_as_documented(&doc, "get", "/judge0/languages", st, &langs);
    let first = langs[0]["id"].as_u64().expect("a language this host has");
    let (st, v) = call("get", "/judge0/languages/all", None).await;
    answers_as_documented(&doc, "get", "/judge0/languages/all", st, &v);
    for (path, status) in [
        (format!("/judge0/languages/{first}"), StatusCode::OK),
        ("/judge0/languages/9999".to_string(), StatusCode::NOT_FOUND),
        // Not a number is no language either: Judge0's 404, not a parse error's 400.
        ("/judge0/languages/abc".to_string(), StatusCode::NOT_FOUND),
        ("/judge0/languages/-1".to_string(), StatusCode::NOT_FOUND),
        ("/judge0/languages/%FF".to_string(), StatusCode::BAD_REQUEST),
    ] {
        let (st, v) = call("get", &path, None).await;
        assert_eq!(st, status, "{path}: {v}");
        answers_as_documented(&doc, "get", "/judge0/languages/{id}", st, &v);
    }
    for path in ["/judge0/statuses", "/judge0/about", "/judge0/config_info"] {
        let (st, v) = call("get", path, None).await;
        assert_eq!(st, StatusCode::OK, "{path}: {v}");
        answers_as_documented(&doc, "get", path, st, &v);
    }
    let (_, info) = call("get", "/judge0/config_info", None).await;
    let keys: BTreeSet<String> = info.as_object().unwrap().keys().cloned().collect();
    assert_eq!(keys, properties(&doc, "Judge0ConfigInfo"));

    // A submission: its token, then read back with every field.
    let submission = json!({"source_code": "echo hello", "language_id": first, "stdin": "x"});
    let (st, created) = call("post", "/judge0/submissions", Some(submission.clone())).await;
    assert_eq!(st, StatusCode::CREATED, "{created}");
    answers_as_documented(&doc, "post", "/judge0/submissions", st, &created);
    let t = created["token"].as_str().unwrap().to_string();
    let (st, all) = call("get", &format!("/judge0/submissions/{t}?fields=*"), None).await;
    answers_as_documented(&doc, "get", "/judge0/submissions/{token}", st, &all);
    let declared = properties(&doc, "Judge0Submission");
    for k in all.as_object().unwrap().keys() {
        assert!(declared.contains(k), "{k} is answered but not declared");
    }
    let (st, v) = call("get", &format!("/judge0/submissions/{t}"), None).await;
    answers_as_documented(&doc, "get", "/judge0/submissions/{token}", st, &v);
    let (st, v) = call(
        "get",
        &format!("/judge0/submissions/{t}?base64_encoded=true&fields=stdin,status"),
        None,
    )
    .await;
    assert_eq!(v["stdin"], "eA==", "{v}");
    answers_as_documented(&doc, "get", "/judge0/submissions/{token}", st, &v);
    // With wait=true, the submission itself (here as it is when the wait ends).
    let (st, v) = call(
        "post",
        "/judge0/submissions?wait=true&fields=*",
        Some(submission.clone()),
    )
    .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    assert!(v["status"]["id"].is_u64(), "{v}");
    answers_as_documented(&doc, "post", "/judge0/submissions", st, &v);
    // The language id as text.
    let (st, v) = call(
        "post",
        "/judge0/submissions?base64_encoded=true",
        Some(json!({"source_code": "ZWNobyBoZWxsbw==", "language_id": first.to_string()})),
    )
    .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    let mut schema = json!({"$ref": "#/components/schemas/Judge0SubmissionRequest"});
    let request = validator(&doc, &schema);
    assert!(request.is_valid(&submission));
    assert!(request.is_valid(&json!({"source_code": "x", "language_id": "71"})));
    assert!(!request.is_valid(&json!({"language_id": 71})));
    schema = json!({"$ref": "#/components/schemas/Judge0BatchRequest"});
    assert!(validator(&doc, &schema).is_valid(&json!({"submissions": [submission]})));

    // Refusals, each in its documented shape.
    for (method, path, template, body, status) in [
        (
            "post",
            "/judge0/submissions",
            "/judge0/submissions",
            Some(json!({"language_id": first})),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "post",
            "/judge0/submissions",
            "/judge0/submissions",
            Some(json!({"source_code": "x", "language_id": 9999})),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "post",
            "/judge0/submissions",
            "/judge0/submissions",
            Some(json!([1, 2])),
            StatusCode::BAD_REQUEST,
        ),
        (
            "get",
            "/judge0/submissions/00000000-0000-4000-8000-000000000000",
            "/judge0/submissions/{token}",
            None,
            StatusCode::NOT_FOUND,
        ),
        (
            "get",
            "/judge0/submissions/00000000-0000-4000-8000-000000000000?fields=bogus",
            "/judge0/submissions/{token}",
            None,
            StatusCode::BAD_REQUEST,
        ),
        (
            "delete",
            "/judge0/submissions/00000000-0000-4000-8000-000000000000",
            "/judge0/submissions/{token}",
            None,
            StatusCode::BAD_REQUEST,
        ),
        (
            "get",
            "/judge0/submissions/batch?tokens=",
            "/judge0/submissions/batch",
            None,
            StatusCode::BAD_REQUEST,
        ),
        (
            "post",
            "/judge0/submissions/batch",
            "/judge0/submissions/batch",
            Some(json!({"submissions": []})),
            StatusCode::BAD_REQUEST,
        ),
        (
            "post",
            "/judge0/submissions/batch",
            "/judge0/submissions/batch",
            Some(json!({"submissions": [{"language_id": first}, {"source_code": "x"}]})),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
    ] {
        let (st, v) = call(method, path, body).await;
        assert_eq!(st, status, "{method} {path}: {v}");
        answers_as_documented(&doc, method, template, st, &v);
    }
    // A time limit over the document's maximum says that bound (it was told "must be a
    // positive number of seconds", which it is).
    for limit in [json!(1e12), json!(100000)] {
        let body = json!({"source_code": "x", "language_id": first, "cpu_time_limit": limit});
        let (st, v) = call("post", "/judge0/submissions", Some(body)).await;
        assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
        assert_eq!(
            v,
            json!({"cpu_time_limit": ["must be less than or equal to 86400 (seconds)"]}),
            "{limit}"
        );
        answers_as_documented(&doc, "post", "/judge0/submissions", st, &v);
    }
    // Form fields, as Judge0 (Rails) takes them (`curl -d language_id=71 --data-urlencode
    // source_code=…`): every value text, numbers read from it; a JSON body labelled as a form
    // (what `curl -d '{…}'` sends) is still read as JSON.
    for (body, source) in [
        (
            format!("language_id={first}&source_code=echo+hello%21&cpu_time_limit=2.5"),
            "echo hello!",
        ),
        (
            json!({"source_code": "echo hello", "language_id": first}).to_string(),
            "echo hello",
        ),
    ] {
        let r = client
            .post(s.url("/judge0/submissions"))
            .header("X-Auth-Token", &token)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body.clone())
            .send()
            .await
            .unwrap();
        let st = r.status();
        let v: Value = r.json().await.unwrap();
        assert_eq!(st, StatusCode::CREATED, "{body}: {v}");
        answers_as_documented(&doc, "post", "/judge0/submissions", st, &v);
        let t = v["token"].as_str().unwrap();
        let (_, v) = call(
            "get",
            &format!("/judge0/submissions/{t}?fields=source_code,language_id"),
            None,
        )
        .await;
        assert_eq!(v["source_code"], source, "{v}");
        assert_eq!(v["language_id"], first, "{v}");
    }
    let form_op = &doc["paths"]["/judge0/submissions"]["post"]["requestBody"]["content"];
    assert!(
        form_op["application/x-www-form-urlencoded"].is_object(),
        "{form_op}"
    );
    // A batch: an item refused does not fail the rest; read back, an unknown token is null.
    let (st, items) = call(
        "post",
        "/judge0/submissions/batch",
        Some(json!({"submissions": [submission, {"source_code": "x", "language_id": 9999}]})),
    )
    .await;
    assert_eq!(st, StatusCode::CREATED, "{items}");
    answers_as_documented(&doc, "post", "/judge0/submissions/batch", st, &items);
    let queued = items[0]["token"].as_str().unwrap();
    let (st, v) = call(
        "get",
        &format!("/judge0/submissions/batch?tokens={queued},00000000-0000-4000-8000-000000000000&fields=*"),
        None,
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert!(v["submissions"][1].is_null(), "{v}");
    answers_as_documented(&doc, "get", "/judge0/submissions/batch", st, &v);
    // corral's own refusals (no token) in the same operations' shapes.
    let r = reqwest::get(s.url("/judge0/about")).await.unwrap();
    let st = r.status();
    let v: Value = r.json().await.unwrap();
    assert_eq!(st, StatusCode::UNAUTHORIZED);
    answers_as_documented(&doc, "get", "/judge0/about", st, &v);
    s.stop().await;
}

/// `POST /submissions/{id}/callback` answers what the document says: the submission, its
/// callback pending again with no tries counted (staff); 403 for a student, 404 for an unknown
/// id, 409 for a submission still to be judged.
#[tokio::test(flavor = "multi_thread")]
async fn redelivery_answers_are_what_the_document_says() {
    // A receiver on loopback that takes every callback.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let receiver = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let app = axum::Router::new().fallback(|| async { "ok" });
        axum::serve(listener, app).await.unwrap();
    });
    let s = TestServer::start(|c| {
        c.submissions.workers = Some(0);
        c.submissions.callback_allow = vec!["127.0.0.1/32".into()];
    })
    .await;
    let (_, doc) = json_of(reqwest::get(s.url("/openapi.json")).await.unwrap()).await;
    let student = s.token(Role::Student).await;
    let staff = s.token(Role::Staff).await;
    let hook = format!("http://{receiver}/hook");
    let mut ids = Vec::new();
    for _ in 0..2 {
        let (st, v) = s
            .post(
                &student,
                "/submissions",
                json!({"cmd": "true", "callback_url": hook}),
            )
            .await;
        assert_eq!(st, StatusCode::ACCEPTED, "{v}");
        ids.push(v["id"].as_str().unwrap().to_string());
    }
    // The first judged (here, by the store), and its callback delivered.
    let c = s
        .store
        .claim_job("w", std::time::Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(c.job.id, ids[0]);
    let verdict = json!({"verdict": "accepted", "score": 1.0, "max_score": 1.0}).to_string();
    s.store
        .complete_job(
            &ids[0],
            &c.lease,
            corral_store::JobState::Done,
            &verdict,
            None,
        )
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (_, v) = s.get(&student, &format!("/submissions/{}", ids[0])).await;
        if v["callback"]["state"] == "delivered" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never delivered: {v}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let template = "/submissions/{id}/callback";
    for (token, id, want) in [
        (&student, ids[0].as_str(), StatusCode::FORBIDDEN),
        (
            &staff,
            "0123456789abcdef0123456789abcdef",
            StatusCode::NOT_FOUND,
        ),
        (&staff, ids[1].as_str(), StatusCode::CONFLICT),
        (&staff, ids[0].as_str(), StatusCode::OK),
    ] {
        let (st, v) = s
            .post(token, &format!("/submissions/{id}/callback"), json!({}))
            .await;
        assert_eq!(st, want, "{id}: {v}");
        answers_as_documented(&doc, "post", template, st, &v);
        if st == StatusCode::OK {
            assert_eq!(v["id"], id, "{v}");
            assert_eq!(v["callback"]["state"], "pending", "{v}");
            assert_eq!(v["callback"]["attempts"], 0, "{v}");
        }
    }
    s.stop().await;
}
