//! `Pool`: warm sandboxes, so a run costs a fork + exec instead of building namespaces and a root.
//!
//! A run takes an idle sandbox of the same shape (network, mounts, disk size) or builds one,
//! runs, and gives it back. Giving back starts a complete reset in the sandbox's init — fresh
//! scratch mounts, fresh IPC and network namespaces, PID numbering restarted, every process dead —
//! while the caller already has its result; the next user collects the reset's answer first. A
//! sandbox whose reset fails, or that served `recycle_after` runs, is destroyed, never reused.
//!
//! A gVisor sandbox serves one lease only (one submission: its compile and its tests), never a
//! second user, however clean its reset. Its start-up (~150 ms) is hidden instead by starting a
//! replacement in the background when one is given back, kept idle until a lease takes it.
//!
//! A sandbox that is not kept (a fresh pool's, a full pool's, a retired or broken one) is torn
//! down by the pool's reaper thread, off the caller's path like the reset: its init's exit and
//! the cgroup's removal (~1.5 ms) no longer delay the caller's result. Dropping the pool waits
//! until every sandbox handed to the reaper is gone, so nothing outlives it. A sandbox being torn
//! down does not count against `max_active`.

use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use crate::capture::OutputSink;
use crate::error::SandboxError;
use crate::host::Host;
use crate::outcome::Outcome;
use crate::sandbox::{run_in, Sandbox, SandboxConfig};
use crate::spec::{Root, RunSpec, Runtime};

/// How the pool behaves.
#[derive(Debug, Clone)]
pub struct PoolConfig {
    /// Idle sandboxes kept at most (beyond that, returned sandboxes are destroyed).
    pub max_idle: usize,
    /// A sandbox is destroyed after this many leases (0 = never).
    pub recycle_after: u64,
    /// Build a new sandbox for every run instead of reusing.
    pub fresh: bool,
    /// Sandboxes leased at once; further leases wait (0 = no bound).
    pub max_active: usize,
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig {
            max_idle: 8,
            recycle_after: 1000,
            fresh: false,
            max_active: 0,
        }
    }
}

pub struct Pool {
    host: Arc<Host>,
    config: PoolConfig,
    idle: Mutex<Vec<Sandbox>>,
    /// Leases out right now, and a signal for those waiting on `max_active`.
    active: Mutex<usize>,
    freed: Condvar,
    /// Sandboxes that are not kept go here to be destroyed (see the module's comment); started
    /// with the first one.
    reaper: Mutex<Option<Reaper>>,
    /// Spare gVisor sandboxes being started ([`Pool::replenish`]): the pool's drop waits for
    /// them, so a process that ends right after its last run leaves no half-made sandbox.
    replenishing: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

/// The thread that destroys the sandboxes sent to it, in order.
struct Reaper {
    to_destroy: Sender<Sandbox>,
    thread: JoinHandle<()>,
}

impl Pool {
    pub fn new(host: Arc<Host>, config: PoolConfig) -> Arc<Pool> {
        Arc::new(Pool {
            host,
            config,
            idle: Mutex::new(Vec::new()),
            active: Mutex::new(0),
            freed: Condvar::new(),
            reaper: Mutex::new(None),
            replenishing: Mutex::new(Vec::new()),
        })
    }

    /// Destroys `s` on the reaper thread (started on first use); in the caller's thread when
    /// no thread can be started.
    fn destroy(&self, s: Sandbox) {
        let Ok(mut reaper) = self.reaper.lock() else {
            drop(s);
            return;
        };
        if reaper.is_none() {
            let (to_destroy, queue) = mpsc::channel::<Sandbox>();
            let spawned = std::thread::Builder::new()
                .name("corral-reaper".into())
                .spawn(move || queue.into_iter().for_each(drop));
            match spawned {
                Ok(thread) => *reaper = Some(Reaper { to_destroy, thread }),
                Err(e) => {
                    tracing::warn!(error = %e, "no thread to tear sandboxes down on; tearing down in place");
                    drop(reaper);
                    drop(s);
                    return;
                }
            }
        }
        if let Some(r) = reaper.as_ref() {
            // The receiver lives until the sender is dropped (in `Drop for Pool`): this cannot
            // fail while the pool exists.
            if let Err(mpsc::SendError(s)) = r.to_destroy.send(s) {
                drop(reaper);
                drop(s);
            }
        }
    }

    /// Leases out right now.
    pub fn active(&self) -> usize {
        self.active.lock().map(|a| *a).unwrap_or(0)
    }

    /// Waits for a free slot under `max_active`, then takes it.
    fn enter(&self) {
        let Ok(mut active) = self.active.lock() else {
            return;
        };
        while self.config.max_active > 0 && *active >= self.config.max_active {
            match self.freed.wait(active) {
                Ok(a) => active = a,
                Err(_) => return,
            }
        }
        *active += 1;
    }

    fn leave(&self) {
        if let Ok(mut active) = self.active.lock() {
            *active = active.saturating_sub(1);
        }
        self.freed.notify_one();
    }

    pub fn host(&self) -> &Arc<Host> {
        &self.host
    }

    /// Builds `n` sandboxes of this shape ahead of time.
    pub fn prewarm(&self, shape: &SandboxConfig, n: usize) -> Result<(), SandboxError> {
        for _ in 0..n {
            let s = Sandbox::create(&self.host, shape)?;
            self.give_back(s);
        }
        Ok(())
    }

    /// Idle sandboxes right now.
    pub fn idle(&self) -> usize {
        self.idle.lock().map(|v| v.len()).unwrap_or(0)
    }

    /// A sandbox of this shape for exclusive use: several runs in sequence share its working
    /// directory (compile, then run the tests). Dropping the lease gives it back.
    pub fn lease(self: &Arc<Self>, shape: &SandboxConfig) -> Result<Lease, SandboxError> {
        self.enter();
        if !self.config.fresh {
            while let Some(mut s) = self.take_idle(shape) {
                // Collect the reset that started when it was given back; a failure retires it.
                if s.finish_reset().is_ok() {
                    tracing::trace!(
                        sandbox = s.id(),
                        leases = s.leases(),
                        "reusing a pooled sandbox"
                    );
                    return Ok(Lease {
                        pool: self.clone(),
                        sandbox: Some(s),
                    });
                }
                tracing::info!(
                    sandbox = s.id(),
                    "discarding a pooled sandbox whose reset failed"
                );
            }
        }
        match Sandbox::create(&self.host, shape) {
            Ok(s) => Ok(Lease {
                pool: self.clone(),
                sandbox: Some(s),
            }),
            Err(e) => {
                self.leave();
                Err(e)
            }
        }
    }

    /// One run, start to end, in a pooled sandbox (copy in, run, copy out, give back).
    pub fn run(self: &Arc<Self>, spec: &RunSpec, sink: &mut dyn OutputSink) -> Outcome {
        if let Err(e) = spec.validate() {
            return Outcome::sandbox_error(spec.limits.clone(), e.to_string())
                .in_runtime(spec.runtime);
        }
        match self.lease(&SandboxConfig::for_spec(spec)) {
            Ok(mut lease) => {
                let s = lease.sandbox();
                let who = (s.id().to_string(), s.leases());
                let mut outcome = run_in(s, spec, sink);
                outcome.sandbox = Some(who);
                outcome
            }
            Err(e) => {
                Outcome::sandbox_error(spec.limits.clone(), e.to_string()).in_runtime(spec.runtime)
            }
        }
    }

    /// [`Pool::run`] in a sandbox that starts the run the way a reused one does: where this
    /// pool would reset the sandbox between leases, it is reset once before the run (a new
    /// sandbox's first run is started by PID 1 itself, every later one from its confined thread:
    /// `inside/confined.rs`). For tests of what every run must hold, on both paths.
    pub fn run_warm(self: &Arc<Self>, spec: &RunSpec, sink: &mut dyn OutputSink) -> Outcome {
        let shape = SandboxConfig::for_spec(spec);
        let fail = |e: SandboxError| {
            Outcome::sandbox_error(spec.limits.clone(), e.to_string()).in_runtime(spec.runtime)
        };
        if let Err(e) = spec.validate() {
            return fail(e.into());
        }
        let mut lease = match self.lease(&shape) {
            Ok(l) => l,
            Err(e) => return fail(e),
        };
        let s = lease.sandbox();
        if self.reuses(&shape) && shape.runtime != Runtime::Gvisor {
            if let Err(e) = s.reset(shape.disk_bytes, shape.inodes) {
                return fail(e);
            }
        }
        let who = (s.id().to_string(), s.leases());
        let mut outcome = run_in(s, spec, sink);
        outcome.sandbox = Some(who);
        outcome
    }

    /// An idle sandbox of this shape, preferring one whose reset has already finished (so the
    /// caller does not wait for it); otherwise the one given back first.
    fn take_idle(&self, shape: &SandboxConfig) -> Option<Sandbox> {
        let mut idle = self.idle.lock().ok()?;
        let i = idle
            .iter()
            .position(|s| s.config() == shape && s.reset_done())
            .or_else(|| idle.iter().position(|s| s.config() == shape))?;
        Some(idle.remove(i))
    }

    /// Whether this pool resets a sandbox of this shape for another lease once it served one
    /// (a gVisor sandbox serves one lease; one started ahead is given back before it).
    fn reuses(&self, shape: &SandboxConfig) -> bool {
        !(self.config.fresh
            // Its root keeps what the last programs changed in it (build and root mode).
            || matches!(&shape.root, Root::Image(i) if i.runs_as_root())
            // A reset may make the working directory anew, which its second path would not follow.
            || shape.workdir_alias.is_some()
            // A reset makes the scratch folders anew, and the binds in them are gone with the old
            // ones (PID 1 no longer sees the host to bind them again).
            || shape.mounts.iter().any(|m| crate::inside::rootfs::on_scratch(&m.dst)))
    }

    fn give_back(&self, mut s: Sandbox) {
        let retire = !self.reuses(s.config())
            || s.config().runtime == Runtime::Gvisor && s.leases() > 0
            || s.is_broken()
            || s.memory_peak_spent()
            || (self.config.recycle_after > 0 && s.leases() >= self.config.recycle_after);
        if retire {
            if s.is_broken() {
                tracing::info!(
                    sandbox = s.id(),
                    "discarding a broken sandbox instead of reusing it"
                );
            } else {
                tracing::debug!(sandbox = s.id(), leases = s.leases(), "retiring a sandbox");
            }
            self.destroy(s);
            return;
        }
        if self.config.max_idle == 0 {
            self.destroy(s);
            return;
        }
        let (disk, inodes) = (s.config().disk_bytes, s.config().inodes);
        if let Err(e) = s.begin_reset(disk, inodes) {
            tracing::warn!(sandbox = s.id(), error = %e, "starting a sandbox's reset failed; discarding it");
            self.destroy(s);
            return;
        }
        let evicted = {
            let Ok(mut idle) = self.idle.lock() else {
                return;
            };
            // Full: the sandbox idle the longest makes room (the most recent shapes stay warm).
            let evicted = (idle.len() >= self.config.max_idle).then(|| idle.remove(0));
            idle.push(s);
            evicted
        };
        if let Some(e) = evicted {
            tracing::debug!(
                sandbox = e.id(),
                "the idle pool is full; evicting its oldest sandbox"
            );
            self.destroy(e);
        }
    }
}

impl Drop for Pool {
    /// Waits for the reaper to destroy what it was given: no sandbox outlives its pool.
    fn drop(&mut self) {
        // A spare still starting finds no pool to join and is torn down by its own thread.
        let starting = self
            .replenishing
            .get_mut()
            .map(std::mem::take)
            .unwrap_or_default();
        let me = std::thread::current().id();
        for t in starting {
            // The last reference may be dropped by a replenishing thread itself.
            if t.thread().id() != me {
                let _ = t.join();
            }
        }
        let reaper = self.reaper.get_mut().ok().and_then(Option::take);
        if let Some(Reaper { to_destroy, thread }) = reaper {
            drop(to_destroy);
            if thread.join().is_err() {
                tracing::warn!("the sandbox reaper panicked; some sandboxes may be left behind");
            }
        }
    }
}

/// Exclusive use of one sandbox; given back (and reset) when dropped.
pub struct Lease {
    pool: Arc<Pool>,
    sandbox: Option<Sandbox>,
}

impl Lease {
    pub fn sandbox(&mut self) -> &mut Sandbox {
        self.sandbox.as_mut().expect("present until drop")
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(mut s) = self.sandbox.take() {
            s.count_lease();
            s.cancel_runs_on(None);
            let gvisor_shape = (s.config().runtime == Runtime::Gvisor).then(|| s.config().clone());
            self.pool.give_back(s);
            if let Some(shape) = gvisor_shape {
                self.pool.replenish(shape);
            }
        }
        self.pool.leave();
    }
}

impl Pool {
    /// Starts a new sandbox of this shape in the background and keeps it idle, when the pool
    /// keeps idle sandboxes at all and has room: a used gVisor sandbox is never reused, so the
    /// next lease would otherwise wait for a whole start. A pool dropped meanwhile gets nothing
    /// (the new sandbox is torn down).
    fn replenish(self: &Arc<Self>, shape: SandboxConfig) {
        if self.config.fresh || self.config.max_idle == 0 || self.idle() >= self.config.max_idle {
            return;
        }
        let pool = Arc::downgrade(self);
        let host = self.host.clone();
        let spawned = std::thread::Builder::new()
            .name("corral-replenish".into())
            .spawn(move || match Sandbox::create(&host, &shape) {
                Ok(s) => {
                    if let Some(pool) = pool.upgrade() {
                        pool.give_back(s);
                    }
                }
                Err(e) => tracing::warn!(error = %e, "starting a spare gVisor sandbox failed"),
            });
        match spawned {
            Ok(t) => {
                if let Ok(mut starting) = self.replenishing.lock() {
                    starting.retain(|t| !t.is_finished());
                    starting.push(t);
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not start a thread for a spare gVisor sandbox")
            }
        }
    }
}
