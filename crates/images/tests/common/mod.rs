//! Test helpers: tars written byte by byte (so hostile headers can be made), OCI layouts by hand.
#![allow(dead_code)]

pub mod fake;
pub mod registry;

use std::io::Write;
use std::path::Path;

use sha2::{Digest as _, Sha256};

/// One entry of a hand-made tar.
pub struct E {
    pub name: Vec<u8>,
    pub kind: u8,
    pub mode: u32,
    pub link: Vec<u8>,
    pub data: Vec<u8>,
}

pub fn file(name: &str, data: &[u8]) -> E {
    E {
        name: name.into(),
        kind: b'0',
        mode: 0o644,
        link: vec![],
        data: data.to_vec(),
    }
}
pub fn dir(name: &str) -> E {
    E {
        name: name.into(),
        kind: b'5',
        mode: 0o755,
        link: vec![],
        data: vec![],
    }
}
pub fn symlink(name: &str, target: &str) -> E {
    E {
        name: name.into(),
        kind: b'2',
        mode: 0o777,
        link: target.into(),
        data: vec![],
    }
}
pub fn hardlink(name: &str, target: &str) -> E {
    E {
        name: name.into(),
        kind: b'1',
        mode: 0o644,
        link: target.into(),
        data: vec![],
    }
}
pub fn special(name: &str, kind: u8) -> E {
    E {
        name: name.into(),
        kind,
        mode: 0o666,
        link: vec![],
        data: vec![],
    }
}

fn octal(field: &mut [u8], v: u64) {
    if v >= 1 << (3 * (field.len() - 1)) {
        // GNU base-256 for numbers that do not fit in octal.
        let n = field.len();
        for (i, b) in v.to_be_bytes().iter().rev().enumerate().take(n - 1) {
            field[n - 1 - i] = *b;
        }
        field[0] = 0x80;
        return;
    }
    let s = format!("{:0width$o}", v, width = field.len() - 1);
    field[..s.len()].copy_from_slice(s.as_bytes());
}

/// A ustar header block (name ≤ 100 bytes, or a GNU long-name header first).
pub fn header(name: &[u8], kind: u8, mode: u32, link: &[u8], size: u64) -> [u8; 512] {
    let mut h = [0u8; 512];
    let n = name.len().min(100);
    h[..n].copy_from_slice(&name[..n]);
    octal(&mut h[100..108], u64::from(mode));
    octal(&mut h[108..116], 0);
    octal(&mut h[116..124], 0);
    octal(&mut h[124..136], size);
    octal(&mut h[136..148], 1_700_000_000);
    h[156] = kind;
    let l = link.len().min(100);
    h[157..157 + l].copy_from_slice(&link[..l]);
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[148..156].copy_from_slice(b"        ");
    let sum: u64 = h.iter().map(|&b| u64::from(b)).sum();
    let s = format!("{sum:06o}\0 ");
    h[148..156].copy_from_slice(s.as_bytes());
    h
}

fn pad(out: &mut Vec<u8>) {
    while !out.len().is_multiple_of(512) {
        out.push(0);
    }
}

pub fn tar(entries: &[E]) -> Vec<u8> {
    let mut out = Vec::new();
    for e in entries {
        if e.name.len() > 100 {
            let mut long = e.name.clone();
            long.push(0);
            out.extend_from_slice(&header(
                b"././@LongLink",
                b'L',
                0o644,
                b"",
                long.len() as u64,
            ));
            out.extend_from_slice(&long);
            pad(&mut out);
        }
        out.extend_from_slice(&header(
            &e.name,
            e.kind,
            e.mode,
            &e.link,
            e.data.len() as u64,
        ));
        out.extend_from_slice(&e.data);
        pad(&mut out);
    }
    out.extend_from_slice(&[0u8; 1024]);
    out
}

pub fn gzip(b: &[u8]) -> Vec<u8> {
    let mut g = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    g.write_all(b).unwrap();
    g.finish().unwrap()
}

pub fn zstd(b: &[u8]) -> Vec<u8> {
    zstd::encode_all(b, 3).unwrap()
}

pub fn sha(b: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(b)))
}

fn put_blob(dir: &Path, b: &[u8]) -> String {
    let d = sha(b);
    std::fs::write(dir.join("blobs/sha256").join(&d[7..]), b).unwrap();
    d
}

/// Writes an OCI image layout at `dir` with the given layers (uncompressed tars) compressed as
/// `compress` says ("" / "gzip" / "zstd"); returns the manifest digest.
pub fn oci_layout(dir: &Path, layers: &[Vec<u8>], compress: &str, tag: &str) -> String {
    std::fs::create_dir_all(dir.join("blobs/sha256")).unwrap();
    std::fs::write(dir.join("oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
    let mut descs = Vec::new();
    let mut diff_ids = Vec::new();
    for l in layers {
        diff_ids.push(sha(l));
        let (blob, mt) = match compress {
            "gzip" => (gzip(l), "application/vnd.oci.image.layer.v1.tar+gzip"),
            "zstd" => (zstd(l), "application/vnd.oci.image.layer.v1.tar+zstd"),
            _ => (l.clone(), "application/vnd.oci.image.layer.v1.tar"),
        };
        let d = put_blob(dir, &blob);
        descs.push(serde_json::json!({"mediaType": mt, "digest": d, "size": blob.len()}));
    }
    let config = serde_json::json!({
        "created": "2026-01-01T00:00:00Z", "architecture": "amd64", "os": "linux",
        "config": {"Env": ["PATH=/usr/bin:/bin", "LANG=C.UTF-8"], "WorkingDir": "/work", "Cmd": ["sh"], "User": "1000"},
        "rootfs": {"type": "layers", "diff_ids": diff_ids}
    });
    let config = serde_json::to_vec(&config).unwrap();
    let cd = put_blob(dir, &config);
    let manifest = serde_json::json!({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cd, "size": config.len()},
        "layers": descs
    });
    let manifest = serde_json::to_vec(&manifest).unwrap();
    let md = put_blob(dir, &manifest);
    let index = serde_json::json!({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": md, "size": manifest.len(),
                       "annotations": {"org.opencontainers.image.ref.name": tag}}]
    });
    std::fs::write(dir.join("index.json"), serde_json::to_vec(&index).unwrap()).unwrap();
    md
}

/// A folder for test data on a filesystem with trusted xattrs (not every /tmp has them).
pub fn scratch() -> tempfile::TempDir {
    let base = Path::new(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(base).unwrap();
    tempfile::tempdir_in(base).unwrap()
}

/// Turns the single-image layout at `dir` (from [`oci_layout`]) into a multi-platform one: its
/// `index.json` points at an image index listing a linux/arm64 image (same layers, another
/// config) and the original as linux/amd64. Returns (index digest, amd64 manifest digest).
pub fn make_multi_platform(dir: &Path, tag: &str) -> (String, String) {
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("index.json")).unwrap()).unwrap();
    let amd = index["manifests"][0].clone();
    let amd_digest = amd["digest"].as_str().unwrap().to_string();
    let manifest: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.join("blobs/sha256").join(&amd_digest[7..])).unwrap(),
    )
    .unwrap();
    let mut config: serde_json::Value = serde_json::from_slice(
        &std::fs::read(
            dir.join("blobs/sha256")
                .join(&manifest["config"]["digest"].as_str().unwrap()[7..]),
        )
        .unwrap(),
    )
    .unwrap();
    config["architecture"] = "arm64".into();
    let config = serde_json::to_vec(&config).unwrap();
    let cd = put_blob(dir, &config);
    let mut arm = manifest.clone();
    arm["config"]["digest"] = cd.into();
    arm["config"]["size"] = config.len().into();
    let arm = serde_json::to_vec(&arm).unwrap();
    let arm_digest = put_blob(dir, &arm);
    let mt = "application/vnd.oci.image.manifest.v1+json";
    let image_index = serde_json::json!({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [
            {"mediaType": mt, "digest": arm_digest, "size": arm.len(), "platform": {"architecture": "arm64", "os": "linux"}},
            {"mediaType": mt, "digest": amd_digest, "size": amd["size"], "platform": {"architecture": "amd64", "os": "linux"}}
        ]
    });
    let image_index = serde_json::to_vec(&image_index).unwrap();
    let index_digest = put_blob(dir, &image_index);
    let top = serde_json::json!({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{"mediaType": "application/vnd.oci.image.index.v1+json", "digest": index_digest, "size": image_index.len(),
                       "annotations": {"org.opencontainers.image.ref.name": tag}}]
    });
    std::fs::write(dir.join("index.json"), serde_json::to_vec(&top).unwrap()).unwrap();
    (index_digest, amd_digest)
}

/// The two test layers: a base (with `bin/FILE` holding `content`) and one that whites out
/// `etc/os-release` and adds `etc/motd`.
pub fn two_layers(file_name: &str, content: &[u8]) -> Vec<Vec<u8>> {
    vec![
        tar(&[
            dir("etc/"),
            file("etc/os-release", b"ID=corraltest\n"),
            dir("bin/"),
            E {
                mode: 0o755,
                ..file(&format!("bin/{file_name}"), content)
            },
        ]),
        tar(&[
            dir("etc/"),
            file("etc/.wh.os-release", b""),
            file("etc/motd", b"welcome\n"),
        ]),
    ]
}
