//! Image references: `NAME[:TAG]`, `NAME@sha256:…`, `sha256:…`, or a ≥12-hex digest prefix.

use crate::digest::{excerpt, Digest};
use crate::error::Error;

/// A parsed reference, before it is looked up in a store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ref {
    /// A full name with its tag (`:latest` added when none was given).
    Name(String),
    /// A digest, with the name it was written with, if any.
    Digest(Option<String>, Digest),
    /// Lowercase hex digits (12–63) that must start exactly one image's digest.
    Prefix(String),
}

/// The shortest digest prefix accepted.
pub const MIN_PREFIX: usize = 12;

impl Ref {
    pub fn parse(s: &str) -> Result<Ref, Error> {
        let bad = || Error::BadReference(excerpt(s));
        if let Some((name, digest)) = s.split_once('@') {
            let name = normalise_name(name).ok_or_else(bad)?;
            return Ok(Ref::Digest(Some(name), Digest::parse(digest)?));
        }
        if let Some(hex) = s.strip_prefix("sha256:") {
            if hex.len() == 64 {
                return Ok(Ref::Digest(None, Digest::from_hex(hex)?));
            }
            return prefix(hex).ok_or_else(bad);
        }
        if let Some(p) = prefix(s) {
            return Ok(p);
        }
        normalise_name(s).map(Ref::Name).ok_or_else(bad)
    }
}

fn prefix(hex: &str) -> Option<Ref> {
    let ok = (MIN_PREFIX..=64).contains(&hex.len())
        && hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    ok.then(|| Ref::Prefix(hex.to_string()))
}

/// `repo/path[:tag]` with `:latest` added; lowercase letters, digits, `._-/` in the path, and an
/// optional `host[:port]/` first component. `None` if the name is not one.
pub fn normalise_name(s: &str) -> Option<String> {
    if s.is_empty() || s.len() > 255 {
        return None;
    }
    let last_slash = s.rfind('/').map_or(0, |i| i + 1);
    let (path, tag) = match s[last_slash..].rfind(':') {
        Some(i) => (&s[..last_slash + i], &s[last_slash + i + 1..]),
        None => (s, "latest"),
    };
    let tag_ok = !tag.is_empty()
        && tag.len() <= 128
        && tag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        && !tag.starts_with(['.', '-']);
    // A lone name of 12 to 64 hex digits reads as a digest (or its prefix): an archive's own
    // name must never take over the way `corral env ls` names an image (Docker refuses a
    // 64-hex repository name for the same reason).
    if !path.contains('/') && prefix(path).is_some() {
        return None;
    }
    let mut comps = path.split('/').peekable();
    let mut first = true;
    while let Some(c) = comps.next() {
        let is_host = first
            && comps.peek().is_some()
            && (c.contains('.') || c.contains(':') || c == "localhost");
        let ok = if is_host {
            // `host[:port]`, the host starting and ending with a letter or digit (as Docker's
            // grammar: no `..` or `-x.` host).
            let (host, port) = c.split_once(':').unwrap_or((c, "1"));
            let edges = |h: &str| {
                h.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
                    && h.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric())
            };
            edges(host)
                && host
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b".-".contains(&b))
                && !port.is_empty()
                && port.bytes().all(|b| b.is_ascii_digit())
        } else {
            !c.is_empty()
                && c.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
                && c.as_bytes()[0].is_ascii_alphanumeric()
        };
        if !ok {
            return None;
        }
        first = false;
    }
    tag_ok.then(|| format!("{path}:{tag}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_form() {
        assert_eq!(
            Ref::parse("python").unwrap(),
            Ref::Name("python:latest".into())
        );
        assert_eq!(
            Ref::parse("127.0.0.1:5000/a/b:3.12").unwrap(),
            Ref::Name("127.0.0.1:5000/a/b:3.12".into())
        );
        let d = format!("sha256:{}", "a".repeat(64));
        assert!(matches!(Ref::parse(&d).unwrap(), Ref::Digest(None, _)));
        assert!(
            matches!(Ref::parse(&format!("x/y@{d}")).unwrap(), Ref::Digest(Some(n), _) if n == "x/y:latest")
        );
        assert_eq!(
            Ref::parse("0123456789ab").unwrap(),
            Ref::Prefix("0123456789ab".into())
        );
        assert!(Ref::parse("UPPER").is_err());
        // A name that reads as a digest or its prefix is none: hex is always a digest.
        for hexname in ["0123456789ab:latest", &format!("{}:v1", "a".repeat(64))] {
            assert!(Ref::parse(hexname).is_err(), "{hexname}");
            assert_eq!(normalise_name(hexname), None, "{hexname}");
        }
        assert_eq!(
            normalise_name("course/0123456789ab").as_deref(),
            Some("course/0123456789ab:latest"),
            "a path is no digest"
        );
        assert_eq!(
            normalise_name("0123456789a").as_deref(),
            Some("0123456789a:latest"),
            "shorter than a prefix"
        );
        assert!(Ref::parse("a/../b").is_err());
        for bad in ["../x", "..:5000/x", "-a.b/x", "a.b:/x", "a.b:5x/y"] {
            assert_eq!(normalise_name(bad), None, "{bad}");
        }
        assert_eq!(
            normalise_name("localhost:5000/a").as_deref(),
            Some("localhost:5000/a:latest")
        );
        assert!(Ref::parse("a:").is_err());
    }
}
