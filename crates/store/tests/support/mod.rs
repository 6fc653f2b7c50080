//! A fresh store per test: SQLite in a temporary folder (PostgreSQL: a fresh database on the
//! server `CORRAL_TEST_POSTGRES_URL` names).
#![allow(dead_code)]

use std::sync::Arc;

use corral_store::Store;

pub struct Backend {
    pub store: Arc<dyn Store>,
    _dir: tempfile::TempDir,
}

impl Backend {
    pub async fn sqlite() -> Backend {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("corral.db").display());
        let store = corral_store::open(&url, &dir.path().join("blobs"))
            .await
            .expect("open a SQLite store");
        Backend { store, _dir: dir }
    }

    pub async fn finish(self) {
        self.store.close().await;
    }
}
