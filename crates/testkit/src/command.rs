//! Running a command that must succeed, or that prints one JSON document.

use std::process::Command;

/// Runs `cmd` and returns what it printed on stdout; the test fails, showing its stderr, when
/// it did not exit 0.
pub fn succeed(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Runs `cmd`, which prints one JSON document: its exit code, the document, and stdout as
/// printed. The test fails, showing stdout and stderr, when stdout is not JSON or `cmd` was
/// killed by a signal.
pub fn json_output(cmd: &mut Command) -> (i32, serde_json::Value, String) {
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let json = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "{cmd:?}: not JSON ({e}):\n{stdout}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let code = out
        .status
        .code()
        .unwrap_or_else(|| panic!("{cmd:?}: {}", out.status));
    (code, json, stdout)
}
