//! cgroup v1 backend: a run's leaf is one directory in each of the memory, pids and cpuacct
//! hierarchies (fewer when some of them are co-mounted, e.g. `cpu,cpuacct`).

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use crate::detect::{cg_join, v1_for, V1Hierarchy};
use crate::error::{again_if_vanished, Error};
use crate::fs;
use crate::leaf::{leaf_cgroup_methods, validate_name, Leaf};
use crate::model::{Baseline, Cgroup, Limits, Manager, MemoryBaseline, Usage, Version};
use crate::open_files::OpenFiles;
use crate::parse::{parse_u64, KeyedFile};

/// "Unlimited" for v1 memory files.
const V1_MEMORY_UNLIMITED: &str = "-1";

/// One distinct mounted hierarchy we use, with corral's base directory in it.
#[derive(Debug)]
struct Hier {
    mount: PathBuf,
    base: PathBuf,
    controllers: Vec<String>,
}

impl Hier {
    fn has(&self, controller: &str) -> bool {
        self.controllers.iter().any(|c| c == controller)
    }
}

/// Creates leaves in the memory, pids and cpuacct hierarchies.
#[derive(Debug)]
pub(crate) struct V1Manager {
    /// Distinct hierarchies (co-mounted controllers share one entry).
    hiers: Vec<Hier>,
    memory: usize,
    pids: usize,
    cpuacct: usize,
    /// Remove the (then empty) base directories on drop: a leftover `corral` directory would keep
    /// whoever owns our own cgroup from removing it. Not done for CORRAL_CGROUP_PARENT, which
    /// belongs to the administrator.
    remove_base_on_drop: bool,
}

impl V1Manager {
    /// Builds the manager and creates the base directories. `parent` is CORRAL_CGROUP_PARENT.
    pub(crate) fn new(v1: &[V1Hierarchy], parent: Option<&str>) -> Result<V1Manager, Error> {
        let mut hiers: Vec<Hier> = Vec::new();
        let mut index = |controller: &str| -> Result<usize, Error> {
            let h = v1_for(v1, controller).ok_or_else(|| {
                Error::Unsupported(format!("cgroup v1 has no mounted {controller} hierarchy"))
            })?;
            if let Some(i) = hiers.iter().position(|x| x.mount == h.mount_point) {
                return Ok(i);
            }
            let base_rel = match parent {
                Some(p) => p.to_owned(),
                None => format!("{}/corral", h.own_path.trim_end_matches('/')),
            };
            hiers.push(Hier {
                base: cg_join(&h.mount_point, &base_rel),
                mount: h.mount_point.clone(),
                controllers: h.controllers.clone(),
            });
            Ok(hiers.len() - 1)
        };
        let memory = index("memory")?;
        let pids = index("pids")?;
        let cpuacct = index("cpuacct")?;
        let m = V1Manager {
            hiers,
            memory,
            pids,
            cpuacct,
            remove_base_on_drop: parent.is_none(),
        };
        m.prepare()?;
        Ok(m)
    }

    /// Creates the base directories (mkdir -p, 0755). Idempotent. Another corral process that
    /// exits removes the bases while they are empty; if that happens half-way, start again.
    fn prepare(&self) -> Result<(), Error> {
        again_if_vanished(|| self.prepare_once())
    }

    fn prepare_once(&self) -> Result<(), Error> {
        for h in &self.hiers {
            fs::mkdir_p(&h.mount, &h.base)?;
            if h.has("cpuset") {
                // Top-down, so each level can copy from an already populated parent.
                let mut chain: Vec<&Path> =
                    h.base.ancestors().take_while(|a| *a != h.mount).collect();
                chain.reverse();
                for dir in chain {
                    cpuset_inherit(dir)?;
                }
            }
        }
        Ok(())
    }

    /// mkdir of the leaf in every hierarchy; on failure removes what it made.
    fn make_leaves(&self, name: &str) -> Result<Vec<PathBuf>, Error> {
        let mut made: Vec<PathBuf> = Vec::new();
        let result = (|| {
            for h in &self.hiers {
                let dir = h.base.join(name);
                match fs::mkdir(&dir) {
                    Ok(()) => made.push(dir.clone()),
                    Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                        return Err(Error::Exists(dir))
                    }
                    Err(e) => return Err(e),
                }
                if h.has("cpuset") {
                    cpuset_inherit(&dir)?;
                }
            }
            Ok(())
        })();
        match result {
            Ok(()) => Ok(made),
            Err(e) => {
                for d in made.iter().rev() {
                    let _ = fs::rmdir_retry(d);
                }
                Err(e)
            }
        }
    }
}

/// A new cpuset cgroup starts with empty `cpuset.cpus`/`cpuset.mems`, and nothing can join it
/// until they are set; copy the parent's. Only relevant when cpuset is co-mounted with one of
/// our controllers.
fn cpuset_inherit(dir: &Path) -> Result<(), Error> {
    let Some(parent) = dir.parent() else {
        return Ok(());
    };
    for file in ["cpuset.cpus", "cpuset.mems"] {
        let here = dir.join(file);
        if fs::read(&here)?.trim().is_empty() {
            let value = fs::read(&parent.join(file))?;
            fs::write(&here, value.trim())?;
        }
    }
    Ok(())
}

impl Manager for V1Manager {
    fn version(&self) -> Version {
        Version::V1
    }

    fn create(&self, name: &str, limits: &Limits) -> Result<Box<dyn Cgroup>, Error> {
        validate_name(name)?;
        let mut attempts = 0;
        let dirs = loop {
            match self.make_leaves(name) {
                Ok(d) => break d,
                // The base vanished (another corral process's manager removed it while empty):
                // recreate it and retry.
                Err(e) if e.is_vanished() && attempts < 3 => {
                    attempts += 1;
                    self.prepare()?;
                }
                Err(e) => return Err(e),
            }
        };
        let leaf_of = |i: usize| self.hiers[i].base.join(name);
        let cg = V1Cgroup {
            memory: leaf_of(self.memory),
            pids: leaf_of(self.pids),
            cpuacct: leaf_of(self.cpuacct),
            // `tasks`, not `cgroup.procs`: see `Cgroup::procs_files`.
            leaf: Leaf::new(dirs, None, "tasks"),
            files: OpenFiles::default(),
            written: Mutex::new(None),
        };
        // On error `cg` is dropped, which removes the directories again.
        cg.apply(limits)?;
        Ok(Box::new(cg))
    }

    fn base_dirs(&self) -> Vec<PathBuf> {
        self.hiers.iter().map(|h| h.base.clone()).collect()
    }

    fn describe(&self) -> Vec<(String, String)> {
        let mut out = vec![("cgroup version".to_owned(), "v1".to_owned())];
        for (role, i) in [
            ("memory", self.memory),
            ("pids", self.pids),
            ("cpuacct", self.cpuacct),
        ] {
            let h = &self.hiers[i];
            out.push((
                format!("{role} hierarchy"),
                format!("{} ({})", h.mount.display(), h.controllers.join(",")),
            ));
            out.push((format!("{role} base"), h.base.display().to_string()));
        }
        let memsw = self.hiers[self.memory]
            .base
            .join("memory.memsw.limit_in_bytes")
            .exists();
        out.push((
            "swap limit".to_owned(),
            if memsw {
                "memory.memsw.limit_in_bytes = memory limit".to_owned()
            } else {
                "unavailable (no swap accounting; only memory.swappiness=0)".to_owned()
            },
        ));
        let tcp = self.hiers[self.memory]
            .base
            .join("memory.kmem.tcp.limit_in_bytes")
            .exists();
        out.push((
            "socket buffers".to_owned(),
            if tcp {
                "charged: memory.kmem.tcp.limit_in_bytes = memory limit".to_owned()
            } else {
                "NOT charged (no memory.kmem.tcp on this kernel): TCP buffers escape the memory limit"
                    .to_owned()
            },
        ));
        out
    }
}

impl Drop for V1Manager {
    fn drop(&mut self) {
        if self.remove_base_on_drop {
            for h in &self.hiers {
                // Fails harmlessly (EBUSY) while any leaf, ours or another process's, exists.
                fs::rmdir_if_unused(&h.base);
            }
        }
    }
}

/// One run's leaf in the v1 hierarchies.
pub(crate) struct V1Cgroup {
    memory: PathBuf,
    pids: PathBuf,
    cpuacct: PathBuf,
    leaf: Leaf,
    /// The control files every run reads and resets, opened once.
    files: OpenFiles,
    /// The memory limit this handle last wrote to its files. Every run sets the limit again (it
    /// includes PID 1's resident memory, which moves), and reading the old pair back, to order
    /// the two writes and again to judge the run's peak, was four `pread`s a run. `None` at
    /// first and after a failed write: then the files are read.
    written: Mutex<Option<WrittenLimit>>,
}

/// A memory limit as the kernel shows it after our write, and whether memsw exists.
#[derive(Clone, Copy, Debug, PartialEq)]
struct WrittenLimit {
    /// Rounded down to a page, as the kernel keeps it; `u64::MAX` for none.
    shown: u64,
    memsw: bool,
}

impl WrittenLimit {
    fn new(limit: u64, memsw: bool) -> WrittenLimit {
        let page = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
            .ok()
            .flatten()
            .and_then(|p| u64::try_from(p).ok())
            .filter(|p| *p > 0)
            .unwrap_or(4096);
        let shown = if limit == u64::MAX {
            u64::MAX
        } else {
            limit / page * page
        };
        WrittenLimit { shown, memsw }
    }

    /// What the file shows, for undoing a write.
    fn text(self) -> String {
        if self.shown == u64::MAX {
            V1_MEMORY_UNLIMITED.to_owned()
        } else {
            self.shown.to_string()
        }
    }

    /// The limit a peak is judged against (`None`: unlimited).
    fn limit(self) -> Option<u64> {
        (self.shown != u64::MAX).then_some(self.shown)
    }
}

impl V1Cgroup {
    /// The limits at creation, plus `memory.swappiness=0`.
    fn apply(&self, limits: &Limits) -> Result<(), Error> {
        self.set_memory_limit(limits.memory_bytes)?;
        // Refused in some setups (e.g. the root cgroup, or a parent with use_hierarchy); it
        // only makes the kernel prefer dropping page cache over swapping, so ignore failure.
        let _ = self
            .files
            .write(&self.memory.join("memory.swappiness"), "0");
        self.set_pids_limit(limits.pids)
    }

    fn set_pids_limit(&self, pids: Option<u64>) -> Result<(), Error> {
        let pids = pids.map_or_else(|| "max".to_owned(), |n| n.to_string());
        self.files.write(&self.pids.join("pids.max"), &pids)
    }

    /// Sets `memory.limit_in_bytes` and, where it exists, `memory.memsw.limit_in_bytes` to the
    /// same value: memory+swap = memory means no swap at all. The memsw file is absent without
    /// swap accounting (CONFIG_MEMCG_SWAP off or swapaccount=0); then swappiness=0 is all we can
    /// do.
    ///
    /// The kernel insists on memsw >= memory after every single write, so a growing limit is
    /// written to memsw first and a shrinking one to memory first; if the second write fails,
    /// the first is undone so the old pair stays in force.
    fn set_memory_limit(&self, bytes: Option<u64>) -> Result<(), Error> {
        let known = *self.written.lock().unwrap_or_else(|e| e.into_inner());
        let result = self.write_memory_limits(bytes, known);
        let written = match (&result, known) {
            (Ok(now), _) => Some(*now),
            // What we knew was stale (the files were changed behind our back) and the kernel
            // refused the order of the writes (memsw below memory): once more, from the files.
            (Err(e), Some(_)) if e.raw_os_error() == Some(libc::EINVAL) => {
                let again = self.write_memory_limits(bytes, None);
                let now = again.as_ref().ok().copied();
                *self.written.lock().unwrap_or_else(|e| e.into_inner()) = now;
                return match now {
                    Some(now) => self.limit_socket_memory(now),
                    None => again.map(drop),
                };
            }
            (Err(_), _) => None,
        };
        *self.written.lock().unwrap_or_else(|e| e.into_inner()) = written;
        result?;
        match written {
            // Written again only when the limit changes (most runs repeat the last one).
            Some(now) if known.map(|k| k.shown) != Some(now.shown) => self.limit_socket_memory(now),
            _ => Ok(()),
        }
    }

    /// v1 charges TCP socket buffers to a cgroup only once its `memory.kmem.tcp.limit_in_bytes`
    /// has been written (v2 charges them to `memory.max` always): uncharged, one run's loopback
    /// sockets filled the host-wide `tcp_mem` (2.3 GB under a 32M limit, every host socket under
    /// memory pressure). Capped at the memory limit; v1 keeps it as a counter of its own, so a
    /// run may hold that much again in socket buffers, and no more. Absent on kernels without
    /// it (and in the fake trees of most tests).
    fn limit_socket_memory(&self, limit: WrittenLimit) -> Result<(), Error> {
        let tcp = self.memory.join("memory.kmem.tcp.limit_in_bytes");
        self.files.write_if_exists(&tcp, &limit.text()).map(drop)
    }

    /// [`Self::set_memory_limit`]'s writes, given the pair in force (`None`: read it).
    fn write_memory_limits(
        &self,
        bytes: Option<u64>,
        known: Option<WrittenLimit>,
    ) -> Result<WrittenLimit, Error> {
        let value = bytes.map_or_else(|| V1_MEMORY_UNLIMITED.to_owned(), |b| b.to_string());
        let limit = bytes.unwrap_or(u64::MAX);
        let mem = self.memory.join("memory.limit_in_bytes");
        let memsw = self.memory.join("memory.memsw.limit_in_bytes");
        let old = match known {
            Some(k) => k,
            None => match self.files.read_optional(&memsw)? {
                None => WrittenLimit::new(u64::MAX, false),
                Some(_) => {
                    let old_mem = self.files.read(&mem)?;
                    // The kernel shows "unlimited" as a huge number; tolerate "-1" as well.
                    let shown = match old_mem.trim() {
                        V1_MEMORY_UNLIMITED => u64::MAX,
                        text => parse_u64(&mem, text)?,
                    };
                    // memsw is kept equal to memory, so its old value is the same.
                    WrittenLimit { shown, memsw: true }
                }
            },
        };
        if !old.memsw {
            self.write_memory_limit(&mem, &value, limit, "memory.usage_in_bytes")?;
            return Ok(WrittenLimit::new(limit, false));
        }
        let old_text = old.text();
        let growing = limit >= old.shown;
        let mem_step = (&mem, "memory.usage_in_bytes");
        let memsw_step = (&memsw, "memory.memsw.usage_in_bytes");
        let (first, second) = if growing {
            (memsw_step, mem_step)
        } else {
            (mem_step, memsw_step)
        };
        self.write_memory_limit(first.0, &value, limit, first.1)?;
        if let Err(e) = self.write_memory_limit(second.0, &value, limit, second.1) {
            let _ = self.files.write(first.0, &old_text);
            return Err(e);
        }
        Ok(WrittenLimit::new(limit, true))
    }

    /// One limit write, with EBUSY (usage above the new limit and nothing left to reclaim)
    /// turned into [`Error::MemoryLimitBelowUsage`] naming the usage from `usage_file`.
    fn write_memory_limit(
        &self,
        path: &Path,
        value: &str,
        limit: u64,
        usage_file: &str,
    ) -> Result<(), Error> {
        match self.files.write(path, value) {
            Err(Error::Write { source, .. }) if source.raw_os_error() == Some(libc::EBUSY) => {
                Err(Error::MemoryLimitBelowUsage {
                    path: path.to_owned(),
                    limit,
                    usage: self
                        .files
                        .read_u64(&self.memory.join(usage_file))
                        .unwrap_or(0),
                    source,
                })
            }
            other => other,
        }
    }

    /// A number from a memory file that may be absent (memsw without swap accounting).
    fn read_optional_u64(&self, file: &str) -> Result<Option<u64>, Error> {
        self.files.read_optional_u64(&self.memory.join(file))
    }

    /// `memory.oom_control`: the oom_kill counter (absent before Linux 4.13) and under_oom.
    fn oom_control(&self) -> Result<(Option<u64>, u64), Error> {
        let path = self.memory.join("memory.oom_control");
        let text = self.files.read(&path)?;
        let oom = KeyedFile::parse(&path, &text)?;
        Ok((oom.get("oom_kill")?, oom.get_or_zero("under_oom")?))
    }

    /// [`Usage`] relative to `base` (counter growth since then), or over the cgroup's life.
    fn measure(&self, base: Option<&Baseline>) -> Result<Usage, Error> {
        let (cpu0, oom0, pids0, fail0, memsw_fail0) = match base {
            None => (Duration::ZERO, 0, 0, 0, 0),
            Some(b) => {
                debug_assert_eq!(b.dir, self.memory, "baseline of another cgroup");
                let (fail, memsw_fail) = match b.memory {
                    MemoryBaseline::V1 {
                        failcnt,
                        memsw_failcnt,
                    } => (failcnt, memsw_failcnt),
                    MemoryBaseline::V2 { .. } => (0, 0),
                };
                (b.cpu, b.oom_kills, b.pids_max_events, fail, memsw_fail)
            }
        };
        let cpu_time = self.cpu_time()?.saturating_sub(cpu0);
        // After begin_run's reset: the peak since then (starting at the usage at that moment).
        let memory_peak_bytes = self
            .files
            .read_u64(&self.memory.join("memory.max_usage_in_bytes"))?;
        let failcnt = self
            .files
            .read_u64(&self.memory.join("memory.failcnt"))?
            .saturating_sub(fail0);
        // With memsw limited to the same value, the memory+swap counter is the one that trips,
        // and recent kernels (seen on 6.18) keep no failcnt for it: memory.memsw.failcnt stays
        // 0, and so does memory.failcnt. So a peak at the limit counts as hitting it too.
        let memsw_failcnt = self
            .read_optional_u64("memory.memsw.failcnt")?
            .unwrap_or(0)
            .saturating_sub(memsw_fail0);
        let at_limit = |peak: Option<u64>, limit: Option<u64>| match (peak, limit) {
            (Some(p), Some(l)) => p.saturating_add(near_limit_margin(l)) >= l,
            _ => false,
        };
        let written = *self.written.lock().unwrap_or_else(|e| e.into_inner());
        let (mem_limit, memsw_limit) = match written {
            Some(w) => (w.limit(), w.limit().filter(|_| w.memsw)),
            None => (
                self.read_optional_u64("memory.limit_in_bytes")?,
                self.read_optional_u64("memory.memsw.limit_in_bytes")?,
            ),
        };
        let mem_at_limit = at_limit(Some(memory_peak_bytes), mem_limit);
        let memsw_at_limit = at_limit(
            self.read_optional_u64("memory.memsw.max_usage_in_bytes")?,
            memsw_limit,
        );
        let (oom_kill, under_oom) = self.oom_control()?;
        let oom_killed = match oom_kill {
            Some(n) => n > oom0,
            // Kernels before 4.13 have no counter: an ongoing OOM after failures is the best
            // evidence left.
            None => failcnt > 0 && under_oom > 0,
        };
        Ok(Usage {
            cpu_time,
            memory_peak_bytes,
            oom_killed,
            memory_limit_hit: failcnt > 0
                || memsw_failcnt > 0
                || mem_at_limit
                || memsw_at_limit
                || oom_killed,
            // Recent kernels (6.18 has it) offer pids.peak on v1 too; it is never reset.
            pids_peak: self.files.read_optional_u64(&self.pids.join("pids.peak"))?,
            pids_limit_hit: pids_events_max(&self.files, &self.pids)? > pids0,
        })
    }
}

impl Cgroup for V1Cgroup {
    leaf_cgroup_methods!();

    fn fork_target(&self) -> Result<Option<std::os::fd::OwnedFd>, Error> {
        Ok(None)
    }

    fn cpu_time(&self) -> Result<Duration, Error> {
        // Nanoseconds, including tasks that have exited.
        self.files
            .read_u64(&self.cpuacct.join("cpuacct.usage"))
            .map(Duration::from_nanos)
    }

    fn begin_run(&self) -> Result<Baseline, Error> {
        let mem = |file: &str| self.memory.join(file);
        // Writing 0 sets a peak to the current usage: a peak cannot be diffed, so it is reset.
        self.files.write(&mem("memory.max_usage_in_bytes"), "0")?;
        self.files
            .write_if_exists(&mem("memory.memsw.max_usage_in_bytes"), "0")?;
        // The counters (CPU, failures, OOM kills, pids.events) are not reset but diffed against
        // this snapshot: fewer writes per run, and the long-lived processes keep counting anyway.
        Ok(Baseline {
            resident_bytes: self.memory_current()?,
            peak_is_lifetime: false,
            dir: self.memory.clone(),
            cpu: self.cpu_time()?,
            oom_kills: self.oom_control()?.0.unwrap_or(0),
            pids_max_events: pids_events_max(&self.files, &self.pids)?,
            memory: MemoryBaseline::V1 {
                failcnt: self.files.read_u64(&mem("memory.failcnt"))?,
                memsw_failcnt: self.read_optional_u64("memory.memsw.failcnt")?.unwrap_or(0),
            },
        })
    }

    fn usage_since(&self, baseline: &Baseline) -> Result<Usage, Error> {
        self.measure(Some(baseline))
    }

    fn cpu_time_since(&self, baseline: &Baseline) -> Result<Duration, Error> {
        Ok(self.cpu_time()?.saturating_sub(baseline.cpu))
    }

    fn memory_current(&self) -> Result<u64, Error> {
        self.files
            .read_u64(&self.memory.join("memory.usage_in_bytes"))
    }

    fn pids_current(&self) -> Result<u64, Error> {
        self.files.read_u64(&self.pids.join("pids.current"))
    }
}

/// How close to a v1 limit the recorded peak must come to count as hitting it. The peak
/// counters never exceed the limit, and when a charge fails the kernel reclaims and retries, so
/// the highest *successful* usage stays a little below it (276 KiB below 64 MiB in a test on
/// 6.18); a huge page (2 MiB) is the largest single charge. Capped at 1/8 of small limits.
pub(crate) fn near_limit_margin(limit: u64) -> u64 {
    (2 * 1024 * 1024).min(limit / 8)
}

/// `pids.events` "max N": how many forks failed on pids.max (0 if the file is absent, before
/// Linux 4.3 or so).
pub(crate) fn pids_events_max(files: &OpenFiles, dir: &Path) -> Result<u64, Error> {
    let path = dir.join("pids.events");
    match files.read_optional(&path)? {
        Some(text) => KeyedFile::parse(&path, &text)?.get_or_zero("max"),
        None => Ok(0),
    }
}
