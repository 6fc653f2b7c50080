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
