//! The optional static safety check (mograder's `--safety-check`): before any check runs, the
//! submission's Python files are scanned for denied imports, calls (`eval`, `exec`, `compile`,
//! `__import__`) and attributes (`__subclasses__`, `__globals__`, …).
//!
//! It is a best-effort heuristic that catches the obvious, never a substitute for the sandbox:
//! `getattr(builtins, "ev" + "al")`, `importlib` tricks through an allowed module, or code loaded
//! from a data file all pass it. Every check still runs in a sandbox whatever the scan says.
//!
//! The scan parses untrusted code, so it runs inside a sandbox with `/usr/bin/python3`'s own
//! `ast` module ([`SCANNER`]) rather than in this process: Python's parser is the reference for
//! Python syntax (no drift between what is scanned and what runs), and a hostile file (deep
//! nesting, huge literals) can at worst exhaust that sandbox's limits, never crash or stall the
//! grader. Parsing with a Rust crate in the host process would put a recursive-descent parser's
//! stack within reach of a submission.

use std::path::Path;
use std::sync::Arc;

use corral_sandbox::{Limits, Millis, NoSink, Pool, RunSpec, SandboxConfig, Size, Status};
use serde::Deserialize;

use crate::report::{Finding, SafetyReport, ScanError};
use crate::shared::python::PYTHON;
use crate::suite::safety::SafetyConfig;

/// The scanner, run with `/usr/bin/python3 -I -B -c SCANNER RULES` in the submission's folder.
pub const SCANNER: &str = include_str!("safety_scan.py");

#[derive(Deserialize)]
struct ScanOutput {
    scanned: u64,
    findings: Vec<Finding>,
    errors: Vec<ScanError>,
}

/// Scans the submission folder in a pooled sandbox.
pub fn scan(
    pool: &Arc<Pool>,
    cfg: &SafetyConfig,
    submission: &Path,
    runtime: corral_sandbox::Runtime,
) -> SafetyReport {
    let limits = Limits {
        cpu_time: Millis::ms(10_000),
        wall_time: Millis::ms(20_000),
        memory: Size::mib(512),
        output: Size::mib(4),
        ..Limits::default()
    };
    let mut report = SafetyReport {
        ok: false,
        enforced: cfg.enforce,
        scanned: 0,
        findings: Vec::new(),
        errors: Vec::new(),
        failure: None,
    };
    let rules = serde_json::json!({
        "deny_imports": cfg.deny_imports,
        "deny_calls": cfg.deny_calls,
        "deny_attributes": cfg.deny_attributes,
    });
    let mut spec = RunSpec::new(vec![
        PYTHON.into(),
        "-I".into(),
        "-B".into(),
        "-c".into(),
        SCANNER.into(),
        rules.to_string(),
    ]);
    spec.limits = limits.clone();
    let shape = SandboxConfig {
        runtime,
        ..SandboxConfig::offline(Vec::new(), limits.disk.bytes())
    };
    let outcome = match pool.lease(&shape) {
        Ok(mut lease) => {
            let sb = lease.sandbox();
            match sb.copy_in(submission) {
                Ok(()) => sb.run(&spec, &mut NoSink),
                Err(e) => {
                    report.failure = Some(format!("copying the submission: {e}"));
                    return report;
                }
            }
        }
        Err(e) => {
            report.failure = Some(format!("sandbox error: {e}"));
            return report;
        }
    };
    if outcome.status != Status::Ok {
        report.failure = Some(
            outcome
                .reason()
                .or_else(|| outcome.error.clone())
                .unwrap_or_else(|| outcome.status.as_str().to_string()),
        );
        return report;
    }
    match serde_json::from_slice::<ScanOutput>(&outcome.stdout.bytes) {
        Ok(o) => {
            report.ok = o.findings.is_empty();
            report.scanned = o.scanned;
            report.findings = o.findings;
            report.errors = o.errors;
        }
        Err(e) => report.failure = Some(format!("the scanner's output is malformed: {e}")),
    }
    report
}
