//! Server configuration: a TOML file, then `CORRAL_*` environment variables, then command-line
//! flags (applied by the CLI), each overriding the one before.

use std::path::{Path, PathBuf};
use std::time::Duration;

use corral_sandbox::{Limits, LimitsRequest, Millis, Size};
use serde::Deserialize;

use crate::error::ServerError;

/// Requests per minute and burst for one token.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rate {
    /// Sustained requests per minute; 0 means unlimited.
    pub per_minute: u32,
    /// Requests allowed at once after a quiet period.
    pub burst: u32,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RateLimits {
    pub student: Rate,
    pub staff: Rate,
    pub admin: Rate,
}

impl Default for RateLimits {
    fn default() -> Self {
        RateLimits {
            student: Rate {
                per_minute: 120,
                burst: 60,
            },
            staff: Rate {
                per_minute: 1200,
                burst: 300,
            },
            admin: Rate {
                per_minute: 0,
                burst: 0,
            },
        }
    }
}

/// What one upload may hold.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct UploadLimits {
    /// Files in one upload.
    pub max_files: usize,
    /// Bytes of all files together (after unpacking an archive).
    pub max_bytes: Size,
    /// Folders deep (`a/b/c.txt` is 3).
    pub max_depth: usize,
}

impl Default for UploadLimits {
    fn default() -> Self {
        UploadLimits {
            max_files: 1000,
            max_bytes: Size::mib(32),
            max_depth: 16,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Address to listen on (`127.0.0.1:8080`; port 0 picks a free one).
    pub listen: String,
    /// Folder for the database, the blobs and temporary files.
    pub data_dir: PathBuf,
    /// Database URL; default `sqlite://DATA/corral.db`.
    pub database_url: Option<String>,
    /// No authentication at all: every caller is the same admin. For local development only.
    pub dev_no_auth: bool,
    /// Runs and `/check` gradings at once (default: the number of CPUs).
    pub parallelism: usize,
    /// Slots on top of `parallelism` that only programs (`/run`, WebSocket runs) take, so a
    /// storm of `/check`s never makes an editor's run wait for a grading to end (0: none).
    pub reserved_run_slots: usize,
    /// Checks (and language submissions' programs) this server grades at once, across `/check`
    /// and its in-process queue workers (default: the number of CPUs): more CPU-bound programs
    /// than CPUs would stretch each one's wall clock, and a busy machine would fail a correct
    /// program's `timeout`. `/check`'s and the queue's take turns while both wait.
    pub grading_slots: usize,
    /// Runs waiting for a free slot; more are refused with 503.
    pub queue: usize,
    /// Sandboxes kept for follow-up runs, in total and per caller (per caller also: its `/check`
    /// requests, and its runs that keep no sandbox, under way at once).
    pub max_sandboxes: usize,
    pub max_sandboxes_per_caller: usize,
    /// WebSockets (`/ws`) one token may have open at once; more are refused with 429.
    pub max_websockets_per_caller: usize,
    /// The most memory idle kept sandboxes may hold together (files in their tmpfs mounts are
    /// RAM): past it the least recently used idle ones are dropped. Default: a quarter of the
    /// host's memory.
    pub kept_memory_max: Option<Size>,
    /// Idle time after which a kept sandbox is destroyed.
    pub sandbox_ttl: Millis,
    /// Uploads older than this are deleted (suites' files are kept).
    pub retention: Millis,
    /// Limits of a run that does not ask for its own.
    pub default_limits: LimitsRequest,
    /// The most any run may get; a request asking for more gets this (and is told).
    pub caps: LimitsRequest,
    pub upload: UploadLimits,
    /// Largest JSON request body.
    pub max_json_bytes: Size,
    pub rate_limit: RateLimits,
    /// Folder of suites loaded at start (`ID/suite.yaml` + files); default `DATA/suites`.
    pub suites_dir: Option<PathBuf>,
    /// How long shutdown waits for running programs before killing them.
    pub shutdown_grace: Millis,
    /// An operator's language registry (TOML) on top of the built-in one.
    pub languages: Option<PathBuf>,
    /// The submission queue and its workers (`[submissions]`).
    pub submissions: QueueConfig,
    /// The Judge0 surface (`[judge0]`).
    pub judge0: Judge0Config,
    /// Where uploaded files are kept (content-addressed); default `DATA/blobs`. API nodes sharing
    /// a PostgreSQL database must share this folder too (a network filesystem).
    pub blobs_dir: Option<PathBuf>,
    /// The runtime of untrusted runs (`[runtime]`): `default = "native"` or `"gvisor"` for a
    /// request that names none, and `force_gvisor = true`, the public-instance switch, under
    /// which every run (`/run`, WebSocket, `/check`, `/submissions`, Judge0) is gVisor's and a
    /// request for `native` is refused.
    pub runtime: corral_sandbox::RuntimePolicy,
    /// Container images (`[images]`).
    pub images: ImagesConfig,
    /// Connections and how long a client may take to send a request (`[http]`).
    pub http: HttpConfig,
}

/// `[http]` in the configuration file: what a slow or idle client may hold. Without these a
/// client that sends a header line (or a body byte) a second keeps its connection, and a
/// descriptor, forever.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpConfig {
    /// A request's head (request line and headers) must arrive within this, counted from the
    /// connection's start or the end of its previous response; so an idle keep-alive connection
    /// is closed after it too.
    pub header_timeout: Millis,
    /// A request's whole body must arrive within this of its head; a later one is answered 408
    /// and its connection closed. Image archives (`POST /images/import`, admins) are exempt.
    pub body_timeout: Millis,
    /// Connections open at once, WebSockets included; more wait in the kernel's listen backlog
    /// until one closes. Default: 4096, or half the open-files limit when that is lower.
    pub max_connections: Option<usize>,
    /// Web pages of other origins that may call the API from a browser (CORS): origins such as
    /// `"https://ide.example.edu"`, or `"*"` for any. Default: none (only the server's own pages).
    /// Requests carry a bearer token, never a cookie, so a page still needs a token to do
    /// anything; Judge0's own default is any origin.
    pub cors_origins: Vec<String>,
    /// Where the other servers sharing this one's database reach it (`"http://10.0.0.5:8080"`),
    /// to send on a request for a sandbox this one keeps between runs that a load balancer gave
    /// them. Default: `http://` and the listening address, when that is a specific one (not
    /// `0.0.0.0` or `[::]`); otherwise none, and such requests are answered 421 naming it.
    pub node_url: Option<String>,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            header_timeout: Millis::ms(20_000),
            body_timeout: Millis::ms(60_000),
            max_connections: None,
            cors_origins: Vec::new(),
            node_url: None,
        }
    }
}

/// Why `http.node_url` is not a URL a server can be reached at (`http(s)://host[:port][/path]`).
pub fn node_url_error(u: &str) -> Option<String> {
    let ok = url::Url::parse(u).is_ok_and(|url| {
        matches!(url.scheme(), "http" | "https")
            && url.host_str().is_some()
            && url.username().is_empty()
            && url.password().is_none()
            && url.query().is_none()
            && url.fragment().is_none()
    });
    (!ok).then(|| {
        format!(
            "http.node_url: {u:?} is not where a server can be reached: write \
             http(s)://host[:port], as the other servers would call it (\"http://10.0.0.5:8080\")"
        )
    })
}

/// Why an entry of `http.cors_origins` is not an origin (`scheme://host[:port]`, or `*`).
pub fn cors_origin_error(origin: &str) -> Option<String> {
    if origin == "*" {
        return None;
    }
    let why = |w: &str| {
        Some(format!(
            "http.cors_origins: {origin:?} {w}: write an origin as a browser sends it, \
             scheme://host[:port] (\"https://ide.example.edu\"), or \"*\" for any"
        ))
    };
    let Ok(url) = url::Url::parse(origin) else {
        return why("is not a URL");
    };
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return why("is not an http(s) origin");
    }
    if url.origin().ascii_serialization() != origin {
        return why("has more than an origin (a path, a trailing /, a user, upper case)");
    }
    None
}

impl HttpConfig {
    /// `max_connections`, or its default for a process that may open `open_files` descriptors
    /// (the rest are for sandboxes, the database and blobs).
    pub fn max_connections(&self, open_files: u64) -> usize {
        self.max_connections
            .unwrap_or_else(|| (open_files / 2).clamp(1, 4096) as usize)
    }
}

/// `[images]` in the configuration file: how `POST /images` (and `corral env pull --config`)
/// reach registries.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ImagesConfig {
    /// Registries (`host[:port]`, as in image references) pulled from over plain HTTP: a
    /// registry on the campus network without TLS. `CORRAL_INSECURE_REGISTRIES` (comma-separated)
    /// adds to it.
    pub insecure_registries: Vec<String>,
    /// Image builds (`POST /images/build`) waiting or running at once; one more is a 503 with
    /// `Retry-After`. Builds run one at a time.
    pub max_pending_builds: usize,
}

impl Default for ImagesConfig {
    fn default() -> Self {
        ImagesConfig {
            insecure_registries: Vec::new(),
            max_pending_builds: crate::service::image_builds::MAX_PENDING,
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: "127.0.0.1:8080".into(),
            data_dir: PathBuf::from("corral-data"),
            database_url: None,
            dev_no_auth: false,
            parallelism: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2),
            reserved_run_slots: 1,
            grading_slots: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2),
            queue: 64,
            max_sandboxes: 64,
            max_sandboxes_per_caller: 4,
            max_websockets_per_caller: 8,
            kept_memory_max: None,
            sandbox_ttl: Millis::ms(5 * 60 * 1000),
            retention: Millis::ms(7 * 24 * 3600 * 1000),
            default_limits: LimitsRequest::default(),
            caps: LimitsRequest::default(),
            upload: UploadLimits::default(),
            max_json_bytes: Size::mib(2),
            rate_limit: RateLimits::default(),
            suites_dir: None,
            shutdown_grace: Millis::ms(20_000),
            languages: None,
            submissions: Default::default(),
            judge0: Default::default(),
            blobs_dir: None,
            images: ImagesConfig::default(),
            runtime: Default::default(),
            http: HttpConfig::default(),
        }
    }
}

/// `kept_memory_max`, or a quarter of the host's memory (`MemTotal`; 4 GiB when unreadable).
pub fn kept_memory_max(c: &Config) -> u64 {
    if let Some(s) = c.kept_memory_max {
        return s.bytes();
    }
    let total_kib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .unwrap_or(16 << 20);
    total_kib * 1024 / 4
}

/// The platform caps when the configuration sets none.
pub fn builtin_caps() -> Limits {
    Limits {
        cpu_time: Millis::ms(10_000),
        wall_time: Millis::ms(60_000),
        memory: Size::mib(512),
        pids: 128,
        output: Size::mib(4),
        disk: Size::mib(128),
        open_files: 1024,
        file_size: Size::mib(128),
    }
}

impl Config {
    /// Reads a TOML file (when given), then applies the environment.
    pub fn load(file: Option<&Path>) -> Result<Config, ServerError> {
        let mut c = match file {
            Some(p) => {
                let text = std::fs::read_to_string(p)
                    .map_err(|e| ServerError::Config(format!("reading {}: {e}", p.display())))?;
                toml::from_str(&text)
                    .map_err(|e| ServerError::Config(format!("{}: {e}", p.display())))?
            }
            None => Config::default(),
        };
        c.apply_env(|k| std::env::var(k).ok())?;
        Ok(c)
    }

    /// `CORRAL_LISTEN`, `CORRAL_DATA`, `CORRAL_DATABASE_URL`, `CORRAL_PARALLELISM`,
    /// `CORRAL_SANDBOX_TTL`, `CORRAL_RETENTION`, `CORRAL_DEV_NO_AUTH`, `CORRAL_DEFAULT_RUNTIME`,
    /// `CORRAL_FORCE_GVISOR`.
    pub fn apply_env(&mut self, get: impl Fn(&str) -> Option<String>) -> Result<(), ServerError> {
        let bad = |k: &str, v: &str, e: &dyn std::fmt::Display| {
            ServerError::Config(format!("{k}={v:?}: {e}"))
        };
        if let Some(v) = get("CORRAL_LISTEN") {
            self.listen = v;
        }
        if let Some(v) = get("CORRAL_DATA") {
            self.data_dir = v.into();
        }
        if let Some(v) = get("CORRAL_DATABASE_URL") {
            self.database_url = Some(v);
        }
        if let Some(v) = get("CORRAL_PARALLELISM") {
            self.parallelism = v.parse().map_err(|e| bad("CORRAL_PARALLELISM", &v, &e))?;
        }
        if let Some(v) = get("CORRAL_GRADING_SLOTS") {
            self.grading_slots = v.parse().map_err(|e| bad("CORRAL_GRADING_SLOTS", &v, &e))?;
        }
        if let Some(v) = get("CORRAL_SANDBOX_TTL") {
            self.sandbox_ttl = v.parse().map_err(|e| bad("CORRAL_SANDBOX_TTL", &v, &e))?;
        }
        if let Some(v) = get("CORRAL_RETENTION") {
            self.retention = v.parse().map_err(|e| bad("CORRAL_RETENTION", &v, &e))?;
        }
        if let Some(v) = get("CORRAL_LANGUAGES").filter(|v| !v.is_empty()) {
            self.languages = Some(v.into());
        }
        if let Some(v) = get("CORRAL_DEV_NO_AUTH") {
            self.dev_no_auth = matches!(v.as_str(), "1" | "true" | "yes");
        }
        if let Some(v) = get("CORRAL_DEFAULT_RUNTIME") {
            self.runtime.default = v
                .parse()
                .map_err(|e| bad("CORRAL_DEFAULT_RUNTIME", &v, &e))?;
        }
        if let Some(v) = get("CORRAL_FORCE_GVISOR") {
            self.runtime.force_gvisor = match v.as_str() {
                "1" | "true" | "yes" => true,
                "0" | "false" | "no" => false,
                _ => return Err(bad("CORRAL_FORCE_GVISOR", &v, &"use true or false")),
            };
        }
        Ok(())
    }

    pub fn database_url(&self) -> String {
        self.database_url
            .clone()
            .unwrap_or_else(|| format!("sqlite://{}", self.data_dir.join("corral.db").display()))
    }

    /// The blob folder: `blobs_dir`, or `DATA/blobs`.
    pub fn blobs_dir(&self) -> PathBuf {
        self.blobs_dir
            .clone()
            .unwrap_or_else(|| self.data_dir.join("blobs"))
    }

    pub fn caps(&self) -> Result<Limits, ServerError> {
        self.caps
            .resolve(&builtin_caps())
            .map_err(|e| ServerError::Config(format!("caps: {e}")))
    }

    /// Default limits, never above the caps.
    pub fn default_limits(&self) -> Result<Limits, ServerError> {
        let caps = self.caps()?;
        Ok(self
            .default_limits
            .resolve(&Limits::default())
            .map_err(|e| ServerError::Config(format!("default_limits: {e}")))?
            .clamp_to(&caps))
    }

    /// Checks the values that would otherwise fail later.
    pub fn validate(&self) -> Result<(), ServerError> {
        self.caps()?;
        self.default_limits()?;
        let bad = |m: &str| Err(ServerError::Config(m.into()));
        if self.parallelism == 0 {
            return bad("parallelism must be at least 1");
        }
        if self.grading_slots == 0 {
            return bad("grading_slots must be at least 1");
        }
        if self.max_sandboxes == 0 || self.max_sandboxes_per_caller == 0 {
            return bad("max_sandboxes and max_sandboxes_per_caller must be at least 1");
        }
        if self.images.max_pending_builds == 0 {
            return bad("images.max_pending_builds must be at least 1");
        }
        if self.max_websockets_per_caller == 0 {
            return bad("max_websockets_per_caller must be at least 1");
        }
        if self.upload.max_files == 0 || self.upload.max_depth == 0 {
            return bad("upload.max_files and upload.max_depth must be at least 1");
        }
        if self.sandbox_ttl.duration().is_zero() {
            return bad("sandbox_ttl must be more than 0");
        }
        if self.http.header_timeout.duration().is_zero()
            || self.http.body_timeout.duration().is_zero()
        {
            return bad("http.header_timeout and http.body_timeout must be more than 0");
        }
        if let Some(e) = self
            .http
            .cors_origins
            .iter()
            .find_map(|o| cors_origin_error(o))
        {
            return Err(ServerError::Config(e));
        }
        if let Some(e) = self.http.node_url.as_deref().and_then(node_url_error) {
            return Err(ServerError::Config(e));
        }
        let q = &self.submissions;
        if q.callback_concurrency == 0 || q.callback_per_owner == 0 {
            return bad(
                "submissions.callback_concurrency and submissions.callback_per_owner must be at least 1",
            );
        }
        if q.callback_backoff_max.duration() < q.callback_backoff.duration() {
            return bad(
                "submissions.callback_backoff_max must be at least submissions.callback_backoff",
            );
        }
        if self.http.max_connections == Some(0) {
            return bad("http.max_connections must be at least 1");
        }
        for r in &self.images.insecure_registries {
            let host = r.rsplit_once(':').map_or(r.as_str(), |(h, _)| h);
            if host.is_empty()
                || r.contains("://")
                || r.contains('/')
                || r.chars().any(char::is_whitespace)
            {
                return Err(ServerError::Config(format!(
                    "images.insecure_registries: {r:?} is not a registry; write host[:port], as in image references (e.g. \"registry.lab:5000\")"
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_env_and_defaults() {
        let c: Config = toml::from_str(
            r#"
            listen = "0.0.0.0:9000"
            parallelism = 3
            sandbox_ttl = "2m"
            [caps]
            memory = "128M"
            [default_limits]
            memory = "1G"
            [rate_limit.student]
            per_minute = 10
            burst = 5
            "#,
        )
        .unwrap();
        assert_eq!(c.parallelism, 3);
        assert_eq!(c.sandbox_ttl, Millis::ms(120_000));
        assert_eq!(c.default_limits().unwrap().memory, Size::mib(128));
        assert_eq!(c.caps().unwrap().pids, 128);
        assert_eq!(c.rate_limit.student.per_minute, 10);
        let mut c = c;
        c.apply_env(|k| (k == "CORRAL_DATA").then(|| "/srv/corral".to_string()))
            .unwrap();
        assert_eq!(c.database_url(), "sqlite:///srv/corral/corral.db");
        assert!(toml::from_str::<Config>("bogus = 1").is_err());
        c.validate().unwrap();
    }

    #[test]
    fn http_limits_and_their_defaults() {
        let c: Config = toml::from_str("[http]\nheader_timeout = \"5s\"\n").unwrap();
        assert_eq!(c.http.header_timeout, Millis::ms(5000));
        assert_eq!(c.http.body_timeout, Millis::ms(60_000));
        // 4096 connections, unless the process may open fewer than twice that many files.
        assert_eq!(c.http.max_connections(1 << 20), 4096);
        assert_eq!(c.http.max_connections(1024), 512);
        let c: Config = toml::from_str("[http]\nmax_connections = 10\n").unwrap();
        assert_eq!(c.http.max_connections(1024), 10);
        for bad in [
            "max_connections = 0",
            "header_timeout = \"0s\"",
            "body_timeout = 0",
        ] {
            let c: Config = toml::from_str(&format!("[http]\n{bad}\n")).unwrap();
            assert!(c.validate().is_err(), "{bad}");
        }
    }

    #[test]
    fn callback_backoff_is_capped_at_no_less_than_its_start() {
        let c = Config::default();
        assert_eq!(c.submissions.callback_backoff_max, Millis::ms(600_000));
        assert_eq!(c.submissions.callback_max_attempts, 20);
        let c: Config = toml::from_str(
            r#"
            [submissions]
            callback_backoff = "1s"
            callback_backoff_max = "1s"
            "#,
        )
        .unwrap();
        c.validate().unwrap();
        let c: Config = toml::from_str(
            r#"
            [submissions]
            callback_backoff = "2m"
            callback_backoff_max = "1m"
            "#,
        )
        .unwrap();
        let e = c.validate().unwrap_err().to_string();
        assert!(
            e.contains("submissions.callback_backoff_max must be at least"),
            "{e}"
        );
    }

    #[test]
    fn cors_origins_are_origins_or_any() {
        for good in [
            "*",
            "https://ide.example.edu",
            "http://localhost:5173",
            "https://[::1]:8443",
        ] {
            assert_eq!(cors_origin_error(good), None, "{good}");
        }
        for bad in [
            "ide.example.edu",
            "https://ide.example.edu/",
            "https://ide.example.edu/editor",
            "https://IDE.example.edu",
            "ftp://example.edu",
            "https://user@example.edu",
            "",
        ] {
            let e = cors_origin_error(bad).unwrap_or_else(|| panic!("{bad:?} passed"));
            assert!(e.contains("scheme://host[:port]"), "{e}");
        }
        let c: Config =
            toml::from_str("[http]\ncors_origins = [\"https://a.example\", \"a.example\"]\n")
                .unwrap();
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("\"a.example\""), "{e}");
    }

    #[test]
    fn a_node_url_is_where_a_server_is_reached() {
        for good in [
            "http://10.0.0.5:8080",
            "https://node1.corral.internal",
            "http://[fd00::5]:8080/corral",
        ] {
            assert_eq!(node_url_error(good), None, "{good}");
        }
        for bad in [
            "10.0.0.5:8080",
            "ftp://node1",
            "http://user:pw@node1",
            "http://node1/?x=1",
            "http://node1/#top",
            "",
        ] {
            let e = node_url_error(bad).unwrap_or_else(|| panic!("{bad:?} passed"));
            assert!(e.contains("http(s)://host[:port]"), "{e}");
        }
        let c: Config = toml::from_str("[http]\nnode_url = \"node1:8080\"\n").unwrap();
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("http.node_url: \"node1:8080\""), "{e}");
    }
}

/// `[judge0]` in the configuration file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Judge0Config {
    /// Judge0's `enable_network: true` runs the program with the host's network. Refused (422)
    /// unless this is on: a sandbox has no network by default.
    pub allow_network: bool,
    /// The most `number_of_runs` a submission may ask for (Judge0's own default cap).
    pub max_number_of_runs: u32,
}

impl Default for Judge0Config {
    fn default() -> Self {
        Judge0Config {
            allow_network: false,
            max_number_of_runs: 20,
        }
    }
}

/// `[submissions]` in the configuration file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QueueConfig {
    /// In-process workers judging submissions (default: `parallelism`; 0: only remote workers).
    pub workers: Option<usize>,
    /// How long a claim lasts without a heartbeat (workers renew it every third of it).
    pub lease: Millis,
    /// Claims of one job whose worker stopped answering before the job is marked failed.
    pub max_attempts: u32,
    /// The longest `?wait=true` waits for a result.
    pub wait_max: Millis,
    /// Submissions in one `POST /submissions/batch`.
    pub batch_max: usize,
    /// Submissions waiting (queued or running) per token; more are refused with 429.
    pub max_pending_per_owner: u64,
    /// The key callbacks are signed with (every API node needs the same one). Default: a random
    /// key kept in `DATA/callback-secret` (created at the first start).
    pub callback_secret: Option<String>,
    /// Address ranges callbacks may reach although they are not public (`127.0.0.1/32`,
    /// `10.0.0.0/8`, `::1`); by default loopback, private, link-local, multicast and other
    /// non-public addresses are refused.
    pub callback_allow: Vec<String>,
    /// One callback request's time limit.
    pub callback_timeout: Millis,
    /// Tries before a callback is given up. With the default backoff and cap, 20 tries span
    /// about two hours: an LMS down for that long on deadline night still gets its callbacks
    /// (and staff can send a given-up one again: `POST /submissions/{id}/callback`).
    pub callback_max_attempts: u32,
    /// The wait before the second try; doubled for each further one, up to
    /// `callback_backoff_max`.
    pub callback_backoff: Millis,
    /// The longest wait between two tries (at least `callback_backoff`): the doubling stops
    /// there, so a long outage is tried every this often rather than once more hours later.
    pub callback_backoff_max: Millis,
    /// Callbacks this node delivers at once.
    pub callback_concurrency: usize,
    /// Of those, at most this many of one token's submissions: a token whose targets never
    /// answer holds no more slots than this, and everyone else's callbacks go on.
    pub callback_per_owner: usize,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            workers: None,
            lease: Millis::ms(30_000),
            max_attempts: 3,
            wait_max: Millis::ms(30_000),
            batch_max: 100,
            max_pending_per_owner: 10_000,
            callback_secret: None,
            callback_allow: Vec::new(),
            callback_timeout: Millis::ms(10_000),
            // 2 s doubling to the 10-minute cap takes 9 waits (17 min), then 10 waits of 10
            // minutes: the 20th try comes about 2 hours after the first.
            callback_max_attempts: 20,
            callback_backoff: Millis::ms(2_000),
            callback_backoff_max: Millis::ms(600_000),
            callback_concurrency: 32,
            callback_per_owner: 4,
        }
    }
}

impl QueueConfig {
    pub fn lease(&self) -> Duration {
        self.lease.duration().max(Duration::from_millis(100))
    }
    pub fn heartbeat_every(&self) -> Duration {
        self.lease() / 3
    }
}
