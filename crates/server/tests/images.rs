//! Container images over HTTP: staff list them, admins import and remove them, and requests of
//! any role may name only images the server has (never pulled: a clear 422, nothing fetched).
//! The pool here never runs a program (see support/mod.rs): runs in an image end to end are in
//! `crates/cli/tests`.

mod support;

use corral_store::Role;
use reqwest::StatusCode;
use serde_json::{json, Value};
use support::{json_of, TestServer};

/// A root-filesystem tar with one file: a one-layer image when imported.
fn rootfs_tar(text: &str) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Regular);
    h.set_size(text.len() as u64);
    h.set_mode(0o644);
    h.set_path("hello.txt").unwrap();
    h.set_cksum();
    b.append(&h, text.as_bytes()).unwrap();
    b.into_inner().unwrap()
}

async fn import(s: &TestServer, token: &str, name: &str, tar: Vec<u8>) -> (StatusCode, Value) {
    json_of(
        reqwest::Client::new()
            .post(s.url(&format!("/images/import?name={name}")))
            .bearer_auth(token)
            .header("content-type", "application/octet-stream")
            .body(tar)
            .send()
            .await
            .unwrap(),
    )
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn staff_list_admins_import_and_remove() {
    let s = TestServer::start(|_| {}).await;
    let (admin, staff, student) = (
        s.token(Role::Admin).await,
        s.token(Role::Staff).await,
        s.token(Role::Student).await,
    );
    let (st, list) = s.get(&staff, "/images").await;
    assert_eq!((st, list), (StatusCode::OK, json!([])));
    assert_eq!(s.get(&student, "/images").await.0, StatusCode::FORBIDDEN);
    // Importing and pulling are an admin's.
    let (st, _) = import(&s, &staff, "course/py:1", rootfs_tar("x")).await;
    assert_eq!(st, StatusCode::FORBIDDEN);
    let (st, _) = s
        .post(&student, "/images", json!({"pull": "example.invalid/x:1"}))
        .await;
    assert_eq!(st, StatusCode::FORBIDDEN);
    let (st, img) = import(&s, &admin, "course/py:1", rootfs_tar("x")).await;
    assert_eq!(st, StatusCode::CREATED, "{img}");
    let digest = img["digest"].as_str().unwrap().to_string();
    assert!(digest.starts_with("sha256:") && digest.len() == 71, "{img}");
    assert_eq!(img["names"], json!(["course/py:1"]));
    let (_, list) = s.get(&staff, "/images").await;
    assert_eq!(list[0]["digest"], digest.as_str());
    // Where it came from, without the server's own paths.
    assert_eq!(list[0]["source"], "import (HTTP upload)", "{list}");
    assert!(list[0]["size"].as_u64().unwrap() > 0);
    // Not an archive, an empty body, a bad name: clean 422s.
    let (st, e) = import(&s, &admin, "course/bad:1", b"not an archive".to_vec()).await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{e}");
    let (st, _) = import(&s, &admin, "course/empty:1", Vec::new()).await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY);
    let (st, _) = import(&s, &admin, "Not..A..Name", rootfs_tar("y")).await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY);
    // A pull of a reference that is not one is refused before any network.
    let (st, _) = s
        .post(&admin, "/images", json!({"pull": "Not A Ref"}))
        .await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY);
    // Removal: staff may not; an admin removes the name (the image with it).
    let del = |token: String, r: &str| {
        reqwest::Client::new()
            .delete(s.url(&format!("/images/{r}")))
            .bearer_auth(token)
            .send()
    };
    assert_eq!(
        del(staff.clone(), "course/py:1").await.unwrap().status(),
        StatusCode::FORBIDDEN
    );
    let (st, gone) = json_of(del(admin.clone(), "course/py:1").await.unwrap()).await;
    assert_eq!(st, StatusCode::OK, "{gone}");
    assert_eq!(gone["removed"], digest.as_str());
    let (st, _) = json_of(del(admin.clone(), "course/py:1").await.unwrap()).await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    assert_eq!(s.get(&staff, "/images").await.1, json!([]));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn students_may_name_only_images_the_server_has() {
    // Two folder suites: one naming an image the server will have, one naming a missing one.
    let s = TestServer::start(|c| {
        for (id, image) in [("has", "course/py:1"), ("lacks", "course/none:1")] {
            let dir = c.data_dir.join("suites").join(id);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(
                dir.join("suite.yaml"),
                format!("name: {id}\nchecks:\n  - id: a\n    image: {image}\n    steps: [{{run: \"true\"}}]\n"),
            )
            .unwrap();
        }
    })
    .await;
    let (admin, student) = (s.token(Role::Admin).await, s.token(Role::Student).await);
    let missing = "registry.example.invalid/course/python:3.12";
    let not_here = |v: &Value| {
        let m = v["message"].as_str().unwrap_or_default();
        m.contains("not on this server") && m.contains(missing)
    };
    let (st, e) = s
        .post(&student, "/run", json!({"cmd": "true", "image": missing}))
        .await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{e}");
    assert!(not_here(&e), "{e}");
    let (st, e) = s
        .post(
            &student,
            "/submissions",
            json!({"cmd": "true", "image": missing}),
        )
        .await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{e}");
    assert!(not_here(&e), "{e}");
    let (st, out) = s
        .post(
            &student,
            "/submissions/batch",
            json!({"submissions": [{"cmd": "true", "image": missing}]}),
        )
        .await;
    assert!(st.is_success(), "{st} {out}");
    assert!(not_here(&out["submissions"][0]), "{out}");
    let (st, e) = s
        .post(
            &student,
            "/run",
            json!({"cmd": "true", "image": "Not A Ref"}),
        )
        .await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{e}");
    // Nothing was pulled on the students' behalf.
    assert_eq!(s.get(&admin, "/images").await.1, json!([]));

    // An image the server has: the run records it (this pool cannot start programs, so the run
    // itself is a sandbox error here; the image it was to run in is still what the result says).
    let (st, img) = import(&s, &admin, "course/py:1", rootfs_tar("z")).await;
    assert_eq!(st, StatusCode::CREATED, "{img}");
    let (st, r) = s
        .post(
            &student,
            "/run",
            json!({"cmd": "true", "image": "course/py:1"}),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{r}");
    assert_eq!(
        r["image"],
        json!({"name": "course/py:1", "digest": img["digest"]})
    );
    // An image with a kept sandbox is refused (the sandbox keeps its own root).
    let (st, e) = s
        .post(
            &student,
            "/run",
            json!({"cmd": "true", "image": "course/py:1", "sandbox": {"id": "x"}}),
        )
        .await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{e}");
    // A submission naming it is queued, pinned to the digest.
    let (st, sub) = s
        .post(
            &student,
            "/submissions",
            json!({"cmd": "true", "image": "course/py:1"}),
        )
        .await;
    assert_eq!(st, StatusCode::ACCEPTED, "{sub}");
    let job = s
        .store
        .get_job(sub["id"].as_str().unwrap())
        .await
        .unwrap()
        .unwrap();
    let spec: Value = serde_json::from_str(&job.spec).unwrap();
    assert_eq!(spec["image"], "course/py:1");
    assert_eq!(spec["image_digests"]["course/py:1"], img["digest"]);
    // A suite's own images are pinned at submission too; one the server lacks is a 422 then.
    let files = json!([{"path": "a.txt", "content": "x"}]);
    let (st, sub) = s
        .post(
            &student,
            "/submissions",
            json!({"suite": "has", "files": files}),
        )
        .await;
    assert_eq!(st, StatusCode::ACCEPTED, "{sub}");
    let job = s
        .store
        .get_job(sub["id"].as_str().unwrap())
        .await
        .unwrap()
        .unwrap();
    let spec: Value = serde_json::from_str(&job.spec).unwrap();
    assert_eq!(spec["image_digests"], json!({"course/py:1": img["digest"]}));
    let (st, e) = s
        .post(
            &student,
            "/submissions",
            json!({"suite": "lacks", "files": files}),
        )
        .await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("course/none:1"),
        "{e}"
    );
    // The answer never tells a client where the server keeps its data.
    let data = s.data_dir().to_string_lossy().into_owned();
    assert!(!e.to_string().contains(&data), "{e}");
    s.stop().await;
}

/// A tar of `entries` (path, bytes) and `links` (path, target: symlinks).
fn archive(entries: &[(&str, Vec<u8>)], links: &[(&str, &str)]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (path, data) in entries {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Regular);
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_path(path).unwrap();
        h.set_cksum();
        b.append(&h, data.as_slice()).unwrap();
    }
    for (path, target) in links {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_size(0);
        h.set_mode(0o777);
        h.set_path(path).unwrap();
        h.set_link_name(target).unwrap();
        h.set_cksum();
        b.append(&h, std::io::empty()).unwrap();
    }
    b.into_inner().unwrap()
}

/// A broken archive is the caller's to fix: a 422 that names what is missing, never a 500, and
/// no path of the server's in the message.
#[tokio::test(flavor = "multi_thread")]
async fn a_broken_archive_is_a_422_naming_what_is_missing() {
    let s = TestServer::start(|_| {}).await;
    let admin = s.token(Role::Admin).await;
    let data = s.data_dir().display().to_string();
    let layer = rootfs_tar("hello");
    let digest = |b: &[u8]| corral_images::Digest::of_bytes(b).to_string();
    let blob = |b: &[u8]| format!("blobs/sha256/{}", &digest(b)[7..]);
    let config = serde_json::to_vec(&json!({
        "architecture": corral_images::oci::host_architecture(), "os": "linux",
        "rootfs": {"type": "layers", "diff_ids": [digest(&layer)]}
    }))
    .unwrap();
    let manifest = serde_json::to_vec(&json!({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": digest(&config), "size": config.len()},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": digest(&layer), "size": layer.len()}]
    }))
    .unwrap();
    let index = serde_json::to_vec(&json!({"schemaVersion": 2, "manifests": [{
        "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": digest(&manifest), "size": manifest.len()}]}))
    .unwrap();
    // An OCI layout whose only layer blob is absent.
    let oci = archive(
        &[
            ("oci-layout", br#"{"imageLayoutVersion":"1.0.0"}"#.to_vec()),
            ("index.json", index.clone()),
            (&blob(&manifest), manifest.clone()),
            (&blob(&config), config.clone()),
        ],
        &[],
    );
    let (st, e) = import(&s, &admin, "b/missing", oci).await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{e}");
    assert_eq!(
        e["message"],
        format!("the archive has no blob {} for layer 1", digest(&layer)),
        "{e}"
    );
    // A docker-archive whose layer is a symlink (never followed out of the archive).
    let da = archive(
        &[
            (
                "manifest.json",
                br#"[{"Config":"config.json","RepoTags":null,"Layers":["layer.tar"]}]"#.to_vec(),
            ),
            ("config.json", config.clone()),
        ],
        &[("layer.tar", "/etc/passwd")],
    );
    let (st, e) = import(&s, &admin, "b/sym", da).await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{e}");
    let msg = e["message"].as_str().unwrap();
    assert!(msg.contains("no file \"layer.tar\" for layer 1"), "{e}");
    // A docker-archive naming a file outside itself, and one whose entries clash.
    let da = archive(
        &[
            (
                "manifest.json",
                br#"[{"Config":"config.json","RepoTags":null,"Layers":["../../x/layer.tar"]}]"#
                    .to_vec(),
            ),
            ("config.json", config.clone()),
        ],
        &[],
    );
    let (st, e) = import(&s, &admin, "b/out", da).await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{e}");
    let clash = archive(
        &[
            ("index.json", index.clone()),
            ("blobs", b"a file".to_vec()),
            (&blob(&manifest), manifest.clone()),
        ],
        &[],
    );
    let (st, e2) = import(&s, &admin, "b/clash", clash).await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{e2}");
    for e in [&e, &e2] {
        let msg = e["message"].as_str().unwrap();
        assert!(!msg.contains(&data) && !msg.contains("/tmp/"), "{e}");
    }
    let (_, list) = s.get(&admin, "/images").await;
    assert_eq!(list, json!([]));
    s.stop().await;
}

/// `GET /worker/blobs/{digest}` serves byte ranges, so a worker whose download was cut off asks
/// for the rest: `bytes=N-` and `bytes=N-M` give 206 with exactly those bytes and a
/// `Content-Range`; a start past the end is a 416; other forms get the whole blob.
#[tokio::test(flavor = "multi_thread")]
async fn worker_blobs_serve_byte_ranges() {
    let s = TestServer::start(|_| {}).await;
    let (admin, worker) = (s.token(Role::Admin).await, s.token(Role::Worker).await);
    let text: String = (0..5000).map(|i| format!("line {i}\n")).collect();
    let (st, img) = import(&s, &admin, "course/ranges:1", rootfs_tar(&text)).await;
    assert_eq!(st, StatusCode::CREATED, "{img}");
    // The layer blob: the largest blob of the image's manifest.
    let manifest_digest = img["digest"].as_str().unwrap();
    let get = |digest: String, range: Option<&'static str>| {
        let mut r = reqwest::Client::new()
            .get(s.url(&format!("/worker/blobs/{digest}")))
            .bearer_auth(&worker);
        if let Some(v) = range {
            r = r.header("range", v);
        }
        r.send()
    };
    let manifest: Value = get(manifest_digest.to_string(), None)
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let layer = manifest["layers"][0]["digest"]
        .as_str()
        .unwrap()
        .to_string();
    let whole = get(layer.clone(), None).await.unwrap();
    assert_eq!(whole.status(), StatusCode::OK);
    assert_eq!(whole.headers()["accept-ranges"], "bytes");
    let whole = whole.bytes().await.unwrap().to_vec();
    let len = whole.len();
    assert!(len > 1000, "{len}");

    let r = get(layer.clone(), Some("bytes=1000-")).await.unwrap();
    assert_eq!(r.status(), StatusCode::PARTIAL_CONTENT);
    assert_eq!(
        r.headers()["content-range"],
        format!("bytes 1000-{}/{len}", len - 1).as_str()
    );
    assert_eq!(r.bytes().await.unwrap().to_vec(), whole[1000..]);
    let r = get(layer.clone(), Some("bytes=10-19")).await.unwrap();
    assert_eq!(r.status(), StatusCode::PARTIAL_CONTENT);
    assert_eq!(r.bytes().await.unwrap().to_vec(), whole[10..20]);
    // An end past the blob's is cut at its end.
    let r = get(layer.clone(), Some("bytes=5-99999999")).await.unwrap();
    assert_eq!(r.status(), StatusCode::PARTIAL_CONTENT);
    assert_eq!(r.bytes().await.unwrap().to_vec(), whole[5..]);
    let past = format!("bytes={len}-");
    let r = reqwest::Client::new()
        .get(s.url(&format!("/worker/blobs/{layer}")))
        .bearer_auth(&worker)
        .header("range", past)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::RANGE_NOT_SATISFIABLE);
    assert_eq!(
        r.headers()["content-range"],
        format!("bytes */{len}").as_str()
    );
    for other in ["bytes=-100", "bytes=0-1,5-6", "bytes=9-3"] {
        let r = reqwest::Client::new()
            .get(s.url(&format!("/worker/blobs/{layer}")))
            .bearer_auth(&worker)
            .header("range", other)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{other}");
        assert_eq!(r.bytes().await.unwrap().to_vec(), whole, "{other}");
    }
    s.stop().await;
}
