//! The OpenAPI 3 document, generated from the handlers' annotations and the body types.

use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder};
use utoipa::{Modify, OpenApi};

use crate::error::ErrorBody;
use crate::types::*;

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
        for item in openapi.paths.paths.values_mut() {
            for op in [
                item.get.as_mut(),
                item.post.as_mut(),
                item.put.as_mut(),
                item.delete.as_mut(),
                item.patch.as_mut(),
            ]
            .into_iter()
            .flatten()
            {
                if op.security.is_none() {
                    continue;
                }
                let mut common = vec![
                    (
                        "400",
                        "Malformed request (bad JSON or form, bad Authorization header)",
                    ),
                    ("401", "No, unknown or revoked token"),
                    ("413", "Request body too large"),
                    ("429", "Rate limited; see Retry-After"),
                ];
                if op.request_body.is_some() {
                    common.push(("415", "Wrong Content-Type"));
                    common.push(("422", "Well-formed but invalid (types, fields, values)"));
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
            over a WebSocket. The CS50 Sandbox API, extended.",
        license(name = "Apache-2.0")
    ),
    paths(
        crate::api::upload,
        crate::api::get_upload,
        crate::api::run,
        crate::api::delete_sandbox,
        crate::ws::ws,
        crate::checks::check,
        crate::checks::register_suite,
        crate::checks::list_suites,
        crate::api::create_token,
        crate::api::revoke_token,
        crate::api::whoami,
        crate::api::health,
        crate::api::metrics,
        crate::api::languages,
        crate::api::openapi,
        crate::revisions::create,
        crate::revisions::list,
        crate::revisions::get_one,
    ),
    components(schemas(
        ErrorBody, RunRequest, RunResponse, Cmd, SandboxRef, LimitsDoc, LimitValue, UploadResponse,
        UploadForm, UploadInfo, FileInfo, TokenRequest, TokenResponse, RoleName, WhoAmI, Health,
        LanguageInfo, WsClientMessage, WsServerMessage, crate::types::TermSize, crate::checks::CheckRequest,
        crate::checks::CheckResponse, crate::checks::CheckResultDoc, crate::checks::ScriptEntry,
        crate::checks::Observation, crate::checks::SuiteForm, crate::checks::SuiteInfo,
        crate::revisions::RevisionRequest, crate::revisions::RevisionMetaDoc,
        crate::revisions::RevisionDoc, crate::revisions::RevisionFileDoc,
        crate::revisions::RevisionKindName,
    )),
    modifiers(&Security),
    tags(
        (name = "sandbox", description = "Upload, run, interactive runs"),
        (name = "checks", description = "Check suites and grading"),
        (name = "admin", description = "Tokens"),
        (name = "meta", description = "Health, metrics, languages, this document"),
        (name = "editor", description = "The browser editor's revisions"),
    )
)]
pub struct ApiDoc;

pub fn document() -> utoipa::openapi::OpenApi {
    let mut doc = ApiDoc::openapi();
    doc.merge(crate::submissions::ApiDoc::openapi());
    // The merged operations get the common answers too.
    Security.modify(&mut doc);
    doc.info.version = env!("CARGO_PKG_VERSION").to_string();
    doc
}
