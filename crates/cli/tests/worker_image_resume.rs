//! A remote worker's image download that is cut off mid-blob continues where it stopped: the
//! worker talks to the real `corral serve` through a loopback proxy that cuts the first
//! connection to carry more than 2 MiB from the server (mid-way through the Debian test image's
//! layer); the worker asks for the rest with `Range: bytes=N-`, checks the whole blob's digest,
//! and judges the job in the image.

mod common;
mod server_support;

use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::image::NAME;
use reqwest::StatusCode;
use serde_json::{json, Value};
use server_support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Bytes from the server after which the proxy cuts the connection carrying them (once).
const CUT_AFTER: u64 = 2 << 20;

/// What the proxy saw: the requests' bytes (to find Range headers) and whether it cut.
#[derive(Default)]
struct Seen {
    requests: Mutex<Vec<u8>>,
    cut: AtomicBool,
    cut_at: AtomicU64,
}

/// Forwards every connection to `upstream`; cuts the first one to carry [`CUT_AFTER`] bytes
/// from the server, closing both sides without finishing the response.
async fn proxy(listener: tokio::net::TcpListener, upstream: String, seen: Arc<Seen>) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            return;
        };
        let Ok(server) = tokio::net::TcpStream::connect(&upstream).await else {
            continue;
        };
        let seen = seen.clone();
        tokio::spawn(async move {
            let (mut cr, mut cw) = client.into_split();
            let (mut sr, mut sw) = server.into_split();
            let seen2 = seen.clone();
            let up = tokio::spawn(async move {
                let mut buf = vec![0u8; 64 << 10];
                while let Ok(n) = cr.read(&mut buf).await {
                    if n == 0 || sw.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                    seen2.requests.lock().unwrap().extend_from_slice(&buf[..n]);
                }
                let _ = sw.shutdown().await;
            });
            let mut carried = 0u64;
            let mut buf = vec![0u8; 64 << 10];
            while let Ok(n) = sr.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                if carried + n as u64 > CUT_AFTER && !seen.cut.swap(true, Ordering::SeqCst) {
                    // Half of this read goes through, then the connection is gone.
                    let _ = cw.write_all(&buf[..n / 2]).await;
                    seen.cut_at
                        .store(carried + (n / 2) as u64, Ordering::SeqCst);
                    up.abort();
                    return;
                }
                if cw.write_all(&buf[..n]).await.is_err() {
                    break;
                }
                carried += n as u64;
            }
            let _ = cw.shutdown().await;
        });
    }
}

struct Worker(std::process::Child, Arc<Mutex<String>>);

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_cut_off_image_download_resumes_with_a_range_request() {
    let data = tempfile::tempdir().unwrap();
    common::image::import_into(data.path());
    let store = corral_images::Store::open(data.path()).unwrap();
    let (_, rec) = store.resolve(NAME).unwrap();
    let digest = rec.digest.to_string();
    assert!(
        rec.layers.iter().any(|l| l.size > 2 * CUT_AFTER),
        "the test image's layer must be larger than the cut"
    );
    let s = Server::start_in(data.path(), "[submissions]\nworkers = 0\n", &[]);
    let worker_data = tempfile::tempdir().unwrap();
    let rt = rt();
    let seen = Arc::new(Seen::default());
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let proxy_url = format!("http://{}", listener.local_addr().unwrap());
    rt.spawn(proxy(listener, s.addr.clone(), seen.clone()));
    rt.block_on(async {
        let (t, wt) = (s.token("student").await, s.token("worker").await);
        let (st, v) = s
            .post(
                &t,
                "/submissions",
                json!({"cmd": "cat /etc/debian_version", "image": NAME}),
            )
            .await;
        assert_eq!(st, StatusCode::ACCEPTED, "{v}");
        let id = v["id"].as_str().unwrap().to_string();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_corral"));
        cmd.args([
            "worker", "--server", &proxy_url, "--name", "resumer", "--data",
        ])
        .arg(worker_data.path())
        .env("CORRAL_WORKER_TOKEN", &wt)
        .env("CORRAL_LOG", "info");
        let Logged { child, log, .. } = Logged::spawn(cmd);
        let w = Worker(child, log);
        let deadline = Instant::now() + Duration::from_secs(300);
        let v: Value = loop {
            let (st, v) = s
                .get(&t, &format!("/submissions/{id}?wait=true&timeout=10"))
                .await;
            assert_eq!(st, StatusCode::OK, "{v}");
            if v["status"] == "done" || v["status"] == "failed" {
                break v;
            }
            assert!(
                Instant::now() < deadline,
                "not finished: {v}\nworker:\n{}",
                w.1.lock().unwrap()
            );
        };
        let worker_log = w.1.lock().unwrap().clone();
        assert_eq!(v["verdict"], "accepted", "{v}\nworker:\n{worker_log}");
        assert!(
            v["run"]["stdout"]
                .as_str()
                .unwrap_or_default()
                .starts_with("12."),
            "{v}"
        );
        assert_eq!(v["image"]["digest"], digest.as_str(), "{v}");
        // The cut happened mid-blob and the worker asked for the rest, not the whole blob again.
        assert!(seen.cut.load(Ordering::SeqCst), "the proxy never cut");
        assert!(worker_log.contains("resuming"), "{worker_log}");
        let requests = String::from_utf8_lossy(&seen.requests.lock().unwrap()).to_lowercase();
        let start: u64 = requests
            .split("range: bytes=")
            .nth(1)
            .and_then(|r| r.split('-').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no Range request went through the proxy"));
        assert!(start > 0, "resumed from {start}");
        assert!(
            start <= seen.cut_at.load(Ordering::SeqCst),
            "resumed from {start}, past the {} bytes that got through",
            seen.cut_at.load(Ordering::SeqCst)
        );
    });
    // The worker's store holds the image by the same digest; no partial blob is left.
    let worker_store = corral_images::Store::open(worker_data.path()).unwrap();
    assert_eq!(
        worker_store.resolve(&digest).unwrap().1.digest.to_string(),
        digest
    );
    let partials = worker_store.tmp_dir().join("worker-blobs");
    let left: Vec<_> = std::fs::read_dir(&partials)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
    s.stop();
}
