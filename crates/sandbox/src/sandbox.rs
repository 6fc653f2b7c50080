//! `Sandbox`: one isolated environment (namespaces, root, working directory, cgroup) served by its
//! init. Programs run in it one at a time through [`Execution`]; between users it is reset.

use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::Path;

use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::fcntl::OFlag;

use crate::capture::OutputSink;
use crate::control::Control;
use crate::cpu_clock::TreeClock;
use crate::error::SandboxError;
use crate::execution::{Execution, Streams, Tty};
use crate::host::{FilterKind, Host};
use crate::outcome::{Outcome, Status};
use crate::protocol::{self, Event, Request, Rlimits, Setup, SetupRoot};
use crate::spawner::Keeper;
use crate::spec::{Mount, Root, RunSpec, Runtime, Stdin};
use crate::uids::{self, UidLease};
use corral_seccomp::CompiledFilter;

/// The shape of a sandbox: what is fixed when it is built. Runs with the same shape can share a
/// pooled sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SandboxConfig {
    pub network: bool,
    pub mounts: Vec<Mount>,
    /// Size of the working directory, `/tmp` and `/dev/shm` (each).
    pub disk_bytes: u64,
    pub inodes: u64,
    /// A second path where the working directory itself is mounted (e.g. `/grade` for a grader
    /// that expects its files there and makes folders in it). Native runtime only; such a
    /// sandbox is not reused.
    pub workdir_alias: Option<std::path::PathBuf>,
    /// What `/` is; a pool keeps sandboxes per root.
    pub root: Root,
    /// Which kernel runs the programs; a pool never mixes them.
    pub runtime: Runtime,
}

impl SandboxConfig {
    /// What its seccomp program depends on.
    pub(crate) fn filter_kind(&self) -> FilterKind {
        FilterKind {
            network: self.network || matches!(&self.root, Root::Image(i) if i.is_build()),
            root_inside: matches!(&self.root, Root::Image(i) if i.runs_as_root()),
        }
    }

    /// The shape a run of `spec` needs.
    pub fn for_spec(spec: &RunSpec) -> Self {
        let build = matches!(&spec.root, Root::Image(img) if img.is_build());
        SandboxConfig {
            // Build mode always has network (package managers); every other run only on request.
            network: spec.network || build,
            root: spec.root.clone(),
            runtime: spec.runtime,
            ..Self::offline(spec.mounts.clone(), spec.limits.disk.bytes())
        }
    }

    /// A sandbox without network whose scratch filesystems hold `disk_bytes` each, with one inode
    /// per 4 KiB of it (at least 256, so tiny disks still hold a program's few files; at most 2^20,
    /// the most a tmpfs needs for any disk corral allows).
    pub fn offline(mounts: Vec<Mount>, disk_bytes: u64) -> Self {
        SandboxConfig {
            network: false,
            mounts,
            disk_bytes,
            inodes: (disk_bytes / 4096).clamp(256, 1 << 20),
            workdir_alias: None,
            root: Root::Host,
            runtime: Runtime::Native,
        }
    }
}

/// A live sandbox. Dropping it ends every process in it and removes everything it created.
pub struct Sandbox {
    id: String,
    /// Its shape. An image root's claim is in it: `corral env gc` keeps the image's layers while
    /// the sandbox lives, and the claim goes when the sandbox is dropped.
    config: SandboxConfig,
    keeper: Option<Keeper>,
    /// Compiles the stricter seccomp programs a run may ask for.
    host: Arc<Host>,
    /// The init's socket and the run accounting, which an [`Execution`] borrows.
    control: Control,
    uid: u32,
    gid: u32,
    /// Held while the sandbox lives (root mode): no other sandbox on the host gets its uid.
    _uid_lease: Option<UidLease>,
    /// Build mode: the 65536 host ids its user namespace maps, held like the uid.
    _range_lease: Option<UidLease>,
    leases: u64,
    pending_reset: Option<(u64, u64)>,
    pub landlock_abi: Option<i32>,
    /// PID 1 was forked straight into its cgroup (cgroup v2, `inside::fork_into`) instead of
    /// joining it by a write.
    forked_into_cgroup: bool,
    /// The spawner prepared the root ahead (`inside::spares`); PID 1 only finished it.
    root_prepared: bool,
    /// Every log line about this sandbox carries its id.
    span: tracing::Span,
    /// A gVisor sandbox's folder on the host (bundle, working directory); removed after the
    /// keeper (runsc) has exited.
    gvisor: Option<crate::gvisor::HostDirs>,
    /// Every run started in it is killed when this is requested (see [`Sandbox::cancel_runs_on`]).
    cancel: Option<Arc<crate::cancel::Cancel>>,
}

impl Sandbox {
    pub fn create(host: &Arc<Host>, config: &SandboxConfig) -> Result<Sandbox, SandboxError> {
        let started = Instant::now();
        match Self::build(host, config) {
            Ok(s) => {
                s.span.in_scope(|| {
                    tracing::debug!(
                        network = config.network,
                        disk_bytes = config.disk_bytes,
                        mounts = config.mounts.len(),
                        cgroup_join = if s.forked_into_cgroup {
                            "at fork"
                        } else {
                            "write"
                        },
                        root = if s.root_prepared {
                            "prepared ahead"
                        } else {
                            "built"
                        },
                        ms = started.elapsed().as_millis() as u64,
                        "sandbox created"
                    )
                });
                Ok(s)
            }
            Err(e) => {
                tracing::warn!(error = %e, network = config.network, "sandbox creation failed");
                Err(e)
            }
        }
    }

    fn build(host: &Arc<Host>, config: &SandboxConfig) -> Result<Sandbox, SandboxError> {
        let image = match &config.root {
            Root::Host => None,
            Root::Image(img) => Some(img),
        };
        // Build mode and root mode: the programs are root of a user namespace of their own.
        let build = image.is_some_and(|i| i.runs_as_root());
        if build && host.rootless {
            return Err(SandboxError::Unsupported(
                "build mode and root mode (root in a user namespace of its own over a range of host uids) need corral to run as root",
            ));
        }
        let (root, cwd) = match image {
            None => (SetupRoot::Host, crate::spec::WORKDIR.to_string()),
            Some(img) => {
                if let Some(upper) = &img.upper {
                    prepare_upper(upper)?;
                }
                let cwd = match (&img.upper, &img.working_dir) {
                    (Some(_), Some(dir)) => dir.clone(),
                    (Some(_), None) => "/".to_string(),
                    (None, _) => crate::spec::WORKDIR.to_string(),
                };
                (
                    SetupRoot::Image {
                        layers: img.layers.clone(),
                        upper: img.upper.clone(),
                        scratch_upper: img.as_root && img.upper.is_none(),
                    },
                    cwd,
                )
            }
        };
        // Build mode always has network (package managers); root mode only when asked.
        let network = config.network || image.is_some_and(|i| i.is_build());
        if build && config.runtime == Runtime::Gvisor {
            // Build and root mode's root is a user namespace over a range of host uids, with
            // idmapped layers and an upper layer: nothing gVisor's file server can be given.
            return Err(SandboxError::Unsupported(
                if image.is_some_and(|i| i.is_build()) {
                    "image builds under the gVisor runtime (build natively; run the image under gVisor)"
                } else {
                    "root mode under the gVisor runtime (a grader that runs as root runs natively)"
                },
            ));
        }
        if let Some(alias) = &config.workdir_alias {
            check_workdir_alias(alias, &config.mounts)?;
            if config.runtime == Runtime::Gvisor {
                return Err(SandboxError::Unsupported(
                    "a second path for the working directory under the gVisor runtime",
                ));
            }
        }
        // Fail closed before anything is made: a gVisor run never falls back to the host kernel.
        let runsc = match config.runtime {
            Runtime::Native => None,
            Runtime::Gvisor => Some(host.runsc()?),
        };
        let (n, name) = host.unique();
        // A uid of its own per sandbox (like isolate's boxes), unique on the host and no account's.
        // Rootless: the program is uid 1000 in its own user namespace, the caller's uid outside.
        let (uid, userns, uid_lease) = if host.rootless {
            let (u, g) = (
                nix::unistd::getuid().as_raw(),
                nix::unistd::getgid().as_raw(),
            );
            (1000, Some((u, g)), None)
        } else {
            let hint = std::process::id().wrapping_mul(31).wrapping_add(n);
            let lease = uids::lease(Path::new(uids::LOCK_DIR), hint, &host.host_ids)?;
            (lease.uid(), None, Some(lease))
        };
        let range_lease = if build {
            let hint = std::process::id().wrapping_add(n);
            Some(uids::lease_range(
                Path::new(uids::LOCK_DIR),
                hint,
                &host.host_ids,
            )?)
        } else {
            None
        };
        let build_ids = range_lease.as_ref().map(UidLease::uid);
        let filter = host.filter(FilterKind {
            network,
            root_inside: build,
        })?;
        // The sandbox's PID 1 joins this cgroup once; every program it starts inherits it, so no
        // run pays for a cgroup migration (an RCU grace period on cgroup v1).
        let no_limits = corral_cgroups::Limits {
            memory_bytes: None,
            pids: None,
        };
        let cgroup = match &uid_lease {
            // Named after the uid, which this process holds alone on the host: a supervisor with
            // the same PID in another PID namespace cannot pick the same name. One left by a
            // killed holder of this uid is empty (its processes died with their init): remove it.
            Some(lease) => {
                let cg_name = format!("sbx-u{}", lease.uid());
                for base in host.cgroups.base_dirs() {
                    let _ = std::fs::remove_dir(base.join(&cg_name));
                }
                host.cgroups.create(&cg_name, &no_limits)?
            }
            // Rootless: the caller's own delegated subtree; a name taken by a namesake process
            // (same PID, another PID namespace) is skipped.
            None => {
                let mut attempt = 0;
                loop {
                    let cg_name = format!("sbx-{name}-{attempt}");
                    match host.cgroups.create(&cg_name, &no_limits) {
                        Err(corral_cgroups::Error::Exists(_)) if attempt < 16 => attempt += 1,
                        r => break r?,
                    }
                }
            }
        };
        let procs = cgroup.procs_files()?;
        // runsc's process joins by writing (gVisor makes its own PID 1).
        let fork_target = match runsc {
            None => cgroup.fork_target()?,
            Some(_) => None,
        };
        let (mine, theirs) = protocol::channel()?;
        let mut clock = None;
        let (keeper, workdir, gvisor) = match runsc {
            None => {
                // A hint: the keeper itself checks the setup against the prepared root.
                let host_root = image.is_none()
                    && !network
                    && userns.is_none()
                    && config.mounts.is_empty()
                    && config.workdir_alias.is_none();
                let keeper = match host.spawner.keeper(&host.init, theirs, host_root) {
                    Ok(k) => k,
                    Err(e) => {
                        let _ = cgroup.destroy();
                        return Err(e);
                    }
                };
                // Before the keeper reads its setup and forks PID 1: PID 1 and every program it
                // starts inherit the clock.
                clock = TreeClock::follow(keeper.id());
                let root = File::open("/")
                    .map(OwnedFd::from)
                    .map_err(|e| SandboxError::io("opening /", e))?;
                (keeper, root, None)
            }
            Some(runsc) => {
                let launched = crate::gvisor::launch(crate::gvisor::LaunchPlan {
                    runsc,
                    init: (&host.init.path, &host.init.arg),
                    name: &format!("u{uid}"),
                    uid,
                    gid: uid,
                    disk_bytes: config.disk_bytes,
                    inodes: config.inodes,
                    network: config.network,
                    mounts: &config.mounts,
                    image_layers: image.map(|i| i.layers.as_slice()),
                    cgroup_procs: &procs,
                    control: theirs,
                });
                match launched {
                    Ok(l) => (Keeper::Child(l.runsc), l.workdir, Some(l.dirs)),
                    Err(e) => {
                        let _ = cgroup.destroy();
                        return Err(e);
                    }
                }
            }
        };
        let mut sandbox = Sandbox {
            id: name.clone(),
            config: config.clone(),
            keeper: Some(keeper),
            host: host.clone(),
            control: Control::new(mine, workdir, cgroup),
            // Who owns copied-in files, as the host sees it (build mode: the namespace's root).
            uid: build_ids.unwrap_or(userns.map_or(uid, |(u, _)| u)),
            gid: build_ids.unwrap_or(userns.map_or(uid, |(_, g)| g)),
            _uid_lease: uid_lease,
            _range_lease: range_lease,
            leases: 0,
            pending_reset: None,
            landlock_abi: None,
            forked_into_cgroup: false,
            root_prepared: false,
            span: tracing::debug_span!("sandbox", id = %name),
            gvisor,
            cancel: None,
        };
        if let Some(clock) = clock {
            sandbox.control.set_clock(clock);
        }
        let is_gvisor = sandbox.gvisor.is_some();
        let seccomp = if is_gvisor {
            crate::gvisor::traced_filter(filter)?.as_bytes().to_vec()
        } else {
            watched(filter, config.network).as_bytes().to_vec()
        };
        // Build mode: the program is root of its own user namespace.
        let uid = if build { 0 } else { uid };
        let setup = Setup {
            uid,
            gid: uid,
            userns,
            hostname: "sandbox".into(),
            network,
            disk_bytes: config.disk_bytes,
            inodes: config.inodes,
            mounts: config.mounts.clone(),
            // An image brings its own /etc; corral writes only its curated entries over it.
            etc_entries: match image {
                None => crate::inside::rootfs::default_etc(),
                Some(_) => Vec::new(),
            },
            seccomp,
            // gVisor has no Landlock (ENOSYS); what its file server can reach is the wall there.
            landlock: host.landlock && !is_gvisor,
            root,
            cwd,
            build_ids,
            gvisor: is_gvisor,
            fork_into_cgroup: fork_target.is_some(),
            workdir_alias: config
                .workdir_alias
                .as_ref()
                .map(|p| p.to_string_lossy().into_owned()),
        };
        // Under gVisor, runsc joined the cgroup before it executed (init cannot reach the host's).
        let fds: Vec<_> = if is_gvisor {
            Vec::new()
        } else {
            procs
                .iter()
                .chain(&fork_target)
                .map(|f| f.as_raw_fd())
                .collect()
        };
        protocol::send(sandbox.control.fd(), &setup, &fds)?;
        drop(procs);
        drop(fork_target);
        match protocol::recv::<Event>(sandbox.control.fd())? {
            Some((
                Event::Ready {
                    landlock_abi,
                    tasks,
                    forked_into_cgroup,
                    root_prepared,
                },
                mut fds,
            )) if fds.len() == usize::from(!is_gvisor) => {
                sandbox.forked_into_cgroup = forked_into_cgroup;
                sandbox.root_prepared = root_prepared;
                if let Some(workdir) = fds.pop() {
                    sandbox.control.set_workdir(workdir);
                }
                sandbox.control.set_init_tasks(tasks);
                sandbox.landlock_abi = landlock_abi;
                sandbox.control.set_broken(false);
                Ok(sandbox)
            }
            Some((Event::Failed { error }, _)) => Err(SandboxError::Init(error)),
            Some((other, _)) => Err(SandboxError::Protocol(format!(
                "expected Ready, got {other:?}"
            ))),
            None => Err(SandboxError::Init(
                "the sandbox init exited while building the sandbox".into(),
            )),
        }
    }

    /// A name for logs and results, unique on this machine.
    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn config(&self) -> &SandboxConfig {
        &self.config
    }

    /// Runs started in this sandbox since it was built.
    pub fn runs(&self) -> u64 {
        self.control.runs()
    }

    /// Times this sandbox was leased from a pool.
    pub fn leases(&self) -> u64 {
        self.leases
    }

    pub(crate) fn count_lease(&mut self) {
        self.leases += 1;
    }

    /// From now on every run started in the sandbox — by [`Sandbox::run`] or [`Sandbox::start`]
    /// — is killed once `cancel` is requested (see [`Execution::cancel_on`]); `None` stops that.
    /// A pool's lease clears it when the sandbox goes back.
    pub fn cancel_runs_on(&mut self, cancel: Option<Arc<crate::cancel::Cancel>>) {
        self.cancel = cancel;
    }

    pub fn is_broken(&self) -> bool {
        self.control.is_broken()
    }

    /// Memory the sandbox holds between runs (its tmpfs files — RAM, never swapped out here —,
    /// page cache and its init): what keeping it idle costs the host.
    pub fn memory_held(&self) -> Result<u64, SandboxError> {
        self.control.memory_held()
    }

    /// Whether the next run here would be charged an earlier run's memory peak (cgroup v2 before
    /// Linux 6.12 cannot reset it): the pool retires such a sandbox instead of reusing it.
    pub fn memory_peak_spent(&self) -> bool {
        self.control.peak_spent()
    }

    /// The working directory, for host-side copies (see [`crate::exists_beneath`] and the copy methods).
    pub fn workdir(&self) -> BorrowedFd<'_> {
        self.control.workdir()
    }

    pub fn copy_in(&self, dir: &std::path::Path) -> Result<(), SandboxError> {
        crate::hostfs::copy_in(dir, self.workdir(), self.uid, self.gid)
    }

    pub fn copy_out(
        &self,
        dest: &std::path::Path,
        max_bytes: u64,
    ) -> Result<Vec<String>, SandboxError> {
        crate::hostfs::copy_out(self.workdir(), dest, max_bytes)
    }

    /// Reads one regular file of the working directory (never through a link), at most `max` bytes.
    pub fn read_file(
        &self,
        rel: &std::path::Path,
        max: u64,
    ) -> Result<Option<Vec<u8>>, SandboxError> {
        crate::hostfs::read_file(self.workdir(), rel, max)
    }

    /// Makes the sandbox as good as new for the next user (see `Request::Reset` in the protocol); on failure the
    /// sandbox is broken and must be dropped.
    pub fn reset(&mut self, disk_bytes: u64, inodes: u64) -> Result<(), SandboxError> {
        self.begin_reset(disk_bytes, inodes)?;
        self.finish_reset()
    }

    /// Asks init to reset and returns at once; init works while the caller goes on.
    pub fn begin_reset(&mut self, disk_bytes: u64, inodes: u64) -> Result<(), SandboxError> {
        self.control.set_broken(true);
        self.control.send(&Request::Reset { disk_bytes, inodes })?;
        self.pending_reset = Some((disk_bytes, inodes));
        Ok(())
    }

    /// True when no reset is pending, or its answer is already waiting (collecting it won't block).
    pub fn reset_done(&self) -> bool {
        if self.pending_reset.is_none() {
            return true;
        }
        let mut fds = [nix::poll::PollFd::new(
            self.control.fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        matches!(nix::poll::poll(&mut fds, nix::poll::PollTimeout::ZERO), Ok(n) if n > 0)
    }

    /// Collects the answer to [`Sandbox::begin_reset`] (no-op when none is pending).
    pub fn finish_reset(&mut self) -> Result<(), SandboxError> {
        let Some((disk_bytes, inodes)) = self.pending_reset.take() else {
            return Ok(());
        };
        let result = self.collect_reset(disk_bytes, inodes);
        let _in = self.span.enter();
        match &result {
            Ok(()) => tracing::trace!("sandbox reset"),
            Err(e) => tracing::warn!(error = %e, "sandbox reset failed; the sandbox is broken"),
        }
        result
    }

    fn collect_reset(&mut self, disk_bytes: u64, inodes: u64) -> Result<(), SandboxError> {
        match protocol::recv::<Event>(self.control.fd())? {
            Some((Event::Ready { tasks, .. }, mut fds))
                if fds.len() == usize::from(self.gvisor.is_none()) =>
            {
                self.control.set_init_tasks(tasks);
                match fds.pop() {
                    Some(workdir) => self.control.set_workdir(workdir),
                    // gVisor's working directory is the host's: emptied here, every process of
                    // the sandbox being dead (init checked before it answered).
                    None => {
                        if let Some(dirs) = &self.gvisor {
                            dirs.reset_workdir(self.uid, self.gid)?;
                        }
                    }
                }
                self.config.disk_bytes = disk_bytes;
                self.config.inodes = inodes;
                self.control.set_broken(false);
                Ok(())
            }
            Some((Event::Failed { error }, _)) => Err(SandboxError::Init(error)),
            Some((other, _)) => Err(SandboxError::Protocol(format!(
                "expected Ready after reset, got {other:?}"
            ))),
            None => Err(SandboxError::Init(
                "the sandbox init exited during reset".into(),
            )),
        }
    }

    /// Starts a program. The returned [`Execution`] must be driven to its end before the next one.
    /// Returns once the program is exec'd: a program that cannot start is an error here.
    pub fn start(&mut self, spec: &RunSpec) -> Result<Execution<'_>, SandboxError> {
        self.launch(spec, false)
    }

    /// [`start`](Self::start); with `quiet`, returns once the run is asked for, without waiting
    /// for PID 1 to report the exec (a program that cannot start is then the execution's error).
    fn launch(&mut self, spec: &RunSpec, quiet: bool) -> Result<Execution<'_>, SandboxError> {
        spec.validate()?;
        self.finish_reset()?;
        if self.control.is_broken() {
            let _in = self.span.enter();
            tracing::warn!("refusing to run in a broken sandbox");
            return Err(SandboxError::Init(
                "this sandbox is broken and cannot run anything".into(),
            ));
        }
        let limits = spec.limits.clone();
        // Pipes for stdio, unless the run has a terminal (init makes the pty inside the sandbox
        // and sends its master back). With a terminal, stderr still gets a pipe of its own so
        // errors stay distinguishable. Under gVisor, which cannot send the master out, a
        // terminal run has pipes as well: PID 1 relays between them and the pty.
        let relayed_tty = spec.tty.is_some() && self.config.runtime == Runtime::Gvisor;
        let master_tty = spec.tty.is_some() && !relayed_tty;
        let tty_err = if master_tty { Some(pipe()?) } else { None };
        let pipes = if master_tty {
            None
        } else {
            let (out, err) = (pipe()?, pipe()?);
            set_nonblocking(out.0.as_fd())?;
            set_nonblocking(err.0.as_fd())?;
            Some((out, err))
        };
        let (stdin_r, stdin_w, stdin_data) = match &spec.stdin {
            _ if master_tty => (None, None, stdin_bytes(&spec.stdin)?),
            _ if relayed_tty => {
                let (r, w) = pipe()?;
                set_nonblocking(w.as_fd())?;
                (Some(r), Some(w), stdin_bytes(&spec.stdin)?)
            }
            Stdin::Empty => {
                let (r, _w) = pipe()?;
                (Some(r), None, Vec::new())
            }
            Stdin::File(path) => {
                let f = open_stdin_file(path)?;
                (Some(OwnedFd::from(f)), None, Vec::new())
            }
            Stdin::Bytes(b) => {
                let (r, w) = pipe()?;
                set_nonblocking(w.as_fd())?;
                // What fits in the pipe goes in now, the pipe closed behind it when that is
                // all: after `Run` is sent, PID 1 (a batch task, see `inside/wake_policy.rs`)
                // waits for this thread to sleep, so less is left to do after the send.
                let sent = prefill(w.as_fd(), b);
                let rest = b[sent..].to_vec();
                let w = if rest.is_empty() { None } else { Some(w) };
                (Some(r), w, rest)
            }
            Stdin::Pipe => {
                let (r, w) = pipe()?;
                set_nonblocking(w.as_fd())?;
                (Some(r), Some(w), Vec::new())
            }
        };
        // Under gVisor the program's processes are limited inside it; the host cgroup, which
        // counts gVisor's own threads, only has a backstop.
        let (host_pids, inner_pids) = match self.config.runtime {
            Runtime::Native => (limits.pids, None),
            Runtime::Gvisor => (
                crate::gvisor::host_pids_backstop(limits.pids),
                Some(limits.pids),
            ),
        };
        self.control
            .account_new_run(limits.memory.bytes(), host_pids)?;
        let rlimits = Rlimits {
            nofile: limits.open_files,
            fsize: limits.file_size.bytes(),
            // The kernel's own CPU limit is a backstop a little past ours.
            cpu_secs: limits.cpu_time.duration().as_secs() + 2,
            // Above the pids cgroup limit, so the cgroup (which reports hits) bites first.
            nproc: limits.pids.saturating_add(8),
        };
        // A stricter profile reports like the default one: under gVisor, through PID 1's tracing.
        let seccomp = match self
            .host
            .strict_filter(self.config.filter_kind(), &spec.seccomp)?
        {
            Some(f) if self.gvisor.is_some() => {
                Some(crate::gvisor::traced_filter(&f)?.as_bytes().to_vec())
            }
            Some(f) => Some(watched(&f, self.config.network).as_bytes().to_vec()),
            None => None,
        };
        // A terminal's master comes with `Started`: those runs always wait for it.
        let quiet_start = quiet && !master_tty;
        let (turn, cpu) = self.host.placement.begin();
        let run = Request::Run {
            argv: spec.argv.clone(),
            env: spec.environment(),
            rlimits,
            tty: spec.tty,
            seccomp,
            pids: inner_pids,
            wall_ns: Some(limits.wall_time.duration().as_nanos() as u64),
            quiet_start,
            cpu,
        };
        self.control.count_run();
        let mut sent = Vec::new();
        if let (Some(r), Some(((_, out_w), (_, err_w)))) = (&stdin_r, &pipes) {
            sent = vec![r.as_raw_fd(), out_w.as_raw_fd(), err_w.as_raw_fd()];
        }
        if let Some((_, w)) = &tty_err {
            sent = vec![w.as_raw_fd()];
        }
        // Limits count from here: the child's setup and exec are part of the run's time, so a
        // wall limit lands at the limit, not a setup's length after it.
        let sent_at = std::time::Instant::now();
        protocol::send(self.control.fd(), &run, &sent)?;
        drop(stdin_r);
        let mut fds = Vec::new();
        if !quiet_start {
            let (event, passed) = self.control.next_event_with_fds()?;
            match event {
                Event::Started => fds = passed,
                Event::Failed { error } => return Err(SandboxError::Init(error)),
                other => {
                    return Err(SandboxError::Protocol(format!(
                        "expected Started, got {other:?}"
                    )))
                }
            }
        }
        // (The output pipes were made non-blocking before the send.)
        let (out_r, err_r, stdin_w) = match pipes {
            Some(((out_r, _), (err_r, _))) => (out_r, Some(err_r), stdin_w),
            None => {
                let master = fds
                    .pop()
                    .ok_or_else(|| SandboxError::Protocol("no terminal came back".into()))?;
                let reader = master.try_clone().map_err(|e| SandboxError::io("dup", e))?;
                set_nonblocking(master.as_fd())?;
                set_nonblocking(reader.as_fd())?;
                let err = tty_err.map(|(r, _)| r);
                if let Some(e) = &err {
                    set_nonblocking(e.as_fd())?;
                }
                (reader, err, Some(master))
            }
        };
        let tty = match spec.tty {
            None => Tty::None,
            Some(_) if relayed_tty => Tty::Relayed,
            Some(_) => Tty::Master,
        };
        let streams = Streams {
            stdout: out_r,
            stderr: err_r,
            stdin: stdin_w,
            tty,
            overflow: spec.output_overflow,
        };
        let mut exec = Execution::new(
            &mut self.control,
            limits,
            streams,
            self.config.runtime,
            sent_at,
            turn,
        );
        if let Some(cancel) = &self.cancel {
            exec.cancel_on(cancel);
        }
        if !stdin_data.is_empty() {
            exec.write_stdin(&stdin_data);
        }
        if !matches!(spec.stdin, Stdin::Pipe) {
            exec.close_stdin();
        }
        Ok(exec)
    }

    /// Runs one program to its end (or its limit) and reports what happened.
    pub fn run(&mut self, spec: &RunSpec, sink: &mut dyn OutputSink) -> Outcome {
        let _in = self.span.clone().entered();
        let runtime = self.config.runtime;
        // Driven to its end here: nobody needs to know when the exec happened.
        let result = self.launch(spec, true).and_then(|e| e.finish(sink));
        match result {
            Ok(o) => {
                tracing::debug!(
                    status = o.status.as_str(),
                    blocked_syscall = o.blocked_syscall.as_deref(),
                    "run finished"
                );
                o
            }
            Err(e) if self.control.init_died_of_oom() => {
                // Where the supervisor lacks CAP_SYS_RESOURCE, init cannot be made OOM-exempt:
                // when only unattributed memory (pipe buffers, tmpfs) is left to reclaim, the
                // cgroup's OOM killer may pick the init itself. The run did hit its memory limit;
                // what it printed is lost with the init, and the sandbox is not used again.
                tracing::info!(error = %e, "the memory limit's OOM kill took the sandbox's init");
                self.control.set_broken(true);
                let mut o = Outcome::sandbox_error(spec.limits.clone(), String::new());
                o.status = Status::MemoryLimit;
                o.signal = Some(libc::SIGKILL);
                o.error = None;
                o.in_runtime(runtime)
            }
            Err(e) => {
                tracing::warn!(error = %e, "run failed; the sandbox is marked broken");
                self.control.set_broken(true);
                Outcome::sandbox_error(spec.limits.clone(), e.to_string()).in_runtime(runtime)
            }
        }
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _in = self.span.clone().entered();
        tracing::debug!(
            runs = self.runs(),
            leases = self.leases,
            "destroying sandbox"
        );
        let _ = protocol::send(self.control.fd(), &Request::Exit, &[]);
        if let Some(keeper) = self.keeper.take() {
            // PID 1 exits at once on Exit; if it does not, killing the keeper kills it (PDEATHSIG).
            keeper.end(Duration::from_secs(2));
        }
        self.control.destroy_cgroup();
    }
}

/// A working directory's second path: where a mount could go, not under the scratch mounts and
/// not where another mount goes.
fn check_workdir_alias(alias: &Path, mounts: &[Mount]) -> Result<(), SandboxError> {
    let bad = |why: &str| SandboxError::Path {
        path: alias.to_path_buf(),
        why: format!("not a place for the working directory: {why}"),
    };
    Mount {
        src: "/".into(),
        dst: alias.to_path_buf(),
        writable: true,
    }
    .validate()
    .map_err(|e| bad(&e.to_string()))?;
    if crate::inside::rootfs::on_scratch(alias) {
        return Err(bad("it is under /tmp, /dev/shm or the working directory"));
    }
    if mounts
        .iter()
        .any(|m| m.dst.starts_with(alias) || alias.starts_with(&m.dst))
    {
        return Err(bad("a mount goes there"));
    }
    Ok(())
}

/// Build mode: the upper folder must be an absolute folder; its overlayfs `workdir` (the sibling
/// `NAME.work`) is made here when missing.
fn prepare_upper(upper: &Path) -> Result<(), SandboxError> {
    let bad = |why: &str| SandboxError::Path {
        path: upper.to_path_buf(),
        why: why.into(),
    };
    if !upper.is_absolute() || upper.file_name().is_none() {
        return Err(bad("the build upper folder must be an absolute path"));
    }
    match std::fs::symlink_metadata(upper) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(bad("the build upper folder is not a folder")),
        Err(e) => return Err(bad(&format!("the build upper folder is missing: {e}"))),
    }
    let work = crate::inside::image_root::overlay_workdir(upper);
    std::fs::create_dir_all(&work)
        .map_err(|e| SandboxError::io(format!("creating {}", work.display()), e))
}

/// Starts the native sandbox's init: the corral binary itself, with the control socket as fd 3.
/// What a terminal run types in at the start: the given bytes, or a file's contents.
fn stdin_bytes(stdin: &Stdin) -> Result<Vec<u8>, SandboxError> {
    match stdin {
        Stdin::Empty | Stdin::Pipe => Ok(Vec::new()),
        Stdin::Bytes(b) => Ok(b.clone()),
        Stdin::File(path) => {
            use std::io::Read;
            // Typed in whole at the start: a bounded amount (`/dev/zero` never ends).
            const MAX: u64 = 64 << 20;
            let mut data = Vec::new();
            open_stdin_file(path)?
                .take(MAX + 1)
                .read_to_end(&mut data)
                .map_err(|e| SandboxError::Path {
                    path: path.clone(),
                    why: format!("cannot read stdin file: {e}"),
                })?;
            if data.len() as u64 > MAX {
                return Err(SandboxError::Path {
                    path: path.clone(),
                    why: "stdin file: a terminal run types in at most 64 MiB".into(),
                });
            }
            Ok(data)
        }
    }
}

/// Opens a stdin file for the program. The descriptor is the supervisor's (root's) and goes to
/// the program as is, so only what is data and nothing more: a regular file, a pipe (`--stdin
/// <(cmd)`), or `/dev/null`, `/dev/zero`, `/dev/full`, `/dev/random`, `/dev/urandom`. A folder
/// would let the program list it, a device (`/dev/sda`, `/dev/mem`) read the host's disk or
/// memory, a socket talk to whatever is behind it.
pub fn open_stdin_file(path: &Path) -> Result<File, SandboxError> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let refuse = |why: String| SandboxError::Path {
        path: path.to_path_buf(),
        why,
    };
    let f = File::open(path).map_err(|e| refuse(format!("cannot open stdin file: {e}")))?;
    let meta = f
        .metadata()
        .map_err(|e| refuse(format!("cannot open stdin file: {e}")))?;
    let t = meta.file_type();
    // The memory devices (major 1) that hold no data of anyone's: null, zero, full, random, urandom.
    let harmless_device = t.is_char_device()
        && libc::major(meta.rdev()) == 1
        && [3, 5, 7, 8, 9].contains(&libc::minor(meta.rdev()));
    if t.is_file() || t.is_fifo() || harmless_device {
        return Ok(f);
    }
    let what = if t.is_dir() {
        "a folder"
    } else if t.is_socket() {
        "a socket"
    } else {
        "a device"
    };
    Err(refuse(format!(
        "the stdin file is {what}: give a regular file, a pipe or /dev/null"
    )))
}

/// A native sandbox's program: without network, behind the socket watch, so that PID 1 learns
/// which runs reached for their network namespace and a reset reads the namespace's counters
/// only after those (reading them is most of a reset's CPU time otherwise, and grows with the
/// host's CPU count; see `inside::netns`). With network the namespace is the host's: nothing
/// to watch. Under gVisor, whose filter traces instead of notifying, the reset always reads.
fn watched(filter: &CompiledFilter, network: bool) -> std::borrow::Cow<'_, CompiledFilter> {
    if network {
        std::borrow::Cow::Borrowed(filter)
    } else {
        std::borrow::Cow::Owned(filter.with_socket_watch())
    }
}

fn pipe() -> Result<(OwnedFd, OwnedFd), SandboxError> {
    nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(|e| SandboxError::io("pipe", e.into()))
}

/// Writes what fits of `data` into a fresh non-blocking pipe; returns how much went in.
fn prefill(w: BorrowedFd<'_>, data: &[u8]) -> usize {
    if data.is_empty() {
        return 0;
    }
    // EAGAIN (full) or any other failure: the execution's loop writes the rest and reports.
    nix::unistd::write(w, data).unwrap_or(0)
}

/// One `ioctl(FIONBIO)`: no read of the old flags first (two `fcntl`s for each pipe of a run).
fn set_nonblocking(fd: BorrowedFd<'_>) -> Result<(), SandboxError> {
    rustix::io::ioctl_fionbio(fd, true)
        .map_err(|e| SandboxError::io("making a pipe non-blocking", e.into()))
}

/// Runs `spec` in a fresh sandbox: build, copy the folder in, run, copy out, tear down.
pub fn run_fresh(host: &Arc<Host>, spec: &RunSpec, sink: &mut dyn OutputSink) -> Outcome {
    let fail = |e: SandboxError| {
        Outcome::sandbox_error(spec.limits.clone(), e.to_string()).in_runtime(spec.runtime)
    };
    if let Err(e) = spec.validate() {
        return fail(e.into());
    }
    let mut sandbox = match Sandbox::create(host, &SandboxConfig::for_spec(spec)) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    run_in(&mut sandbox, spec, sink)
}

/// Copy in, run, copy out — in an existing sandbox.
pub fn run_in(sandbox: &mut Sandbox, spec: &RunSpec, sink: &mut dyn OutputSink) -> Outcome {
    let runtime = sandbox.config().runtime;
    let fail = |e: SandboxError| {
        Outcome::sandbox_error(spec.limits.clone(), e.to_string()).in_runtime(runtime)
    };
    if let Some(dir) = &spec.dir {
        if let Err(e) = sandbox.copy_in(dir) {
            return fail(e);
        }
    }
    let mut outcome = sandbox.run(spec, sink);
    if let (Some(dest), false) = (&spec.copy_out, outcome.status == Status::SandboxError) {
        // The program ran: a copy that fails now (a destination changed since the spec was
        // checked, a file where the run made a folder) is reported beside its outcome, which
        // it must not replace.
        match sandbox.copy_out(dest, spec.limits.disk.bytes()) {
            Ok(skipped) => outcome.copy_out_skipped = skipped,
            Err(e) => outcome.copy_out_error = Some(e.to_string()),
        }
    }
    outcome
}
