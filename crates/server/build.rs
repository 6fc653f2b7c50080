//! Embeds the browser editor's built bundle (`web/dist`, committed; `npm run build` in `web/`
//! remakes it) into the binary: one `include_bytes!` per file, listed in `$OUT_DIR/web_assets.rs`.

use std::path::{Path, PathBuf};

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
    let mut code = String::from("/// The editor's bundle: (path below web/dist, contents).\npub static ASSETS: &[(&str, &[u8])] = &[\n");
    for (rel, path) in &files {
        let abs = path.canonicalize().expect("a file just listed");
        code.push_str(&format!(
            "    ({rel:?}, include_bytes!({:?})),\n",
            abs.display().to_string()
        ));
    }
    code.push_str("];\n");
    let out =
        PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets it")).join("web_assets.rs");
    std::fs::write(out, code).expect("writing web_assets.rs");
}
