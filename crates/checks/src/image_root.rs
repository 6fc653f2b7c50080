//! A container image named by a language, a suite, a check or a request, resolved through the
//! images store to the root a sandbox runs in, and the `{"name", "digest"}` every result records.

use corral_images::Store;
use corral_sandbox::{ImageRoot, Root};
use serde::{Deserialize, Serialize};

/// Resolves `reference` (a name, `name@sha256:…` or a bare digest) among the images the store
/// already has. Never pulls: students may only pick images staff made available.
pub fn resolve(store: &Store, reference: &str) -> Result<ImageRoot, corral_images::Error> {
    let (found_as, _) = store.resolve(reference)?;
    // `NAME@sha256:…` is found by its digest; its name is still the one it was chosen by.
    let found_as = found_as.or_else(|| match corral_images::store::Ref::parse(reference) {
        Ok(corral_images::store::Ref::Digest(name, _)) => name,
        _ => None,
    });
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
        upper: None,
        as_root: false,
        // Held by every sandbox built on this root: gc keeps the layers while one lives.
        claim: rootfs.claim.into(),
    })
}

/// Why an image named somewhere cannot be used, for people: said the same way by the CLI, the
/// server and workers — so it never names the store's folder, which a server's clients must not
/// learn (the CLI names its data folder itself).
pub fn unavailable(reference: &str, store: Option<&Store>) -> Option<String> {
    let Some(store) = store else {
        return Some(format!(
            "image {reference:?} is named, but no image store is open here (give the data folder that holds it)"
        ));
    };
    match store.resolve(reference) {
        Ok(_) => None,
        Err(corral_images::Error::NotFound(_)) => Some(format!(
            "image {reference:?} is not in the image store (staff add it with `corral env pull` or `corral env import`; nothing is pulled on demand)"
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

/// `reference` as `NAME@DIGEST` when `pins` pins it (REF → `sha256:…`), so it resolves to
/// exactly that digest and still records the name; else unchanged.
pub fn pinned(reference: &str, pins: &std::collections::BTreeMap<String, String>) -> String {
    match pins.get(reference) {
        Some(digest) => match corral_images::store::Ref::parse(reference) {
            Ok(corral_images::store::Ref::Name(name)) => format!("{name}@{digest}"),
            Ok(corral_images::store::Ref::Digest(Some(name), _)) => format!("{name}@{digest}"),
            _ => digest.clone(),
        },
        None => reference.to_string(),
    }
}

/// Pins every reference in `references` to the digest `store` resolves it to now (what a queued
/// job records at submission, so every worker runs the same image).
pub fn pin_all<'a>(
    store: &Store,
    references: impl IntoIterator<Item = &'a str>,
) -> Result<std::collections::BTreeMap<String, String>, String> {
    let mut pins = std::collections::BTreeMap::new();
    for r in references {
        if pins.contains_key(r) {
            continue;
        }
        if let Some(why) = unavailable(r, Some(store)) {
            return Err(why);
        }
        let (_, rec) = store.resolve(r).map_err(|e| format!("image {r:?}: {e}"))?;
        pins.insert(r.to_string(), rec.digest.to_string());
    }
    Ok(pins)
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
    // The scratch folder in the content: two calls give two images.
    std::fs::write(
        rootfs.join("hello.txt"),
        format!("{name} {}", scratch.display()),
    )
    .unwrap();
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
        // Said to a server's clients too (a queued job whose image was removed): never where
        // the store is.
        let root = dir.path().to_string_lossy().into_owned();
        assert!(!why.contains(&root), "{why}");
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
        assert_eq!(
            (by_digest.name, by_digest.digest),
            (digest.clone(), digest.clone())
        );
        // Pinned, a name resolves to its digest at pinning time even after it moves.
        let pins = pin_all(&store, ["course/py:1"]).unwrap();
        assert_eq!(pins["course/py:1"], digest);
        let other = dir.path().join("other");
        std::fs::create_dir_all(&other).unwrap();
        let moved = test_image(&store, &other, "course/py:1");
        assert_ne!(moved, digest);
        let pinned_ref = pinned("course/py:1", &pins);
        assert_eq!(pinned_ref, format!("course/py:1@{digest}"));
        let again = resolve(&store, &pinned_ref).unwrap();
        assert_eq!(
            (again.name.as_str(), again.digest.as_str()),
            ("course/py:1", digest.as_str())
        );
        assert_eq!(resolve(&store, "course/py:1").unwrap().digest, moved);
        assert!(pin_all(&store, ["course/none:1"])
            .unwrap_err()
            .contains("not in the image store"));
    }
}
