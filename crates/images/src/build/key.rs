//! Step cache keys: a step is identified by its parent (the base image's manifest digest for the
//! first step, the previous step's key after) and its canonical JSON — plus, for `copy`, the digest
//! of what it copies. A changed step changes its key and every later key; the entries themselves
//! are kept by the store (`store/cache.rs`).

use super::file::Step;
use crate::digest::Digest;

/// The cache key of `step` on top of `parent`; `content` is a `copy` step's source digest.
pub fn key(parent: &Digest, step: &Step, content: Option<&Digest>) -> Digest {
    let v = serde_json::json!({
        "parent": parent.to_string(),
        "step": step,
        "content": content.map(|d| d.to_string()),
    });
    Digest::of_bytes(v.to_string().as_bytes())
}
