//! A blocking OCI distribution client: `/v2/…` requests with the auth dance, manifests read with a
//! size cap, and blobs downloaded to `.part` files that a later pull continues with `Range`.

use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

use reqwest::blocking::{Client, RequestBuilder, Response};
use reqwest::header::{ACCEPT, RANGE, WWW_AUTHENTICATE};
use reqwest::{StatusCode, Url};

use super::auth::{parse_challenge, Challenge, Credentials};
use super::reference::RemoteRef;
use super::steady::Steady;
use crate::digest::{excerpt, Digest};
use crate::error::Error;
use crate::error::IoContext;
use crate::oci::{DOCKER_LIST, DOCKER_MANIFEST, MAX_DOCUMENT, OCI_INDEX, OCI_MANIFEST};

/// Bytes of an error answer's body read (its first 300 characters are shown).
const MAX_ERROR_BODY: u64 = 64 << 10;
/// Bytes of a token service's reply read at most.
const MAX_TOKEN_REPLY: u64 = 1 << 20;

pub struct Registry {
    http: Client,
    base: String,
    /// `base` parsed: the origin (scheme, host, port) Basic credentials may go to over plain HTTP.
    origin: Url,
    remote: RemoteRef,
    creds: Option<Credentials>,
    /// Why credentials set in the environment were not used for this registry (for errors).
    creds_note: Option<String>,
    bearer: Option<String>,
    basic: bool,
    /// How long a reply may stall (see [`Steady`]).
    stall: Duration,
}

#[derive(Deserialize)]
struct TokenReply {
    token: Option<String>,
    access_token: Option<String>,
}

use serde::Deserialize;

impl Registry {
    /// `stall`: how long the registry may be silent (or nearly so) before a request fails.
    pub fn new(
        remote: &RemoteRef,
        insecure: bool,
        creds: Option<Credentials>,
        stall: Duration,
    ) -> Result<Registry, Error> {
        let scheme = if insecure { "http" } else { "https" };
        let base = format!("{scheme}://{}", remote.registry);
        let origin = Url::parse(&base).map_err(|e| Error::Registry {
            registry: remote.registry.clone(),
            reason: format!("{base}: {e}"),
        })?;
        // A redirect may lead to https anywhere (a CDN holding the blobs), or within the registry's
        // own origin (a plain-HTTP registry listed as insecure): never from https down to plain
        // HTTP, nor to another plain-HTTP host.
        let home = origin.clone();
        let redirects = reqwest::redirect::Policy::custom(move |attempt| {
            if attempt.previous().len() >= 10 {
                attempt.error("more than 10 redirects")
            } else if attempt.url().scheme() == "https" || same_origin(attempt.url(), &home) {
                attempt.follow()
            } else {
                let refused = format!(
                    "redirect to {} refused: only https, or {home} itself, is followed",
                    attempt.url()
                );
                attempt.error(refused)
            }
        });
        let http = Client::builder()
            .redirect(redirects)
            .connect_timeout(Duration::from_secs(30))
            // The blocking client's timeout bounds the wait for the answer's headers and each
            // read of its body, not the whole download.
            .timeout(stall)
            .user_agent(concat!("corral/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| Error::Registry {
                registry: remote.registry.clone(),
                reason: e.to_string(),
            })?;
        Ok(Registry {
            http,
            base,
            origin,
            remote: remote.clone(),
            creds_note: if creds.is_none() {
                super::auth::env_note(&remote.registry)
            } else {
                None
            },
            creds,
            bearer: None,
            basic: false,
            stall,
        })
    }

    fn err(&self, reason: impl std::fmt::Display) -> Error {
        Error::Registry {
            registry: self.remote.registry.clone(),
            reason: reason.to_string(),
        }
    }

    /// Whether credentials may be sent to `url`: over https, or to the registry's own origin (a
    /// plain-HTTP registry listed as insecure may answer its own token requests).
    fn trusted(&self, url: &Url) -> bool {
        url.scheme() == "https" || same_origin(url, &self.origin)
    }

    /// " (…)" telling why environment credentials were not sent, or nothing.
    fn note(&self) -> String {
        self.creds_note
            .as_ref()
            .map(|n| format!(" ({n})"))
            .unwrap_or_default()
    }

    fn authorise(&self, rb: RequestBuilder) -> RequestBuilder {
        match (&self.bearer, &self.creds) {
            (Some(t), _) => rb.bearer_auth(t),
            (None, Some(c)) if self.basic => rb.basic_auth(&c.user, Some(&c.password)),
            _ => rb,
        }
    }

    /// GET `path` (under `/v2/`), answering one auth challenge if the registry sends one.
    fn get(
        &mut self,
        path: &str,
        accept: Option<&str>,
        range_from: u64,
    ) -> Result<Response, Error> {
        let url = format!("{}/v2/{}", self.base, path);
        for attempt in 0..2 {
            let mut rb = self.authorise(self.http.get(&url));
            if let Some(a) = accept {
                rb = rb.header(ACCEPT, a);
            }
            if range_from > 0 {
                rb = rb.header(RANGE, format!("bytes={range_from}-"));
            }
            let resp = rb
                .send()
                .map_err(|e| self.err(format!("GET {url}: {}", with_sources(&e))))?;
            if resp.status() != StatusCode::UNAUTHORIZED || attempt == 1 {
                return self.check(resp, &url);
            }
            let challenge = resp
                .headers()
                .get(WWW_AUTHENTICATE)
                .and_then(|h| h.to_str().ok())
                .and_then(parse_challenge);
            match challenge {
                Some(Challenge::Basic) if self.creds.is_some() => self.basic = true,
                Some(Challenge::Bearer { realm, service, scope }) => self.fetch_token(&realm, service, scope)?,
                _ => return Err(self.err(format!("authentication required: give credentials (CORRAL_REGISTRY_USER/PASSWORD with CORRAL_REGISTRY_HOST={}, or --auth-file){}", self.remote.registry, self.note()))),
            }
        }
        unreachable!("the loop returns on its second attempt")
    }

    fn check(&self, resp: Response, url: &str) -> Result<Response, Error> {
        let status = resp.status();
        if status.is_success() {
            return Ok(resp);
        }
        // A redirect the policy did not follow (to plain HTTP elsewhere, to `file://`) comes
        // back as it is: say where it pointed.
        let location = resp
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .map(excerpt);
        // A hostile registry's body may never end: read a little of it, then hang up.
        let mut bytes = Vec::new();
        let _ = Steady::new(resp.take(MAX_ERROR_BODY), self.stall).read_to_end(&mut bytes);
        let body: String = String::from_utf8_lossy(&bytes).chars().take(300).collect();
        let hint = match status {
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                format!(" (check the credentials){}", self.note())
            }
            StatusCode::NOT_FOUND => " (no such repository, tag or blob)".into(),
            s if s.is_redirection() => match location {
                Some(to) => format!(
                    " (a redirect to {to}, not followed: only https, or {} itself, is)",
                    self.base
                ),
                None => " (a redirect without a Location)".into(),
            },
            _ => String::new(),
        };
        Err(self.err(format!("GET {url}: {status}{hint}: {}", excerpt(&body))))
    }

    fn fetch_token(
        &mut self,
        realm: &str,
        service: Option<String>,
        scope: Option<String>,
    ) -> Result<(), Error> {
        let scope = scope.unwrap_or_else(|| format!("repository:{}:pull", self.remote.repository));
        let mut query = vec![("scope", scope)];
        if let Some(s) = service {
            query.push(("service", s));
        }
        let url = Url::parse(realm)
            .map_err(|e| self.err(format!("the token realm {realm:?} is not a URL: {e}")))?;
        let mut rb = self.http.get(url.clone()).query(&query);
        let mut withheld = String::new();
        if let Some(c) = &self.creds {
            if self.trusted(&url) {
                rb = rb.basic_auth(&c.user, Some(&c.password));
            } else {
                withheld = format!(
                    "; the credentials were not sent: the realm is neither https nor {}",
                    self.base
                );
            }
        }
        let resp = rb
            .send()
            .map_err(|e| self.err(format!("token from {realm}: {}", with_sources(&e))))?;
        if !resp.status().is_success() {
            return Err(self.err(format!(
                "token from {realm}: {} (check the credentials{withheld}){}",
                resp.status(),
                self.note()
            )));
        }
        let mut body = Vec::new();
        Steady::new(resp.take(MAX_TOKEN_REPLY + 1), self.stall)
            .read_to_end(&mut body)
            .map_err(|e| self.err(format!("token from {realm}: {e}")))?;
        if body.len() as u64 > MAX_TOKEN_REPLY {
            return Err(self.err(format!(
                "token from {realm}: the reply is larger than {MAX_TOKEN_REPLY} bytes"
            )));
        }
        let reply: TokenReply = serde_json::from_slice(&body)
            .map_err(|e| self.err(format!("token from {realm}: not a token reply: {e}")))?;
        self.bearer = Some(
            reply
                .token
                .or(reply.access_token)
                .ok_or_else(|| self.err("the token reply has no token"))?,
        );
        Ok(())
    }

    /// The manifest or index `reference` (tag or digest): its bytes, checked against the digest
    /// when one was asked for.
    pub fn manifest(&mut self, reference: &str) -> Result<(Vec<u8>, Digest), Error> {
        let accept = [OCI_INDEX, OCI_MANIFEST, DOCKER_LIST, DOCKER_MANIFEST].join(", ");
        let path = format!("{}/manifests/{reference}", self.remote.repository);
        let resp = self.get(&path, Some(&accept), 0)?;
        let mut body = Vec::new();
        Steady::new(resp.take(MAX_DOCUMENT + 1), self.stall)
            .read_to_end(&mut body)
            .map_err(|e| self.err(format!("manifest {reference}: {}", with_sources(&e))))?;
        if body.len() as u64 > MAX_DOCUMENT {
            return Err(self.err(format!(
                "manifest {reference} is larger than {MAX_DOCUMENT} bytes"
            )));
        }
        let actual = Digest::of_bytes(&body);
        if let Ok(expected) = Digest::parse(reference) {
            if expected != actual {
                return Err(Error::digest_mismatch(
                    format!("manifest {reference}"),
                    &expected,
                    &actual,
                ));
            }
        }
        Ok((body, actual))
    }

    /// A short name of where blobs come from (registry and repository), for partial files.
    pub fn source_key(&self) -> String {
        let source = format!("{}/{}", self.remote.registry, self.remote.repository);
        Digest::of_bytes(source.as_bytes()).hex()[..12].to_string()
    }

    /// Downloads blob `digest` (`size` bytes) into `part`, continuing a partial file.
    pub fn download(&mut self, digest: &Digest, size: u64, part: &Path) -> Result<(), Error> {
        let have = std::fs::metadata(part).map(|m| m.len()).unwrap_or(0);
        if have > size {
            std::fs::remove_file(part).at(part)?;
        }
        let have = have.min(size);
        if have == size && size > 0 {
            return Ok(());
        }
        let path = format!("{}/blobs/{digest}", self.remote.repository);
        let resp = self.get(&path, None, have)?;
        // A 206 continues the file only when it starts where the file ends (`Content-Range:
        // bytes HAVE-…`); any other answer is the whole blob again.
        let resumed = resp.status() == StatusCode::PARTIAL_CONTENT
            && resp
                .headers()
                .get(reqwest::header::CONTENT_RANGE)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|r| r.starts_with(&format!("bytes {have}-")));
        if resp.status() == StatusCode::PARTIAL_CONTENT && !resumed {
            let _ = std::fs::remove_file(part);
            return Err(self.err(format!(
                "blob {digest}: a partial answer that does not start at byte {have} (run the pull again to start over)"
            )));
        }
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(resumed)
            .write(true)
            .truncate(!resumed)
            .open(part)
            .at(part)?;
        let start = if resumed { have } else { 0 };
        // One byte more than is due, to tell a blob larger than stated.
        let mut body = Steady::new(resp.take((size - start).saturating_add(1)), self.stall);
        let mut buf = vec![0u8; 256 << 10];
        let mut got = start;
        loop {
            let n = body.read(&mut buf).map_err(|e| {
                self.err(format!(
                    "blob {digest}: {} (run the pull again to continue)",
                    with_sources(&e)
                ))
            })?;
            if n == 0 {
                break;
            }
            got += n as u64;
            if got > size {
                drop(f);
                let _ = std::fs::remove_file(part);
                return Err(self.err(format!(
                    "blob {digest} is larger than the {size} bytes its descriptor says"
                )));
            }
            f.write_all(&buf[..n]).at(part)?;
        }
        f.sync_all().at(part)?;
        if got < size {
            return Err(self.err(format!("blob {digest}: connection ended after {got} of {size} bytes (run the pull again to continue)")));
        }
        Ok(())
    }
}

/// `e` and what caused it ("error following redirect" alone does not say why it was refused).
fn with_sources(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(s) = next {
        let s_text = s.to_string();
        if !out.contains(&s_text) {
            out.push_str(": ");
            out.push_str(&s_text);
        }
        next = s.source();
    }
    out
}

/// Whether `a` and `b` have the same scheme, host and port (a missing port being the scheme's).
fn same_origin(a: &Url, b: &Url) -> bool {
    a.scheme() == b.scheme()
        && a.host_str().map(str::to_ascii_lowercase) == b.host_str().map(str::to_ascii_lowercase)
        && a.port_or_known_default() == b.port_or_known_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_compare_scheme_host_and_port() {
        let u = |s: &str| Url::parse(s).unwrap();
        assert!(same_origin(
            &u("http://Reg.lab:5000/token"),
            &u("http://reg.lab:5000")
        ));
        assert!(same_origin(
            &u("https://reg.lab/t"),
            &u("https://reg.lab:443")
        ));
        assert!(!same_origin(
            &u("http://reg.lab:5001/t"),
            &u("http://reg.lab:5000")
        ));
        assert!(!same_origin(
            &u("http://other:5000/t"),
            &u("http://reg.lab:5000")
        ));
        assert!(!same_origin(
            &u("http://reg.lab:443/t"),
            &u("https://reg.lab")
        ));
    }
}
