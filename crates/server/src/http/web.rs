//! The browser editor (`web/`), embedded in the binary at build time (`build.rs` includes every
//! file of `web/dist`) and served at `/` (the editor) and `/staff.html` (the staff page), with its
//! hashed assets under `/assets/`.
//!
//! The pages get their own Content-Security-Policy: scripts only from this server (no inline
//! script, no `eval`), connections only back to it (the API and `/ws`), nothing from elsewhere.
//! Inline *styles* are allowed because the editor and terminal libraries set them at run time.

use axum::extract::Path;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use crate::error::ApiError;
use crate::state::SharedState;

mod bundle {
    include!(concat!(env!("OUT_DIR"), "/web_assets.rs"));
}

/// The pages' policy: see the module documentation.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
     img-src 'self' data:; font-src 'self'; connect-src 'self'; manifest-src 'self'; \
     base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The embedded file at `path` (below `web/dist`).
pub fn asset(path: &str) -> Option<&'static [u8]> {
    bundle::ASSETS
        .iter()
        .find(|(p, _)| *p == path)
        .map(|(_, b)| *b)
}

/// Every embedded path.
pub fn paths() -> impl Iterator<Item = &'static str> {
    bundle::ASSETS.iter().map(|(p, _)| *p)
}

pub fn content_type(path: &str) -> &'static str {
    match path.rsplit('.').next().unwrap_or("") {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "woff2" => "font/woff2",
        "woff" => "font/woff",
        "ttf" => "font/ttf",
        "json" | "map" => "application/json",
        "webmanifest" => "application/manifest+json",
        "txt" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

fn serve(path: &str) -> Response {
    let Some(body) = asset(path) else {
        return ApiError::not_found(format!("no file /{path}")).into_response();
    };
    // Hashed asset names never change content: cache for good. Pages are checked every time.
    let cache = if path.starts_with("assets/") {
        "public, max-age=31536000, immutable"
    } else {
        "no-cache"
    };
    let mut r = (StatusCode::OK, body).into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(content_type(path)),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    r
}

async fn index() -> Response {
    serve("index.html")
}

async fn staff() -> Response {
    serve("staff.html")
}

async fn favicon() -> Response {
    serve("favicon.svg")
}

async fn assets(Path(path): Path<String>) -> Response {
    if path
        .split('/')
        .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return ApiError::not_found("no such file").into_response();
    }
    serve(&format!("assets/{path}"))
}

/// The editor's routes (public: the page asks for a token itself).
pub fn routes() -> Router<SharedState> {
    Router::new()
        .route("/", get(index))
        .route("/index.html", get(index))
        .route("/staff", get(staff))
        .route("/staff.html", get(staff))
        .route("/favicon.svg", get(favicon))
        .route("/assets/{*path}", get(assets))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundle_is_embedded() {
        let index = std::str::from_utf8(asset("index.html").expect("web/dist/index.html")).unwrap();
        assert!(asset("staff.html").is_some());
        // Every script and stylesheet the pages name is in the bundle, and none is inline.
        for page in ["index.html", "staff.html"] {
            let html = std::str::from_utf8(asset(page).unwrap()).unwrap();
            for part in html.split("<script").skip(1) {
                let tag = &part[..part.find('>').unwrap()];
                assert!(
                    tag.contains("src=\"/"),
                    "{page}: an inline script: <script{tag}>"
                );
            }
            for attr in ["src=\"/", "href=\"/"] {
                for part in html.split(attr).skip(1) {
                    let path = &part[..part.find('"').unwrap()];
                    let path = if path.is_empty() { "index.html" } else { path };
                    assert!(
                        asset(path).is_some(),
                        "{page} names /{path}, not in the bundle"
                    );
                }
            }
            assert!(!html.contains("http://") && !html.contains("https://"));
        }
        assert!(index.contains("id=\"run\""));
        assert!(paths().any(|p| p.starts_with("assets/") && p.ends_with(".js")));
        assert_eq!(
            content_type("assets/x.js"),
            "text/javascript; charset=utf-8"
        );
        assert_eq!(content_type("index.html"), "text/html; charset=utf-8");
    }

    /// The committed bundle was built from the committed sources: `web/dist.sha256` (written by
    /// `npm run build`) is the hash of the sources, computed here the same way as
    /// `web/scripts/stamp.mjs` does.
    #[test]
    fn the_committed_bundle_matches_the_sources() {
        let web = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../web");
        let mut files = Vec::new();
        fn walk(root: &std::path::Path, p: &std::path::Path, out: &mut Vec<String>) {
            let Ok(md) = std::fs::metadata(p) else { return };
            if md.is_dir() {
                for e in std::fs::read_dir(p).unwrap().flatten() {
                    walk(root, &e.path(), out);
                }
            } else if md.is_file() {
                out.push(p.strip_prefix(root).unwrap().to_string_lossy().into_owned());
            }
        }
        for s in [
            "index.html",
            "staff.html",
            "package.json",
            "package-lock.json",
            "vite.config.ts",
            "tsconfig.json",
            "src",
            "public",
        ] {
            walk(&web, &web.join(s), &mut files);
        }
        files.sort();
        let mut all = Vec::new();
        for f in &files {
            let data = std::fs::read(web.join(f)).unwrap();
            all.extend_from_slice(format!("{f}\0{}\0", data.len()).as_bytes());
            all.extend_from_slice(&data);
        }
        let hash = corral_store::sha256_hex(&all);
        let recorded = std::fs::read_to_string(web.join("dist.sha256")).unwrap_or_default();
        assert_eq!(
            recorded.trim(),
            hash,
            "web/dist is stale: the sources under web/ changed since the bundle was built; run \
             `npm ci && npm run build` in web/ and commit web/dist and web/dist.sha256"
        );
    }
}
