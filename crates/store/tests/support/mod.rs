//! A fresh store per test: SQLite in a temporary folder, or a fresh database on the PostgreSQL
//! server `CORRAL_TEST_POSTGRES_URL` names — when it is unset, the private test cluster that
//! `scripts/pg-test-cluster` starts (idempotently). A PostgreSQL test never skips: without
//! PostgreSQL it fails and says how to get it.
#![allow(dead_code)]

use std::sync::{Arc, OnceLock};

/// One test per named `async fn NAME(Arc<dyn Store>)` of the including file on each backend:
/// `sqlite::NAME` and `postgres::NAME`, each on a fresh store, with `threads` runtime threads.
#[allow(unused_macros)]
macro_rules! on_both_backends {
    (threads = $threads:tt; $($name:ident),* $(,)?) => {
        on_both_backends!(@on sqlite, $threads; $($name),*);
        on_both_backends!(@on postgres, $threads; $($name),*);
    };
    (@on $backend:ident, $threads:tt; $($name:ident),*) => {
        mod $backend {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = $threads)]
                async fn $name() {
                    let b = super::support::Backend::$backend().await;
                    super::$name(b.store.clone()).await;
                    b.finish().await;
                }
            )*
        }
    };
}

use corral_store::Store;
use sqlx::Connection;

pub struct Backend {
    pub store: Arc<dyn Store>,
    _dir: tempfile::TempDir,
    /// PostgreSQL: the server's URL and the database to drop at the end.
    pg: Option<(String, String)>,
}

/// The PostgreSQL server the tests use.
pub fn postgres_base_url() -> String {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| {
        if let Ok(u) = std::env::var("CORRAL_TEST_POSTGRES_URL") {
            if !u.is_empty() {
                return u;
            }
        }
        let script =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/pg-test-cluster");
        let out = std::process::Command::new(&script)
            .output()
            .unwrap_or_else(|e| panic!("running {}: {e}", script.display()));
        assert!(
            out.status.success(),
            "PostgreSQL tests need a server: set CORRAL_TEST_POSTGRES_URL, or install PostgreSQL \
             (scripts/setup does) so that scripts/pg-test-cluster can start a private one.\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    })
    .clone()
}

/// `base` with another database name.
pub fn with_database(base: &str, db: &str) -> String {
    let (head, query) = match base.split_once('?') {
        Some((h, q)) => (h, Some(q)),
        None => (base, None),
    };
    let scheme_end = head.find("://").map_or(0, |i| i + 3);
    let host_part = match head[scheme_end..].find('/') {
        Some(i) => &head[..scheme_end + i],
        None => head,
    };
    match query {
        Some(q) => format!("{host_part}/{db}?{q}"),
        None => format!("{host_part}/{db}"),
    }
}

/// Creates a fresh database on the test server and returns its URL.
pub async fn fresh_postgres_database() -> (String, String) {
    let base = postgres_base_url();
    let name = format!("corral_t_{}", corral_store::random_hex(6));
    let mut c = sqlx::PgConnection::connect(&base)
        .await
        .unwrap_or_else(|e| panic!("connecting to the test PostgreSQL at {base}: {e}"));
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut c)
        .await
        .unwrap();
    c.close().await.unwrap();
    (with_database(&base, &name), name)
}

/// Drops a database made by [`fresh_postgres_database`].
pub async fn drop_postgres_database(name: &str) {
    if let Ok(mut c) = sqlx::PgConnection::connect(&postgres_base_url()).await {
        let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .execute(&mut c)
            .await;
    }
}

impl Backend {
    pub async fn sqlite() -> Backend {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("corral.db").display());
        let store = corral_store::open(&url, &dir.path().join("blobs"))
            .await
            .expect("open a SQLite store");
        Backend {
            store,
            _dir: dir,
            pg: None,
        }
    }

    pub async fn postgres() -> Backend {
        let dir = tempfile::tempdir().unwrap();
        let (url, name) = fresh_postgres_database().await;
        let store = corral_store::open(&url, &dir.path().join("blobs"))
            .await
            .unwrap_or_else(|e| panic!("open a PostgreSQL store at {url}: {e}"));
        Backend {
            store,
            _dir: dir,
            pg: Some((postgres_base_url(), name)),
        }
    }

    pub async fn finish(self) {
        self.store.close().await;
        if let Some((base, name)) = self.pg {
            if let Ok(mut c) = sqlx::PgConnection::connect(&base).await {
                let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                    .execute(&mut c)
                    .await;
            }
        }
    }
}
