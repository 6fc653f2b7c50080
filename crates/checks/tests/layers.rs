//! The crate's modules form layers: `scripts/module-cycles` finds no import cycle among them, and
//! does find one when a lower module imports a higher one.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs the script on a crate's source folder: (exit code, output).
fn module_cycles(src: &Path) -> (i32, String) {
    let out = Command::new("python3")
        .arg(root().join("scripts/module-cycles"))
        .arg(src)
        .output()
        .expect("python3 runs");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn modules_import_no_importer() {
    let (code, text) = module_cycles(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("no cycle"), "{text}");
}

#[test]
fn an_injected_cycle_is_found() {
    // A copy of the sources where the suite model imports the engine, which imports the model.
    let tmp = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    copy(&src, tmp.path());
    let model = tmp.path().join("suite/mod.rs");
    let text = std::fs::read_to_string(&model).unwrap();
    std::fs::write(&model, text + "\nuse crate::engine::GradeOptions;\n").unwrap();
    let (code, text) = module_cycles(tmp.path());
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("engine -> suite -> engine") || text.contains("suite -> engine -> suite"),
        "{text}"
    );
}

fn copy(from: &Path, to: &Path) {
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&dst).unwrap();
            copy(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), dst).unwrap();
        }
    }
}
