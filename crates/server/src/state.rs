//! What the service shares between requests, workers and housekeeping: configuration, store,
//! sandbox pool, kept sandboxes, admission, metrics, rate limits, revoked tokens, languages, the
//! queue.

use std::path::PathBuf;
use std::sync::Arc;

use corral_sandbox::{Limits, Pool};
use corral_store::Store;

use crate::config::Config;
use crate::data_lock::DataLock;
use crate::error::ServerError;
use crate::metrics::Metrics;
use crate::ratelimit::RateLimiter;
use crate::service::kept_sandboxes::KeptSandboxes;
use crate::service::loaded_suites::LoadedSuites;
use crate::service::per_caller::PerCaller;
use crate::service::pinned_folders::PinnedFolders;
use crate::service::revocations::Revocations;
use crate::service::runner::Runner;
use crate::service::store_health::StoreHealth;
use crate::service::submissions::queue::QueueHandle;
use crate::service::this_node::ThisNode;
use crate::service::token_cache::TokenCache;

pub struct AppState {
    pub config: Config,
    pub caps: Limits,
    pub defaults: Limits,
    pub store: Arc<dyn Store>,
    pub pool: Arc<Pool>,
    pub sandboxes: KeptSandboxes,
    /// This server among those sharing its database.
    pub node: ThisNode,
    pub runner: Runner,
    /// Checks graded at once, `/check`'s and the in-process queue workers' together
    /// (`grading_slots`).
    pub grading_slots: Arc<corral_checks::GradingSlots>,
    /// Each caller's `/check` gradings under way (capped at `max_sandboxes_per_caller`).
    pub gradings: PerCaller,
    /// Each caller's open WebSockets (capped at `max_websockets_per_caller`).
    pub websockets: PerCaller,
    pub metrics: Arc<Metrics>,
    pub limiter: RateLimiter,
    /// Revoked tokens, for connections authenticated before the revocation.
    pub revocations: Arc<Revocations>,
    pub token_cache: TokenCache,
    /// Suites loaded when submissions were accepted, by their files' content.
    pub loaded_suites: LoadedSuites,
    /// Folder suites pinned a moment ago, by the state of their folder.
    pub pinned_folders: PinnedFolders,
    /// Languages for `/languages` and check suites.
    pub languages: corral_checks::LanguageRegistry,
    /// The data folder's image store (`DATA/images`): the only images requests may name.
    pub images: corral_images::Store,
    /// Image builds asked for over HTTP, one at a time.
    pub image_builds: crate::service::image_builds::ImageBuilds,
    /// Temporary folders (materialised uploads) live here.
    pub tmp_dir: PathBuf,
    /// Fires once when the server starts shutting down.
    pub shutdown: tokio::sync::watch::Sender<bool>,
    /// The requests in flight that do work: a shutdown keeps answering until they are done.
    pub work_requests: crate::service::work_requests::WorkRequests,
    /// The submission queue's in-process signals.
    pub queue: QueueHandle,
    /// The store's last write probe, for `/health`.
    pub store_health: StoreHealth,
    /// Held while a regrade looks for one already pending and queues its own, so two clicks at
    /// once queue one (`service/submissions/regrade.rs`).
    pub regrading: tokio::sync::Mutex<()>,
    /// The data folder, this server's alone while it runs.
    _data_lock: DataLock,
}

pub type SharedState = Arc<AppState>;

impl AppState {
    /// The state of a server on `config`'s data folder, which `data_lock` holds for it.
    pub fn new(
        config: Config,
        store: Arc<dyn Store>,
        pool: Arc<Pool>,
        data_lock: DataLock,
    ) -> Result<SharedState, ServerError> {
        config.validate()?;
        if data_lock.dir() != config.data_dir {
            return Err(ServerError::Config(format!(
                "the data folder {} is not the one locked ({})",
                config.data_dir.display(),
                data_lock.dir().display()
            )));
        }
        let metrics = Arc::new(Metrics::new());
        let tmp_dir = config.data_dir.join("tmp");
        // Leftovers of a crash: nothing in tmp outlives the process that made it (and no other
        // server uses this folder: `data_lock`).
        let _ = std::fs::remove_dir_all(&tmp_dir);
        std::fs::create_dir_all(&tmp_dir).map_err(|e| ServerError::Io {
            what: format!("creating {}", tmp_dir.display()),
            source: e,
        })?;
        let (shutdown, _) = tokio::sync::watch::channel(false);
        let languages = corral_checks::LanguageRegistry::load(config.languages.as_deref())
            .map_err(|e| ServerError::Config(format!("languages: {e}")))?;
        let images = corral_images::Store::open(&config.data_dir).map_err(|e| ServerError::Io {
            what: "opening the image store".into(),
            source: std::io::Error::other(e),
        })?;
        let caps = within_host(config.caps()?, corral_sandbox::host_open_files_max());
        let node = ThisNode::default();
        let queue = QueueHandle::new(&config, node.id())?;
        Ok(Arc::new(AppState {
            defaults: config.default_limits()?.clamp_to(&caps),
            caps,
            store,
            pool,
            sandboxes: KeptSandboxes::new(
                config.max_sandboxes,
                config.max_sandboxes_per_caller,
                crate::config::kept_memory_max(&config),
                config.sandbox_ttl.duration(),
                node.id(),
            ),
            node,
            runner: Runner::new(
                config.parallelism,
                config.reserved_run_slots,
                config.queue,
                metrics.clone(),
            ),
            grading_slots: corral_checks::GradingSlots::new(config.grading_slots),
            gradings: PerCaller::default(),
            websockets: PerCaller::default(),
            metrics,
            limiter: RateLimiter::default(),
            revocations: Arc::default(),
            token_cache: TokenCache::default(),
            loaded_suites: LoadedSuites::default(),
            pinned_folders: PinnedFolders::default(),
            languages,
            images,
            image_builds: crate::service::image_builds::ImageBuilds::new(
                config.images.max_pending_builds,
            ),
            tmp_dir,
            shutdown,
            work_requests: Default::default(),
            queue,
            store_health: StoreHealth::default(),
            regrading: tokio::sync::Mutex::new(()),
            _data_lock: data_lock,
            config,
        }))
    }

    pub fn is_shutting_down(&self) -> bool {
        *self.shutdown.borrow()
    }
}

/// The caps, with `open_files` no higher than this host's hard limit (`host_max`), which no
/// sandbox can exceed: a request above it is then clamped and told so (`limits_clamped`), as
/// above any other cap, instead of failing in the sandbox.
fn within_host(mut caps: Limits, host_max: u64) -> Limits {
    if caps.open_files > host_max {
        tracing::warn!(
            configured = caps.open_files,
            host_max,
            "caps.open_files is above this host's hard limit on open files (RLIMIT_NOFILE); \
             runs get at most the host's"
        );
        caps.open_files = host_max;
    }
    caps
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_open_files_cap_is_at_most_the_hosts_hard_limit() {
        let caps = Limits {
            open_files: 1 << 20,
            ..Limits::default()
        };
        assert_eq!(within_host(caps.clone(), 20_000).open_files, 20_000);
        assert_eq!(within_host(caps, 1 << 20).open_files, 1 << 20);
        let low = Limits::default();
        assert_eq!(within_host(low.clone(), 20_000), low);
    }
}
