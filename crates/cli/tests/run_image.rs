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

/// An image's loader, libraries and `/etc/ld.so.preload` never run in the init under gVisor:
/// runsc starts the init inside the image's root, and a dynamically linked init loaded by the
/// image's loader ran the image's preload library as PID 1, root in gVisor's kernel, before any
/// of its confinement ("PRELOADED pid=1" on stderr). The init now comes with the host's loader
/// and libraries, and the image's preload file is hidden. Also: an image with no glibc at all
/// (static busybox only) runs under gVisor, which it could not when the init needed the
/// image's libraries.
#[test]
fn an_images_loader_and_preload_never_run_in_the_gvisor_init() {
    let t = tempfile::tempdir().unwrap();
    let busybox = std::path::Path::new("/bin/busybox");
    assert!(
        busybox.exists(),
        "busybox-static is installed (scripts/setup)"
    );
    let make_root = |name: &str, with_glibc: bool| -> std::path::PathBuf {
        let root = t.path().join(name);
        std::fs::create_dir_all(root.join("bin")).unwrap();
        std::fs::create_dir_all(root.join("etc")).unwrap();
        std::fs::copy(busybox, root.join("bin/busybox")).unwrap();
        std::os::unix::fs::symlink("busybox", root.join("bin/sh")).unwrap();
        std::os::unix::fs::symlink("busybox", root.join("bin/cat")).unwrap();
        if with_glibc {
            // Every library corral's binary needs, at the host's paths: the image's own copies
            // of what a dynamically loaded init would use.
            let ldd = Command::new("ldd")
                .arg(env!("CARGO_BIN_EXE_corral"))
                .output()
                .unwrap();
            for line in String::from_utf8_lossy(&ldd.stdout).lines() {
                let path = line
                    .split_whitespace()
                    .find(|w| w.starts_with('/'))
                    .map(std::path::PathBuf::from);
                if let Some(p) = path {
                    let dst = root.join(p.strip_prefix("/").unwrap());
                    std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
                    std::fs::copy(&p, &dst).unwrap();
                }
            }
            let src = t.path().join("preload.c");
            std::fs::write(
                &src,
                "#include <stdio.h>\n#include <unistd.h>\n\
                 __attribute__((constructor)) static void c(int argc, char **argv) {\n\
                 fprintf(stderr, \"PRELOADED pid=%d argv0=%s\\n\", getpid(), argc > 0 ? argv[0] : \"\");\n}\n",
            )
            .unwrap();
            std::fs::create_dir_all(root.join("usr/lib")).unwrap();
            let so = root.join("usr/lib/preload.so");
            corral_testkit::succeed(
                Command::new("gcc")
                    .args(["-shared", "-fPIC", "-o"])
                    .arg(&so)
                    .arg(&src),
            );
            std::fs::write(root.join("etc/ld.so.preload"), "/usr/lib/preload.so\n").unwrap();
        }
        let tar = t.path().join(format!("{name}.tar"));
        common::image::tar_folder(&root, &tar);
        tar
    };
    let data = t.path().join("data");
    common::image::import(&data, "test/preload:1", &make_root("preload", true));
    common::image::import(&data, "test/static:1", &make_root("static", false));
    for image in ["test/preload:1", "test/static:1"] {
        let out = corral()
            .args([
                "run",
                "--json",
                "--runtime",
                "gvisor",
                "--image",
                image,
                "--data",
            ])
            .arg(&data)
            .args(["--", "/bin/sh", "-c", "echo ran; cat /etc/ld.so.preload"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{image}: {e}: {stderr}"));
        assert!(
            !stderr.contains("PRELOADED") && !v["stderr"].as_str().unwrap().contains("PRELOADED"),
            "{image}: the image's preload library ran: {stderr} {v}"
        );
        assert_eq!(v["runtime"], "gvisor", "{image}: {v}");
        // Ran, and the preload file is not there.
        assert_eq!(v["stdout"], "ran\n", "{image}: {v} {stderr}");
    }
}

/// `corral languages` tests an image language where its programs run: a required program is
/// looked up in the image (`requires` was skipped for image languages, so one without it was
/// listed available), and the version command runs under the language's runtime (it ran
/// natively, so a language whose gVisor runs fail was listed available).
#[test]
fn image_languages_are_probed_in_their_image_and_runtime() {
    let t = tempfile::tempdir().unwrap();
    let langs = t.path().join("languages.toml");
    std::fs::write(
        &langs,
        format!(
            "[languages.needs_tool]\nname = \"t\"\nsource = \"m.sh\"\nrun = \"sh m.sh\"\n\
             image = \"{NAME}\"\nrequires = [\"sh\", \"no-such-tool-here\"]\n\
             [languages.py_gvisor]\nname = \"p\"\nsource = \"m.py\"\nrun = \"python3 m.py\"\n\
             image = \"{NAME}\"\nruntime = \"gvisor\"\nversion = \"python3 -c 'import os; print(os.uname().release)'\"\n"
        ),
    )
    .unwrap();
    let out = corral()
        .args(["languages", "--json", "--languages"])
        .arg(&langs)
        .arg("--data")
        .arg(data_dir())
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let of = |id: &str| {
        v.as_array()
            .unwrap()
            .iter()
            .find(|l| l["id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("{id} not listed: {v}"))
    };
    let needs = of("needs_tool");
    assert_eq!(needs["available"], false, "{needs}");
    assert!(
        needs["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("no-such-tool-here not found in the image"),
        "{needs}"
    );
    // gVisor's kernel answers uname with its own release (4.4.0), the host's does not.
    let py = of("py_gvisor");
    assert_eq!(py["available"], true, "{py}");
    assert_eq!(py["version"], "4.4.0", "{py}");
}
