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

/// Installs the subscriber; `json` prints one JSON object a line.
pub fn init(kind: Kind, json: bool) {
    let fallback = match kind {
        Kind::Service => "info",
        Kind::OneShot => "warn",
        Kind::Grading => "warn,corral_checks::engine=error",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("CORRAL_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(fallback));
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
