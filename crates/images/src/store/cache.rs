//! The build step cache: `cache/sha256/KEY.json`, one entry per step ever completed (see
//! `build::key` for the key). An entry is the image state after the step — layers, Env,
//! WorkingDir, history — so a hit skips the step and everything before it.
//!
//! `gc` keeps an entry while every layer it names is used by some image (so the steps of a built
//! image stay cached) and removes the rest with their layers.

use serde::{Deserialize, Serialize};

use super::model::{LayerRecord, Store};
use crate::digest::Digest;
use crate::error::Error;

/// The image as it stands after a build step.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct State {
    /// This state's cache key (the base image's manifest digest before any step).
    pub key: Digest,
    /// Bottom layer first.
    pub layers: Vec<LayerRecord>,
    pub env: Vec<String>,
    pub working_dir: Option<String>,
    /// The OCI history entries the build's steps added.
    pub history: Vec<serde_json::Value>,
}

impl Store {
    fn cache_path(&self, key: &Digest) -> std::path::PathBuf {
        self.root()
            .join("cache/sha256")
            .join(format!("{}.json", key.hex()))
    }

    /// The cached state of `key`, if every layer it needs is still stored.
    pub fn cached_state(&self, key: &Digest) -> Result<Option<State>, Error> {
        let path = self.cache_path(key);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::Io { path, source: e }),
        };
        let Ok(state) = serde_json::from_slice::<State>(&bytes) else {
            tracing::warn!(path = %path.display(), "damaged build cache entry ignored");
            return Ok(None);
        };
        let complete = state
            .layers
            .iter()
            .all(|l| self.has_blob(&l.blob) && self.layer_path(&l.diff_id).is_dir());
        Ok((state.key == *key && complete).then_some(state))
    }

    pub fn save_state(&self, state: &State) -> Result<(), Error> {
        let json = serde_json::to_vec_pretty(state).expect("states serialise");
        self.write_atomic(&format!("cache/sha256/{}.json", state.key.hex()), &json)
    }
}
