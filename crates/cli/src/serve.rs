//! `corral serve`: the HTTP service (see the README's "HTTP service" section).

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use corral_sandbox::{Limits, Millis};
use corral_server::{Config, ServerError};

use crate::errors::OrUsage;

#[derive(Args, Debug)]
#[command(
    after_help = "Configuration: the TOML file (--config), then CORRAL_* environment variables \
    (CORRAL_LISTEN, CORRAL_DATA, CORRAL_DATABASE_URL, CORRAL_PARALLELISM, CORRAL_SANDBOX_TTL, \
    CORRAL_RETENTION, CORRAL_LANGUAGES, CORRAL_DEV_NO_AUTH, CORRAL_DEFAULT_RUNTIME, \
    CORRAL_FORCE_GVISOR), then these flags. Logs: RUST_LOG-style filter in CORRAL_LOG."
)]
pub struct ServeArgs {
    /// A TOML configuration file (keys as in the README: listen, data_dir, caps, default_limits, …).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Address to listen on [default: 127.0.0.1:8080; port 0 picks a free port].
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
    /// Data folder: database, uploaded files, temporary files [default: ./corral-data].
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,
    /// Database URL: sqlite://PATH or postgres://USER@HOST/DB [default: sqlite://DATA/corral.db].
    #[arg(long, visible_alias = "database", value_name = "URL")]
    database_url: Option<String>,
    /// Runs at once [default: the number of CPUs].
    #[arg(long, value_name = "N")]
    parallelism: Option<usize>,
    /// Runs waiting for a slot before new ones are refused with 503 [default: 64].
    #[arg(long, value_name = "N")]
    queue: Option<usize>,
    /// Idle time before a kept sandbox is destroyed [default: 5m].
    #[arg(long, value_name = "DURATION")]
    sandbox_ttl: Option<Millis>,
    /// In-process workers judging queued submissions [default: --parallelism; 0: remote workers only].
    #[arg(long, value_name = "N")]
    workers: Option<usize>,
    /// Serve without authentication: every caller is one admin. Local development only.
    #[arg(long)]
    dev_no_auth: bool,
    /// Print logs as JSON lines.
    #[arg(long)]
    log_json: bool,
}

pub fn main(args: ServeArgs) -> i32 {
    crate::errors::report("serve", serve(args))
}

fn config(args: &ServeArgs) -> anyhow::Result<Config> {
    let mut c = Config::load(args.config.as_deref())?;
    if let Some(v) = &args.listen {
        c.listen = v.clone();
    }
    if let Some(v) = &args.data {
        c.data_dir = v.clone();
    }
    if let Some(v) = &args.database_url {
        c.database_url = Some(v.clone());
    }
    if let Some(v) = args.parallelism {
        c.parallelism = v;
    }
    if let Some(v) = args.queue {
        c.queue = v;
    }
    if let Some(v) = args.workers {
        c.submissions.workers = Some(v);
    }
    if let Some(v) = args.sandbox_ttl {
        c.sandbox_ttl = v;
    }
    if args.dev_no_auth {
        c.dev_no_auth = true;
    }
    c.validate()?;
    Ok(c)
}

/// The async runtime's worker threads: half the CPUs, at least one (`TOKIO_WORKER_THREADS`
/// overrides). The runs themselves take the rest: each runs on a blocking thread, and its
/// sandbox's processes need CPUs of their own. A worker per CPU made more wake-ups than work — a
/// parked worker is woken to steal each new task — measured with `wrk` on 2 CPUs (three rounds of
/// `POST /run`, alternating): 2 workers 1,301–1,343 req/s and 7.3 context switches of the server
/// per request, 1 worker 1,352–1,364 req/s and 5.8.
fn async_workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1))
}

fn serve(args: ServeArgs) -> anyhow::Result<()> {
    crate::logs::init(crate::logs::Kind::Service, args.log_json);
    // The file, the CORRAL_* variables and the flags together: what they say is the caller's.
    let config = config(&args).usage()?;
    crate::data_folder::prepare(&config.data_dir)?;
    // Before anything else: a second server on this folder stops here, touching nothing.
    let data_lock = corral_server::DataLock::acquire(&config.data_dir)?;
    // A mistyped --data or the wrong working directory makes a new folder: say which is used.
    eprintln!(
        "corral serve: data folder {}",
        std::path::absolute(&config.data_dir)
            .unwrap_or_else(|_| config.data_dir.clone())
            .display()
    );
    // Sandboxes are started by executing this binary as their init (never by forking the server).
    let pool = crate::sandboxes::service_pool(config.parallelism)?;
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    if std::env::var_os("TOKIO_WORKER_THREADS").is_none() {
        rt.worker_threads(async_workers());
    }
    let rt = rt
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let result = rt.block_on(async move {
        let store = corral_store::open(&config.database_url(), &config.blobs_dir())
            .await
            .with_context(|| {
                format!(
                    "opening the store {}",
                    corral_store::shown_url(&config.database_url())
                )
            })?;
        // A store it cannot write would answer reads and fail every write: refused at start.
        store.check_writable().await.with_context(|| {
            format!(
                "the store {} cannot be written: corral serve writes it (tokens, uploads, the \
                 submission queue)",
                corral_store::shown_url(&config.database_url())
            )
        })?;
        // Everything that can still fail (the address, the state) comes before the first admin
        // token is made: it is shown once, and a start that then failed would have used it up.
        let listener = corral_server::bind(&config.listen)
            .await
            .map_err(|e| match &e {
                // Not an address ("nonsense", no port); one in use or not ours is a failure.
                ServerError::Io { source, .. }
                    if source.kind() == std::io::ErrorKind::InvalidInput =>
                {
                    crate::errors::usage(e)
                }
                _ => e.into(),
            })?;
        let addr = listener.local_addr().context("reading the bound address")?;
        let caps: Limits = config.caps().usage()?;
        let dev_no_auth = config.dev_no_auth;
        let state = corral_server::AppState::new(config, store, pool, data_lock).map_err(|e| {
            // What the configuration says (a languages file, limits over the caps).
            if matches!(e, ServerError::Config(_)) {
                crate::errors::usage(e)
            } else {
                e.into()
            }
        })?;
        if dev_no_auth {
            eprintln!(
                "corral serve: WARNING: --dev-no-auth: no authentication, every caller is an admin"
            );
        } else if let Some(token) = corral_server::first_admin_token(state.store.as_ref()).await? {
            eprintln!(
                "corral serve: first start: admin token (shown once, stored hashed): {token}"
            );
        }
        eprintln!(
            "corral serve: listening on http://{addr} (caps: cpu {} wall {} memory {} pids {})",
            caps.cpu_time, caps.wall_time, caps.memory, caps.pids
        );
        corral_server::serve(state, listener, corral_server::shutdown_signal()).await?;
        anyhow::Ok(())
    });
    // `serve` waited `shutdown_grace` for running programs; a run still going on a blocking
    // thread past it (a program sleeping to its wall limit) would hold the runtime's drop, and
    // the process, until it ended. Its sandbox dies with this process (its init's parent-death
    // signal), and the next start removes what its cgroups left.
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    result
}
