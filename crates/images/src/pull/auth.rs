//! Registry credentials (never from the command line) and the `WWW-Authenticate` challenge.
//!
//! Credentials: `CORRAL_REGISTRY_USER` + `CORRAL_REGISTRY_PASSWORD` for the one registry
//! `CORRAL_REGISTRY_HOST` names (`host[:port]` as in image references; without it they are used
//! for none, so a registry an image reference names cannot harvest them), else the entry for the
//! registry in a Docker `config.json`-format file (`--auth-file`, else `CORRAL_REGISTRY_AUTH`,
//! else `$HOME/.docker/config.json`): `{"auths": {"HOST[:PORT]": {"auth": base64(user:pass)}}}`
//! or `{"username", "password"}` in the entry.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use base64::Engine;
use serde::Deserialize;

use crate::error::Error;

#[derive(Clone)]
pub struct Credentials {
    pub user: String,
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credentials({}, ****)", self.user)
    }
}

#[derive(Deserialize)]
struct ConfigFile {
    #[serde(default)]
    auths: HashMap<String, Entry>,
}

#[derive(Deserialize)]
struct Entry {
    auth: Option<String>,
    username: Option<String>,
    password: Option<String>,
}

/// The auth file to read: the flag, else `CORRAL_REGISTRY_AUTH`, else Docker's default.
pub fn auth_file(flag: Option<&Path>) -> Option<PathBuf> {
    flag.map(Path::to_path_buf)
        .or_else(|| std::env::var_os("CORRAL_REGISTRY_AUTH").map(PathBuf::from))
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".docker/config.json")))
}

/// Whether `host` (as an admin wrote it: `host[:port]`, perhaps with a scheme or a trailing
/// slash) names `registry` (as a parsed reference has it; Docker Hub's is `registry-1.docker.io`,
/// which `docker.io` and `index.docker.io` also name).
fn names_registry(host: &str, registry: &str) -> bool {
    let host = host
        .trim()
        .trim_start_matches("https://")
        .trim_start_matches("http://")
        .trim_end_matches('/');
    host.eq_ignore_ascii_case(registry)
        || (registry == "registry-1.docker.io"
            && ["docker.io", "index.docker.io"]
                .iter()
                .any(|h| host.eq_ignore_ascii_case(h)))
}

/// `CORRAL_REGISTRY_USER`/`_PASSWORD`, when both are set and `CORRAL_REGISTRY_HOST` names
/// `registry`.
fn env_credentials(registry: &str) -> Option<Credentials> {
    let (Ok(user), Ok(password)) = (
        std::env::var("CORRAL_REGISTRY_USER"),
        std::env::var("CORRAL_REGISTRY_PASSWORD"),
    ) else {
        return None;
    };
    let host = std::env::var("CORRAL_REGISTRY_HOST").ok()?;
    names_registry(&host, registry).then_some(Credentials { user, password })
}

/// Why the environment's credentials are not used for `registry` when they are set but not for
/// it: told in a warning and in an "authentication required" error.
pub fn env_note(registry: &str) -> Option<String> {
    if std::env::var_os("CORRAL_REGISTRY_USER").is_none()
        || std::env::var_os("CORRAL_REGISTRY_PASSWORD").is_none()
    {
        return None;
    }
    match std::env::var("CORRAL_REGISTRY_HOST") {
        Ok(host) if names_registry(&host, registry) => None,
        Ok(host) => Some(format!(
            "CORRAL_REGISTRY_USER/PASSWORD are for {:?} (CORRAL_REGISTRY_HOST), not {registry}, so they were not sent",
            host.trim()
        )),
        Err(_) => Some(format!(
            "CORRAL_REGISTRY_USER/PASSWORD are set but not used: set CORRAL_REGISTRY_HOST to the registry they are for (e.g. {registry}); without it they are sent to no registry"
        )),
    }
}

/// Credentials for `registry` (`host[:port]`), if any are configured.
pub fn credentials(registry: &str, file: Option<&Path>) -> Result<Option<Credentials>, Error> {
    if let Some(c) = env_credentials(registry) {
        return Ok(Some(c));
    }
    if let Some(note) = env_note(registry) {
        tracing::warn!("registry {registry}: {note}");
    }
    let Some(path) = file else { return Ok(None) };
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::Credentials(format!("{}: {e}", path.display()))),
    };
    let cfg: ConfigFile = serde_json::from_slice(&bytes)
        .map_err(|e| Error::Credentials(format!("{}: {e}", path.display())))?;
    let entry = cfg.auths.iter().find(|(k, _)| {
        let k = k
            .trim_start_matches("https://")
            .trim_start_matches("http://");
        k.split('/').next() == Some(registry)
    });
    let Some((_, entry)) = entry else {
        return Ok(None);
    };
    if let (Some(user), Some(password)) = (&entry.username, &entry.password) {
        return Ok(Some(Credentials {
            user: user.clone(),
            password: password.clone(),
        }));
    }
    let Some(auth) = &entry.auth else {
        return Ok(None);
    };
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(auth.trim())
        .map_err(|_| {
            Error::Credentials(format!(
                "{}: the auth entry for {registry} is not base64",
                path.display()
            ))
        })?;
    let decoded = String::from_utf8(decoded)
        .map_err(|_| Error::Credentials("auth entry is not UTF-8".into()))?;
    let (user, password) = decoded.split_once(':').ok_or_else(|| {
        Error::Credentials(format!(
            "{}: the auth entry for {registry} is not user:password",
            path.display()
        ))
    })?;
    Ok(Some(Credentials {
        user: user.into(),
        password: password.into(),
    }))
}

/// A parsed `WWW-Authenticate` header.
#[derive(Debug, PartialEq, Eq)]
pub enum Challenge {
    Basic,
    Bearer {
        realm: String,
        service: Option<String>,
        scope: Option<String>,
    },
}

pub fn parse_challenge(h: &str) -> Option<Challenge> {
    let (scheme, params) = h.trim().split_once(' ').unwrap_or((h.trim(), ""));
    if scheme.eq_ignore_ascii_case("basic") {
        return Some(Challenge::Basic);
    }
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let mut map = HashMap::new();
    let mut rest = params;
    while let Some((k, v)) = rest.split_once('=') {
        let k = k.trim().trim_start_matches(',').trim().to_ascii_lowercase();
        let v = v.trim_start();
        let (value, after) = if let Some(stripped) = v.strip_prefix('"') {
            let end = stripped.find('"')?;
            (&stripped[..end], &stripped[end + 1..])
        } else {
            let end = v.find(',').unwrap_or(v.len());
            (&v[..end], &v[end..])
        };
        map.insert(k, value.to_string());
        rest = after;
    }
    Some(Challenge::Bearer {
        realm: map.remove("realm")?,
        service: map.remove("service"),
        scope: map.remove("scope"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registry_host_names_its_registry_only() {
        assert!(names_registry("registry.lab:5000", "registry.lab:5000"));
        assert!(names_registry(
            " https://Registry.lab:5000/ ",
            "registry.lab:5000"
        ));
        assert!(!names_registry("registry.lab:5000", "registry.lab:5001"));
        assert!(!names_registry("registry.lab", "registry.lab:5000"));
        assert!(!names_registry("registry.lab:5000", "evil.example"));
        assert!(names_registry("docker.io", "registry-1.docker.io"));
        assert!(!names_registry("docker.io", "evil.example"));
    }

    #[test]
    fn parses_bearer_challenges() {
        let c = parse_challenge(
            r#"Bearer realm="http://127.0.0.1:1/token",service="reg",scope="repository:a/b:pull""#,
        )
        .unwrap();
        assert_eq!(
            c,
            Challenge::Bearer {
                realm: "http://127.0.0.1:1/token".into(),
                service: Some("reg".into()),
                scope: Some("repository:a/b:pull".into())
            }
        );
        assert_eq!(
            parse_challenge(r#"Basic realm="x""#),
            Some(Challenge::Basic)
        );
    }
}
