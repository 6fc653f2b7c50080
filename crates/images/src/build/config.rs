//! The built image's config and manifest: the base's config (every field it had, kept as JSON)
//! with the new layers' diff-ids, the Env and WorkingDir the steps set, and one history entry per
//! step. No `created` time, so rebuilding an unchanged file gives the same digest.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{json, Value};

use super::file::Step;
use crate::digest::excerpt;
use crate::error::Error;
use crate::ingest::{ingest, BlobSource};
use crate::oci::{self, Descriptor, Manifest};
use crate::store::{ImageName, ImageRecord, State, Store};

/// The OCI history entry of a step.
pub fn history_entry(step: &Step, empty_layer: bool) -> Value {
    let mut h = json!({"created_by": format!("corral env build: {}", excerpt(&step.to_string()))});
    if empty_layer {
        h["empty_layer"] = json!(true);
    }
    h
}

/// `env` (`K=V` entries) with `vars` set; `$NAME` and `${NAME}` in a value expand to the value
/// before this step (empty when unset), as a Dockerfile's ENV does.
pub fn set_env(env: &[String], vars: &BTreeMap<String, String>) -> Vec<String> {
    let before: BTreeMap<&str, &str> = env.iter().filter_map(|kv| kv.split_once('=')).collect();
    let mut out: Vec<String> = env.to_vec();
    for (k, v) in vars {
        let entry = format!("{k}={}", expand(v, &before));
        match out
            .iter_mut()
            .find(|kv| kv.split_once('=').is_some_and(|(n, _)| n == k))
        {
            Some(slot) => *slot = entry,
            None => out.push(entry),
        }
    }
    out
}

fn expand(v: &str, env: &BTreeMap<&str, &str>) -> String {
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::new();
    let mut rest = v;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let (name, skip) = if let Some(braced) = after.strip_prefix('{') {
            match braced.find('}') {
                Some(end) if braced[..end].chars().all(is_name) && end > 0 => {
                    (&braced[..end], end + 2)
                }
                _ => ("", 0),
            }
        } else {
            let end = after.find(|c: char| !is_name(c)).unwrap_or(after.len());
            (&after[..end], end)
        };
        if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
            out.push('$');
            rest = after;
        } else {
            out.push_str(env.get(name).copied().unwrap_or(""));
            rest = &after[skip..];
        }
    }
    out.push_str(rest);
    out
}

/// Blobs a build wrote itself: already in the store.
struct Present;

impl BlobSource for Present {
    fn fetch(&mut self, store: &Store, d: &Descriptor, what: &str) -> Result<(), Error> {
        if store.has_blob(&d.digest) {
            Ok(())
        } else {
            Err(Error::NotFound(format!("{what} {}", d.digest)))
        }
    }

    /// The base's layers were checked when it was stored, the steps' made from their own tars.
    fn vouches(&self, _layer: &crate::store::LayerRecord) -> bool {
        true
    }
}

/// Writes the image of `state` (built on `base`) and names it: the only step that makes a build
/// visible, so a build that failed earlier leaves no image named.
pub fn write_image(
    store: &Store,
    base: &ImageRecord,
    state: &State,
    name: Option<&str>,
    file: &Path,
) -> Result<ImageRecord, Error> {
    let base_config = store.read_document(&base.config)?;
    let mut config: Value =
        serde_json::from_slice(&base_config).map_err(|e| Error::BadManifest {
            what: format!("config {}", base.config),
            reason: e.to_string(),
        })?;
    if !config.is_object() {
        return Err(Error::BadManifest {
            what: format!("config {}", base.config),
            reason: "not a JSON object".into(),
        });
    }
    let mut history = match config.get("history") {
        Some(Value::Array(h)) => h.clone(),
        // The base says nothing of its layers: one entry each, so the history still lines up.
        _ => base
            .layers
            .iter()
            .map(|_| json!({"created_by": format!("base image: {}", base.source)}))
            .collect(),
    };
    history.extend(state.history.iter().cloned());
    let obj = config.as_object_mut().expect("checked above");
    obj.remove("created");
    obj.insert("history".into(), Value::Array(history));
    obj.insert(
        "rootfs".into(),
        json!({"type": "layers", "diff_ids": state.layers.iter().map(|l| l.diff_id.to_string()).collect::<Vec<_>>()}),
    );
    let run = obj.entry("config").or_insert_with(|| json!({}));
    if !run.is_object() {
        *run = json!({});
    }
    run["Env"] = json!(state.env);
    match &state.working_dir {
        Some(w) => run["WorkingDir"] = json!(w),
        None => {
            run.as_object_mut().expect("an object").remove("WorkingDir");
        }
    }
    let config_bytes = serde_json::to_vec(&config).expect("configs serialise");
    let config_digest = store.put_blob_bytes(&config_bytes, "config")?;
    let layers = state
        .layers
        .iter()
        .map(|l| Descriptor::new(&l.media_type, l.blob.clone(), l.size))
        .collect();
    let manifest = Manifest::written(&config_bytes, config_digest, layers);
    debug_assert!(oci::parse_document(&manifest, "manifest").is_ok());
    ingest(
        store,
        &mut Present,
        &manifest,
        None,
        name.map(ImageName::Given),
        format!("build {}", file.display()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_expands_the_previous_values() {
        let env = vec!["PATH=/usr/bin:/bin".to_string(), "A=1".to_string()];
        let vars: BTreeMap<String, String> = [
            ("PATH".to_string(), "/opt/x/bin:$PATH".to_string()),
            ("B".to_string(), "${A}2 $NOPE. $ $1 ${bad-name}".to_string()),
            ("A".to_string(), "3".to_string()),
        ]
        .into();
        assert_eq!(
            set_env(&env, &vars),
            vec![
                "PATH=/opt/x/bin:/usr/bin:/bin",
                "A=3",
                "B=12 . $ $1 ${bad-name}"
            ]
        );
    }
}
