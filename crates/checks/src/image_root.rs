//! A container image named by a language, a suite, a check or a request, resolved through the
//! images store to the root a sandbox runs in.

use corral_images::Store;
use corral_sandbox::ImageRoot;

/// Resolves `reference` (a name, `name@sha256:…` or a bare digest) among the images the store
/// already has. Never pulls: students may only pick images staff made available.
pub fn resolve(store: &Store, reference: &str) -> Result<ImageRoot, corral_images::Error> {
    let rootfs = store.rootfs(reference)?;
    let env = rootfs
        .env
        .iter()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Ok(ImageRoot {
        name: reference.to_string(),
        digest: rootfs.digest.to_string(),
        layers: rootfs.lower_dirs,
        env,
        working_dir: rootfs.working_dir,
        upper: None,
    })
}
