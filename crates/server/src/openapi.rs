//! The OpenAPI 3 document, generated from the handlers' annotations (their examples and response
//! links) and the body types.

use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder};
use utoipa::{Modify, OpenApi};

use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::Value;

use crate::error::ErrorBody;
use crate::http::{checks, gradebook, images, meta, revisions, runs, submissions, tokens, uploads};
use crate::judge0::{self, doc::*};
use crate::service::runs::{LimitValue, LimitsDoc, RunResponse, SandboxRef};
use crate::service::submissions::accept::{SubmissionFile, SubmissionRequest};
use crate::service::submissions::gradebook::{Gradebook, GradebookCheck, GradebookRow};
use crate::service::submissions::listing::{SubmissionPage, SubmissionSummary};
use crate::service::submissions::regrade::Regraded;
use crate::service::submissions::view::{CallbackInfo, SubmissionView};
use crate::service::suites::SuiteInfo;
use crate::state::SharedState;
use crate::ws::messages::{TermSize, WsClientMessage, WsServerMessage};
use corral_judge::{
    ClaimRequest, ClaimedJob, Cmd, JobFile, LeaseRequest, ResultRequest, ResultResponse, Verdict,
    VerdictKind,
};

struct Security;

impl Modify for Security {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "An API token (`corral token create`, or POST /tokens as an admin)",
                    ))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "judge0",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "X-Auth-Token",
                "Judge0's header, on the `/judge0/…` operations only: the same API token as `bearer`",
            ))),
        );
        // Answers every authenticated operation can give, whatever it does.
        let error = |what: &str| {
            RefOr::T(
                ResponseBuilder::new()
                    .description(what)
                    .content(
                        "application/json",
                        ContentBuilder::new()
                            .schema(Some(Ref::from_schema_name("ErrorBody")))
                            .build(),
                    )
                    .build(),
            )
        };
        for (path, item) in openapi.paths.paths.iter_mut() {
            // The body deadline (`http.body_timeout`) spares only image archives.
            let body_deadline = path.as_str() != crate::http::images::IMPORT_PATH;
            for op in operations(item) {
                if op.security.is_none() {
                    continue;
                }
                let mut common = vec![
                    (
                        "400",
                        "Malformed request (bad JSON or form, a body cut short (`bad_body`), a path parameter \
                         that is not UTF-8, bad Authorization header)",
                    ),
                    ("401", "No, unknown or revoked token"),
                    (
                        "403",
                        "The token's role may not do this (a worker token only claims jobs and \
                         posts results, `/worker/…`; some operations are staff's or admins')",
                    ),
                    ("413", "Request body too large"),
                    ("429", "Rate limited; see Retry-After"),
                    (
                        "503",
                        "Retry after Retry-After: overloaded, shutting down, the database does not \
                         answer, or (a write) the server's storage is full (`storage_full`)",
                    ),
                ];
                if op.request_body.is_some() {
                    common.push(("415", "Wrong Content-Type"));
                    common.push(("422", "Well-formed but invalid (types, fields, values)"));
                    if body_deadline {
                        common.push((
                            "408",
                            "The body did not arrive within http.body_timeout (the connection is closed)",
                        ));
                    }
                }
                for (code, what) in common {
                    op.responses
                        .responses
                        .entry(code.to_string())
                        .or_insert_with(|| error(what));
                }
            }
        }
    }
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "corral",
        description = "Run untrusted code in isolated Linux sandboxes: upload files, run commands \
            (then more commands in the same sandbox), run check suites, drive interactive programs \
            over a WebSocket. The CS50 Sandbox API, extended.\n\n\
            Two operations are not plain HTTP requests: `GET /ws` is a WebSocket (RFC 6455); open \
            it with an `Upgrade: websocket` handshake (`ws://` or `wss://`). A plain HTTP request \
            cannot open it and is answered 400. `POST /worker/jobs/{id}/result` takes a worker \
            token (role `worker`; any other role gets 403) and a `Corral-Signature` header, an \
            HMAC-SHA256 of the exact body bytes keyed with the SHA-256 of that token; without a \
            valid signature the answer is 401, so a client that cannot compute it only ever sees \
            401 or 403 there.",
        license(name = "Apache-2.0", identifier = "Apache-2.0")
    ),
    paths(
        uploads::upload,
        uploads::get_upload,
        runs::run,
        runs::delete_sandbox,
        crate::ws::ws,
        checks::check,
        checks::register_suite,
        checks::list_suites,
        tokens::create_token,
        tokens::revoke_token,
        tokens::whoami,
        meta::health,
        meta::metrics,
        meta::languages,
        openapi,
        revisions::create,
        revisions::list,
        revisions::get_one,
        images::list,
        images::pull,
        images::import,
        images::remove,
        images::build,
        images::build_status,
    ),
    components(schemas(
        ErrorBody, runs::RunRequest, RunResponse, Cmd, SandboxRef, LimitsDoc, LimitValue, uploads::UploadResponse,
        uploads::UploadForm, uploads::UploadInfo, uploads::FileInfo, tokens::TokenRequest, tokens::TokenResponse, tokens::RoleName, tokens::WhoAmI, meta::Health,
        meta::LanguageInfo, meta::LanguageImageInfo, WsClientMessage, WsServerMessage, TermSize, checks::CheckRequest,
        checks::CheckResponse, checks::CheckEvent, checks::CheckResultDoc, checks::ScriptEntry,
        checks::UsedImageDoc, checks::IntegrityDoc, checks::IntegrityFlagDoc,
        checks::Observation, checks::SuiteForm, SuiteInfo,
        revisions::RevisionRequest, revisions::RevisionMetaDoc,
        revisions::RevisionDoc, revisions::RevisionFileDoc,
        revisions::RevisionKindName,
        images::PullRequest, crate::service::images::ImageInfo, crate::service::images::Removed,
        crate::service::image_builds::BuildJob, crate::service::image_builds::BuildStepInfo,
        crate::service::image_builds::BuildStatus,
        corral_judge::ImageDoc,
    )),
    modifiers(&Security),
    servers((url = "/", description = "The server this document was fetched from (the API is served at the root of its address)")),
    tags(
        (name = "sandbox", description = "Upload, run, interactive runs"),
        (name = "checks", description = "Check suites and grading"),
        (name = "admin", description = "Tokens"),
        (name = "meta", description = "Health, metrics, languages, this document"),
        (name = "editor", description = "The browser editor's revisions"),
        (name = "images", description = "Container images requests may name (staff list them; admins pull, import, build, remove)"),
    )
)]
pub struct ApiDoc;

pub fn document() -> utoipa::openapi::OpenApi {
    let mut doc = ApiDoc::openapi();
    doc.merge(QueueDoc::openapi());
    doc.merge(Judge0Doc::openapi());
    exactly_one_mode(&mut doc);
    websocket_messages_are_named(&mut doc);
    // The merged operations get the common answers too.
    Security.modify(&mut doc);
    judge0_errors_are_judge0s(&mut doc);
    public_operations_say_so(&mut doc);
    doc.info.version = env!("CARGO_PKG_VERSION").to_string();
    doc
}

/// Every operation of a path (the methods the API uses).
fn operations(
    item: &mut utoipa::openapi::path::PathItem,
) -> impl Iterator<Item = &mut utoipa::openapi::path::Operation> {
    [
        item.get.as_mut(),
        item.post.as_mut(),
        item.put.as_mut(),
        item.delete.as_mut(),
        item.patch.as_mut(),
    ]
    .into_iter()
    .flatten()
}

/// The public operations (`/health`, `/languages`, `/metrics`, this document) say that they need
/// no token, `security: [{}]`, rather than saying nothing: a document with neither a global
/// `security` nor one on each operation fails linters (`redocly lint`'s `security-defined` is an
/// error) and leaves a reader to guess. After [`Security`], which gives the common error answers
/// to the operations that name a scheme.
fn public_operations_say_so(doc: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::security::SecurityRequirement;
    for item in doc.paths.paths.values_mut() {
        for op in operations(item) {
            op.security
                .get_or_insert_with(|| vec![SecurityRequirement::default()]);
        }
    }
}

/// The `/judge0/…` operations answer Judge0's error body, `{"error"}`, where the server's
/// own refusals (a token, the rate limit, an overloaded server) carry corral's `message` too:
/// the common answers [`Security`] gives every operation say [`judge0::doc::Judge0Error`],
/// which takes both, instead of `ErrorBody`, which requires `message`.
fn judge0_errors_are_judge0s(doc: &mut utoipa::openapi::OpenApi) {
    let judge0 = doc
        .paths
        .paths
        .iter_mut()
        .filter(|(path, _)| path.starts_with("/judge0/"));
    for (_, item) in judge0 {
        for op in operations(item) {
            for response in op.responses.responses.values_mut() {
                let RefOr::T(response) = response else {
                    continue;
                };
                for content in response.content.values_mut() {
                    if let Some(RefOr::Ref(r)) = &content.schema {
                        if r.ref_location == "#/components/schemas/ErrorBody" {
                            content.schema = Some(Ref::from_schema_name("Judge0Error").into());
                        }
                    }
                }
            }
        }
    }
}

/// The WebSocket's messages (`GET /ws`) as code generators read them: each message a schema of
/// its own (`WsClientRun`, …, `WsServerExit`, …, named by the message's `type`), and each
/// side's message `oneOf` them with `type`, the wire's tag, as its discriminator. The operation
/// names both in `x-websocket-messages`. utoipa writes the variants inline: openapi-python-client
/// then failed on the `exit` message (a `$ref` with a sibling description, in a union) and made
/// two models of one name (the `run` message's `env`). A client's message with fields takes no
/// field it does not declare (`additionalProperties: false`: the server refuses unknown fields).
fn websocket_messages_are_named(doc: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::schema::{AdditionalProperties, Discriminator, Schema};
    /// The `type` a variant's schema requires (an object's, or in an `allOf`, one part's).
    fn tag_of(schema: &Schema) -> Option<String> {
        match schema {
            Schema::Object(o) => match o.properties.get("type")? {
                RefOr::T(Schema::Object(t)) => {
                    t.enum_values.as_ref()?.first()?.as_str().map(String::from)
                }
                _ => None,
            },
            Schema::AllOf(all) => all.items.iter().find_map(|part| match part {
                RefOr::T(s) => tag_of(s),
                RefOr::Ref(_) => None,
            }),
            _ => None,
        }
    }
    let Some(components) = doc.components.as_mut() else {
        return;
    };
    for (union, prefix, closed) in [
        ("WsClientMessage", "WsClient", true),
        ("WsServerMessage", "WsServer", false),
    ] {
        let Some(RefOr::T(Schema::OneOf(mut one))) = components.schemas.remove(union) else {
            continue;
        };
        let mut mapping = Vec::new();
        for variant in std::mem::take(&mut one.items) {
            let RefOr::T(mut variant) = variant else {
                one.items.push(variant);
                continue;
            };
            let tag = tag_of(&variant).unwrap_or_else(|| panic!("a {union} without a type"));
            match &mut variant {
                // Serde refuses unknown fields of a message with fields (`kill` has none, and
                // takes any).
                Schema::Object(o) if closed && o.properties.len() > 1 => {
                    o.additional_properties = Some(Box::new(AdditionalProperties::FreeForm(false)));
                }
                // The variant says what it is; the object it extends says nothing beside it.
                Schema::AllOf(all) => {
                    for part in &mut all.items {
                        if let RefOr::Ref(r) = part {
                            r.description.clear();
                        }
                    }
                }
                _ => {}
            }
            let name = format!("{prefix}{}{}", tag[..1].to_uppercase(), &tag[1..]);
            one.items.push(Ref::from_schema_name(&name).into());
            mapping.push((tag, format!("#/components/schemas/{name}")));
            components.schemas.insert(name, RefOr::T(variant));
        }
        one.discriminator = Some(Discriminator::with_mapping("type", mapping));
        components
            .schemas
            .insert(union.into(), RefOr::T(Schema::OneOf(one)));
    }
    let ws = doc
        .paths
        .paths
        .get_mut("/ws")
        .and_then(|item| item.get.as_mut());
    if let Some(op) = ws {
        let messages = serde_json::json!({
            "client": {"$ref": "#/components/schemas/WsClientMessage"},
            "server": {"$ref": "#/components/schemas/WsServerMessage"},
        });
        op.extensions.get_or_insert_with(Default::default).merge(
            utoipa::openapi::extensions::ExtensionsBuilder::new()
                .add("x-websocket-messages", messages)
                .build(),
        );
    }
}

/// `POST /submissions` (and each item of a batch) takes exactly one of `language`, `cmd` and
/// `suite`: said in the schema as `oneOf` three alternatives beside the derived properties
/// (utoipa derives the properties only), each requiring its field and declaring it, not null.
/// An alternative with `required` alone (no `properties`) reads to typed clients as an object
/// with no fields: openapi-typescript made the request `{…} & (Record<string, never> | …)`, which
/// no submission satisfies.
fn exactly_one_mode(doc: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::schema::{AllOfBuilder, ObjectBuilder, OneOfBuilder, Schema, Type};
    let Some(components) = doc.components.as_mut() else {
        return;
    };
    let Some(RefOr::T(derived)) = components.schemas.remove("SubmissionRequest") else {
        return;
    };
    let string = || {
        RefOr::T(Schema::Object(
            ObjectBuilder::new().schema_type(Type::String).build(),
        ))
    };
    let modes = [
        ("language", string()),
        ("cmd", RefOr::Ref(Ref::from_schema_name("Cmd"))),
        ("suite", string()),
    ]
    .into_iter()
    .fold(OneOfBuilder::new(), |b, (mode, schema)| {
        b.item(
            ObjectBuilder::new()
                .schema_type(Type::Object)
                .property(mode, schema)
                .required(mode)
                .build(),
        )
    })
    .description(Some("Exactly one of language, cmd and suite"));
    let schema = AllOfBuilder::new()
        .item(derived)
        .item(Schema::OneOf(modes.build()))
        .build();
    components
        .schemas
        .insert("SubmissionRequest".into(), RefOr::T(Schema::AllOf(schema)));
}

/// The queue's part of the document (merged into the rest): submissions and remote workers.
#[derive(OpenApi)]
#[openapi(
    paths(
        submissions::submit, submissions::submit_batch, submissions::get_submission,
        submissions::list_submissions, submissions::regrade_submission,
        submissions::redeliver_callback,
        gradebook::get_gradebook, gradebook::regrade_suite,
        crate::worker_api::claim, crate::worker_api::heartbeat, crate::worker_api::result,
        crate::worker_api::images::resolve, crate::worker_api::images::blob,
    ),
    components(schemas(
        SubmissionRequest, SubmissionFile, submissions::SubmissionCreated, submissions::BatchRequest,
        submissions::BatchResponse, submissions::BatchItem, SubmissionView, CallbackInfo, VerdictKind,
        Verdict, ClaimRequest, ClaimedJob, JobFile, LeaseRequest,
        ResultRequest, ResultResponse, SubmissionPage, SubmissionSummary, Regraded,
        Gradebook, GradebookRow, GradebookCheck, gradebook::SuiteRegraded,
    )),
    tags(
        (name = "submissions", description = "The submission queue: submit, then get the verdict or a callback"),
        (name = "workers", description = "Remote workers (worker tokens): claim, heartbeat, result"),
    ),
)]
struct QueueDoc;

/// The Judge0-compatible surface (merged into the rest): Judge0 CE 1.13.1's API on the queue.
#[derive(OpenApi)]
#[openapi(
    paths(
        judge0::submissions::create, judge0::submissions::create_batch, judge0::submissions::get_batch, judge0::submissions::get_one,
        judge0::submissions::delete_one, judge0::languages::languages, judge0::languages::languages_all, judge0::languages::language,
        judge0::about::statuses, judge0::about::about, judge0::about::config_info,
    ),
    components(schemas(
        Judge0SubmissionRequest, Judge0LanguageId, Judge0Submission, Judge0LanguageRef,
        Judge0Status, Judge0BatchRequest, Judge0BatchItem, Judge0Refusal, Judge0Token,
        Judge0Submissions, Judge0ValidationErrors, Judge0Error, Judge0Language,
        Judge0LanguageDetail, Judge0About, Judge0ConfigInfo,
    )),
    tags(
        (name = "judge0", description = "Judge0 CE 1.13.1's API (`/judge0/…`) on the submission queue: existing Judge0 clients work by changing their URL. `X-Auth-Token` or a bearer token; Judge0's shapes, status ids and error bodies"),
    ),
)]
struct Judge0Doc;

/// The OpenAPI 3 document of this API (generated from the code).
#[utoipa::path(
    get, path = "/openapi.json", tag = "meta",
    responses((status = 200, description = "OpenAPI 3.1 document", content_type = "application/json"))
)]
pub async fn openapi() -> Response {
    Json(served(document())).into_response()
}

/// The document as served. utoipa 5.5 writes the fields of a response's `links` (declared with
/// the handlers, `links(...)` in `#[utoipa::path]`) in Rust's spelling (`operation_id`,
/// `request_body`); OpenAPI, and so clients like schemathesis' stateful phase that follow the
/// links, read `operationId`, `operationRef` and `requestBody`. Renamed here, in one place.
///
/// A free-form object (`Object` in the code: a run's result object in a verdict, a job's spec,
/// a JSON build file) gets `additionalProperties: true`: without it, utoipa's bare
/// `{"type": "object"}` read to openapi-typescript as `Record<string, never>`, an object with no
/// fields, so a typed client could read nothing of `run.stdout`.
fn served(doc: utoipa::openapi::OpenApi) -> Value {
    let mut v = serde_json::to_value(doc).expect("the OpenAPI document is JSON");
    free_form_objects_say_so(&mut v);
    let operations = v["paths"].as_object_mut().into_iter().flat_map(|paths| {
        paths
            .values_mut()
            .filter_map(Value::as_object_mut)
            .flat_map(|item| item.values_mut())
    });
    for op in operations {
        let Some(responses) = op.get_mut("responses").and_then(Value::as_object_mut) else {
            continue;
        };
        let links = responses
            .values_mut()
            .filter_map(|r| r.get_mut("links").and_then(Value::as_object_mut))
            .flat_map(|links| links.values_mut().filter_map(Value::as_object_mut));
        for link in links {
            for (rust, openapi) in [
                ("operation_id", "operationId"),
                ("operation_ref", "operationRef"),
                ("request_body", "requestBody"),
            ] {
                if let Some(x) = link.remove(rust) {
                    link.insert(openapi.to_string(), x);
                }
            }
        }
    }
    v
}

/// Every schema of type `object` that says neither its `properties` nor its
/// `additionalProperties` (nor composes others) is a free-form object: says so. Examples are
/// left as they are.
fn free_form_objects_say_so(v: &mut Value) {
    match v {
        Value::Object(map) => {
            let is_object = match map.get("type") {
                Some(Value::String(t)) => t == "object",
                Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
                _ => false,
            };
            let said = [
                "properties",
                "additionalProperties",
                "allOf",
                "oneOf",
                "anyOf",
                "$ref",
            ]
            .iter()
            .any(|k| map.contains_key(*k));
            if is_object && !said {
                map.insert("additionalProperties".into(), Value::Bool(true));
            }
            // Examples are values, not schemas.
            map.iter_mut()
                .filter(|(k, _)| *k != "example" && *k != "examples")
                .for_each(|(_, v)| free_form_objects_say_so(v));
        }
        Value::Array(items) => items.iter_mut().for_each(free_form_objects_say_so),
        _ => {}
    }
}

/// `/openapi.json` (public).
pub fn routes() -> Router<SharedState> {
    Router::new().route("/openapi.json", get(openapi))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `POST /submissions` documents its `Idempotency-Key` and what a retry is answered;
    /// every authenticated operation its 503 (a full storage among its reasons).
    #[test]
    fn the_idempotency_key_and_a_full_storage_are_documented() {
        let doc = served(document());
        let post = &doc["paths"]["/submissions"]["post"];
        let key = post["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "Idempotency-Key")
            .unwrap_or_else(|| panic!("no Idempotency-Key parameter: {post}"));
        assert_eq!(
            (&key["in"], &key["required"]),
            (&"header".into(), &false.into())
        );
        let accepted = &post["responses"]["202"];
        assert!(
            accepted["headers"]["Idempotent-Replayed"].is_object(),
            "{accepted}"
        );
        let created = &doc["components"]["schemas"]["SubmissionCreated"];
        assert!(created["properties"]["replayed"].is_object(), "{created}");
        for status in ["400", "422"] {
            let text = post["responses"][status]["description"].as_str().unwrap();
            assert!(text.contains("Idempotency-Key"), "{status}: {text}");
        }
        for (path, method) in [
            ("/submissions", "post"),
            ("/upload", "post"),
            ("/suites", "post"),
        ] {
            let text = doc["paths"][path][method]["responses"]["503"]["description"]
                .as_str()
                .unwrap_or_else(|| panic!("{method} {path}: no 503"));
            assert!(text.contains("storage_full"), "{method} {path}: {text}");
        }
    }

    /// The links that let a client (schemathesis' stateful phase) reach the operations on ids
    /// with real ones, spelled as OpenAPI spells them.
    #[test]
    fn links_are_served_in_openapi_spelling() {
        let doc = served(document());
        let link = |path: &str, method: &str, status: &str, name: &str| {
            doc["paths"][path][method]["responses"][status]["links"][name].clone()
        };
        let get_upload = link("/upload", "post", "200", "GetUpload");
        assert_eq!(get_upload["operationId"], "get_upload");
        assert_eq!(get_upload["parameters"]["id"], "$response.body#/id");
        let delete = link("/run", "post", "200", "DeleteSandbox");
        assert_eq!(delete["operationId"], "delete_sandbox");
        assert_eq!(delete["parameters"]["id"], "$response.body#/sandbox");
        let run = link("/upload", "post", "200", "RunInUpload");
        assert_eq!(
            run["requestBody"]["sandbox"]["homedir"],
            "$response.body#/id"
        );
        for (path, status, name) in [
            ("/tokens", "201", "RevokeToken"),
            ("/submissions", "202", "GetSubmission"),
            ("/suites", "201", "ListSuites"),
            ("/suites", "201", "SubmitToSuite"),
            ("/revisions", "201", "GetRevision"),
            ("/upload", "200", "CheckUpload"),
            ("/run", "200", "ContinueRun"),
        ] {
            let l = link(path, "post", status, name);
            assert!(l["operationId"].is_string(), "{path} {name}: {l}");
            assert!(l.get("operation_id").is_none() && l.get("request_body").is_none());
        }
        // Every link names an operation of the document.
        let ids: Vec<&str> = doc["paths"]
            .as_object()
            .unwrap()
            .values()
            .flat_map(|item| item.as_object().unwrap().values())
            .filter_map(|op| op["operationId"].as_str())
            .collect();
        for item in doc["paths"].as_object().unwrap().values() {
            for op in item.as_object().unwrap().values() {
                for r in op["responses"]
                    .as_object()
                    .into_iter()
                    .flat_map(|r| r.values())
                {
                    for l in r["links"].as_object().into_iter().flat_map(|l| l.values()) {
                        let id = l["operationId"].as_str().unwrap();
                        assert!(ids.contains(&id), "a link to unknown operation {id}");
                    }
                }
            }
        }
    }

    /// All operations of the served document: (method, path, operation).
    fn operations(doc: &Value) -> Vec<(String, String, Value)> {
        let mut ops = Vec::new();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                ops.push((method.clone(), path.clone(), op.clone()));
            }
        }
        ops
    }

    /// A typed client builds a submission: each of the three modes declares the field it
    /// requires, not null (openapi-typescript made `{…} & (Record<string, never> | …)` of bare
    /// `required` alternatives, which no request satisfies), and the schema still takes exactly
    /// one mode.
    #[test]
    fn a_typed_client_can_build_a_submission() {
        let doc = served(document());
        let sub = &doc["components"]["schemas"]["SubmissionRequest"]["allOf"];
        let modes = sub[1]["oneOf"].as_array().unwrap();
        assert_eq!(modes.len(), 3, "{sub}");
        for (alt, mode) in modes.iter().zip(["language", "cmd", "suite"]) {
            assert_eq!(alt["required"], serde_json::json!([mode]), "{alt}");
            let field = &alt["properties"][mode];
            assert!(
                field.is_object(),
                "{mode}: the alternative does not declare it: {alt}"
            );
            let text = field.to_string();
            assert!(
                !text.contains("null"),
                "{mode} may be null in its own mode: {field}"
            );
        }
        let mut schema = serde_json::json!({"$ref": "#/components/schemas/SubmissionRequest"});
        schema["components"] = doc["components"].clone();
        let v = jsonschema::validator_for(&schema).unwrap();
        for (body, valid) in [
            (
                serde_json::json!({"language": "c", "source_code": "int main(){}"}),
                true,
            ),
            (serde_json::json!({"cmd": ["true"]}), true),
            (serde_json::json!({"suite": "hello", "upload": "ab"}), true),
            (serde_json::json!({"cmd": "true", "language": null}), true),
            (serde_json::json!({"cmd": "true", "language": "c"}), false),
            (serde_json::json!({"stdin": "x"}), false),
        ] {
            assert_eq!(v.is_valid(&body), valid, "{body}");
        }
    }

    /// `/check?format=json`'s report (corral's, beyond CS50's `results`) is in the document:
    /// every key of a full report — a check with every field, staff's view, an image, a
    /// revision — is a property of `CheckResponse`, its results' and script entries' schemas,
    /// and the report validates against it. The document typed it as CS50's `{results}` only,
    /// so generated clients dropped `score`, `passed`, `order`, … (the generated-client trial).
    #[test]
    fn the_check_report_is_described_whole() {
        use corral_checks::report::{Observation, ScriptEntry};
        use corral_checks::{CheckResult, Integrity, Report, UsedImage, View};
        let doc = served(document());
        let observation = |kind: &str, value: serde_json::Value| Observation {
            kind: kind.into(),
            value,
            matcher: Some("regex".into()),
        };
        let row = CheckResult {
            dependencies: vec!["compiles".into()],
            script: vec![ScriptEntry {
                expected: observation("stdout", "hello".into()),
                actual: observation("stdout", "bye".into()),
            }],
            max_points: 1.0,
            time_ms: 12,
            hidden: true,
            message: Some("expected hello".into()),
            error: Some("the sandbox failed".into()),
            diagnostics: Some("stderr".into()),
            ..CheckResult::new("says", "prints hello")
        };
        let image = UsedImage {
            name: "python:3.12-slim".into(),
            digest: format!("sha256:{}", "0".repeat(64)),
        };
        let report = Report {
            suite: "hello".into(),
            results: vec![row],
            integrity: Integrity::default(),
            safety: None,
            images: [("says".to_string(), image)].into(),
            runtimes: [("says".to_string(), corral_sandbox::Runtime::Native)].into(),
        };
        let mut answer = report.to_json(View::Staff);
        answer["order"] = serde_json::json!(["says"]);
        answer["revision"] = serde_json::json!({"id": "r1", "owner": "t1", "created_at": 1,
            "kind": "check", "language": "python", "status": "failed", "suite": "hello",
            "score": 0.0, "max_score": 1.0, "summary": "0/1", "files_count": 1, "total_bytes": 5});
        let schemas = &doc["components"]["schemas"];
        let undeclared = |value: &serde_json::Value, schema: &str| -> Vec<String> {
            let props = &schemas[schema]["properties"];
            value
                .as_object()
                .unwrap()
                .keys()
                .filter(|k| !props[k.as_str()].is_object())
                .map(|k| format!("{schema}.{k}"))
                .collect()
        };
        let mut missing = undeclared(&answer, "CheckResponse");
        missing.extend(undeclared(&answer["results"]["says"], "CheckResultDoc"));
        let entry = &answer["results"]["says"]["script"][0];
        missing.extend(undeclared(entry, "ScriptEntry"));
        missing.extend(undeclared(&entry["expected"], "Observation"));
        assert!(missing.is_empty(), "not in the document: {missing:?}");
        let mut schema = serde_json::json!({"$ref": "#/components/schemas/CheckResponse"});
        schema["components"] = doc["components"].clone();
        let v = jsonschema::validator_for(&schema).unwrap();
        assert!(v.is_valid(&answer), "{answer:#}");
        // CS50's own shape is still an answer of the same operation.
        assert!(v.is_valid(&report.to_cs50(View::Student)));
    }

    /// No schema of the document is an object that says nothing of its fields: utoipa's bare
    /// `{"type": "object"}` (a verdict's `run`, `compile` and `checks`, a job's `spec`) read to
    /// openapi-typescript as `Record<string, never>`.
    #[test]
    fn free_form_objects_are_said_to_be_free_form() {
        fn walk(v: &Value, at: &str, bare: &mut Vec<String>) {
            match v {
                Value::Object(map) => {
                    let object = match map.get("type") {
                        Some(Value::String(t)) => t == "object",
                        Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
                        _ => false,
                    };
                    let said = [
                        "properties",
                        "additionalProperties",
                        "allOf",
                        "oneOf",
                        "anyOf",
                    ]
                    .iter()
                    .any(|k| map.contains_key(*k));
                    if object && !said {
                        bare.push(at.to_string());
                    }
                    for (k, x) in map {
                        if k != "example" && k != "examples" {
                            walk(x, &format!("{at}/{k}"), bare);
                        }
                    }
                }
                Value::Array(items) => {
                    for (i, x) in items.iter().enumerate() {
                        walk(x, &format!("{at}/{i}"), bare);
                    }
                }
                _ => {}
            }
        }
        let doc = served(document());
        let mut bare = Vec::new();
        walk(&doc, "", &mut bare);
        assert!(
            bare.is_empty(),
            "objects without a word on their fields: {bare:#?}"
        );
        let run = &doc["components"]["schemas"]["SubmissionView"]["properties"]["run"];
        assert_eq!(run["additionalProperties"], true, "{run}");
        // Examples are not schemas: left as written.
        let example =
            &doc["paths"]["/run"]["post"]["requestBody"]["content"]["application/json"]["example"];
        assert!(example.get("additionalProperties").is_none(), "{example}");
    }

    /// operationIds become method names in generated clients: none is a reserved word of
    /// Python or JavaScript (`import` became `import_`), and those of images, the editor and
    /// workers name what they act on (`create`, `get_one`, `remove`, `result` said nothing
    /// beside the other tags' operations).
    #[test]
    fn operation_ids_make_good_method_names() {
        const RESERVED: &[&str] = &[
            "and",
            "as",
            "assert",
            "async",
            "await",
            "break",
            "case",
            "catch",
            "class",
            "const",
            "continue",
            "debugger",
            "def",
            "default",
            "del",
            "delete",
            "do",
            "elif",
            "else",
            "enum",
            "except",
            "export",
            "extends",
            "false",
            "finally",
            "for",
            "from",
            "function",
            "global",
            "if",
            "implements",
            "import",
            "in",
            "instanceof",
            "interface",
            "is",
            "lambda",
            "let",
            "new",
            "none",
            "nonlocal",
            "not",
            "null",
            "or",
            "package",
            "pass",
            "private",
            "protected",
            "public",
            "raise",
            "return",
            "static",
            "super",
            "switch",
            "this",
            "throw",
            "true",
            "try",
            "typeof",
            "var",
            "void",
            "while",
            "with",
            "yield",
        ];
        let doc = served(document());
        for (method, path, op) in operations(&doc) {
            let id = op["operationId"].as_str().unwrap();
            assert!(
                !RESERVED.contains(&id),
                "{method} {path}: operationId {id:?} is reserved"
            );
            let noun = match op["tags"][0].as_str() {
                Some("images") => &["image"][..],
                Some("editor") => &["revision"][..],
                Some("workers") => &["job", "worker"][..],
                Some("judge0") => &["judge0"][..],
                _ => continue,
            };
            assert!(
                noun.iter().any(|n| id.contains(n)),
                "{method} {path}: operationId {id:?} does not say it is about {noun:?}"
            );
        }
    }

    /// `POST /images/build` takes JSON as well as YAML, and says so: a client generator that
    /// knows no YAML (openapi-python-client) left the operation out.
    #[test]
    fn an_image_build_file_may_be_sent_as_json() {
        let doc = served(document());
        let content = &doc["paths"]["/images/build"]["post"]["requestBody"]["content"];
        assert!(content["application/yaml"].is_object(), "{content}");
        let json = &content["application/json"];
        assert_eq!(json["schema"]["type"], "object", "{content}");
        assert_eq!(
            json["example"]["from"], "debian:bookworm-minbase",
            "{content}"
        );
    }

    /// Every operation says its security: the bearer token (and then that it may answer 403),
    /// or (the public ones) none needed, `[{}]`, and those answer no 401. A suite may be
    /// registered without files.
    #[test]
    fn every_operation_says_whether_it_needs_a_token() {
        let doc = served(document());
        let mut public = Vec::new();
        for (method, path, op) in operations(&doc) {
            let security = op["security"]
                .as_array()
                .unwrap_or_else(|| panic!("{method} {path} says nothing of its security"));
            if security.iter().any(|r| r.get("bearer").is_some()) {
                // Any token may be of a role refused there (a worker's is, everywhere but
                // `/worker/…`, and only a worker's is accepted there).
                assert!(
                    op["responses"]["403"].is_object(),
                    "{method} {path}: no 403"
                );
                continue;
            }
            assert_eq!(security, &[serde_json::json!({})], "{method} {path}");
            assert!(op["responses"]["401"].is_null(), "{method} {path}");
            public.push(path);
        }
        public.sort();
        assert_eq!(
            public,
            ["/health", "/languages", "/metrics", "/openapi.json"]
        );
        let required = &doc["components"]["schemas"]["SuiteForm"]["required"];
        assert_eq!(required, &serde_json::json!(["suite"]), "{required}");
    }

    /// The WebSocket's messages are a schema each, and each side's message `oneOf` them with
    /// `type` as its discriminator, mapped to every message: utoipa's inline variants made
    /// openapi-python-client fail on `exit` (a `$ref` with a sibling description in a union) and
    /// make two models of one name. The `/ws` operation names both; what the server sends and
    /// what it takes validates, an unknown field of a client's message does not.
    #[test]
    fn websocket_messages_are_schemas_of_their_own() {
        let doc = served(document());
        let schemas = &doc["components"]["schemas"];
        for (union, tags) in [
            (
                "WsClientMessage",
                &["run", "resize", "stdin", "signal", "kill"][..],
            ),
            (
                "WsServerMessage",
                &[
                    "stdout", "stderr", "stdin", "queued", "started", "exit", "error",
                ][..],
            ),
        ] {
            let one = &schemas[union];
            assert_eq!(one["discriminator"]["propertyName"], "type", "{one}");
            let mapping = one["discriminator"]["mapping"].as_object().unwrap();
            let items = one["oneOf"].as_array().unwrap();
            assert_eq!((mapping.len(), items.len()), (tags.len(), tags.len()));
            for tag in tags {
                let r = mapping[*tag].as_str().unwrap();
                assert!(items.iter().any(|i| i["$ref"] == r), "{union}: {tag}");
                let name = r.strip_prefix("#/components/schemas/").unwrap();
                let text = schemas[name].to_string();
                assert!(text.contains(&format!("[\"{tag}\"]")), "{name}: {text}");
            }
        }
        // The exit message extends the run's answer, and says nothing beside the `$ref`.
        let exit = &schemas["WsServerExit"]["allOf"];
        assert_eq!(
            exit[0],
            serde_json::json!({"$ref": "#/components/schemas/RunResponse"})
        );
        let ws = &doc["paths"]["/ws"]["get"];
        assert_eq!(
            ws["x-websocket-messages"]["client"]["$ref"],
            "#/components/schemas/WsClientMessage"
        );
        assert_eq!(
            ws["x-websocket-messages"]["server"]["$ref"],
            "#/components/schemas/WsServerMessage"
        );
        let validator = |name: &str| {
            let mut schema = serde_json::json!({"$ref": format!("#/components/schemas/{name}")});
            schema["components"] = doc["components"].clone();
            jsonschema::validator_for(&schema).unwrap()
        };
        let server = validator("WsServerMessage");
        for m in [
            WsServerMessage::Stdout { data: "hi".into() },
            WsServerMessage::Stdin {},
            WsServerMessage::Queued {},
            WsServerMessage::Started {},
            WsServerMessage::Error {
                error: "rate_limited".into(),
                message: "later".into(),
                retry_after: Some(3),
            },
        ] {
            let v = serde_json::to_value(&m).unwrap();
            assert!(server.is_valid(&v), "{v}");
        }
        let client = validator("WsClientMessage");
        for text in [
            r#"{"type": "run", "cmd": "cat", "limits": {"cpu_time": "1s"}, "tty": {"cols": 80, "rows": 24}, "queue_notices": true}"#,
            r#"{"type": "run", "cmd": ["python3", "-i"], "sandbox": {"id": "0123456789abcdef0123456789abcdef"}}"#,
            r#"{"type": "resize", "cols": 100, "rows": 30}"#,
            r#"{"type": "stdin", "data": "x\n", "eof": true}"#,
            r#"{"type": "signal", "name": "SIGINT"}"#,
            r#"{"type": "kill"}"#,
            r#"{"type": "kill", "now": true}"#,
        ] {
            assert!(WsClientMessage::parse(text).is_ok(), "{text}");
            let v: Value = serde_json::from_str(text).unwrap();
            assert!(client.is_valid(&v), "{text}");
        }
        for text in [
            r#"{"type": "signal", "name": "SIGINT", "pid": 1}"#,
            r#"{"type": "run", "cmd": "cat", "limit": {}}"#,
            r#"{"type": "jump"}"#,
        ] {
            assert!(WsClientMessage::parse(text).is_err(), "{text}");
            let v: Value = serde_json::from_str(text).unwrap();
            assert!(!client.is_valid(&v), "{text}");
        }
    }

    /// A batch's items are submissions, as typed clients should build them (they were `{}`:
    /// `unknown[]` in TypeScript).
    #[test]
    fn a_batch_is_a_list_of_submissions() {
        let doc = served(document());
        let items =
            &doc["components"]["schemas"]["BatchRequest"]["properties"]["submissions"]["items"];
        assert_eq!(
            items["$ref"], "#/components/schemas/SubmissionRequest",
            "{items}"
        );
    }
}
