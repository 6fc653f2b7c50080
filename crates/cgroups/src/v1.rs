//! cgroup v1 backend: a run's leaf is one directory in each of the memory, pids and cpuacct
//! hierarchies (fewer when some of them are co-mounted, e.g. `cpu,cpuacct`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::detect::{cg_join, v1_for, V1Hierarchy};
use crate::fs::{self, KeyedFile};
use crate::leaf::Leaf;
use crate::{validate_name, Cgroup, Error, Limits, Manager, Usage, Version};

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

    /// Creates the base directories (mkdir -p, 0755). Idempotent.
    fn prepare(&self) -> Result<(), Error> {
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
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) && attempts < 3 => {
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
            leaf: Leaf::new(dirs, None),
        };
        // On error `cg` is dropped, which removes the directories again.
        cg.apply(limits)?;
        Ok(Box::new(cg))
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
}

impl V1Cgroup {
    fn apply(&self, limits: &Limits) -> Result<(), Error> {
        let mem = limits
            .memory_bytes
            .map_or_else(|| V1_MEMORY_UNLIMITED.to_owned(), |b| b.to_string());
        // memory first: memsw must never be below it, and both start unlimited.
        fs::write(&self.memory.join("memory.limit_in_bytes"), &mem)?;
        // memory+swap = memory means no swap at all. Absent without swap accounting
        // (CONFIG_MEMCG_SWAP off or swapaccount=0); then swappiness=0 is all we can do.
        fs::write_if_exists(&self.memory.join("memory.memsw.limit_in_bytes"), &mem)?;
        // Refused in some setups (e.g. the root cgroup, or a parent with use_hierarchy); it
        // only makes the kernel prefer dropping page cache over swapping, so ignore failure.
        let _ = fs::write(&self.memory.join("memory.swappiness"), "0");
        let pids = limits
            .pids
            .map_or_else(|| "max".to_owned(), |n| n.to_string());
        fs::write(&self.pids.join("pids.max"), &pids)?;
        Ok(())
    }
}

impl V1Cgroup {
    /// A number from a memory file that may be absent (memsw without swap accounting).
    fn read_optional_u64(&self, file: &str) -> Result<Option<u64>, Error> {
        let path = self.memory.join(file);
        match fs::read_optional(&path)? {
            Some(t) => fs::parse_u64(&path, &t).map(Some),
            None => Ok(None),
        }
    }
}

impl Cgroup for V1Cgroup {
    fn procs_files(&self) -> Result<Vec<std::os::fd::OwnedFd>, Error> {
        self.leaf.procs_files()
    }

    fn cpu_time(&self) -> Result<Duration, Error> {
        // Nanoseconds, including tasks that have exited.
        fs::read_u64(&self.cpuacct.join("cpuacct.usage")).map(Duration::from_nanos)
    }

    fn usage(&self) -> Result<Usage, Error> {
        let cpu_time = self.cpu_time()?;
        let memory_peak_bytes = fs::read_u64(&self.memory.join("memory.max_usage_in_bytes"))?;
        let failcnt = fs::read_u64(&self.memory.join("memory.failcnt"))?;
        // With memsw limited to the same value, the memory+swap counter is the one that trips,
        // and recent kernels (seen on 6.18) keep no failcnt for it: memory.memsw.failcnt stays
        // 0, and so does memory.failcnt. So a peak at the limit counts as hitting it too.
        let memsw_failcnt = self.read_optional_u64("memory.memsw.failcnt")?.unwrap_or(0);
        let at_limit = |peak: Option<u64>, limit: Option<u64>| match (peak, limit) {
            (Some(p), Some(l)) => p.saturating_add(near_limit_margin(l)) >= l,
            _ => false,
        };
        let mem_at_limit = at_limit(
            Some(memory_peak_bytes),
            self.read_optional_u64("memory.limit_in_bytes")?,
        );
        let memsw_at_limit = at_limit(
            self.read_optional_u64("memory.memsw.max_usage_in_bytes")?,
            self.read_optional_u64("memory.memsw.limit_in_bytes")?,
        );
        let oom_path = self.memory.join("memory.oom_control");
        let oom_text = fs::read(&oom_path)?;
        let oom = KeyedFile::parse(&oom_path, &oom_text)?;
        let oom_killed = match oom.get("oom_kill")? {
            Some(n) => n > 0,
            // Kernels before 4.13 have no counter: an ongoing OOM after failures is the best
            // evidence left.
            None => failcnt > 0 && oom.get_or_zero("under_oom")? > 0,
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
            pids_peak: None,
            pids_limit_hit: pids_events_max(&self.pids)?,
        })
    }

    fn pids(&self) -> Result<Vec<i32>, Error> {
        self.leaf.pids()
    }

    fn kill_all(&self) -> Result<(), Error> {
        // No freezer: the pids limit bounds how fast the set can grow, and the loop repeats
        // until `cgroup.procs` stays empty.
        self.leaf.kill_all()
    }

    fn destroy(mut self: Box<Self>) -> Result<(), Error> {
        self.leaf.destroy()
    }

    fn paths(&self) -> Vec<PathBuf> {
        self.leaf.dirs.clone()
    }
}

/// How close to a v1 limit the recorded peak must come to count as hitting it. The peak
/// counters never exceed the limit, and when a charge fails the kernel reclaims and retries, so
/// the highest *successful* usage stays a little below it (276 KiB below 64 MiB in a test on
/// 6.18); a huge page (2 MiB) is the largest single charge. Capped at 1/8 of small limits.
pub(crate) fn near_limit_margin(limit: u64) -> u64 {
    (2 * 1024 * 1024).min(limit / 8)
}

/// `pids.events` "max N" > 0: a fork failed on pids.max. Absent before Linux 4.3 or so.
pub(crate) fn pids_events_max(dir: &Path) -> Result<bool, Error> {
    let path = dir.join("pids.events");
    match fs::read_optional(&path)? {
        Some(text) => Ok(KeyedFile::parse(&path, &text)?.get_or_zero("max")? > 0),
        None => Ok(false),
    }
}
