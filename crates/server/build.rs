//! Embeds the browser editor's built bundle (`web/dist`, committed; `npm run build` in `web/`
//! remakes it) into the binary: one `include_bytes!` per file, listed in `$OUT_DIR/web_assets.rs`,
//! with a gzipped copy of each text file that compression makes notably smaller (the editor's
//! script is ~1.3 MB, ~0.43 MB gzipped), made once here rather than on every request.

use std::io::Write;
use std::path::{Path, PathBuf};

/// Text types worth compressing; images and fonts are compressed already.
fn compressible(rel: &str) -> bool {
    matches!(
        rel.rsplit('.').next().unwrap_or(""),
        "html" | "js" | "mjs" | "css" | "svg" | "json" | "map" | "txt" | "webmanifest"
    )
}

/// `data` gzipped, when that saves at least a tenth of it and 256 bytes.
fn gzipped(data: &[u8]) -> Option<Vec<u8>> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(data).ok()?;
    let out = gz.finish().ok()?;
    (out.len() + 256 <= data.len() && out.len() * 10 <= data.len() * 9).then_some(out)
}

fn walk(dir: &Path, base: &Path, out: &mut Vec<(String, PathBuf)>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = rd.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let p = e.path();
        let Ok(ft) = e.file_type() else { continue };
        if ft.is_dir() {
            walk(&p, base, out);
        } else if ft.is_file() {
            let rel = p.strip_prefix(base).expect("below the base");
            let rel = rel.to_string_lossy().replace('\\', "/");
            out.push((rel, p));
        }
    }
}

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let dist = manifest.join("../../web/dist");
    println!("cargo:rerun-if-changed={}", dist.display());
    let mut files = Vec::new();
    walk(&dist, &dist, &mut files);
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets it"));
    let gz_dir = out_dir.join("web_gz");
    let _ = std::fs::remove_dir_all(&gz_dir);
    let mut code = String::from(
        "/// A file of the editor's bundle: its path below web/dist, contents, gzipped contents.\npub type Asset = (&'static str, &'static [u8], Option<&'static [u8]>);\n/// The editor's bundle.\npub static ASSETS: &[Asset] = &[\n",
    );
    for (n, (rel, path)) in files.iter().enumerate() {
        let abs = path.canonicalize().expect("a file just listed");
        let data = std::fs::read(&abs).expect("reading a file of web/dist");
        let gz = match compressible(rel).then(|| gzipped(&data)).flatten() {
            Some(bytes) => {
                std::fs::create_dir_all(&gz_dir).expect("making $OUT_DIR/web_gz");
                let file = gz_dir.join(format!("{n}.gz"));
                std::fs::write(&file, bytes).expect("writing a gzipped asset");
                format!("Some(include_bytes!({:?}))", file.display().to_string())
            }
            None => "None".to_string(),
        };
        code.push_str(&format!(
            "    ({rel:?}, include_bytes!({:?}), {gz}),\n",
            abs.display().to_string()
        ));
    }
    code.push_str("];\n");
    std::fs::write(out_dir.join("web_assets.rs"), code).expect("writing web_assets.rs");
}
