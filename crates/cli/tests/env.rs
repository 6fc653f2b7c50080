//! `corral env`: import, ls, inspect, tag, rm, gc, du through the real binary.

use std::path::Path;
use std::process::{Command, Output};

fn corral(data: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_corral"))
        .arg("env")
        .arg("--data")
        .arg(data)
        .args(args)
        .output()
        .unwrap()
}

fn ok(data: &Path, args: &[&str]) -> String {
    let out = corral(data, args);
    assert!(
        out.status.success(),
        "corral env {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn rootfs_tar(path: &Path) {
    let mut b = tar::Builder::new(std::fs::File::create(path).unwrap());
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Directory);
    h.set_mode(0o755);
    h.set_size(0);
    b.append_data(&mut h, "etc/", std::io::empty()).unwrap();
    let body = b"ID=corral-env-test\n";
    let mut h = tar::Header::new_gnu();
    h.set_mode(0o644);
    h.set_size(body.len() as u64);
    b.append_data(&mut h, "etc/os-release", &body[..]).unwrap();
    b.finish().unwrap();
}

#[test]
fn import_list_inspect_tag_remove_and_gc() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let data = tmp.path().join("data");
    let root = tmp.path().join("root.tar");
    rootfs_tar(&root);

    let out = ok(
        &data,
        &["import", root.to_str().unwrap(), "--name", "course/base:1"],
    );
    let digest = out.split_whitespace().next().unwrap().to_string();
    assert!(
        digest.starts_with("sha256:") && out.contains("course/base:1"),
        "{out}"
    );

    let ls: serde_json::Value = serde_json::from_str(&ok(&data, &["ls", "--json"])).unwrap();
    assert_eq!(ls[0]["digest"], digest.as_str());
    assert_eq!(ls[0]["names"], serde_json::json!(["course/base:1"]));
    assert!(ok(&data, &["ls"]).contains("course/base:1"));

    // Inspect by name, by digest, by a 12-digit prefix: the same image and its layer folder.
    for reference in ["course/base:1", digest.as_str(), &digest[7..19]] {
        let v: serde_json::Value =
            serde_json::from_str(&ok(&data, &["inspect", reference])).unwrap();
        assert_eq!(v["digest"], digest.as_str());
        let layer = v["layer_dirs"][0].as_str().unwrap();
        assert_eq!(
            std::fs::read_to_string(Path::new(layer).join("etc/os-release")).unwrap(),
            "ID=corral-env-test\n"
        );
    }

    ok(&data, &["tag", "course/base:1", "course/base:stable"]);
    let du: serde_json::Value = serde_json::from_str(&ok(&data, &["du", "--json"])).unwrap();
    assert_eq!(
        (du["images"].as_u64(), du["layers"].as_u64()),
        (Some(1), Some(1))
    );

    // Errors: what failed and what to do. An image the store lacks is a usage error (2), as
    // for `corral run --image`.
    let out = corral(&data, &["inspect", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no image \"nope:latest\"") || err.contains("no image \"nope\""),
        "{err}"
    );
    assert!(err.contains("corral env ls"), "{err}");
    let out = corral(&data, &["import", "/nonexistent/image.tar"]);
    assert!(
        !out.status.success()
            && String::from_utf8_lossy(&out.stderr).contains("/nonexistent/image.tar")
    );
    let out = corral(&data, &["pull", "NOT A REF"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("not an image reference"));

    // A registry is reached over HTTPS unless --insecure; the error names the URL tried.
    let out = corral(&data, &["pull", "127.0.0.1:1/course/py:3.12"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains("pulling 127.0.0.1:1/course/py:3.12")
            && err.contains("https://127.0.0.1:1/v2/"),
        "{err}"
    );
    let out = corral(&data, &["pull", "--insecure", "127.0.0.1:1/course/py:3.12"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("http://127.0.0.1:1/v2/"));

    // rm a name keeps the image; rm the last name removes it; gc frees the layer.
    assert!(ok(&data, &["rm", "course/base:1"]).contains("untagged course/base:1"));
    assert!(ok(&data, &["rm", "course/base:stable"]).contains(&format!("removed {digest}")));
    assert!(ok(&data, &["gc"]).contains("removed 1 layers"));
    assert_eq!(ok(&data, &["ls", "--json"]).trim(), "[]");
}

#[test]
fn a_relative_data_folder_gives_sandboxes_absolute_layer_folders() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    rootfs_tar(&tmp.path().join("root.tar"));
    let run = |args: &[&str]| {
        corral_testkit::succeed(
            Command::new(env!("CARGO_BIN_EXE_corral"))
                .current_dir(tmp.path())
                .args(["env", "--data", "rel-data"])
                .args(args),
        )
    };
    run(&["import", "root.tar", "--name", "rel"]);
    let v: serde_json::Value = serde_json::from_str(&run(&["inspect", "rel"])).unwrap();
    let layer = Path::new(v["layer_dirs"][0].as_str().unwrap());
    assert!(layer.is_absolute(), "{layer:?}");
    assert!(layer.starts_with(tmp.path().join("rel-data")), "{layer:?}");
}

#[test]
fn reading_a_data_folder_without_a_store_leaves_it_as_it_is() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let data = tmp.path().join("data");
    assert_eq!(ok(&data, &["ls", "--json"]).trim(), "[]");
    assert!(ok(&data, &["ls"]).starts_with("NAME"));
    assert!(ok(&data, &["du"]).contains("no image store in"));
    assert!(ok(&data, &["gc"]).contains("no image store in"));
    for args in [&["inspect", "x"][..], &["rm", "x"], &["tag", "x", "y"]] {
        let out = corral(&data, args);
        // The folder the command line names has no store: a usage error.
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("no image store in"),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(!data.exists(), "a reading command made {}", data.display());
}

/// An image without a name is printed as its digest alone: `env import` of a root filesystem
/// without --name, and `env build` of a file without `name` or --name, printed "DIGEST " with
/// a space after it.
#[test]
fn an_image_without_a_name_is_its_digest_alone() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let data = tmp.path().join("data");
    let root = tmp.path().join("root.tar");
    rootfs_tar(&root);
    let out = ok(&data, &["import", root.to_str().unwrap()]);
    assert!(
        out.starts_with("sha256:")
            && out.ends_with('\n')
            && !out.trim_end_matches('\n').contains(' '),
        "{out:?}"
    );
    ok(
        &data,
        &["import", root.to_str().unwrap(), "--name", "base:1"],
    );
    let file = tmp.path().join("build.yaml");
    std::fs::write(&file, "from: base:1\nsteps:\n  - env: {A: \"1\"}\n").unwrap();
    let out = ok(&data, &["build", file.to_str().unwrap()]);
    assert!(
        out.starts_with("sha256:") && !out.trim_end_matches('\n').contains(' '),
        "{out:?}"
    );
}

/// Every argument of `corral env rm` has help text.
#[test]
fn env_rm_says_what_its_refs_are() {
    let out = Command::new(env!("CARGO_BIN_EXE_corral"))
        .args(["env", "rm", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    let line = help
        .lines()
        .find(|l| l.trim_start().starts_with("<REF>..."))
        .unwrap_or_else(|| panic!("{help}"));
    assert!(line.contains("a name") && line.contains("digest"), "{help}");
}
