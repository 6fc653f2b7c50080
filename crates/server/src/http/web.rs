//! The browser editor (`web/`), embedded in the binary at build time (`build.rs` includes every
//! file of `web/dist`) and served at `/` (the editor) and `/staff.html` (the staff page), with its
//! hashed assets under `/assets/`.
//!
//! The pages get their own Content-Security-Policy: scripts only from this server (no inline
//! script, no `eval`), connections only back to it (the API and `/ws`), nothing from elsewhere.
//! Inline *styles* are allowed because the editor and terminal libraries set them at run time.

use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use crate::error::ApiError;
use crate::http::path::Path;
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
        .find(|(p, _, _)| *p == path)
        .map(|(_, b, _)| *b)
}

/// The gzipped copy of the embedded file at `path`, made at build time for text files that
/// compress well.
pub fn asset_gzipped(path: &str) -> Option<&'static [u8]> {
    bundle::ASSETS
        .iter()
        .find(|(p, _, _)| *p == path)
        .and_then(|(_, _, gz)| *gz)
}

/// Every embedded path.
pub fn paths() -> impl Iterator<Item = &'static str> {
    bundle::ASSETS.iter().map(|(p, _, _)| *p)
}

/// Whether the request's `Accept-Encoding` takes gzip: `gzip`, `x-gzip` or `*` listed without
/// `q=0` (RFC 9110 §12.5.3; a client that sends none gets the file as it is).
pub fn accepts_gzip(headers: &HeaderMap) -> bool {
    let mut gzip = None;
    let mut any = None;
    for value in headers.get_all(header::ACCEPT_ENCODING) {
        let Ok(text) = value.to_str() else { continue };
        for item in text.split(',') {
            let mut parts = item.split(';');
            let coding = parts.next().unwrap_or("").trim().to_ascii_lowercase();
            let allowed = parts
                .filter_map(|p| p.trim().strip_prefix("q=").or(p.trim().strip_prefix("Q=")))
                .all(|q| q.trim().parse::<f32>().is_ok_and(|q| q > 0.0));
            match coding.as_str() {
                "gzip" | "x-gzip" => gzip = Some(allowed && gzip.unwrap_or(true)),
                "*" => any = Some(allowed),
                _ => {}
            }
        }
    }
    gzip.or(any).unwrap_or(false)
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

fn serve(path: &str, request: &HeaderMap) -> Response {
    let Some(raw) = asset(path) else {
        return ApiError::not_found(format!("no file /{path}")).into_response();
    };
    let gzipped = asset_gzipped(path);
    let body = match gzipped {
        Some(gz) if accepts_gzip(request) => gz,
        _ => raw,
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
    if gzipped.is_some() {
        // Caches must keep the two encodings apart.
        h.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
        if !std::ptr::eq(body, raw) {
            h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        }
    }
    r
}

async fn index(headers: HeaderMap) -> Response {
    serve("index.html", &headers)
}

async fn staff(headers: HeaderMap) -> Response {
    serve("staff.html", &headers)
}

async fn favicon(headers: HeaderMap) -> Response {
    serve("favicon.svg", &headers)
}

async fn assets(Path(path): Path<String>, headers: HeaderMap) -> Response {
    if path
        .split('/')
        .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return ApiError::not_found("no such file").into_response();
    }
    serve(&format!("assets/{path}"), &headers)
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

    #[test]
    fn gzip_is_taken_only_when_the_client_accepts_it() {
        let h = |v: &[&str]| {
            let mut m = HeaderMap::new();
            for v in v {
                m.append(header::ACCEPT_ENCODING, HeaderValue::from_str(v).unwrap());
            }
            accepts_gzip(&m)
        };
        assert!(h(&["gzip, deflate, br, zstd"]));
        assert!(h(&["br;q=1.0, GZIP;q=0.5"]));
        assert!(h(&["deflate", "x-gzip"]));
        assert!(h(&["*"]));
        assert!(!h(&[]));
        assert!(!h(&["identity"]));
        assert!(!h(&["br, deflate"]));
        assert!(!h(&["gzip;q=0"]));
        assert!(
            !h(&["gzip;q=0.000, *"]),
            "a refusal of gzip itself wins over *"
        );
        assert!(!h(&["*;q=0"]));
        // The editor's script has its gzipped copy, and it is the same file.
        let js = paths()
            .find(|p| {
                p.starts_with("assets/") && p.ends_with(".js") && asset(p).unwrap().len() > 100_000
            })
            .expect("the editor's script");
        let gz = asset_gzipped(js).expect("a gzipped copy of the script");
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(gz), &mut out).unwrap();
        assert_eq!(out, asset(js).unwrap());
        assert!(gz.len() * 2 < out.len(), "{} of {}", gz.len(), out.len());
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
