//! Settings that normally come from the environment ([`ENV_VERSION`], [`ENV_PARENT`]).

use crate::error::Error;
use crate::model::Version;

/// Environment variable forcing the cgroup version (`v1` or `v2`).
pub const ENV_VERSION: &str = "CORRAL_CGROUP_VERSION";
/// Environment variable overriding corral's base cgroup (a path relative to the mount root, used
/// for every hierarchy), e.g. a cgroup delegated to corral by the administrator.
pub const ENV_PARENT: &str = "CORRAL_CGROUP_PARENT";

/// Settings that normally come from the environment, injectable for tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// Force a version instead of choosing ([`ENV_VERSION`]).
    pub version: Option<Version>,
    /// Use this cgroup path (relative to every mount root) as corral's base ([`ENV_PARENT`]),
    /// normalised to `/a/b` form.
    pub parent: Option<String>,
}

impl Options {
    /// Reads [`ENV_VERSION`] and [`ENV_PARENT`]; empty values count as unset.
    pub fn from_env() -> Result<Options, Error> {
        let version = match std::env::var(ENV_VERSION) {
            Ok(v) if !v.trim().is_empty() => {
                Some(v.parse::<Version>().map_err(|reason| Error::Config {
                    var: ENV_VERSION,
                    value: v.clone(),
                    reason,
                })?)
            }
            _ => None,
        };
        let parent = match std::env::var(ENV_PARENT) {
            Ok(p) if !p.trim().is_empty() => Some(normalize_parent(&p)?),
            _ => None,
        };
        Ok(Options { version, parent })
    }
}

/// Normalises a cgroup path given by the user to `/a/b` form, rejecting `.`/`..` so the base
/// cannot escape the mount.
pub fn normalize_parent(p: &str) -> Result<String, Error> {
    let mut parts = Vec::new();
    for c in p.split('/').filter(|c| !c.is_empty()) {
        if c == "." || c == ".." {
            return Err(Error::Config {
                var: ENV_PARENT,
                value: p.to_owned(),
                reason: "`.` and `..` are not allowed".to_owned(),
            });
        }
        parts.push(c);
    }
    Ok(format!("/{}", parts.join("/")))
}
