//! Starting the real `corral serve` (the binary under test) on a loopback port and talking to it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::multipart::{Form, Part};
use reqwest::StatusCode;
use serde_json::{json, Value};

/// A `corral` child process whose stderr is kept, whole and line by line (to wait for a line, and
/// to show when something fails).
pub struct Logged {
    pub child: Child,
    pub log: Arc<Mutex<String>>,
    pub lines: std::sync::mpsc::Receiver<String>,
}

impl Logged {
    /// Starts `cmd` with no stdin, stdout discarded and stderr read by a thread.
    pub fn spawn(mut cmd: Command) -> Logged {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("start {cmd:?}: {e}"));
        let log = Arc::new(Mutex::new(String::new()));
        let (tx, lines) = std::sync::mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        let log2 = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let mut l = log2.lock().unwrap();
                l.push_str(&line);
                l.push('\n');
                drop(l);
                let _ = tx.send(line);
            }
        });
        Logged { child, log, lines }
    }
}

/// The repository's `examples/hello`.
pub fn hello_example() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/hello")
}

/// A data folder for [`Server::start_in`] whose `suites/hello` is that example's suite.
pub fn data_with_hello_suite() -> tempfile::TempDir {
    let data = tempfile::tempdir().unwrap();
    let suite = data.path().join("suites/hello");
    std::fs::create_dir_all(&suite).unwrap();
    for f in ["suite.yaml", "expected.txt"] {
        std::fs::copy(hello_example().join(f), suite.join(f)).unwrap();
    }
    data
}

/// A multi-threaded runtime for a test's async part.
pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

pub struct Server {
    child: Option<Child>,
    pub base: String,
    pub addr: String,
    pub admin: String,
    pub data: std::path::PathBuf,
    _tmp: Option<tempfile::TempDir>,
    log: Arc<Mutex<String>>,
}

impl Server {
    /// `corral serve --config CONFIG --data TMP --listen 127.0.0.1:0`, waiting for its address.
    pub fn start(config_toml: &str, args: &[&str]) -> Server {
        let tmp = tempfile::Builder::new()
            .prefix("corral-serve-test-")
            .tempdir()
            .unwrap();
        let mut s = Server::start_in(tmp.path(), config_toml, args);
        s._tmp = Some(tmp);
        s
    }

    /// The same with a data folder the caller keeps (to restart on the same data).
    pub fn start_in(data: &Path, config_toml: &str, args: &[&str]) -> Server {
        let cfg = data.join("config.toml");
        std::fs::write(&cfg, config_toml).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_corral"));
        cmd.arg("serve")
            .arg("--config")
            .arg(&cfg)
            .arg("--data")
            .arg(data)
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .env("CORRAL_LOG", "info");
        let Logged {
            mut child,
            log,
            lines: rx,
        } = Logged::spawn(cmd);
        let mut admin = String::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        let addr = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => {
                    if let Some(t) = line
                        .split("admin token (shown once, stored hashed): ")
                        .nth(1)
                    {
                        admin = t.trim().to_string();
                    }
                    if let Some(rest) = line.split("listening on http://").nth(1) {
                        break rest.split_whitespace().next().unwrap().to_string();
                    }
                }
                Err(_) => {
                    let _ = child.kill();
                    panic!(
                        "corral serve did not start listening; its log:\n{}",
                        log.lock().unwrap()
                    );
                }
            }
        };
        Server {
            child: Some(child),
            base: format!("http://{addr}"),
            addr,
            admin,
            data: data.to_path_buf(),
            _tmp: None,
            log,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// A new token with this role, made by the first admin over the API.
    pub async fn token(&self, role: &str) -> String {
        self.token_with_id(role).await.0
    }

    /// The same, with the token's public id (what `DELETE /tokens/{id}` takes): (secret, id).
    pub async fn token_with_id(&self, role: &str) -> (String, String) {
        let r = client()
            .post(self.url("/tokens"))
            .bearer_auth(&self.admin)
            .json(&json!({"role": role}))
            .send()
            .await
            .unwrap();
        let status = r.status();
        let v: Value = r.json().await.unwrap();
        assert_eq!(
            status,
            StatusCode::CREATED,
            "POST /tokens: {v}\n{}",
            self.log()
        );
        (
            v["token"].as_str().unwrap().to_string(),
            v["id"].as_str().unwrap().to_string(),
        )
    }

    pub async fn upload(&self, token: &str, files: &[(&str, &[u8])]) -> String {
        let mut f = Form::new().percent_encode_noop();
        for (name, data) in files {
            f = f.part(
                "files",
                Part::bytes(data.to_vec()).file_name(name.to_string()),
            );
        }
        let (st, text) = self.post_form(token, "/upload", f).await;
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(st, StatusCode::OK, "upload: {v}");
        v["id"].as_str().unwrap().to_string()
    }

    /// Waits (with `?wait=true`, in rounds) until submission `id` is done or failed, `within` at
    /// most; a timeout's message shows the server's log and `more()` (a worker's log, …).
    pub async fn finished(
        &self,
        token: &str,
        id: &str,
        within: Duration,
        more: impl Fn() -> String,
    ) -> Value {
        let deadline = Instant::now() + within;
        loop {
            let (st, v) = self
                .get(token, &format!("/submissions/{id}?wait=true&timeout=10"))
                .await;
            assert_eq!(st, StatusCode::OK, "{v}");
            if v["status"] == "done" || v["status"] == "failed" {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "submission {id} not finished after {within:?}: {v}\nserver:\n{}\n{}",
                self.log(),
                more()
            );
        }
    }

    /// POST /suites: registers `suite` (YAML text) with `files` (path, bytes) as suite `id`; the
    /// status and the answer as it came.
    pub async fn register_suite(
        &self,
        token: &str,
        id: &str,
        suite: &str,
        files: &[(String, Vec<u8>)],
    ) -> (StatusCode, String) {
        let mut form = reqwest::multipart::Form::new()
            .text("id", id.to_string())
            .part(
                "suite",
                Part::bytes(suite.as_bytes().to_vec()).file_name("suite.yaml"),
            );
        for (i, (path, bytes)) in files.iter().enumerate() {
            form = form.part(
                format!("file{i}"),
                Part::bytes(bytes.clone()).file_name(path.clone()),
            );
        }
        self.post_form(token, "/suites", form).await
    }

    /// POST PATH with a multipart form: the status and the answer as it came.
    pub async fn post_form(
        &self,
        token: &str,
        path: &str,
        form: reqwest::multipart::Form,
    ) -> (StatusCode, String) {
        corral_testkit::http::post_form(&client(), &self.url(path), token, form).await
    }

    /// POST PATH with a JSON body: the status and the JSON answer (panics when it is not JSON).
    pub async fn post(&self, token: &str, path: &str, body: Value) -> (StatusCode, Value) {
        corral_testkit::http::post_json(&client(), &self.url(path), token, &body).await
    }

    /// POST PATH with a JSON body: the status and the JSON answer, or `null` when the answer is
    /// not JSON (for tests that look only at the status of hostile requests).
    pub async fn post_lenient(&self, token: &str, path: &str, body: Value) -> (StatusCode, Value) {
        let (st, text) = self.post_text(token, path, body).await;
        (st, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// POST PATH with a JSON body: the status and the answer as it came.
    pub async fn post_text(&self, token: &str, path: &str, body: Value) -> (StatusCode, String) {
        corral_testkit::http::post(&client(), &self.url(path), token, &body).await
    }

    /// GET PATH as `token`: the status and the JSON answer.
    pub async fn get(&self, token: &str, path: &str) -> (StatusCode, Value) {
        corral_testkit::http::get(&client(), &self.url(path), token).await
    }

    /// POST /run; status and JSON body.
    pub async fn run(&self, token: &str, body: Value) -> (StatusCode, Value) {
        self.post(token, "/run", body).await
    }

    /// Uploads `files`, then runs `cmd` with them as its working directory (must succeed).
    pub async fn run_uploaded(&self, token: &str, files: &[(&str, &[u8])], cmd: &str) -> Value {
        let id = self.upload(token, files).await;
        self.run_ok(token, json!({"cmd": cmd, "sandbox": {"homedir": id}}))
            .await
    }

    /// POST /run that must succeed.
    pub async fn run_ok(&self, token: &str, body: Value) -> Value {
        let (st, v) = self.run(token, body).await;
        assert_eq!(st, StatusCode::OK, "run: {v}\nserver log:\n{}", self.log());
        v
    }

    /// [`Server::finished`] within 10 minutes, showing only the server's log on a timeout.
    pub async fn judged(&self, token: &str, id: &str) -> Value {
        self.finished(token, id, Duration::from_secs(600), String::new)
            .await
    }

    /// A WebSocket to `/ws` as `token`.
    pub async fn ws(&self, token: &str) -> Ws {
        let (ws, _) =
            tokio_tungstenite::connect_async(format!("ws://{}/ws?token={token}", self.addr))
                .await
                .expect("WebSocket connect");
        ws
    }

    pub async fn health(&self) -> Value {
        let r = reqwest::get(self.url("/health")).await.unwrap();
        assert_eq!(r.status(), StatusCode::OK, "the server must still be up");
        r.json().await.unwrap()
    }

    /// SIGTERM, then waits for a clean exit; the exit status and the whole log (up to its
    /// final `stopped` line, when the server wrote one).
    pub fn stop_with_log(self) -> (std::process::ExitStatus, String) {
        let log = self.log.clone();
        let status = self.stop();
        let deadline = Instant::now() + Duration::from_secs(5);
        while !log.lock().unwrap().contains("stopped") && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let log = log.lock().unwrap().clone();
        (status, log)
    }

    /// SIGKILL (a crash, or an operator's `kill -9`): nothing said, nothing cleaned up.
    pub fn kill(mut self) {
        let mut child = self.child.take().unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// SIGTERM, then waits for a clean exit.
    pub fn stop(mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().unwrap();
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(child.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(st) = child.try_wait().unwrap() {
                return st;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!(
                    "corral serve did not stop within 60 s of SIGTERM:\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: kill(2) on our own child's pid.
            unsafe {
                libc::kill(c.id() as i32, libc::SIGTERM);
            }
            let deadline = Instant::now() + Duration::from_secs(30);
            while c.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

pub type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A WebSocket to `s` with `token`.
pub async fn ws_connect(s: &Server, token: &str) -> Ws {
    let (ws, _) = tokio_tungstenite::connect_async(format!("ws://{}/ws?token={token}", s.addr))
        .await
        .expect("WebSocket connect");
    ws
}

/// Sends one JSON message.
pub async fn ws_send(ws: &mut Ws, v: Value) {
    use futures_util::SinkExt;
    ws.send(tokio_tungstenite::tungstenite::Message::Text(
        v.to_string().into(),
    ))
    .await
    .unwrap();
}

/// The next JSON message (60 s at most: a hung server fails the test instead of hanging it).
pub async fn ws_next(ws: &mut Ws) -> Value {
    use futures_util::StreamExt;
    use tokio_tungstenite::tungstenite::Message;
    loop {
        let m = tokio::time::timeout(Duration::from_secs(60), ws.next())
            .await
            .expect("no WebSocket message within 60 s")
            .expect("the socket closed")
            .expect("WebSocket error");
        match m {
            Message::Text(t) => return serde_json::from_str(&t).unwrap(),
            Message::Close(_) => panic!("the server closed the socket"),
            _ => continue,
        }
    }
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap()
}

pub fn containment(name: &str) -> Vec<u8> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/containment")
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Host processes whose command line contains `needle` (none may outlive a run).
pub fn host_procs_with(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if e.file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
            .is_none()
        {
            continue;
        }
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains(needle) {
            found.push(cmd);
        }
    }
    found
}

pub const SEED_HELLO: &str =
    "#include <stdio.h>\n\nint main(void)\n{\n    printf(\"hello, world\\n\");\n}\n";
