//! Migration logging when several API nodes start together on one fresh PostgreSQL database.
//! A test binary of its own: it installs the process's one global log subscriber.

mod support;

use std::sync::Arc;

/// Three API nodes starting together on one fresh PostgreSQL database log each migration as
/// applied once between them. Each used to read what was applied before taking the migrator's
/// lock, so every node logged every migration.
#[tokio::test(flavor = "current_thread")]
async fn postgres_nodes_starting_together_log_each_migration_once() {
    #[derive(Clone, Default)]
    struct Log(Arc<std::sync::Mutex<Vec<u8>>>);
    impl std::io::Write for Log {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let log = Log::default();
    let writer = log.clone();
    // Global, in a test binary of its own: a thread's own subscriber misses events whose
    // callsite another test's thread registered first without one (tracing caches interest).
    tracing::subscriber::set_global_default(
        tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish(),
    )
    .unwrap();
    let migrations = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations/postgres"))
        .unwrap()
        .count();
    for _ in 0..3 {
        log.0.lock().unwrap().clear();
        let (url, name) = support::fresh_postgres_database().await;
        let d = tempfile::tempdir().unwrap();
        let blobs = d.path().join("blobs");
        let (a, b, c) = tokio::join!(
            corral_store::open(&url, &blobs),
            corral_store::open(&url, &blobs),
            corral_store::open(&url, &blobs)
        );
        let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
        let applied = text.matches("database migration applied").count();
        assert_eq!(applied, migrations, "{text}");
        for s in [a.unwrap(), b.unwrap(), c.unwrap()] {
            s.close().await;
        }
        support::drop_postgres_database(&name).await;
    }
}
