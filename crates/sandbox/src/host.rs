//! `Host`: what a process needs once to make sandboxes — the cgroup manager, the compiled seccomp
//! programs and the path of the init binary. Built once, shared by every sandbox.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use corral_seccomp::{CompiledFilter, Profile, Restrictions};

use crate::error::SandboxError;
use crate::spawner::{InitProgram, Spawner};

pub struct Host {
    pub(crate) cgroups: Box<dyn corral_cgroups::Manager>,
    pub(crate) init: InitProgram,
    /// The default profile's programs, by [`FilterKind::index`], compiled on first use.
    filters: [OnceLock<Result<CompiledFilter, String>>; 4],
    /// Programs of stricter profiles, by (kind, restrictions), compiled on first use.
    strict_filters: Mutex<HashMap<(FilterKind, Restrictions), Arc<CompiledFilter>>>,
    pub(crate) landlock: bool,
    /// Not root: sandboxes live in user namespaces owned by the caller.
    pub(crate) rootless: bool,
    /// The uids and gids of the host's accounts, which no sandbox may run as.
    pub(crate) host_ids: std::collections::BTreeSet<u32>,
    /// `runsc`, looked for at the first gVisor sandbox (or its absence, with the reason).
    runsc: OnceLock<Result<crate::gvisor::Runsc, String>>,
    /// Forks the native sandboxes' inits after the first (see [`crate::spawner`]).
    pub(crate) spawner: Spawner,
    /// The CPU a run alone starts its program on (see [`crate::placement`]).
    pub(crate) placement: crate::placement::Placement,
}

impl Host {
    /// Detects cgroups and prepares to start sandboxes with `init`. Fails when this host cannot
    /// give full isolation (run `corral doctor` to see why).
    pub fn new(init: InitProgram) -> Result<Self, SandboxError> {
        crate::cpu_clock::warm_up();
        let rootless = !nix::unistd::geteuid().is_root();
        if rootless {
            let max = std::fs::read_to_string("/proc/sys/user/max_user_namespaces")
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
                .unwrap_or(0);
            if max == 0 {
                return Err(SandboxError::Init(
                    "rootless mode needs user namespaces, which this host disables (user.max_user_namespaces = 0); run corral as root or enable them".into(),
                ));
            }
        }
        let rootless_err = |e: corral_cgroups::Error| {
            SandboxError::Init(format!(
                "rootless mode needs a cgroup subtree this user may write (cgroup v2 with systemd: `systemd-run --user --scope -p Delegate=yes corral ...`; cgroup v1: a folder per controller chowned to the user, named with CORRAL_CGROUP_PARENT): {e}"
            ))
        };
        let cgroups = corral_cgroups::detect().map_err(|e| {
            if rootless {
                rootless_err(e)
            } else {
                SandboxError::Cgroup(e)
            }
        })?;
        if rootless {
            // The base folder may exist (made by root) and still not be ours to write: find out
            // now, with a cgroup made and removed, rather than at the first sandbox.
            let probe = cgroups
                .create(
                    &format!("probe-{}", std::process::id()),
                    &corral_cgroups::Limits::default(),
                )
                .map_err(rootless_err)?;
            probe.destroy().map_err(rootless_err)?;
        }
        sweep_stale_cgroups(cgroups.as_ref());
        raise_open_files_limit();
        tracing::debug!(
            rootless,
            cgroups = ?cgroups.version(),
            "sandbox host ready"
        );
        Ok(Host {
            cgroups,
            init,
            filters: Default::default(),
            strict_filters: Mutex::new(HashMap::new()),
            landlock: true,
            rootless,
            host_ids: crate::uids::host_ids(),
            runsc: OnceLock::new(),
            spawner: Spawner::new(),
            placement: crate::placement::Placement::new(),
        })
    }

    /// The seccomp program, compiled on first use and then reused for every run.
    pub(crate) fn filter(&self, kind: FilterKind) -> Result<&CompiledFilter, SandboxError> {
        self.filters[kind.index()]
            .get_or_init(|| CompiledFilter::compile(&profile(kind)).map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|e| SandboxError::Init(format!("compiling the seccomp profile: {e}")))
    }

    /// The program of a stricter profile (see [`Restrictions`]) for a sandbox of `kind`; `None`
    /// for the default profile (the sandbox's own program, shipped once).
    pub(crate) fn strict_filter(
        &self,
        kind: FilterKind,
        restrictions: &Restrictions,
    ) -> Result<Option<Arc<CompiledFilter>>, SandboxError> {
        /// Allow-lists come from requests: past this many, programs are compiled for one run
        /// and not kept.
        const KEPT: usize = 64;
        if restrictions.is_default() {
            return Ok(None);
        }
        let key = (kind, restrictions.clone());
        if let Some(f) = self.lock_strict().get(&key) {
            return Ok(Some(f.clone()));
        }
        let filter = Arc::new(
            CompiledFilter::compile(&profile(kind).with_restrictions(restrictions.clone()))
                .map_err(|e| {
                    SandboxError::Init(format!("compiling the seccomp profile {restrictions}: {e}"))
                })?,
        );
        let mut kept = self.lock_strict();
        if kept.len() < KEPT {
            kept.insert(key, filter.clone());
        }
        Ok(Some(filter))
    }

    fn lock_strict(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<(FilterKind, Restrictions), Arc<CompiledFilter>>> {
        // A panic while holding it leaves nothing half-written: the map is still valid.
        self.strict_filters
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The `runsc` gVisor sandboxes are started with; the error says why gVisor cannot be used
    /// (a run that asked for it then fails: it never falls back to the native runtime).
    pub fn runsc(&self) -> Result<&crate::gvisor::Runsc, SandboxError> {
        self.runsc
            .get_or_init(|| {
                let found = crate::gvisor::find_runsc();
                if self.rootless {
                    return Err("the gVisor runtime needs root (runsc's sandbox is set up by root); run corral as root or use the native runtime".into());
                }
                if let Ok(r) = &found {
                    crate::gvisor::sweep_stale(Some(&r.path));
                }
                found
            })
            .as_ref()
            .map_err(|e| SandboxError::Init(format!("the gVisor runtime is unusable: {e}")))
    }

    /// A name unique on this machine for a sandbox (cgroup names, uids): the process id and a
    /// counter shared by every `Host` of the process.
    pub(crate) fn unique(&self) -> (u32, String) {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        (n, format!("{pid}-{n}"))
    }

    /// True when sandboxes are built without root, in user namespaces.
    pub fn rootless(&self) -> bool {
        self.rootless
    }

    /// Whether build and root mode (programs root of their own user namespace over an image's
    /// idmapped layers, see `ImageRoot::as_root`) can work here, and if not, why.
    pub fn root_mode(&self) -> Result<(), &'static str> {
        if self.rootless {
            Err("corral runs rootless")
        } else if crate::doctor::kernel_version() < (5, 19) {
            Err("this kernel has no idmapped overlayfs layers (Linux 5.19+)")
        } else {
            Ok(())
        }
    }

    pub fn cgroup_version(&self) -> corral_cgroups::Version {
        self.cgroups.version()
    }
}

/// What a sandbox's seccomp program depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct FilterKind {
    pub network: bool,
    /// The programs are root of their own user namespace (build and root mode): keyring calls
    /// fail quietly (see `Profile::with_quiet_keyrings`).
    pub root_inside: bool,
}

impl FilterKind {
    fn index(self) -> usize {
        usize::from(self.network) | usize::from(self.root_inside) << 1
    }
}

/// The default profile of a sandbox of `kind`.
fn profile(kind: FilterKind) -> Profile {
    Profile::default_profile()
        .with_network(kind.network)
        .with_unix_sockets(!kind.network || abstract_sockets_scoped())
        .with_quiet_keyrings(kind.root_inside)
}

/// Removes empty sandbox cgroups whose owner is gone: a supervisor killed with SIGKILL cannot
/// clean up after itself, but its sandboxes died with it (their init exits when the supervisor's
/// socket closes), leaving only empty directories. `sbx-uUID` (root) is stale when no process
/// holds that uid's lease; `sbx-PID-N-A` (rootless) when no process has that PID.
fn sweep_stale_cgroups(cgroups: &dyn corral_cgroups::Manager) {
    for base in cgroups.base_dirs() {
        let Ok(entries) = std::fs::read_dir(&base) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(rest) = name.strip_prefix("sbx-") else {
                continue;
            };
            let gone = if let Some(uid) = rest.strip_prefix('u').and_then(|u| u.parse().ok()) {
                // Holding the lease while removing keeps a new sandbox of that uid from racing us.
                match crate::uids::try_hold(std::path::Path::new(crate::uids::LOCK_DIR), uid) {
                    Some(_lease) => {
                        remove_stale(&e.path());
                        continue;
                    }
                    None => false,
                }
            } else if let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<i32>().ok()) {
                nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None)
                    == Err(nix::errno::Errno::ESRCH)
            } else {
                false
            };
            if gone {
                remove_stale(&e.path());
            }
        }
    }
}

/// rmdir only succeeds on a cgroup with no processes and no children; one that is not empty is
/// some other process's and stays.
fn remove_stale(path: &std::path::Path) {
    match std::fs::remove_dir(path) {
        Ok(()) => tracing::debug!(cgroup = %path.display(), "removed a stale sandbox cgroup"),
        Err(e) => {
            tracing::trace!(cgroup = %path.display(), error = %e, "a stale-looking cgroup stays")
        }
    }
}

/// Whether Landlock can keep a program from the abstract unix sockets of its network namespace
/// (ABI 6, Linux 6.12). Without it, a sandbox that shares the host's network namespace gets no
/// `socket(AF_UNIX)` at all: the host's abstract sockets (a container runtime's, a desktop
/// bus's) would otherwise be one `connect` away.
pub(crate) fn abstract_sockets_scoped() -> bool {
    crate::inside::landlock::kernel_abi() >= 6
}

/// Each live sandbox holds about twenty descriptors here (its socket, its working directory, the
/// cgroup control files kept open for its runs); a server with a few dozen sandboxes would hit
/// the usual soft limit of 1024. The soft limit is raised to the hard one, as Go's runtime does;
/// sandboxed programs get their own limit from their run's `open_files`.
fn raise_open_files_limit() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        if soft < hard {
            let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
        }
    }
}
