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
use serde::{Deserialize, Serialize};

/// The scanner, run with `/usr/bin/python3 -I -B -c SCANNER RULES` in the submission's folder.
pub const SCANNER: &str = include_str!("safety_scan.py");

/// mograder's list and a few more modules that reach the system or the interpreter's guts.
pub const DEFAULT_DENY_IMPORTS: &[&str] = &[
    "os",
    "sys",
    "subprocess",
    "socket",
    "shutil",
    "ctypes",
    "importlib",
    "multiprocessing",
    "signal",
    "pty",
    "pickle",
    "marshal",
    "builtins",
    "urllib",
    "http",
    "requests",
];
pub const DEFAULT_DENY_CALLS: &[&str] = &["eval", "exec", "compile", "__import__"];
pub const DEFAULT_DENY_ATTRIBUTES: &[&str] =
    &["__subclasses__", "__globals__", "__builtins__", "__code__"];

/// `safety: true`, or the rules.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum RawSafety {
    On(bool),
    Rules(RawRules),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRules {
    #[serde(default)]
    deny_imports: Option<Vec<String>>,
    #[serde(default)]
    deny_calls: Option<Vec<String>>,
    #[serde(default)]
    deny_attributes: Option<Vec<String>>,
    #[serde(default)]
    on_violation: Option<String>,
}

/// The scan's rules.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SafetyConfig {
    pub deny_imports: Vec<String>,
    pub deny_calls: Vec<String>,
    pub deny_attributes: Vec<String>,
    /// `true` (default): a submission with findings is not run and gets no points (mograder's
    /// behaviour); `false`: findings are only reported.
    pub enforce: bool,
}

impl Default for SafetyConfig {
    fn default() -> Self {
        let v = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
        SafetyConfig {
            deny_imports: v(DEFAULT_DENY_IMPORTS),
            deny_calls: v(DEFAULT_DENY_CALLS),
            deny_attributes: v(DEFAULT_DENY_ATTRIBUTES),
            enforce: true,
        }
    }
}

impl SafetyConfig {
    pub(crate) fn resolve(raw: RawSafety) -> Result<Option<SafetyConfig>, String> {
        let r = match raw {
            RawSafety::On(false) => return Ok(None),
            RawSafety::On(true) => return Ok(Some(SafetyConfig::default())),
            RawSafety::Rules(r) => r,
        };
        let d = SafetyConfig::default();
        let enforce = match r.on_violation.as_deref() {
            None | Some("fail") => true,
            Some("flag") => false,
            Some(o) => return Err(format!("on_violation: {o:?} must be `fail` or `flag`")),
        };
        for (key, list) in [
            ("deny_imports", &r.deny_imports),
            ("deny_calls", &r.deny_calls),
            ("deny_attributes", &r.deny_attributes),
        ] {
            for (i, name) in list.iter().flatten().enumerate() {
                let ok = !name.is_empty()
                    && name.split('.').all(|p| {
                        !p.is_empty() && p.chars().all(|c| c.is_alphanumeric() || c == '_')
                    });
                if !ok {
                    return Err(format!("{key}[{i}]: {name:?} is not a Python name"));
                }
            }
        }
        Ok(Some(SafetyConfig {
            deny_imports: r.deny_imports.unwrap_or(d.deny_imports),
            deny_calls: r.deny_calls.unwrap_or(d.deny_calls),
            deny_attributes: r.deny_attributes.unwrap_or(d.deny_attributes),
            enforce,
        }))
    }
}

/// One thing the scan found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    pub path: String,
    pub line: u64,
    pub column: u64,
    /// `import`, `call`, `attribute`, `name` or `unanalysable`.
    pub kind: String,
    pub name: String,
}

/// A file the scan could not parse (a syntax error is not a finding: such code cannot run).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScanError {
    pub path: String,
    pub message: String,
}

/// The `safety` section of a report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SafetyReport {
    /// No finding.
    pub ok: bool,
    /// The checks were not run because of the findings.
    pub enforced: bool,
    /// Python files parsed.
    pub scanned: u64,
    pub findings: Vec<Finding>,
    pub errors: Vec<ScanError>,
    /// Set when the scan itself could not be done (the submission is then not run when enforced).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

impl SafetyReport {
    /// One line per finding, for people.
    pub fn describe(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .findings
            .iter()
            .map(|f| {
                let what = match f.kind.as_str() {
                    "import" => format!("imports {}", f.name),
                    "call" => format!("calls {}()", f.name),
                    "attribute" => format!("uses .{}", f.name),
                    "name" => format!("uses {}", f.name),
                    "unanalysable" => format!("could not be analysed ({})", f.name),
                    other => format!("{other} {}", f.name),
                };
                format!("{}:{}:{}: {what}", f.path, f.line, f.column)
            })
            .collect();
        if let Some(f) = &self.failure {
            out.push(format!("the scan failed: {f}"));
        }
        out
    }

    /// The checks must not run.
    pub fn blocks(&self) -> bool {
        self.enforced && (!self.ok || self.failure.is_some())
    }
}

#[derive(Deserialize)]
struct ScanOutput {
    scanned: u64,
    findings: Vec<Finding>,
    errors: Vec<ScanError>,
}

/// Scans the submission folder in a pooled sandbox.
pub fn scan(pool: &Arc<Pool>, cfg: &SafetyConfig, submission: &Path) -> SafetyReport {
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
        crate::pytest::PYTHON.into(),
        "-I".into(),
        "-B".into(),
        "-c".into(),
        SCANNER.into(),
        rules.to_string(),
    ]);
    spec.limits = limits.clone();
    let shape = SandboxConfig::offline(Vec::new(), limits.disk.bytes());
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
