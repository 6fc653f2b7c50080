//! A real minimal Debian root (`mmdebstrap --variant=minbase bookworm`, Debian's packages), built
//! once and cached in /var/tmp/corral-test-cache (keyed by the arguments).

use std::path::{Path, PathBuf};
use std::process::Command;

const ARGS: [&str; 2] = ["--variant=minbase", "bookworm"];

/// The root-filesystem tar, built on first use (needs Debian's mirror).
pub fn debian_tar() -> PathBuf {
    let cache = Path::new("/var/tmp/corral-test-cache");
    std::fs::create_dir_all(cache).unwrap();
    let path = cache.join("mmdebstrap-minbase-bookworm.tar");
    if !path.is_file() {
        let partial = cache.join(format!("mmdebstrap-{}.tar.partial", std::process::id()));
        let st = Command::new("mmdebstrap")
            .args(["--quiet"])
            .args(ARGS)
            .arg(&partial)
            .status()
            .expect("mmdebstrap (scripts/setup installs it)");
        assert!(
            st.success(),
            "mmdebstrap failed (it needs Debian's package mirror)"
        );
        std::fs::rename(&partial, &path).unwrap();
    }
    path
}
