//! `corral run --image REF`, `"image"` in `--batch` lines, and the result's `"image"` record.

mod common;

use std::process::Command;

use common::image::{data_dir, NAME};

fn corral() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_corral"));
    c.env_remove("CORRAL_DATA");
    c
}

fn digest() -> String {
    common::image::image_root().digest
}

#[test]
fn a_run_in_an_image_sees_the_image_and_records_it() {
    let out = corral()
        .args(["run", "--json", "--image", NAME, "--data"])
        .arg(data_dir())
        .args([
            "--",
            "/bin/sh",
            "-c",
            "cat /etc/debian_version; echo $PATH; pwd; id -u",
        ])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"], "ok", "{v}");
    assert_eq!(v["image"]["name"], NAME);
    assert_eq!(v["image"]["digest"], digest().as_str());
    let stdout = v["stdout"].as_str().unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].starts_with("12."), "bookworm: {stdout}");
    assert_eq!(lines[2], "/home/sandbox");
    assert_ne!(lines[3], "0", "never the image's root");
    // CORRAL_DATA finds the data folder too; on the host root there is no "image".
    let out = corral()
        .env("CORRAL_DATA", data_dir())
        .args(["run", "--json", "--image", NAME, "--", "true"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["image"]["digest"], digest().as_str(), "{v}");
    let out = corral()
        .args(["run", "--json", "--", "true"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v.get("image").is_none(), "{v}");
}

/// An image root under gVisor: the image's files (it has no compiler; the host has), gVisor's
/// kernel, corral's curated `/etc/passwd` over the image's, writes only where a run may write and
/// gone with the run: the image's layer folders on the host are never changed.
#[test]
fn a_run_in_an_image_under_gvisor_sees_the_image_and_keeps_its_writes() {
    assert!(
        std::path::Path::new("/usr/bin/gcc").exists(),
        "the host has gcc"
    );
    let run = |script: &str| -> serde_json::Value {
        let out = corral()
            .args([
                "run",
                "--json",
                "--runtime",
                "gvisor",
                "--image",
                NAME,
                "--data",
            ])
            .arg(data_dir())
            .args(["--", "/bin/sh", "-c", script])
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)))
    };
    let v = run(
        "grep -c bookworm /etc/os-release; test -e /usr/bin/gcc && echo gcc; uname -r; id -un; pwd; echo mine > f; echo tmp > /tmp/t; cat f /tmp/t; echo no > /etc/os-release || echo etc refused; echo no > /x || echo root refused",
    );
    assert_eq!(v["status"], "ok", "{v}");
    assert_eq!(v["runtime"], "gvisor", "{v}");
    assert_eq!(v["image"]["digest"], digest().as_str(), "{v}");
    let stdout = v["stdout"].as_str().unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_ne!(lines[0], "0", "the image's os-release: {stdout}");
    assert_eq!(
        &lines[1..],
        [
            "4.4.0",
            "sandbox",
            "/home/sandbox",
            "mine",
            "tmp",
            "etc refused",
            "root refused"
        ],
        "{v}"
    );
    // A new sandbox of the image starts clean, and the image's layers are unchanged.
    let v = run("ls -A; ls -A /tmp; grep -c bookworm /etc/os-release");
    assert_eq!(v["status"], "ok", "{v}");
    assert_ne!(v["stdout"].as_str().unwrap().trim(), "", "{v}");
    assert!(!v["stdout"].as_str().unwrap().contains('f'), "{v}");
    for layer in common::image::image_root().layers {
        for path in ["home/sandbox/f", "tmp/t", "x"] {
            assert!(!layer.join(path).exists(), "{} in a layer", path);
        }
        let os = std::fs::read_to_string(layer.join("etc/os-release")).unwrap_or_default();
        assert!(!os.starts_with("no"), "the image's os-release changed");
    }
}

#[test]
fn an_unknown_image_is_a_clear_usage_error() {
    let out = corral()
        .args(["run", "--image", "no/such:image", "--data"])
        .arg(data_dir())
        .args(["--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no/such:image"), "{err}");
    for cmd in ["corral env pull", "corral env import", "corral env build"] {
        assert!(err.contains(cmd), "{err}");
    }
}

#[test]
fn batch_lines_name_their_image_and_the_flag_is_the_default() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let file = tmp.path().join("b.jsonl");
    let lines = [
        serde_json::json!({"argv": ["cat", "/etc/debian_version"], "image": NAME}),
        serde_json::json!({"argv": ["true"]}),
        serde_json::json!({"argv": ["true"], "image": "no/such:image"}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&file, text).unwrap();
    let run = |extra: &[&str]| -> Vec<serde_json::Value> {
        corral_testkit::succeed(
            corral()
                .args(["run", "--batch"])
                .arg(&file)
                .arg("--data")
                .arg(data_dir())
                .args(extra),
        )
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
    };
    let res = run(&[]);
    assert_eq!(res[0]["status"], "ok", "{}", res[0]);
    assert_eq!(res[0]["image"]["digest"], digest().as_str());
    assert!(res[1].get("image").is_none(), "{}", res[1]);
    assert_eq!(res[2]["status"], "invalid_spec");
    assert!(res[2]["error"]
        .as_str()
        .unwrap()
        .contains("corral env pull"));
    // --image is every line's default.
    let res = run(&["--image", NAME]);
    assert_eq!(res[1]["image"]["name"], NAME, "{}", res[1]);
}
