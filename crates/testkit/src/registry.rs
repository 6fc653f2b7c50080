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
///
/// A port from [`free_port`] is free only when asked: tests running side by side can be handed
/// the same one, and a connect to a loopback port in the ephemeral range can even reach itself
/// (TCP simultaneous open). So "something accepts on the port" is not proof; the registry counts
/// as started only when it is still running and answers `/v2/` as a registry does — otherwise a
/// fresh port is tried.
pub fn start_registry(dir: &Path, auth: &str) -> Registry {
    let root = dir.join("storage");
    let cfg = dir.join("registry.yml");
    let log_path = dir.join("registry.log");
    for _attempt in 0..5 {
        let port = free_port();
        let addr = format!("127.0.0.1:{port}");
        let config = format!(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {addr}\n{auth}",
            root.display()
        );
        std::fs::write(&cfg, config).unwrap();
        let log = std::fs::File::create(&log_path).unwrap();
        let mut child = Command::new("docker-registry")
            .arg("serve")
            .arg(&cfg)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("docker-registry (scripts/setup installs it)");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                assert!(
                    log.contains("address already in use"),
                    "registry exited ({status}): {log}"
                );
                break; // another listener took the port first: try a new one
            }
            if answers_as_registry(&addr) {
                return Registry { child, addr, root };
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "registry did not start: {}",
                    std::fs::read_to_string(&log_path).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    panic!("registry: five free ports were taken before it could listen");
}

/// Whether `addr` answers `GET /v2/` with the distribution API's header (a 200, or a 401 when
/// the registry wants a token: both carry it).
fn answers_as_registry(addr: &str) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(addr) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"GET /v2/ HTTP/1.0\r\nHost: registry\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut reply = Vec::new();
    let _ = s.read_to_end(&mut reply);
    String::from_utf8_lossy(&reply)
        .to_ascii_lowercase()
        .contains("docker-distribution-api-version")
}
