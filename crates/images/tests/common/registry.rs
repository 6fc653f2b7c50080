//! Around the real registry of `corral_testkit::registry`: `skopeo` pushes, and a token server
//! (JWTs signed with `openssl`) for `auth: token`.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};

pub fn skopeo_push(layout: &Path, dest: &str, extra: &[&str]) {
    let out = Command::new("skopeo")
        .args(["--insecure-policy", "copy", "-q", "--dest-tls-verify=false"])
        .args(extra)
        .arg(format!("oci:{}:v1", layout.display()))
        .arg(format!("docker://{dest}"))
        .stderr(Stdio::piped())
        .output()
        .expect("skopeo (scripts/setup installs it)");
    assert!(
        out.status.success(),
        "skopeo push {dest}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A token server that also forwards every other request to the registry [`TokenServer::front`]
/// names: the registry is reached at `addr` and its token realm is on its own host:port, as behind
/// a reverse proxy (corral sends Basic credentials over plain HTTP to no other realm).
pub struct TokenServer {
    pub addr: String,
    registry: std::sync::Arc<std::sync::OnceLock<String>>,
}

impl TokenServer {
    /// Forwards requests other than `/token…` to the registry at `registry_addr`.
    pub fn front(&self, registry_addr: &str) {
        self.registry.set(registry_addr.to_string()).unwrap();
    }
}

fn b64url(b: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b)
}

fn sign_token(dir: &Path, scope: &str) -> String {
    let pem = std::fs::read_to_string(dir.join("cert.pem")).unwrap();
    let der_b64: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    let header = serde_json::json!({"typ": "JWT", "alg": "RS256", "x5c": [der_b64]});
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let mut access = Vec::new();
    if let Some(rest) = scope.strip_prefix("repository:") {
        if let Some((name, actions)) = rest.rsplit_once(':') {
            access.push(serde_json::json!({"type": "repository", "name": name, "actions": actions.split(',').collect::<Vec<_>>()}));
        }
    }
    let claims = serde_json::json!({"iss": "corral-test", "sub": "tester", "aud": "corral-registry", "exp": now + 600,
                                    "nbf": now - 10, "iat": now, "jti": format!("{now}-{}", rand_id()), "access": access});
    let signing_input = format!(
        "{}.{}",
        b64url(header.to_string().as_bytes()),
        b64url(claims.to_string().as_bytes())
    );
    let input = dir.join(format!("input-{}", rand_id()));
    std::fs::write(&input, &signing_input).unwrap();
    let out = Command::new("openssl")
        .arg("dgst")
        .arg("-sha256")
        .arg("-sign")
        .arg(dir.join("key.pem"))
        .arg(&input)
        .output()
        .unwrap();
    assert!(out.status.success());
    format!("{signing_input}.{}", b64url(&out.stdout))
}

fn rand_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

pub fn start_token_server(dir: &Path, user: &'static str, password: &'static str) -> TokenServer {
    use base64::Engine;
    use std::io::{BufRead, BufReader, Write};
    let st = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=corral-test-token",
        ])
        .arg("-keyout")
        .arg(dir.join("key.pem"))
        .arg("-out")
        .arg(dir.join("cert.pem"))
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let dir = dir.to_path_buf();
    let expected = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
    );
    let registry = std::sync::Arc::new(std::sync::OnceLock::<String>::new());
    let backend = registry.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let (dir, expected, backend) = (dir.clone(), expected.clone(), backend.clone());
            std::thread::spawn(move || {
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut request_line = String::new();
                let _ = reader.read_line(&mut request_line);
                let mut authorised = false;
                let mut forwarded = request_line.clone();
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
                        break;
                    }
                    if let Some((k, v)) = line.split_once(':') {
                        if k.eq_ignore_ascii_case("authorization") && v.trim() == expected {
                            authorised = true;
                        }
                        if !k.eq_ignore_ascii_case("connection") {
                            forwarded.push_str(&line);
                        }
                    }
                }
                let target = request_line.split_whitespace().nth(1).unwrap_or("");
                if !target.starts_with("/token") {
                    // One request per connection: the registry closes it after answering.
                    let Some(reg) = backend.get() else { return };
                    let Ok(mut up) = std::net::TcpStream::connect(reg) else {
                        return;
                    };
                    forwarded.push_str("Connection: close\r\n\r\n");
                    if up.write_all(forwarded.as_bytes()).is_ok() {
                        let _ = std::io::copy(&mut up, &mut conn);
                    }
                    return;
                }
                let query = target.split_once('?').map_or("", |(_, q)| q);
                let scope = query
                    .split('&')
                    .filter_map(|kv| kv.split_once('='))
                    .find(|(k, _)| *k == "scope")
                    .map(|(_, v)| {
                        v.replace("%3A", ":")
                            .replace("%2F", "/")
                            .replace("%2C", ",")
                            .replace("%3a", ":")
                            .replace("%2f", "/")
                            .replace("%2c", ",")
                    })
                    .unwrap_or_default();
                let reply = if authorised {
                    let body = serde_json::json!({"token": sign_token(&dir, &scope)}).to_string();
                    format!("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len())
                } else {
                    "HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                        .to_string()
                };
                let _ = conn.write_all(reply.as_bytes());
            });
        }
    });
    TokenServer { addr, registry }
}

/// The `auth:` section of a registry config using `tokens` (certificate in `dir`).
pub fn token_auth_config(tokens: &TokenServer, dir: &Path) -> String {
    format!(
        "auth:\n  token:\n    realm: http://{}/token\n    service: corral-registry\n    issuer: corral-test\n    rootcertbundle: {}\n",
        tokens.addr,
        dir.join("cert.pem").display()
    )
}
