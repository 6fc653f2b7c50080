//! `host[:port]/repo[:tag]` or `host[:port]/repo@sha256:…`, as `docker pull` reads them.

use crate::digest::{excerpt, Digest};
use crate::error::Error;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteRef {
    /// `host[:port]` as written (Docker Hub's is `registry-1.docker.io`).
    pub registry: String,
    pub repository: String,
    pub tag: Option<String>,
    pub digest: Option<Digest>,
}

impl RemoteRef {
    pub fn parse(s: &str) -> Result<RemoteRef, Error> {
        let bad = || Error::BadReference(excerpt(s));
        let (rest, digest) = match s.split_once('@') {
            Some((r, d)) => (r, Some(Digest::parse(d)?)),
            None => (s, None),
        };
        let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
        let (path, tag) = match rest[last_slash..].rfind(':') {
            Some(i) => (
                &rest[..last_slash + i],
                Some(rest[last_slash + i + 1..].to_string()),
            ),
            None => (rest, None),
        };
        let (registry, repository) = match path.split_once('/') {
            Some((h, r)) if h.contains('.') || h.contains(':') || h == "localhost" => {
                (h.to_string(), r.to_string())
            }
            _ if path.contains('/') => ("registry-1.docker.io".to_string(), path.to_string()),
            _ => (
                "registry-1.docker.io".to_string(),
                format!("library/{path}"),
            ),
        };
        let tag = if digest.is_none() {
            Some(tag.unwrap_or_else(|| "latest".into()))
        } else {
            tag
        };
        // The name this image gets in the store must itself be valid.
        crate::store::refs::normalise_name(&format!(
            "{registry}/{repository}:{}",
            tag.as_deref().unwrap_or("latest")
        ))
        .ok_or_else(bad)?;
        Ok(RemoteRef {
            registry,
            repository,
            tag,
            digest,
        })
    }

    /// What `/v2/REPO/manifests/…` is asked for: the digest when given, else the tag.
    pub fn reference(&self) -> String {
        match (&self.digest, &self.tag) {
            (Some(d), _) => d.to_string(),
            (None, Some(t)) => t.clone(),
            (None, None) => "latest".into(),
        }
    }

    /// The store name for a pull by tag (`host/repo:tag`); a pull by digest is named by digest only.
    pub fn store_name(&self) -> Option<String> {
        match (&self.digest, &self.tag) {
            (None, Some(t)) => Some(format!("{}/{}:{t}", self.registry, self.repository)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_hosts_tags_and_digests() {
        let r = RemoteRef::parse("127.0.0.1:5000/course/py:3.12").unwrap();
        assert_eq!(
            (r.registry.as_str(), r.repository.as_str(), r.tag.as_deref()),
            ("127.0.0.1:5000", "course/py", Some("3.12"))
        );
        let r = RemoteRef::parse("python").unwrap();
        assert_eq!(
            (r.registry.as_str(), r.repository.as_str()),
            ("registry-1.docker.io", "library/python")
        );
        let d = format!("sha256:{}", "b".repeat(64));
        let r = RemoteRef::parse(&format!("localhost:5000/x@{d}")).unwrap();
        assert_eq!(r.reference(), d);
        assert_eq!(r.store_name(), None);
    }
}
