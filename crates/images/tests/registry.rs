//! Pulls from a real registry (Debian's `docker-registry`, the CNCF distribution registry) started
//! on loopback by the test; images made offline and pushed with `skopeo` as OCI and as Docker
//! schema 2, gzip and zstd layers.

mod common;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use corral_images::{pull, PullOptions, Store};

struct Registry {
    child: Child,
    addr: String,
    root: PathBuf,
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts a registry storing under `dir`; `auth` is extra YAML for its `auth:` section.
fn start_registry(dir: &Path, auth: &str) -> Registry {
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

fn skopeo_push(layout: &Path, dest: &str, extra: &[&str]) {
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

fn layers() -> Vec<Vec<u8>> {
    two_layers("noise", &noise(300_000))
}

/// Incompressible bytes, so a gzip'd layer stays large enough to be cut in half.
fn noise(n: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn insecure() -> PullOptions {
    PullOptions {
        insecure: true,
        auth_file: Some(PathBuf::from("/nonexistent")),
        progress: None,
    }
}

fn registry_blob(reg: &Registry, digest: &str) -> PathBuf {
    let hex = &digest[7..];
    reg.root
        .join("docker/registry/v2/blobs/sha256")
        .join(&hex[..2])
        .join(hex)
        .join("data")
}

#[test]
fn pulls_oci_and_docker_images_by_tag_and_digest_and_refuses_tampering() {
    let tmp = scratch();
    let reg = start_registry(tmp.path(), "");
    let expected: Vec<String> = layers().iter().map(|l| sha(l)).collect();
    let gz = tmp.path().join("gz");
    let manifest = oci_layout(&gz, &layers(), "gzip", "v1");
    let zs = tmp.path().join("zs");
    oci_layout(&zs, &layers(), "zstd", "v1");
    skopeo_push(&gz, &format!("{}/course/oci:v1", reg.addr), &[]);
    skopeo_push(
        &gz,
        &format!("{}/course/docker:v1", reg.addr),
        &["--format", "v2s2"],
    );
    skopeo_push(&zs, &format!("{}/course/zstd:v1", reg.addr), &[]);

    let store = Store::open(&tmp.path().join("data")).unwrap();
    // Without --insecure, plain HTTP is not tried.
    let e = pull(
        &store,
        &format!("{}/course/oci:v1", reg.addr),
        &PullOptions::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("https://"), "{e}");

    let r = pull(&store, &format!("{}/course/oci:v1", reg.addr), &insecure()).unwrap();
    assert_eq!(
        r.digest.to_string(),
        manifest,
        "the OCI manifest is stored as pushed"
    );
    assert_eq!(
        r.layers
            .iter()
            .map(|l| l.diff_id.to_string())
            .collect::<Vec<_>>(),
        expected
    );
    assert_eq!(r.working_dir.as_deref(), Some("/work"));
    let root = store
        .rootfs(&format!("{}/course/oci:v1", reg.addr))
        .unwrap();
    assert!(root.lower_dirs[1].join("etc/os-release").is_file());

    let d = pull(
        &store,
        &format!("{}/course/docker:v1", reg.addr),
        &insecure(),
    )
    .unwrap();
    assert_ne!(
        d.digest, r.digest,
        "a Docker schema 2 manifest is another document"
    );
    assert!(
        d.layers[0].media_type.contains("docker"),
        "{:?}",
        d.layers[0].media_type
    );
    assert_eq!(
        d.layers
            .iter()
            .map(|l| l.diff_id.to_string())
            .collect::<Vec<_>>(),
        expected
    );

    let z = pull(&store, &format!("{}/course/zstd:v1", reg.addr), &insecure()).unwrap();
    assert!(z.layers[0].media_type.ends_with("zstd"));
    assert_eq!(
        z.layers
            .iter()
            .map(|l| l.diff_id.to_string())
            .collect::<Vec<_>>(),
        expected
    );
    assert_eq!(
        std::fs::read_dir(store.root().join("layers/sha256"))
            .unwrap()
            .count(),
        2,
        "layers shared"
    );

    // By digest, into a fresh store.
    let store2 = Store::open(&tmp.path().join("data2")).unwrap();
    let by_digest = pull(
        &store2,
        &format!("{}/course/oci@{manifest}", reg.addr),
        &insecure(),
    )
    .unwrap();
    assert_eq!(by_digest.digest.to_string(), manifest);
    assert_eq!(
        store2
            .resolve(&format!("{}/course/oci@{manifest}", reg.addr))
            .unwrap()
            .1
            .digest
            .to_string(),
        manifest
    );

    // A tampered layer blob in the registry is refused, and nothing is recorded.
    let gz_layer = sha(&gzip(&layers()[0]));
    let path = registry_blob(&reg, &gz_layer);
    let mut bytes = std::fs::read(&path).unwrap();
    let n = bytes.len();
    bytes[n / 2] ^= 0xff;
    std::fs::write(&path, bytes).unwrap();
    let store3 = Store::open(&tmp.path().join("data3")).unwrap();
    let e = pull(&store3, &format!("{}/course/oci:v1", reg.addr), &insecure())
        .unwrap_err()
        .to_string();
    assert!(e.contains("digest mismatch"), "{e}");
    assert!(store3.list().unwrap().is_empty());
    assert!(!store3
        .layer_path(&corral_images::Digest::parse(&expected[0]).unwrap())
        .exists());
}

#[test]
fn pulls_through_an_oci_index_and_a_docker_manifest_list_picking_this_platform() {
    let tmp = scratch();
    let reg = start_registry(tmp.path(), "");
    let layout = tmp.path().join("multi");
    oci_layout(&layout, &layers(), "gzip", "v1");
    let (index, amd) = make_multi_platform(&layout, "v1");
    skopeo_push(&layout, &format!("{}/multi/oci:v1", reg.addr), &["--all"]);
    skopeo_push(
        &layout,
        &format!("{}/multi/docker:v1", reg.addr),
        &["--all", "--format", "v2s2"],
    );
    let store = Store::open(&tmp.path().join("data")).unwrap();

    let r = pull(&store, &format!("{}/multi/oci:v1", reg.addr), &insecure()).unwrap();
    assert_eq!(r.platform, "linux/amd64");
    assert_eq!(r.digest.to_string(), amd);
    assert_eq!(r.index.as_ref().map(|d| d.to_string()), Some(index.clone()));
    // By the index's digest: the same image, and the index digest names it in the store.
    let by_index = pull(
        &store,
        &format!("{}/multi/oci@{index}", reg.addr),
        &insecure(),
    )
    .unwrap();
    assert_eq!(by_index.digest.to_string(), amd);
    assert_eq!(store.resolve(&index).unwrap().1.digest.to_string(), amd);

    let d = pull(
        &store,
        &format!("{}/multi/docker:v1", reg.addr),
        &insecure(),
    )
    .unwrap();
    assert_eq!(d.platform, "linux/amd64");
    assert!(d.index.is_some(), "a Docker manifest list was followed");
}

#[test]
fn a_cut_off_pull_continues_from_its_part_file() {
    let tmp = scratch();
    let reg = start_registry(tmp.path(), "");
    let layout = tmp.path().join("layout");
    oci_layout(&layout, &layers(), "gzip", "v1");
    skopeo_push(&layout, &format!("{}/resume/img:v1", reg.addr), &[]);
    let store = Store::open(&tmp.path().join("data")).unwrap();
    let layer = &layers()[0];
    let big = &gzip(layer);
    let part = store.tmp_dir().join(format!("{}.part", &sha(big)[7..]));

    // A wrong first half: if the pull continued with Range (as it must), the result is refused
    // and the part file deleted; were the blob fetched whole, this would pass.
    let mut wrong = big[..big.len() / 2].to_vec();
    wrong[600] ^= 0xff;
    std::fs::write(&part, &wrong).unwrap();
    let reference = format!("{}/resume/img:v1", reg.addr);
    let e = pull(&store, &reference, &insecure())
        .unwrap_err()
        .to_string();
    assert!(e.contains("digest mismatch"), "{e}");
    assert!(!part.exists());

    // The right first half: the pull completes it.
    std::fs::write(&part, &big[..big.len() / 2]).unwrap();
    let r = pull(&store, &reference, &insecure()).unwrap();
    assert_eq!(r.layers[0].diff_id.to_string(), sha(layer));
    assert!(!part.exists());
}

/// A token server for the registry's `auth: token`: checks Basic credentials, answers with a JWT
/// (RS256, signed by `openssl`, the certificate in its `x5c` header) granting the asked scope.
struct TokenServer {
    addr: String,
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

fn start_token_server(dir: &Path, user: &'static str, password: &'static str) -> TokenServer {
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
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut request_line = String::new();
            let _ = reader.read_line(&mut request_line);
            let mut authorised = false;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
                    break;
                }
                if let Some((k, v)) = line.split_once(':') {
                    if k.eq_ignore_ascii_case("authorization") && v.trim() == expected {
                        authorised = true;
                    }
                }
            }
            let target = request_line.split_whitespace().nth(1).unwrap_or("");
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
        }
    });
    TokenServer { addr }
}

#[test]
fn pulls_with_bearer_token_auth_and_credentials_from_a_config_file() {
    let tmp = scratch();
    let tokens = start_token_server(tmp.path(), "staff", "s3cret");
    let auth = format!(
        "auth:\n  token:\n    realm: http://{}/token\n    service: corral-registry\n    issuer: corral-test\n    rootcertbundle: {}\n",
        tokens.addr,
        tmp.path().join("cert.pem").display()
    );
    let reg = start_registry(tmp.path(), &auth);
    let layout = tmp.path().join("layout");
    let manifest = oci_layout(&layout, &layers(), "gzip", "v1");
    skopeo_push(
        &layout,
        &format!("{}/private/img:v1", reg.addr),
        &["--dest-creds", "staff:s3cret"],
    );
    let reference = format!("{}/private/img:v1", reg.addr);
    let store = Store::open(&tmp.path().join("data")).unwrap();

    // No credentials: refused by the token server, and said so.
    let e = pull(&store, &reference, &insecure())
        .unwrap_err()
        .to_string();
    assert!(e.contains("credentials"), "{e}");

    // Wrong credentials in the file: refused.
    use base64::Engine;
    let file = tmp.path().join("auth.json");
    let write = |user: &str, pw: &str| {
        let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pw}"));
        std::fs::write(
            &file,
            serde_json::json!({"auths": {reg.addr.clone(): {"auth": auth}}}).to_string(),
        )
        .unwrap();
    };
    write("staff", "wrong");
    let opts = PullOptions {
        insecure: true,
        auth_file: Some(file.clone()),
        progress: None,
    };
    assert!(pull(&store, &reference, &opts).is_err());

    // The right ones: the image.
    write("staff", "s3cret");
    let r = pull(&store, &reference, &opts).unwrap();
    assert_eq!(r.digest.to_string(), manifest);
}
