//! cgroup v2 backend: a run's leaf is one directory `<base>/<name>` in the unified hierarchy.
//!
//! The "no internal processes" rule shapes the setup: a non-root cgroup may enable controllers
//! for its children (`cgroup.subtree_control`) only while it contains no processes itself. So
//! when our own cgroup is not the root (systemd service or scope, container without its own
//! cgroup namespace, ...), corral first moves itself into `<own>/corral-supervisor` and only then
//! enables memory/pids/cpu in `<own>` and `<own>/corral`, whose children are the per-run leaves:
//!
//! ```text
//! <own>                      subtree_control: cpu memory pids   (no processes)
//! ├── corral-supervisor      the supervisor process, all its threads
//! └── corral                 subtree_control: cpu memory pids   (no processes)
//!     ├── <run-1>            memory.max, memory.swap.max=0, memory.oom.group=0, pids.max
//!     └── <run-2>
//! ```
//!
//! When our own cgroup is the root (typical inside a container with a cgroup namespace), the
//! root is exempt from the rule and the base is simply `/corral`.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use crate::detect::{cg_join, cg_parent, V2Hierarchy, V2_REQUIRED};
use crate::error::{again_if_vanished, Error};
use crate::fs;
use crate::leaf::{leaf_cgroup_methods, validate_name, Leaf};
use crate::model::{Baseline, Cgroup, Limits, Manager, MemoryBaseline, Usage, Version};
use crate::open_files::OpenFiles;
use crate::parse::{controller_list, KeyedFile};
use crate::v1::pids_events_max;

/// Name of the cgroup the supervisor moves itself into.
pub(crate) const SUPERVISOR: &str = "corral-supervisor";

/// Creates leaves in the unified hierarchy.
#[derive(Debug)]
pub(crate) struct V2Manager {
    mount: PathBuf,
    /// Our own cgroup (relative to the mount), with a trailing `/corral-supervisor` removed so a
    /// second `detect` in the same process finds the same base.
    own: String,
    /// corral's base cgroup, relative to the mount.
    base_rel: String,
    base: PathBuf,
    /// The highest cgroup whose `subtree_control` we may write: our own cgroup normally (we do
    /// not reconfigure cgroups that belong to someone else), the mount root with
    /// CORRAL_CGROUP_PARENT (the administrator asked for that place).
    floor: String,
    /// Where we moved ourselves, once we did.
    supervisor: Mutex<Option<PathBuf>>,
    /// See `V1Manager::remove_base_on_drop`.
    remove_base_on_drop: bool,
}

impl V2Manager {
    /// Builds the manager, creates the base and delegates controllers to it.
    pub(crate) fn new(h: &V2Hierarchy, parent: Option<&str>) -> Result<V2Manager, Error> {
        let own = match h.own_path.strip_suffix(&format!("/{SUPERVISOR}")) {
            Some("") => "/".to_owned(),
            Some(p) => p.to_owned(),
            None => h.own_path.clone(),
        };
        let (base_rel, floor) = match parent {
            Some(p) => (p.to_owned(), "/".to_owned()),
            None => (format!("{}/corral", own.trim_end_matches('/')), own.clone()),
        };
        // Already moved by an earlier `detect` in this process?
        let supervisor = (own != h.own_path).then(|| cg_join(&h.mount_point, &h.own_path));
        let m = V2Manager {
            mount: h.mount_point.clone(),
            base: cg_join(&h.mount_point, &base_rel),
            own,
            base_rel,
            floor,
            supervisor: Mutex::new(supervisor),
            remove_base_on_drop: parent.is_none(),
        };
        m.prepare()?;
        Ok(m)
    }

    fn path(&self, rel: &str) -> PathBuf {
        cg_join(&self.mount, rel)
    }

    /// Creates the base and makes memory and pids (and cpu, if offered) available to its
    /// children. Idempotent: only writes what is missing. Another corral process that exits
    /// removes the base while it is empty; if that happens half-way, start again.
    fn prepare(&self) -> Result<(), Error> {
        again_if_vanished(|| self.prepare_once())
    }

    fn prepare_once(&self) -> Result<(), Error> {
        fs::mkdir_p(&self.mount, &self.base)?;

        // floor ..= base, top-down.
        let mut chain = vec![self.base_rel.clone()];
        let mut cur = self.base_rel.clone();
        while cur != self.floor {
            match cg_parent(&cur) {
                Some(p) => {
                    chain.push(p.clone());
                    cur = p;
                }
                // The base is not below the floor (CORRAL_CGROUP_PARENT elsewhere): the chain
                // then starts at the mount root, which is also the floor in that case.
                None => break,
            }
        }
        chain.reverse();

        // The deepest cgroup that already receives every required controller; everything below
        // it needs them enabled in `subtree_control`.
        let has_all = |rel: &str| -> Result<Option<Vec<String>>, Error> {
            let list = controller_list(&fs::read(&self.path(rel).join("cgroup.controllers"))?);
            Ok(V2_REQUIRED
                .iter()
                .all(|c| list.iter().any(|x| x == c))
                .then_some(list))
        };
        let mut start = None;
        for (i, rel) in chain.iter().enumerate().rev() {
            if let Some(list) = has_all(rel)? {
                start = Some((i, list));
                break;
            }
        }
        let Some((start, available)) = start else {
            let top = self.path(&chain[0]);
            let list = controller_list(&fs::read(&top.join("cgroup.controllers"))?);
            return Err(Error::NotDelegated {
                path: top,
                missing: V2_REQUIRED
                    .iter()
                    .filter(|c| !list.iter().any(|x| x == *c))
                    .copied()
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        };

        // We are about to enable controllers in `chain[start..]`; if our own (non-root) cgroup
        // is one of them, it must not contain processes: move ourselves out of the way.
        // Writing our pid to cgroup.procs moves the whole process, all threads included.
        if self.own != "/" && chain[start..].contains(&self.own) {
            let sup = self.path(&self.own).join(SUPERVISOR);
            match fs::mkdir(&sup) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {}
                Err(e) => return Err(e),
            }
            fs::write(&sup.join("cgroup.procs"), &std::process::id().to_string())?;
            *self.supervisor.lock().unwrap_or_else(|e| e.into_inner()) = Some(sup);
        }

        let mut wanted: Vec<String> = V2_REQUIRED.iter().map(|c| c.to_string()).collect();
        if available.iter().any(|c| c == "cpu") {
            wanted.insert(0, "cpu".to_owned());
        }
        for rel in &chain[start..] {
            let path = self.path(rel).join("cgroup.subtree_control");
            let current = controller_list(&fs::read(&path)?);
            let missing: Vec<String> = wanted
                .iter()
                .filter(|c| !current.contains(c))
                .cloned()
                .collect();
            if missing.is_empty() {
                continue;
            }
            let line = |cs: &[String]| {
                cs.iter()
                    .map(|c| format!("+{c}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            let Err(first) = fs::write(&path, &line(&missing)) else {
                continue;
            };
            // cpu is only nice to have (usage_usec is in cpu.stat either way) and can be refused
            // for reasons of its own (e.g. realtime threads in the subtree): retry without it.
            let required: Vec<String> = missing.iter().filter(|c| *c != "cpu").cloned().collect();
            let result = if required.len() < missing.len() {
                wanted.retain(|c| c != "cpu");
                if required.is_empty() {
                    Ok(())
                } else {
                    fs::write(&path, &line(&required))
                }
            } else {
                Err(first)
            };
            if let Err(e) = result {
                let source = match e {
                    Error::Write { source, .. } => source,
                    other => return Err(other),
                };
                return Err(Error::Delegation {
                    path,
                    controllers: line(&required),
                    source,
                });
            }
        }
        Ok(())
    }
}

impl Manager for V2Manager {
    fn version(&self) -> Version {
        Version::V2
    }

    fn create(&self, name: &str, limits: &Limits) -> Result<Box<dyn Cgroup>, Error> {
        validate_name(name)?;
        let dir = self.base.join(name);
        let mut attempts = 0;
        loop {
            match fs::mkdir(&dir) {
                Ok(()) => break,
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => return Err(Error::Exists(dir)),
                // The base vanished (another corral process's manager removed it while empty):
                // recreate and re-delegate, then retry.
                Err(e) if e.is_vanished() && attempts < 3 => {
                    attempts += 1;
                    self.prepare()?;
                }
                Err(e) => return Err(e),
            }
        }
        let kill = dir.join("cgroup.kill");
        let kill_file = kill.exists().then_some(kill);
        let cg = V2Cgroup {
            leaf: Leaf::new(vec![dir.clone()], kill_file, "cgroup.procs"),
            dir,
            files: OpenFiles::default(),
        };
        // On error `cg` is dropped, which removes the directory again.
        cg.apply(limits)?;
        Ok(Box::new(cg))
    }

    fn base_dirs(&self) -> Vec<PathBuf> {
        vec![self.base.clone()]
    }

    fn describe(&self) -> Vec<(String, String)> {
        let read = |p: &Path| {
            fs::read(p)
                .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
                .unwrap_or_else(|e| format!("({e})"))
        };
        let supervisor = self
            .supervisor
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        vec![
            ("cgroup version".to_owned(), "v2".to_owned()),
            ("mount".to_owned(), self.mount.display().to_string()),
            ("base".to_owned(), self.base.display().to_string()),
            (
                "supervisor cgroup".to_owned(),
                supervisor.map_or_else(
                    || "not moved (own cgroup needs no change)".to_owned(),
                    |p| p.display().to_string(),
                ),
            ),
            (
                "controllers at base".to_owned(),
                read(&self.base.join("cgroup.controllers")),
            ),
            (
                "controllers for runs".to_owned(),
                read(&self.base.join("cgroup.subtree_control")),
            ),
            (
                "swap limit".to_owned(),
                if self.base.join("memory.swap.max").exists() {
                    "memory.swap.max = 0".to_owned()
                } else {
                    "unavailable (no swap accounting)".to_owned()
                },
            ),
            (
                "cgroup.kill".to_owned(),
                if self.base.join("cgroup.kill").exists() {
                    "yes".to_owned()
                } else {
                    "no (kill loop)".to_owned()
                },
            ),
        ]
    }
}

impl Drop for V2Manager {
    fn drop(&mut self) {
        if self.remove_base_on_drop {
            // Fails harmlessly (EBUSY) while any leaf exists. The supervisor cgroup stays: we are
            // still in it.
            fs::rmdir_if_unused(&self.base);
        }
    }
}

/// One run's leaf in the unified hierarchy.
pub(crate) struct V2Cgroup {
    dir: PathBuf,
    leaf: Leaf,
    /// The control files every run reads and resets, opened once.
    files: OpenFiles,
}

impl V2Cgroup {
    /// The limits at creation, plus no swap and group OOM kills.
    fn apply(&self, limits: &Limits) -> Result<(), Error> {
        self.files.write(
            &self.dir.join("memory.max"),
            &memory_max(limits.memory_bytes),
        )?;
        // Absent without swap accounting (CONFIG_SWAP off, or swapaccount=0).
        self.files
            .write_if_exists(&self.dir.join("memory.swap.max"), "0")?;
        // No group OOM kill: the sandbox's long-lived PID 1 shares this cgroup and must survive
        // its programs' OOM (it cannot always exempt itself: oom_score_adj -1000 needs
        // CAP_SYS_RESOURCE). PID 1 ends the rest of the run itself once the program dies.
        self.files
            .write_if_exists(&self.dir.join("memory.oom.group"), "0")?;
        self.set_pids_limit(limits.pids)
    }

    fn set_pids_limit(&self, pids: Option<u64>) -> Result<(), Error> {
        let pids = pids.map_or_else(|| "max".to_owned(), |n| n.to_string());
        self.files.write(&self.dir.join("pids.max"), &pids)
    }

    /// Lowers or raises `memory.max` of a live cgroup without letting the kernel OOM-kill to
    /// enforce it: lowering it below `memory.current` makes the write itself reclaim and, if
    /// that is not enough, OOM-kill (the whole cgroup, with memory.oom.group=1). So reclaim the
    /// excess first through `memory.reclaim` (5.19+), which fails with EAGAIN instead.
    fn set_memory_limit(&self, bytes: Option<u64>) -> Result<(), Error> {
        if let Some(limit) = bytes {
            let current = self.memory_current()?;
            if current > limit {
                let reclaim = self.dir.join("memory.reclaim");
                match self.files.write(&reclaim, &(current - limit).to_string()) {
                    Ok(()) => {}
                    Err(Error::Write { source, .. })
                        if source.kind() == std::io::ErrorKind::NotFound => {}
                    Err(Error::Write { source, .. }) => {
                        return Err(Error::MemoryLimitBelowUsage {
                            path: self.dir.join("memory.max"),
                            limit,
                            usage: self.memory_current().unwrap_or(current),
                            source,
                        })
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        self.files
            .write(&self.dir.join("memory.max"), &memory_max(bytes))
    }

    /// [`Usage`] relative to `base` (counter growth since then), or over the cgroup's life.
    fn measure(&self, base: Option<&Baseline>) -> Result<Usage, Error> {
        let (cpu0, oom0, pids0) = base.map_or((Duration::ZERO, 0, 0), |b| {
            debug_assert_eq!(b.dir, self.dir, "baseline of another cgroup");
            (b.cpu, b.oom_kills, b.pids_max_events)
        });
        let (max0, peak_file) = match base.map(|b| &b.memory) {
            Some(MemoryBaseline::V2 { max_events, peak }) => (*max_events, peak.as_ref()),
            _ => (0, None),
        };
        let cpu_time = self.cpu_time()?.saturating_sub(cpu0);
        let peak_path = self.dir.join("memory.peak");
        let memory_peak_bytes = match peak_file {
            // Peak since begin_run's fd-local reset.
            Some(f) => fs::pread_u64(f, &peak_path)?,
            None => match self.files.read_optional_u64(&peak_path)? {
                Some(peak) => peak,
                // memory.peak is 5.19+; the current usage is the best lower bound we have.
                None => self.memory_current()?,
            },
        };
        let events_path = self.dir.join("memory.events");
        let events_text = self.files.read(&events_path)?;
        let events = KeyedFile::parse(&events_path, &events_text)?;
        Ok(Usage {
            cpu_time,
            memory_peak_bytes,
            oom_killed: events.get_or_zero("oom_kill")? > oom0,
            memory_limit_hit: events.get_or_zero("max")? > max0,
            // Lifetime: the kernel has no reset for pids.peak.
            pids_peak: self.files.read_optional_u64(&self.dir.join("pids.peak"))?,
            pids_limit_hit: pids_events_max(&self.files, &self.dir)? > pids0,
        })
    }

    /// (`oom_kill`, `max`) from `memory.events`.
    fn memory_events(&self) -> Result<(u64, u64), Error> {
        let path = self.dir.join("memory.events");
        let text = self.files.read(&path)?;
        let events = KeyedFile::parse(&path, &text)?;
        Ok((events.get_or_zero("oom_kill")?, events.get_or_zero("max")?))
    }
}

/// The `memory.max` value for a limit.
fn memory_max(bytes: Option<u64>) -> String {
    bytes.map_or_else(|| "max".to_owned(), |b| b.to_string())
}

impl Cgroup for V2Cgroup {
    leaf_cgroup_methods!();

    fn fork_target(&self) -> Result<Option<std::os::fd::OwnedFd>, Error> {
        fs::open_dir_path(&self.dir).map(Some)
    }

    fn cpu_time(&self) -> Result<Duration, Error> {
        let path = self.dir.join("cpu.stat");
        let text = self.files.read(&path)?;
        let usec = KeyedFile::parse(&path, &text)?
            .get("usage_usec")?
            .ok_or_else(|| Error::Parse {
                path: path.clone(),
                reason: "no usage_usec line".to_owned(),
            })?;
        Ok(Duration::from_micros(usec))
    }

    fn begin_run(&self) -> Result<Baseline, Error> {
        // Linux 6.12+: writing to an open memory.peak resets the peak seen through that fd (to
        // the current usage), leaving other readers alone. Older kernels refuse to open it for
        // writing or the write itself; then only the lifetime peak is left.
        let peak = fs::open_and_write(&self.dir.join("memory.peak"), "reset\n").ok();
        let (oom_kills, max_events) = self.memory_events()?;
        Ok(Baseline {
            resident_bytes: self.memory_current()?,
            peak_is_lifetime: peak.is_none(),
            dir: self.dir.clone(),
            cpu: self.cpu_time()?,
            oom_kills,
            pids_max_events: pids_events_max(&self.files, &self.dir)?,
            memory: MemoryBaseline::V2 { max_events, peak },
        })
    }

    fn usage_since(&self, baseline: &Baseline) -> Result<Usage, Error> {
        self.measure(Some(baseline))
    }

    fn cpu_time_since(&self, baseline: &Baseline) -> Result<Duration, Error> {
        Ok(self.cpu_time()?.saturating_sub(baseline.cpu))
    }

    fn memory_current(&self) -> Result<u64, Error> {
        self.files.read_u64(&self.dir.join("memory.current"))
    }

    fn pids_current(&self) -> Result<u64, Error> {
        self.files.read_u64(&self.dir.join("pids.current"))
    }
}
