//! `corral run --image REF` and `"image"` in `--batch` lines: an image the data folder's store
//! already has, resolved to the root a sandbox runs in, and recorded in the result.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

use corral_sandbox::{ImageRoot, Root, RunSpec};

/// Where `--image` names are looked up: the data folder (found as `corral env` finds it), opened
/// on first use and each name resolved once.
pub struct Images {
    data: Option<PathBuf>,
    config: Option<PathBuf>,
    store: Mutex<Option<corral_images::Store>>,
    resolved: Mutex<HashMap<String, ImageRoot>>,
}

impl Images {
    pub fn new(data: Option<PathBuf>, config: Option<PathBuf>) -> Self {
        Images {
            data,
            config,
            store: Mutex::new(None),
            resolved: Mutex::new(HashMap::new()),
        }
    }

    /// The root of `reference`, or an error that says how to add it.
    pub fn root(&self, reference: &str) -> Result<Root, String> {
        if let Some(img) = self.resolved.lock().expect("not poisoned").get(reference) {
            return Ok(Root::Image(img.clone()));
        }
        let mut store = self.store.lock().expect("not poisoned");
        if store.is_none() {
            let data = crate::env::data_dir(self.data.as_deref(), self.config.as_deref())
                .map_err(|e| format!("--image {reference}: {}", crate::errors::chain(&e)))?;
            // Looking an image up makes no store: a missing one has no image to find.
            if !data.join("images").is_dir() {
                let none = crate::data_folder::NoStore {
                    what: "no image store",
                    place: data,
                    made_by: "images are added with `corral env pull`, `corral env import` or `corral env build`",
                };
                return Err(format!("image {reference:?}: {none}"));
            }
            crate::data_folder::prepare(&data)
                .map_err(|e| format!("--image {reference}: {}", crate::errors::chain(&e)))?;
            *store = Some(corral_images::Store::open(&data).map_err(|e| {
                format!(
                    "--image {reference}: opening the image store in {}: {e}",
                    data.display()
                )
            })?);
        }
        let store = store.as_ref().expect("just opened");
        let img = corral_checks::image_root::resolve(store, reference).map_err(|e| {
            format!(
                "image {reference:?}: {e} (images are added with `corral env pull`, `corral env import` or `corral env build`; `corral env ls` lists them; the data folder is {})",
                store.root().parent().unwrap_or(store.root()).display()
            )
        })?;
        self.resolved
            .lock()
            .expect("not poisoned")
            .insert(reference.to_string(), img.clone());
        Ok(Root::Image(img))
    }
}

/// The result object of a run: the outcome, plus `"image": {"name", "digest"}` when it ran in one.
pub fn result_json(outcome: &corral_sandbox::Outcome, spec: &RunSpec) -> serde_json::Value {
    let mut json = outcome.to_json();
    if let (Root::Image(img), Some(obj)) = (&spec.root, json.as_object_mut()) {
        obj.insert(
            "image".into(),
            serde_json::json!({"name": img.name, "digest": img.digest}),
        );
    }
    json
}
