//! A fake cgroupfs for unit tests: plain directories in a tempdir, populated with the control
//! files the kernel would provide whenever the crate creates a cgroup directory, and emptied of
//! them before the crate removes one (the crate itself never creates or deletes files).
//!
//! The hooks are thread-local so parallel tests do not see each other's fakes.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use crate::parse::controller_list;

thread_local! {
    static FAKE: RefCell<Option<FakeKernel>> = const { RefCell::new(None) };
    /// Injected write failure: path, errno, and an optional substring the value must contain.
    static FAULT: RefCell<Option<(PathBuf, i32, Option<String>)>> = const { RefCell::new(None) };
    /// A directory that vanishes right after it is next created (another process's rmdir).
    static VANISH: RefCell<Option<PathBuf>> = const { RefCell::new(None) };
    /// A read that fails once: path and errno.
    static READ_FAULT: RefCell<Option<(PathBuf, i32)>> = const { RefCell::new(None) };
}

/// Makes the next `fs::read` of `path` fail with `errno`, as reading a file of a cgroup that
/// another process is removing does (ENODEV).
pub(crate) fn fail_next_read_of(path: &Path, errno: i32) {
    READ_FAULT.with(|f| *f.borrow_mut() = Some((path.to_owned(), errno)));
}

/// Called by `fs::read`: the injected one-time failure for `path`, if any.
pub(crate) fn read_fault(path: &Path) -> Option<std::io::Error> {
    READ_FAULT.with(|f| {
        let mut f = f.borrow_mut();
        match f.as_ref() {
            Some((p, errno)) if p == path => {
                let e = std::io::Error::from_raw_os_error(*errno);
                *f = None;
                Some(e)
            }
            _ => None,
        }
    })
}

/// Makes the next creation of `path` be undone at once, as another corral process removing the
/// (then empty) base would.
pub(crate) fn vanish_after_next_mkdir(path: &Path) {
    VANISH.with(|v| *v.borrow_mut() = Some(path.to_owned()));
}

/// Makes `fs::write` to `path` fail with `errno` (on this thread, until the fake is dropped).
pub(crate) fn fail_writes_to(path: &Path, errno: i32) {
    FAULT.with(|f| *f.borrow_mut() = Some((path.to_owned(), errno, None)));
}

/// Removes the injected failure.
pub(crate) fn clear_write_fault() {
    FAULT.with(|f| *f.borrow_mut() = None);
}

/// Restricts the injected failure to values containing `needle`.
pub(crate) fn fail_only_if_contains(needle: &str) {
    FAULT.with(|f| {
        if let Some(fault) = f.borrow_mut().as_mut() {
            fault.2 = Some(needle.to_owned());
        }
    });
}

/// Called by `fs::write` before writing: an injected failure, or a rule the fake kernel enforces.
pub(crate) fn write_fault(path: &Path, value: &str) -> Option<std::io::Error> {
    let injected = FAULT.with(|f| match f.borrow().as_ref() {
        Some((p, errno, needle))
            if p == path && needle.as_ref().is_none_or(|n| value.contains(n.as_str())) =>
        {
            Some(std::io::Error::from_raw_os_error(*errno))
        }
        _ => None,
    });
    if injected.is_some() || FAKE.with(|k| k.borrow().is_none()) {
        return injected;
    }
    v1_memsw_invariant(path, value)
}

/// What v1 `memory.limit_in_bytes` and `memory.memsw.limit_in_bytes` show when unlimited
/// (PAGE_COUNTER_MAX pages); writing `-1` sets it.
const V1_UNLIMITED: u64 = 9223372036854771712;

/// The v1 kernel refuses (EINVAL) any write that would leave memsw below memory.
fn v1_memsw_invariant(path: &Path, value: &str) -> Option<std::io::Error> {
    let parse = |s: &str| match s.trim() {
        "-1" => Some(V1_UNLIMITED),
        t => t.parse::<u64>().ok(),
    };
    let read = |name: &str| parse(&std::fs::read_to_string(path.parent()?.join(name)).ok()?);
    let new = parse(value)?;
    let ok = match path.file_name()?.to_str()? {
        "memory.limit_in_bytes" => new <= read("memory.memsw.limit_in_bytes")?,
        "memory.memsw.limit_in_bytes" => new >= read("memory.limit_in_bytes")?,
        _ => return None,
    };
    (!ok).then(|| std::io::Error::from_raw_os_error(libc::EINVAL))
}

/// Name under which the fake keeps the inode behind the last fd-local `memory.peak` reset, so a
/// test can set the value that fd reads (the kernel keeps such a peak per open file).
pub(crate) const FD_LOCAL_PEAK: &str = "memory.peak.fd-local";

/// Called by `fs::open_and_write` with the opened file. For a fake v2 `memory.peak` this emulates
/// the kernel's fd-local reset (Linux 6.12+): from now on the fd reads a peak starting at
/// `memory.current`, while the path keeps showing the lifetime peak. The fd's inode is renamed to
/// [`FD_LOCAL_PEAK`] and a fresh `memory.peak` with the old content takes its place.
pub(crate) fn fd_local_write(
    path: &Path,
    f: &std::fs::File,
    _value: &str,
) -> Option<std::io::Result<()>> {
    use std::os::unix::fs::FileExt;
    let active = FAKE.with(|k| k.borrow().is_some());
    if !active || path.file_name()? != "memory.peak" {
        return None;
    }
    let dir = path.parent()?;
    Some((|| {
        let lifetime = std::fs::read(path)?;
        let current = std::fs::read(dir.join("memory.current"))?;
        std::fs::rename(path, dir.join(FD_LOCAL_PEAK))?;
        std::fs::write(path, lifetime)?;
        f.set_len(0)?;
        f.write_all_at(&current, 0)
    })())
}

/// What the fake "kernel" mounts where.
#[derive(Clone, Debug)]
pub(crate) struct FakeKernel {
    /// v1 hierarchies: mount point and controllers.
    pub v1: Vec<(PathBuf, Vec<String>)>,
    /// The cgroup2 mount point.
    pub v2: Option<PathBuf>,
    /// Root `cgroup.controllers` of the v2 mount.
    pub v2_root_controllers: Vec<String>,
    /// Swap accounting (v1 memory.memsw.*, v2 memory.swap.max).
    pub swap: bool,
    /// v2 cgroup.kill.
    pub cgroup_kill: bool,
}

/// Uninstalls the fake on drop.
pub(crate) struct Installed;

impl Drop for Installed {
    fn drop(&mut self) {
        FAKE.with(|f| *f.borrow_mut() = None);
        FAULT.with(|f| *f.borrow_mut() = None);
    }
}

impl FakeKernel {
    /// Creates the mount points with their root files and activates the hooks on this thread.
    pub(crate) fn install(self) -> Installed {
        if let Some(m) = &self.v2 {
            std::fs::create_dir_all(m).unwrap();
            put(m, "cgroup.controllers", &self.v2_root_controllers.join(" "));
            put(m, "cgroup.subtree_control", "");
            put(m, "cgroup.procs", "");
            put(m, "cpu.stat", "usage_usec 0\nuser_usec 0\nsystem_usec 0\n");
        }
        for (m, ctrls) in &self.v1 {
            std::fs::create_dir_all(m).unwrap();
            self.populate_v1(m, ctrls, true);
        }
        FAKE.with(|f| *f.borrow_mut() = Some(self));
        Installed
    }

    fn populate(&self, dir: &Path) {
        if let Some(m) = &self.v2 {
            if dir.starts_with(m) && dir != m {
                self.populate_v2(dir);
                return;
            }
        }
        for (m, ctrls) in &self.v1 {
            if dir.starts_with(m) {
                self.populate_v1(dir, ctrls, false);
                return;
            }
        }
    }

    fn populate_v2(&self, dir: &Path) {
        let parent_sub =
            std::fs::read_to_string(dir.parent().unwrap().join("cgroup.subtree_control"))
                .unwrap_or_default();
        let ctrls = controller_list(&parent_sub);
        let has = |c: &str| ctrls.iter().any(|x| x == c);
        put(dir, "cgroup.controllers", &ctrls.join(" "));
        put(dir, "cgroup.subtree_control", "");
        put(dir, "cgroup.procs", "");
        put(dir, "cgroup.events", "populated 0\nfrozen 0\n");
        put(dir, "cgroup.type", "domain\n");
        put(
            dir,
            "cpu.stat",
            "usage_usec 0\nuser_usec 0\nsystem_usec 0\n",
        );
        if self.cgroup_kill {
            put(dir, "cgroup.kill", "");
        }
        if has("memory") {
            put(dir, "memory.max", "max\n");
            put(dir, "memory.current", "0\n");
            put(dir, "memory.peak", "0\n");
            put(dir, "memory.reclaim", "");
            put(dir, "memory.oom.group", "0\n");
            put(
                dir,
                "memory.events",
                "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n",
            );
            if self.swap {
                put(dir, "memory.swap.max", "max\n");
            }
        }
        if has("pids") {
            put(dir, "pids.max", "max\n");
            put(dir, "pids.current", "0\n");
            put(dir, "pids.peak", "0\n");
            put(dir, "pids.events", "max 0\n");
        }
    }

    fn populate_v1(&self, dir: &Path, ctrls: &[String], root: bool) {
        let has = |c: &str| ctrls.iter().any(|x| x == c);
        put(dir, "cgroup.procs", "");
        put(dir, "tasks", "");
        put(dir, "notify_on_release", "0\n");
        put(dir, "cgroup.clone_children", "0\n");
        if has("memory") {
            put(dir, "memory.limit_in_bytes", "9223372036854771712\n");
            put(dir, "memory.max_usage_in_bytes", "0\n");
            put(dir, "memory.usage_in_bytes", "0\n");
            put(dir, "memory.failcnt", "0\n");
            put(dir, "memory.swappiness", "60\n");
            put(dir, "memory.use_hierarchy", "1\n");
            put(
                dir,
                "memory.kmem.tcp.limit_in_bytes",
                "9223372036854771712\n",
            );
            put(
                dir,
                "memory.oom_control",
                "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n",
            );
            if self.swap {
                put(dir, "memory.memsw.limit_in_bytes", "9223372036854771712\n");
                put(dir, "memory.memsw.failcnt", "0\n");
                put(dir, "memory.memsw.max_usage_in_bytes", "0\n");
                put(dir, "memory.memsw.usage_in_bytes", "0\n");
            }
        }
        if has("pids") && !root {
            put(dir, "pids.max", "max\n");
            put(dir, "pids.current", "0\n");
            put(dir, "pids.peak", "0\n");
            put(dir, "pids.events", "max 0\n");
        }
        if has("cpuacct") {
            put(dir, "cpuacct.usage", "0\n");
            put(dir, "cpuacct.stat", "user 0\nsystem 0\n");
        }
        if has("cpu") {
            put(dir, "cpu.shares", "1024\n");
        }
        if has("cpuset") {
            put(dir, "cpuset.cpus", if root { "0-1\n" } else { "\n" });
            put(dir, "cpuset.mems", if root { "0\n" } else { "\n" });
        }
    }
}

fn put(dir: &Path, name: &str, content: &str) {
    std::fs::write(dir.join(name), content).unwrap();
}

/// Called by `fs::mkdir` after creating a directory.
pub(crate) fn after_mkdir(path: &Path) {
    FAKE.with(|f| {
        if let Some(k) = f.borrow().as_ref() {
            k.populate(path);
        }
    });
    if VANISH.with(|v| v.borrow().as_deref() == Some(path)) {
        VANISH.with(|v| *v.borrow_mut() = None);
        std::fs::remove_dir_all(path).unwrap();
    }
}

/// Called by `fs::rmdir_retry` before removing a directory: the kernel removes a cgroup's
/// control files along with it, so the fake deletes them.
pub(crate) fn before_rmdir(path: &Path) {
    FAKE.with(|f| {
        if f.borrow().is_some() {
            // Like the kernel, refuse (leave everything) while sub-cgroups exist.
            let has_subdirs = std::fs::read_dir(path).is_ok_and(|rd| {
                rd.flatten()
                    .any(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            });
            if has_subdirs {
                return;
            }
            if let Ok(rd) = std::fs::read_dir(path) {
                for e in rd.flatten() {
                    if e.file_type().is_ok_and(|t| t.is_file()) {
                        let _ = std::fs::remove_file(e.path());
                    }
                }
            }
        }
    });
}
