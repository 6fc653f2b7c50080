//! (e) Memory held by an idle pool of 8 warm sandboxes.
//!
//! `idle_rss_mib` is this process alone (`VmRSS` of /proc/self/status) while it holds the pool.
//! The sandboxes' own processes (per sandbox a keeper, child of this process, and the sandbox's
//! PID 1, child of the keeper) are summed separately: their RSS counts the pages of the shared
//! corral binary once per process, so their PSS (shared pages divided among sharers) is reported
//! too, as is the tmpfs memory the sandboxes' roots and scratch mounts hold.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use corral_sandbox::{Host, Pool, PoolConfig, SandboxConfig};

use crate::stats::Report;

const SANDBOXES: usize = 8;
const MIB: f64 = 1024.0 * 1024.0;

pub fn measure(host: &Arc<Host>, report: &mut Report) -> anyhow::Result<()> {
    let me = std::process::id();
    let before = status_kib(me, "VmRSS:").unwrap_or(0);
    let pool = Pool::new(
        host.clone(),
        PoolConfig {
            max_idle: SANDBOXES,
            ..PoolConfig::default()
        },
    );
    let spec = crate::pooled::true_spec();
    let shape = SandboxConfig::for_spec(&spec);
    pool.prewarm(&shape, SANDBOXES)?;
    // One run through each, so every sandbox has served (and been reset) like a warm pool's would.
    {
        let leases: Vec<_> = (0..SANDBOXES)
            .map(|_| pool.lease(&shape))
            .collect::<Result<_, _>>()?;
        for mut l in leases {
            let o = corral_sandbox::run_in(l.sandbox(), &spec, &mut corral_sandbox::NoSink);
            crate::pooled::expect_ok(&o)?;
        }
    }
    // Let the resets finish; idle means idle.
    std::thread::sleep(Duration::from_millis(300));
    anyhow::ensure!(
        pool.idle() == SANDBOXES,
        "expected {SANDBOXES} idle sandboxes, the pool holds {}",
        pool.idle()
    );

    let self_rss = status_kib(me, "VmRSS:").unwrap_or(0);
    let self_pss = rollup_kib(me, "Pss:").unwrap_or(0);
    let inits = descendants(me);
    let (mut rss, mut pss) = (0u64, 0u64);
    for pid in &inits {
        rss += status_kib(*pid, "VmRSS:").unwrap_or(0);
        pss += rollup_kib(*pid, "Pss:").unwrap_or(0);
    }
    let kib = |k: u64| (k as f64 * 1024.0 / MIB * 100.0).round() / 100.0;
    report.set("idle_sandboxes", SANDBOXES);
    report.set("bench_rss_before_pool_mib", kib(before));
    report.set("idle_rss_mib", kib(self_rss));
    report.set("idle_pss_mib", kib(self_pss));
    report.set("idle_init_processes", inits.len());
    report.set("idle_rss_inits_mib", kib(rss));
    report.set("idle_pss_inits_mib", kib(pss));
    report.set("idle_rss_with_inits_mib", kib(self_rss + rss));
    report.set("idle_pss_with_inits_mib", kib(self_pss + pss));
    report.set(
        "idle_rss_per_sandbox_mib",
        kib(rss / SANDBOXES as u64 + (self_rss - before.min(self_rss)) / SANDBOXES as u64),
    );
    // What the sandboxes' cgroups are charged: PID 1's memory plus the tmpfs pages of each root,
    // /tmp, /dev/shm and working directory.
    let cgroups = memory_cgroups(&inits);
    let charged: u64 = cgroups.iter().filter_map(|p| cgroup_bytes(p)).sum();
    report.set("idle_sandbox_cgroups", cgroups.len());
    report.set(
        "idle_cgroup_memory_mib",
        (charged as f64 / MIB * 100.0).round() / 100.0,
    );
    drop(pool);
    Ok(())
}

/// A `Key:   123 kB` line of /proc/PID/status.
fn status_kib(pid: u32, key: &str) -> Option<u64> {
    field_kib(&format!("/proc/{pid}/status"), key)
}

fn rollup_kib(pid: u32, key: &str) -> Option<u64> {
    field_kib(&format!("/proc/{pid}/smaps_rollup"), key)
}

/// The memory cgroup directories these processes are in (v1 `memory` hierarchy, or v2).
fn memory_cgroups(pids: &[u32]) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for pid in pids {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) else {
            continue;
        };
        for line in text.lines() {
            let mut parts = line.splitn(3, ':');
            let (_, ctrl, path) = (parts.next(), parts.next(), parts.next());
            let dir = match (ctrl, path) {
                (Some(c), Some(p)) if c.split(',').any(|c| c == "memory") => {
                    format!("/sys/fs/cgroup/memory{p}")
                }
                (Some(""), Some(p)) if !std::path::Path::new("/sys/fs/cgroup/memory").exists() => {
                    format!("/sys/fs/cgroup{p}")
                }
                _ => continue,
            };
            let dir = std::path::PathBuf::from(dir);
            if !out.contains(&dir) {
                out.push(dir);
            }
        }
    }
    // The keepers stay in this process's cgroup, which is not a sandbox's.
    let own = memory_cgroups_of_self();
    out.retain(|d| !own.contains(d));
    out
}

fn memory_cgroups_of_self() -> Vec<std::path::PathBuf> {
    let Ok(text) = std::fs::read_to_string("/proc/self/cgroup") else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, c, p) = (parts.next()?, parts.next()?, parts.next()?);
            if c.split(',').any(|c| c == "memory") {
                Some(std::path::PathBuf::from(format!(
                    "/sys/fs/cgroup/memory{p}"
                )))
            } else if c.is_empty() {
                Some(std::path::PathBuf::from(format!("/sys/fs/cgroup{p}")))
            } else {
                None
            }
        })
        .collect()
}

fn cgroup_bytes(dir: &std::path::Path) -> Option<u64> {
    ["memory.usage_in_bytes", "memory.current"]
        .iter()
        .find_map(|f| std::fs::read_to_string(dir.join(f)).ok())
        .and_then(|s| s.trim().parse().ok())
}

fn field_kib(path: &str, key: &str) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

/// Every process below `root` (children, grandchildren, …), from the parent pids in /proc.
fn descendants(root: u32) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            // "pid (comm) state ppid ...": comm may hold spaces and parentheses; split after the last ')'.
            let Some(ppid) = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse::<u32>().ok())
            else {
                continue;
            };
            children.entry(ppid).or_default().push(pid);
        }
    }
    let mut out = Vec::new();
    let mut todo = vec![root];
    while let Some(p) = todo.pop() {
        if let Some(kids) = children.get(&p) {
            for &k in kids {
                // Threads of this process are not in /proc's top level; only processes are.
                out.push(k);
                todo.push(k);
            }
        }
    }
    out
}
