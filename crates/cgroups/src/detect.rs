//! Finding cgroup hierarchies: parsing `/proc/self/mountinfo` and `/proc/self/cgroup`, and choosing
//! between v1 and v2.
//!
//! Everything here is read-only; creating directories is the backends' job.

use std::path::{Path, PathBuf};

use crate::fs;
use crate::model::Version;
use crate::parse::controller_list;

/// Controllers corral needs on cgroup v2 (`cpu.stat` with `usage_usec` exists without the cpu
/// controller, so cpu is only enabled opportunistically).
pub(crate) const V2_REQUIRED: [&str; 2] = ["memory", "pids"];
/// Hierarchies corral needs on cgroup v1.
pub(crate) const V1_REQUIRED: [&str; 3] = ["memory", "pids", "cpuacct"];

/// cgroup v1 controller names; mount options that are not in this list (`rw`, `noprefix`,
/// `clone_children`, `release_agent=...`) are not controllers.
const V1_CONTROLLERS: [&str; 14] = [
    "cpu",
    "cpuacct",
    "cpuset",
    "memory",
    "devices",
    "freezer",
    "net_cls",
    "net_prio",
    "blkio",
    "perf_event",
    "hugetlb",
    "pids",
    "rdma",
    "misc",
];

/// One mounted cgroup v1 hierarchy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct V1Hierarchy {
    /// Controllers bound to it, e.g. `["cpu", "cpuacct"]`; named hierarchies appear as
    /// `"name=systemd"`.
    pub controllers: Vec<String>,
    /// Where it is mounted (with the test `fs_root` prepended).
    pub mount_point: PathBuf,
    /// Which cgroup of the hierarchy the mount shows at its mount point (mountinfo field 4);
    /// `/` unless a container runtime bind-mounted a sub-tree.
    pub mount_root: String,
    /// This process's cgroup in the hierarchy, relative to `mount_point` (`/` = the mount point).
    pub own_path: String,
}

/// The mounted cgroup v2 (unified) hierarchy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct V2Hierarchy {
    /// Where it is mounted (with the test `fs_root` prepended).
    pub mount_point: PathBuf,
    /// Which cgroup the mount shows at its mount point (mountinfo field 4).
    pub mount_root: String,
    /// This process's cgroup, relative to `mount_point`.
    pub own_path: String,
    /// The mount root's `cgroup.controllers`: controllers bound to v2 (empty if unreadable).
    pub controllers: Vec<String>,
    /// `cgroup.controllers` of this process's own cgroup (what its parent delegates), if readable.
    pub own_controllers: Option<Vec<String>>,
}

/// What is mounted, for `corral doctor`. Built without creating or writing anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// cgroup v1 hierarchies in mountinfo order (a hierarchy mounted twice appears twice).
    pub v1: Vec<V1Hierarchy>,
    /// The cgroup2 mount, if any.
    pub v2: Option<V2Hierarchy>,
    /// The version `detect` would use (honouring CORRAL_CGROUP_VERSION).
    pub selected: Option<Version>,
    /// Why nothing is usable, when `selected` is `None`.
    pub problem: Option<String>,
}

/// One line of mountinfo, reduced to what we need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MountEntry {
    pub root: String,
    pub mount_point: String,
    pub fstype: String,
    pub super_options: String,
}

/// Undoes mountinfo's octal escaping of space, tab, newline and backslash (`\040` etc.).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') as u32 * 64
                + (b[i + 2] - b'0') as u32 * 8
                + (b[i + 3] - b'0') as u32;
            if let Ok(v) = u8::try_from(v) {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses mountinfo text (proc(5)). Malformed lines are skipped: one odd line must not hide the
/// cgroup mounts.
pub(crate) fn parse_mountinfo(text: &str) -> Vec<MountEntry> {
    let mut out = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        // id parent maj:min root mount_point options [optional...] - fstype source super_options
        let Some(sep) = fields.iter().position(|f| *f == "-") else {
            continue;
        };
        if sep < 6 || fields.len() < sep + 4 {
            continue;
        }
        out.push(MountEntry {
            root: unescape(fields[3]),
            mount_point: unescape(fields[4]),
            fstype: fields[sep + 1].to_owned(),
            super_options: fields[sep + 3].to_owned(),
        });
    }
    out
}

/// `/proc/self/cgroup`, split by version.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SelfCgroup {
    /// The `0::/path` line.
    pub v2: Option<String>,
    /// `(controllers, path)` for every v1 line.
    pub v1: Vec<(Vec<String>, String)>,
}

/// Parses `/proc/self/cgroup` text ("hierarchy-id:controller-list:path" per line). The path is
/// everything after the second colon, since cgroup names may themselves contain colons.
pub(crate) fn parse_self_cgroup(text: &str) -> SelfCgroup {
    let mut out = SelfCgroup::default();
    for line in text.lines() {
        let mut it = line.splitn(3, ':');
        let (Some(id), Some(ctrls), Some(path)) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        let path = path.trim_end().trim_end_matches(" (deleted)").to_owned();
        if id == "0" && ctrls.is_empty() {
            out.v2 = Some(path);
        } else {
            out.v1
                .push((ctrls.split(',').map(str::to_owned).collect(), path));
        }
    }
    out
}

/// Turns a cgroup path from /proc/self/cgroup into a path relative to a mount whose root is
/// `mount_root` (container runtimes may mount only a sub-tree of the hierarchy).
fn relative_to_mount(own: &str, mount_root: &str) -> String {
    if mount_root == "/" || mount_root.is_empty() {
        return own.to_owned();
    }
    let root = mount_root.trim_end_matches('/');
    if own == root {
        return "/".to_owned();
    }
    if let Some(rest) = own.strip_prefix(root) {
        if rest.starts_with('/') {
            return rest.to_owned();
        }
    }
    // Not below the mount root (e.g. a cgroup namespace shows "/.." roots): the best guess is
    // that the path is already relative to what we see.
    own.to_owned()
}

/// `mount_point` inside `fs_root`.
pub(crate) fn under_root(fs_root: &Path, mount_point: &str) -> PathBuf {
    let rel = mount_point.trim_start_matches('/');
    if rel.is_empty() {
        fs_root.to_path_buf()
    } else {
        fs_root.join(rel)
    }
}

/// `rel` (a cgroup path like `/a/b`, `/` = the mount point itself) below a mount point.
pub(crate) fn cg_join(mount: &Path, rel: &str) -> PathBuf {
    let rel = rel.trim_matches('/');
    if rel.is_empty() {
        mount.to_path_buf()
    } else {
        mount.join(rel)
    }
}

/// The parent of a cgroup path, `None` for `/`.
pub(crate) fn cg_parent(rel: &str) -> Option<String> {
    let t = rel.trim_end_matches('/');
    if t.is_empty() {
        return None;
    }
    match t.rfind('/') {
        Some(0) | None => Some("/".to_owned()),
        Some(i) => Some(t[..i].to_owned()),
    }
}

/// Reads a controller list file; `None` if it cannot be read.
fn read_controllers(path: &Path) -> Option<Vec<String>> {
    fs::read_optional(path)
        .ok()
        .flatten()
        .map(|t| controller_list(&t))
}

/// Builds the read-only view of this host's cgroup mounts.
pub(crate) fn layout(
    mountinfo: &str,
    self_cgroup: &str,
    fs_root: &Path,
) -> (Vec<V1Hierarchy>, Option<V2Hierarchy>) {
    let mounts = parse_mountinfo(mountinfo);
    let own = parse_self_cgroup(self_cgroup);
    let mut v1 = Vec::new();
    let mut v2 = None;
    for m in mounts {
        match m.fstype.as_str() {
            "cgroup" => {
                let controllers: Vec<String> = m
                    .super_options
                    .split(',')
                    .filter(|o| V1_CONTROLLERS.contains(o) || o.starts_with("name="))
                    .map(str::to_owned)
                    .collect();
                if controllers.is_empty() {
                    continue;
                }
                // The /proc/self/cgroup line for this hierarchy lists the same controller set.
                let own_raw = own
                    .v1
                    .iter()
                    .find(|(c, _)| c.iter().any(|x| controllers.contains(x)))
                    .map(|(_, p)| p.clone())
                    .unwrap_or_else(|| "/".to_owned());
                v1.push(V1Hierarchy {
                    own_path: relative_to_mount(&own_raw, &m.root),
                    mount_point: under_root(fs_root, &m.mount_point),
                    mount_root: m.root,
                    controllers,
                });
            }
            "cgroup2" if v2.is_none() => {
                let mount_point = under_root(fs_root, &m.mount_point);
                let own_raw = own.v2.clone().unwrap_or_else(|| "/".to_owned());
                let own_path = relative_to_mount(&own_raw, &m.root);
                let controllers =
                    read_controllers(&mount_point.join("cgroup.controllers")).unwrap_or_default();
                let own_controllers =
                    read_controllers(&cg_join(&mount_point, &own_path).join("cgroup.controllers"));
                v2 = Some(V2Hierarchy {
                    mount_point,
                    mount_root: m.root,
                    own_path,
                    controllers,
                    own_controllers,
                });
            }
            _ => {}
        }
    }
    (v1, v2)
}

/// The v1 hierarchy carrying `controller`, preferring a mount of the whole hierarchy.
pub(crate) fn v1_for<'a>(v1: &'a [V1Hierarchy], controller: &str) -> Option<&'a V1Hierarchy> {
    let mut candidates = v1
        .iter()
        .filter(|h| h.controllers.iter().any(|c| c == controller));
    let first = candidates.clone().next();
    candidates.find(|h| h.mount_root == "/").or(first)
}

/// v2 controllers (of [`V2_REQUIRED`]) that are not available: checked in the mount root's
/// `cgroup.controllers` and along this process's own cgroup chain.
pub(crate) fn v2_missing(v2: &V2Hierarchy) -> Vec<&'static str> {
    let have = |c: &str| {
        v2.controllers.iter().any(|x| x == c)
            || v2
                .own_controllers
                .as_ref()
                .is_some_and(|o| o.iter().any(|x| x == c))
    };
    let mut missing: Vec<&'static str> = V2_REQUIRED.into_iter().filter(|c| !have(c)).collect();
    if !missing.is_empty() {
        // Walk the ancestors of our own cgroup: any of them listing the controller means it
        // reaches this part of the tree.
        let mut cur = cg_parent(&v2.own_path);
        while let Some(p) = cur {
            if let Some(list) =
                read_controllers(&cg_join(&v2.mount_point, &p).join("cgroup.controllers"))
            {
                missing.retain(|c| !list.iter().any(|x| x == c));
            }
            cur = cg_parent(&p);
        }
    }
    missing
}

/// v1 controllers (of [`V1_REQUIRED`]) without a mounted hierarchy.
pub(crate) fn v1_missing(v1: &[V1Hierarchy]) -> Vec<&'static str> {
    V1_REQUIRED
        .into_iter()
        .filter(|c| v1_for(v1, c).is_none())
        .collect()
}

fn describe_v2_problem(v2: Option<&V2Hierarchy>) -> String {
    match v2 {
        None => "cgroup v2 is not mounted".to_owned(),
        Some(h) => format!(
            "cgroup v2 at {} lacks controllers {} (it has: {})",
            h.mount_point.display(),
            v2_missing(h).join(", "),
            if h.controllers.is_empty() {
                "none".to_owned()
            } else {
                h.controllers.join(" ")
            }
        ),
    }
}

fn describe_v1_problem(v1: &[V1Hierarchy]) -> String {
    format!(
        "cgroup v1 has no mounted hierarchy for {}",
        v1_missing(v1).join(", ")
    )
}

/// Chooses the version: v2 when its memory and pids controllers are available, else v1 when the
/// memory, pids and cpuacct hierarchies are mounted. `force` (CORRAL_CGROUP_VERSION) restricts
/// the choice. The error text says what is missing for each version considered.
pub(crate) fn select(
    v1: &[V1Hierarchy],
    v2: Option<&V2Hierarchy>,
    force: Option<Version>,
) -> Result<Version, String> {
    let v2_ok = v2.is_some_and(|h| v2_missing(h).is_empty());
    let v1_ok = v1_missing(v1).is_empty();
    match force {
        Some(Version::V2) if v2_ok => Ok(Version::V2),
        Some(Version::V2) => Err(format!(
            "CORRAL_CGROUP_VERSION=v2, but {}",
            describe_v2_problem(v2)
        )),
        Some(Version::V1) if v1_ok => Ok(Version::V1),
        Some(Version::V1) => Err(format!(
            "CORRAL_CGROUP_VERSION=v1, but {}",
            describe_v1_problem(v1)
        )),
        None if v2_ok => Ok(Version::V2),
        None if v1_ok => Ok(Version::V1),
        None => Err(format!(
            "{}; {}",
            describe_v2_problem(v2),
            describe_v1_problem(v1)
        )),
    }
}

/// Builds a [`Probe`] from the given texts (read-only).
pub(crate) fn probe_from(
    mountinfo: &str,
    self_cgroup: &str,
    fs_root: &Path,
    force: Option<Version>,
) -> Probe {
    let (v1, v2) = layout(mountinfo, self_cgroup, fs_root);
    let (selected, problem) = match select(&v1, v2.as_ref(), force) {
        Ok(v) => (Some(v), None),
        Err(e) => (None, Some(e)),
    };
    Probe {
        v1,
        v2,
        selected,
        problem,
    }
}
