//! A container image named by a language, a suite, a check or a request, resolved through the
//! images store to the root a sandbox runs in, and the `{"name", "digest"}` every result records.

use corral_images::Store;
use corral_sandbox::{ImageRoot, Root};
use serde::{Deserialize, Serialize};

/// Resolves `reference` (a name, `name@sha256:…` or a bare digest) among the images the store
/// already has. Never pulls: students may only pick images staff made available.
pub fn resolve(store: &Store, reference: &str) -> Result<ImageRoot, corral_images::Error> {
    let (found_as, _) = store.resolve(reference)?;
    let rootfs = store.rootfs(reference)?;
    let env = rootfs
        .env
        .iter()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Ok(ImageRoot {
        // The normalised name (`python` → `python:latest`) when found by name, else as written.
        name: found_as.unwrap_or_else(|| reference.to_string()),
        digest: rootfs.digest.to_string(),
        layers: rootfs.lower_dirs,
        env,
        working_dir: rootfs.working_dir,
    })
}

/// Why an image named somewhere cannot be used, for people: said the same way by the CLI, the
/// server and workers.
pub fn unavailable(reference: &str, store: Option<&Store>) -> Option<String> {
    let Some(store) = store else {
        return Some(format!(
            "image {reference:?} is named, but no image store is open here (give the data folder that holds it)"
        ));
    };
    match store.resolve(reference) {
        Ok(_) => None,
        Err(corral_images::Error::NotFound(_)) => Some(format!(
            "image {reference:?} is not in the image store at {} (staff add it with `corral env pull` or `corral env import`; nothing is pulled on demand)",
            store.root().display()
        )),
        Err(e) => Some(format!("image {reference:?}: {e}")),
    }
}

/// Resolves an optional image reference: `None` is the host root.
pub fn root_for(store: Option<&Store>, reference: Option<&str>) -> Result<Root, String> {
    let Some(reference) = reference else {
        return Ok(Root::Host);
    };
    if let Some(why) = unavailable(reference, store) {
        return Err(why);
    }
    let store = store.expect("unavailable() said the store is there");
    resolve(store, reference)
        .map(Root::Image)
        .map_err(|e| format!("image {reference:?}: {e}"))
}

/// Whether `reference` is written like an image reference (a name, `name@sha256:…`, a digest or
/// a ≥ 12-hex prefix); says why not. Existence is checked only when something runs.
pub fn check_reference(reference: &str) -> Result<(), String> {
    corral_images::store::Ref::parse(reference)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// The image a run, check or submission ran in, as every result records it: the name it was
/// chosen by and the image manifest's digest (what actually ran). Absent on the host root.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct UsedImage {
    pub name: String,
    pub digest: String,
}

impl UsedImage {
    /// The image of a root; `None` for the host's.
    pub fn of(root: &Root) -> Option<UsedImage> {
        match root {
            Root::Host => None,
            Root::Image(i) => Some(UsedImage {
                name: i.name.clone(),
                digest: i.digest.clone(),
            }),
        }
    }
}

#[cfg(test)]
/// Imports a one-file root filesystem tar (made with the host's `tar`) as `name`; its digest.
pub(crate) fn test_image(store: &Store, scratch: &std::path::Path, name: &str) -> String {
    let rootfs = scratch.join("rootfs");
    std::fs::create_dir_all(&rootfs).unwrap();
    std::fs::write(rootfs.join("hello.txt"), name).unwrap();
    let tar = scratch.join("rootfs.tar");
    let ok = std::process::Command::new("tar")
        .arg("-C")
        .arg(&rootfs)
        .arg("-cf")
        .arg(&tar)
        .arg(".")
        .status()
        .unwrap()
        .success();
    assert!(ok, "tar failed");
    corral_images::import(store, &tar, Some(name))
        .unwrap()
        .digest
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_are_checked_for_shape_only() {
        for ok in [
            "python:3.12-slim",
            "localhost:5000/course/py@sha256:0000000000000000000000000000000000000000000000000000000000000000",
            "sha256:0000000000000000000000000000000000000000000000000000000000000000",
            "0123456789ab",
        ] {
            check_reference(ok).unwrap();
        }
        for bad in ["", "Python", "a/../b", "x:", "sha256:zz"] {
            assert!(check_reference(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn an_image_missing_from_the_store_is_named_and_never_pulled() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let why = root_for(Some(&store), Some("python:3.12-slim")).unwrap_err();
        assert!(
            why.contains("python:3.12-slim") && why.contains("not in the image store"),
            "{why}"
        );
        let why = root_for(None, Some("python:3.12-slim")).unwrap_err();
        assert!(why.contains("no image store"), "{why}");
        assert_eq!(root_for(None, None).unwrap(), Root::Host);
        assert_eq!(UsedImage::of(&Root::Host), None);
        // Nothing was fetched: the store holds no record.
        assert!(store.records().unwrap().is_empty());
    }

    #[test]
    fn a_stored_image_resolves_by_name_and_by_digest_to_what_results_record() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("data")).unwrap();
        let digest = test_image(&store, dir.path(), "course/py:1");
        let root = root_for(Some(&store), Some("course/py:1")).unwrap();
        let Root::Image(image) = &root else {
            panic!("{root:?}")
        };
        assert_eq!(image.digest, digest);
        assert_eq!(image.layers.len(), 1);
        assert!(image.layers[0].join("hello.txt").is_file());
        assert_eq!(
            UsedImage::of(&root),
            Some(UsedImage {
                name: "course/py:1".into(),
                digest: digest.clone()
            })
        );
        // By digest, the digest is the name it was chosen by.
        let by_digest = resolve(&store, &digest).unwrap();
        assert_eq!((by_digest.name, by_digest.digest), (digest.clone(), digest));
    }
}
