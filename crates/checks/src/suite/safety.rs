//! The static safety check's rules (`safety:` in a suite), mograder's `--safety-check`: which
//! imports, calls and attributes a submission's Python files may not use. The scan itself is
//! [`crate::safety_scan`].
//!
//! ```yaml
//! safety: true                                  # the default rules
//! safety: {deny_imports: [os], on_violation: flag}
//! ```

use serde::{Deserialize, Serialize};

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
#[derive(Debug)]
pub(crate) enum RawSafety {
    On(bool),
    Rules(RawRules),
}

// By hand rather than `untagged`: serde's untagged enums say "data did not match any variant
// of untagged enum RawSafety", and serde_yaml loses the line of the value inside one.
impl<'de> Deserialize<'de> for RawSafety {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = RawSafety;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(
                    "true, false, or the rules: {deny_imports: [...], deny_calls: [...], \
                     deny_attributes: [...], on_violation: fail or flag}",
                )
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<RawSafety, E> {
                Ok(RawSafety::On(v))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<RawSafety, A::Error> {
                RawRules::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(RawSafety::Rules)
            }
        }
        d.deserialize_any(V)
    }
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
