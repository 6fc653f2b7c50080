//! The HTTP server of these tests: the real router, auth and store in this process on a loopback
//! port. The pool's init program is `$CORRAL_BIN` when set, else a path that is never executed
//! (no test here runs a program); the host must still support sandboxes (root, cgroups).
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use corral_sandbox::{Host, InitProgram, Pool, PoolConfig};
use corral_server::{AppState, Config};
use corral_store::{Role, SqliteStore, Store};

pub struct TestServer {
    pub base: String,
    pub store: Arc<dyn Store>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
    data: PathBuf,
    _dir: tempfile::TempDir,
}

impl TestServer {
    pub async fn start(edit: impl FnOnce(&mut Config)) -> TestServer {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config {
            data_dir: dir.path().to_path_buf(),
            listen: "127.0.0.1:0".into(),
            ..Config::default()
        };
        edit(&mut config);
        // A test may move the data folder (onto a small file system of its own).
        let data = config.data_dir.clone();
        let store = SqliteStore::open(&config.database_url(), &config.blobs_dir())
            .await
            .unwrap();
        let store: Arc<dyn Store> = Arc::new(store);
        let init = InitProgram {
            path: std::env::var_os("CORRAL_BIN")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("/nonexistent/corral-not-used-here")),
            arg: "__sandbox-init".into(),
        };
        let host = Arc::new(
            Host::new(init).expect("this host must support sandboxes (see corral doctor)"),
        );
        let pool = Pool::new(host, PoolConfig::default());
        let listener = corral_server::bind(&config.listen).await.unwrap();
        let addr: SocketAddr = listener.local_addr().unwrap();
        let lock = corral_server::DataLock::acquire(&data).unwrap();
        let state = AppState::new(config, store.clone(), pool, lock).unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            corral_server::serve(state, listener, async move {
                let _ = rx.await;
            })
            .await
            .unwrap();
        });
        TestServer {
            base: format!("http://{addr}"),
            store,
            stop: Some(tx),
            task: Some(task),
            data,
            _dir: dir,
        }
    }

    /// The server's data folder.
    pub fn data_dir(&self) -> &std::path::Path {
        &self.data
    }

    pub async fn token(&self, role: Role) -> String {
        self.store.create_token(role, "test").await.unwrap().secret
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// `GET path` with `token`: status and JSON body (see [`json_of`]).
    pub async fn get(&self, token: &str, path: &str) -> (reqwest::StatusCode, serde_json::Value) {
        send(reqwest::Client::new().get(self.url(path)), token).await
    }

    /// `POST path` with `token` and a JSON body: status and JSON body.
    pub async fn post(
        &self,
        token: &str,
        path: &str,
        body: impl serde::Serialize,
    ) -> (reqwest::StatusCode, serde_json::Value) {
        send(
            reqwest::Client::new().post(self.url(path)).json(&body),
            token,
        )
        .await
    }

    /// `DELETE path` with `token`: status and JSON body.
    pub async fn delete(
        &self,
        token: &str,
        path: &str,
    ) -> (reqwest::StatusCode, serde_json::Value) {
        send(reqwest::Client::new().delete(self.url(path)), token).await
    }

    /// The shutdown signal, without waiting for the server to stop (its grace period begins).
    pub fn signal_stop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }

    pub async fn stop(mut self) {
        self.signal_stop();
        self.task.take().unwrap().await.unwrap();
    }
}

/// Sends `request` with `token`: status and JSON body.
async fn send(
    request: reqwest::RequestBuilder,
    token: &str,
) -> (reqwest::StatusCode, serde_json::Value) {
    json_of(request.bearer_auth(token).send().await.unwrap()).await
}

/// Status and JSON body; every response of this API is JSON, errors included.
pub async fn json_of(r: reqwest::Response) -> (reqwest::StatusCode, serde_json::Value) {
    let status = r.status();
    let ct = r
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let text = r.text().await.unwrap();
    let v: serde_json::Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{status}: not JSON ({e}), content-type {ct:?}: {text}"));
    assert!(
        ct.starts_with("application/json"),
        "{status}: content-type {ct:?}"
    );
    if !status.is_success() {
        assert!(
            v["error"].is_string() && v["message"].is_string(),
            "{status}: error body without error/message: {v}"
        );
    }
    (status, v)
}
