//! A real registry for tests: Debian's `docker-registry` (`scripts/setup` installs it) on a free
//! loopback port, storing under a test's folder, stopped when dropped.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// A running registry at `addr` (`127.0.0.1:PORT`, plain HTTP) storing under `root`.
pub struct Registry {
    child: Child,
    pub addr: String,
    pub root: PathBuf,
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback port nothing listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts a registry storing under `dir`; `auth` is extra YAML for its `auth:` section.
pub fn start_registry(dir: &Path, auth: &str) -> Registry {
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let root = dir.join("storage");
    let config = format!(
        "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {addr}\n{auth}",
        root.display()
    );
    let cfg = dir.join("registry.yml");
    std::fs::write(&cfg, config).unwrap();
    let log = std::fs::File::create(dir.join("registry.log")).unwrap();
    let child = Command::new("docker-registry")
        .arg("serve")
        .arg(&cfg)
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("docker-registry (scripts/setup installs it)");
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(&addr).is_err() {
        assert!(
            Instant::now() < deadline,
            "registry did not start: {}",
            std::fs::read_to_string(dir.join("registry.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Registry { child, addr, root }
}
