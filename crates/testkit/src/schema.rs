//! The workspace's JSON schemas (`schemas/`), and what they find wrong with a document.

use std::path::{Path, PathBuf};

/// The workspace's root folder (`schemas/`, `examples/`, `environments/`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A validator for the workspace's `schemas/NAME`.
pub fn schema(name: &str) -> jsonschema::Validator {
    let text = std::fs::read_to_string(workspace_root().join("schemas").join(name)).unwrap();
    let schema: serde_json::Value = serde_json::from_str(&text).unwrap();
    jsonschema::validator_for(&schema).expect("the schema itself is valid")
}

/// What `v` finds wrong with the YAML (or JSON) `text`: one line an error, none when it is valid.
pub fn schema_errors(v: &jsonschema::Validator, text: &str) -> Vec<String> {
    let instance: serde_json::Value = serde_yaml::from_str(text).unwrap();
    v.iter_errors(&instance)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect()
}

/// What the OpenAPI document `doc` finds wrong with `body`, answered `status` by `method path`
/// (`path` as the document writes it): the status must be documented for that operation and the
/// body must match its JSON schema. One line an error, none when it is as documented.
pub fn documented_answer_errors(
    doc: &serde_json::Value,
    method: &str,
    path: &str,
    status: u16,
    body: &serde_json::Value,
) -> Vec<String> {
    documented_answer_errors_as(doc, method, path, status, "application/json", body)
}

/// [`documented_answer_errors`] for an answer of media type `media` (for
/// `application/x-ndjson`, one line of it: the document's schema is a line's).
pub fn documented_answer_errors_as(
    doc: &serde_json::Value,
    method: &str,
    path: &str,
    status: u16,
    media: &str,
    body: &serde_json::Value,
) -> Vec<String> {
    let op = &doc["paths"][path][method];
    if !op.is_object() {
        return vec![format!("{method} {path} is not in the document")];
    }
    let response = &op["responses"][status.to_string()];
    if !response.is_object() {
        return vec![format!(
            "{method} {path} answered {status}, which the document does not say"
        )];
    }
    let mut schema = response["content"][media]["schema"].clone();
    if !schema.is_object() {
        return vec![format!("{method} {path} {status}: no schema for {media}")];
    }
    // The schema's `$ref`s point into the document's components.
    schema["components"] = doc["components"].clone();
    let v = jsonschema::validator_for(&schema).expect("the document's schema is valid");
    v.iter_errors(body)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect()
}
