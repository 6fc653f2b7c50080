//! The one place the CLI installs its log subscriber: stderr, filtered by `CORRAL_LOG`
//! (a `RUST_LOG`-style filter), colour only on a terminal.

/// The level shown when `CORRAL_LOG` is unset: `info` for the long-running services
/// (`serve`, `worker`), `warn` for one-shot commands so their normal output stays as it was.
#[derive(Clone, Copy)]
pub enum Kind {
    Service,
    OneShot,
    /// `check`, `grade`, `gradescope`: as `OneShot`, without the engine's "check errored"
    /// warnings. The report (and `grade`'s gradebook) says which check errored and why, for
    /// which student; the log line named neither student nor submission, between progress.
    Grading,
}

/// The filter of `kind` when `CORRAL_LOG` is unset. A service leaves out PostgreSQL's notices
/// at their own level (info), which say only that a statement had nothing to do: every start
/// logged `relation "_sqlx_migrations" already exists, skipping` twice, among the lines an
/// operator reads after an upgrade. PostgreSQL's warnings still show.
fn fallback(kind: Kind) -> &'static str {
    match kind {
        Kind::Service => "info,sqlx::postgres::notice=warn",
        Kind::OneShot => "warn",
        Kind::Grading => "warn,corral_checks::engine=error",
    }
}

/// Installs the subscriber; `json` prints one JSON object a line.
pub fn init(kind: Kind, json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("CORRAL_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(fallback(kind)));
    // Colour only on a terminal: `corral serve 2> server.log` must not write escape sequences.
    let colour = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let b = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour)
        .with_writer(std::io::stderr);
    if json {
        b.json().init();
    } else {
        b.init();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a service logs by default: its own info lines (a migration applied), PostgreSQL's
    /// warnings, not PostgreSQL's notices.
    #[test]
    fn a_service_leaves_out_postgres_notices_by_default() {
        #[derive(Clone, Default)]
        struct Buf(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
        impl std::io::Write for Buf {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buf = Buf::default();
        let writer = buf.clone();
        let sub = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(fallback(Kind::Service)))
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(sub, || {
            tracing::info!(target: "sqlx::postgres::notice", "relation already exists, skipping");
            tracing::warn!(target: "sqlx::postgres::notice", "a postgres warning");
            tracing::info!(target: "corral_store::sql::migrate", "database migration applied");
        });
        let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        assert!(!text.contains("already exists"), "{text}");
        assert!(text.contains("a postgres warning"), "{text}");
        assert!(text.contains("database migration applied"), "{text}");
    }
}
