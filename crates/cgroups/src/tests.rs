//! Unit tests against fake cgroupfs trees (see `testfs`). Real-kernel tests are in `tests/`.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tempfile::TempDir;

use crate::detect::{self, layout, parse_mountinfo, parse_self_cgroup};
use crate::entry::{detect_with, probe_from};
use crate::error::Error;
use crate::fs;
use crate::model::{Baseline, Cgroup, Limits, Manager, Version};
use crate::options::{normalize_parent, Options};
use crate::parse::{parse_pids, KeyedFile};
use crate::testfs::{self, FakeKernel, Installed};

/// This machine's real /proc/self/mountinfo and /proc/self/cgroup (hybrid: v1 controllers under
/// /sys/fs/cgroup/<ctrl>, a cgroup2 at /sys/fs/cgroup/unified with only hugetlb).
const THIS_HOST_MOUNTINFO: &str = include_str!("../tests/fixtures/this_host.mountinfo");
const THIS_HOST_CGROUP: &str = include_str!("../tests/fixtures/this_host.cgroup");
const THIS_HOST_MEM_OWN: &str = "process_api/8804c530b01b66899b6ed9d62d212c10";

/// A systemd host with only the unified hierarchy (Fedora, Ubuntu 22.04+, ...).
const SYSTEMD_V2_MOUNTINFO: &str = "\
22 1 252:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw
23 22 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
24 22 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:2 - sysfs sysfs rw
26 24 0:24 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
";
const SYSTEMD_V2_CGROUP: &str = "0::/user.slice/user-1000.slice/session-2.scope\n";
const SESSION: &str = "sys/fs/cgroup/user.slice/user-1000.slice/session-2.scope";

/// A container with its own cgroup namespace: cgroup2 mounted read-write, we sit at "/".
const CONTAINER_V2_MOUNTINFO: &str = "\
600 500 0:50 / / rw,relatime master:1 - overlay overlay rw,lowerdir=/l,upperdir=/u,workdir=/w
610 600 0:60 / /sys rw,nosuid,nodev,noexec,relatime - sysfs sysfs rw
620 610 0:61 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup rw,nsdelegate
";
const CONTAINER_V2_CGROUP: &str = "0::/\n";

/// Older distributions: cpu and cpuacct co-mounted.
const COMOUNT_V1_MOUNTINFO: &str = "\
30 25 0:26 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755
31 30 0:27 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,xattr,release_agent=/usr/lib/systemd/systemd-cgroups-agent,name=systemd
33 30 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct
34 30 0:30 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
35 30 0:31 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids
";
const COMOUNT_V1_CGROUP: &str = "\
5:pids:/system.slice/corral.service
4:memory:/system.slice/corral.service
3:cpu,cpuacct:/system.slice/corral.service
1:name=systemd:/system.slice/corral.service
0::/system.slice/corral.service
";

/// A fake host: a tempdir plus the installed fake kernel.
struct Host {
    tmp: TempDir,
    _kernel: Installed,
}

impl Host {
    fn new(kernel: impl FnOnce(&Path) -> FakeKernel) -> Host {
        let tmp = tempfile::tempdir().unwrap();
        let k = kernel(tmp.path());
        Host {
            _kernel: k.install(),
            tmp,
        }
    }

    fn root(&self) -> &Path {
        self.tmp.path()
    }

    fn p(&self, rel: &str) -> PathBuf {
        self.root().join(rel)
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.p(rel))
            .unwrap_or_else(|e| panic!("{rel}: {e}"))
            .trim()
            .to_owned()
    }

    /// Overwrites a file's content, as the kernel would report it.
    fn set(&self, rel: &str, content: &str) {
        let p = self.p(rel);
        assert!(p.is_file(), "{rel} must exist already");
        std::fs::write(p, content).unwrap();
    }

    /// Creates a cgroup directory the way the kernel would (control files included).
    fn mkcg(&self, rel: &str) {
        fs::mkdir_p(self.root(), &self.p(rel)).unwrap();
    }
}

fn this_host(swap: bool) -> Host {
    let h = Host::new(|root| {
        let cg = root.join("sys/fs/cgroup");
        let v1 = [
            ("cpu", "cpu"),
            ("cpuacct", "cpuacct"),
            ("cpuset", "cpuset"),
            ("memory", "memory"),
            ("devices", "devices"),
            ("freezer", "freezer"),
            ("blkio", "blkio"),
            ("pids", "pids"),
            ("systemd", "name=systemd"),
        ]
        .into_iter()
        .map(|(dir, c)| (cg.join(dir), vec![c.to_owned()]))
        .collect();
        FakeKernel {
            v1,
            v2: Some(cg.join("unified")),
            v2_root_controllers: vec!["hugetlb".to_owned()],
            swap,
            cgroup_kill: false,
        }
    });
    h.mkcg(&format!("sys/fs/cgroup/memory/{THIS_HOST_MEM_OWN}"));
    h
}

fn pure_v2(swap: bool, cgroup_kill: bool) -> Host {
    Host::new(|root| FakeKernel {
        v1: vec![],
        v2: Some(root.join("sys/fs/cgroup")),
        v2_root_controllers: "cpuset cpu io memory hugetlb pids rdma misc"
            .split(' ')
            .map(str::to_owned)
            .collect(),
        swap,
        cgroup_kill,
    })
}

/// A systemd host where `session-2.scope` was delegated memory, pids and cpu.
fn systemd_host() -> Host {
    let h = pure_v2(true, true);
    h.set("sys/fs/cgroup/cgroup.subtree_control", "cpu memory pids");
    h.mkcg("sys/fs/cgroup/user.slice");
    h.set(
        "sys/fs/cgroup/user.slice/cgroup.subtree_control",
        "cpu memory pids",
    );
    h.mkcg("sys/fs/cgroup/user.slice/user-1000.slice");
    h.set(
        "sys/fs/cgroup/user.slice/user-1000.slice/cgroup.subtree_control",
        "cpu memory pids",
    );
    h.mkcg(SESSION);
    h
}

fn no_env() -> Options {
    Options::default()
}

fn limits(mem: u64, pids: u64) -> Limits {
    Limits {
        memory_bytes: Some(mem),
        pids: Some(pids),
    }
}

const MIB: u64 = 1024 * 1024;

/// A leaf `name` made by corral's manager on [`this_host`]: the host, the manager, the leaf and
/// the leaf's memory folder (relative to the host's root).
fn v1_leaf(
    swap: bool,
    name: &str,
    limits: &Limits,
) -> (Host, Box<dyn Manager>, Box<dyn Cgroup>, String) {
    let h = this_host(swap);
    let m = detect_with(THIS_HOST_MOUNTINFO, THIS_HOST_CGROUP, h.root(), &no_env()).unwrap();
    let cg = m.create(name, limits).unwrap();
    let mem = format!("sys/fs/cgroup/memory/{THIS_HOST_MEM_OWN}/corral/{name}");
    (h, m, cg, mem)
}

/// The v1 memory and memory+swap limits of the leaf whose memory folder is `mem`.
fn memory_and_memsw(h: &Host, mem: &str) -> (String, String) {
    (
        h.read(&format!("{mem}/memory.limit_in_bytes")),
        h.read(&format!("{mem}/memory.memsw.limit_in_bytes")),
    )
}

// ---------------------------------------------------------------- parsing

#[test]
fn parses_this_hosts_mountinfo_and_cgroup() {
    let root = Path::new("/fake");
    let (v1, v2) = layout(THIS_HOST_MOUNTINFO, THIS_HOST_CGROUP, root);
    let names: Vec<String> = v1.iter().map(|h| h.controllers.join(",")).collect();
    assert_eq!(
        names,
        [
            "cpu",
            "cpuacct",
            "cpuset",
            "memory",
            "devices",
            "freezer",
            "blkio",
            "pids",
            "name=systemd"
        ]
    );
    let mem = detect::v1_for(&v1, "memory").unwrap();
    assert_eq!(mem.mount_point, Path::new("/fake/sys/fs/cgroup/memory"));
    assert_eq!(mem.own_path, format!("/{THIS_HOST_MEM_OWN}"));
    assert_eq!(detect::v1_for(&v1, "pids").unwrap().own_path, "/");
    assert_eq!(detect::v1_for(&v1, "cpuacct").unwrap().own_path, "/");
    let v2 = v2.unwrap();
    assert_eq!(v2.mount_point, Path::new("/fake/sys/fs/cgroup/unified"));
    assert_eq!(v2.own_path, "/");
}

#[test]
fn mountinfo_unescapes_and_skips_garbage() {
    let text = "\
garbage line
40 31 0:38 / /mnt/my\\040cgroups rw,relatime shared:5 master:3 - cgroup2 cgroup2 rw
41 31 0:39 /docker/abc /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
";
    let m = parse_mountinfo(text);
    assert_eq!(m.len(), 2);
    assert_eq!(m[0].mount_point, "/mnt/my cgroups");
    assert_eq!(m[0].fstype, "cgroup2");
    assert_eq!(m[1].root, "/docker/abc");
    assert_eq!(m[1].super_options, "rw,memory");
}

#[test]
fn self_cgroup_keeps_colons_in_paths() {
    let s = parse_self_cgroup("0::/a:b/c\n4:memory:/x\n3:cpu,cpuacct:/y (deleted)\n");
    assert_eq!(s.v2.as_deref(), Some("/a:b/c"));
    assert_eq!(s.v1[0], (vec!["memory".to_owned()], "/x".to_owned()));
    assert_eq!(
        s.v1[1],
        (
            vec!["cpu".to_owned(), "cpuacct".to_owned()],
            "/y".to_owned()
        )
    );
}

#[test]
fn own_path_is_relative_to_a_bind_mounted_subtree() {
    // Docker without a cgroup namespace on v1: the mount shows /docker/abc at the mount point.
    let mi = "41 31 0:39 /docker/abc /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n\
              42 31 0:40 /docker/abc /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n";
    let cg = "4:memory:/docker/abc\n3:pids:/docker/abc/inner\n";
    let (v1, _) = layout(mi, cg, Path::new("/"));
    assert_eq!(v1[0].own_path, "/");
    assert_eq!(v1[1].own_path, "/inner");
}

#[test]
fn keyed_files_parse_strictly_but_tolerate_unknown_keys() {
    let p = Path::new("/x/memory.events");
    let f = KeyedFile::parse(p, "low 0\nhigh 0\nmax 17\n\nfuture_key 9\n").unwrap();
    assert_eq!(f.get("max").unwrap(), Some(17));
    assert_eq!(f.get("oom_kill").unwrap(), None);
    assert_eq!(f.get_or_zero("oom_kill").unwrap(), 0);

    let f = KeyedFile::parse(p, "max lots\n").unwrap();
    let e = f.get("max").unwrap_err();
    assert!(matches!(e, Error::Parse { .. }));
    assert!(e.to_string().contains("/x/memory.events"), "{e}");

    let e = KeyedFile::parse(p, "max 1 2\n").err().unwrap();
    assert!(e.to_string().contains("/x/memory.events"), "{e}");
}

#[test]
fn pids_parsing_refuses_zero_and_negative() {
    let p = Path::new("/x/cgroup.procs");
    assert_eq!(parse_pids(p, "12\n7\n").unwrap(), [12, 7]);
    for bad in ["0\n", "-1\n", "1x\n"] {
        let e = parse_pids(p, bad).unwrap_err();
        assert!(e.to_string().contains("/x/cgroup.procs"), "{e}");
    }
}

#[test]
fn version_and_options() {
    assert_eq!(Version::V1.to_string(), "v1");
    assert_eq!(Version::V2.to_string(), "v2");
    assert_eq!("v2".parse::<Version>().unwrap(), Version::V2);
    assert_eq!("1".parse::<Version>().unwrap(), Version::V1);
    assert!("v3".parse::<Version>().is_err());
    assert_eq!(normalize_parent("corral//runs/").unwrap(), "/corral/runs");
    assert_eq!(normalize_parent("/").unwrap(), "/");
    assert!(normalize_parent("/a/../b").is_err());
}

#[test]
fn write_never_creates_files() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("memory.max");
    let e = fs::write(&p, "max").unwrap_err();
    assert!(!p.exists());
    assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
    assert!(e.to_string().contains("memory.max"), "{e}");
    // The same through the control files a cgroup keeps open.
    let files = crate::open_files::OpenFiles::default();
    let e = files.write(&p, "max").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
    assert!(e.to_string().contains("memory.max"), "{e}");
    assert!(!files.write_if_exists(&p, "max").unwrap());
    assert!(files.read_optional(&p).unwrap().is_none());
    assert!(!p.exists());
}

// ---------------------------------------------------------------- selection

#[test]
fn this_host_selects_v1() {
    let h = this_host(true);
    let p = probe_from(THIS_HOST_MOUNTINFO, THIS_HOST_CGROUP, h.root(), &no_env()).unwrap();
    assert_eq!(p.selected, Some(Version::V1));
    assert_eq!(p.v2.as_ref().unwrap().controllers, ["hugetlb"]);
    assert_eq!(p.v1.len(), 9);

    let m = detect_with(THIS_HOST_MOUNTINFO, THIS_HOST_CGROUP, h.root(), &no_env()).unwrap();
    assert_eq!(m.version(), Version::V1);
    // Base per hierarchy: <mount>/<own path>/corral.
    assert!(h
        .p(&format!("sys/fs/cgroup/memory/{THIS_HOST_MEM_OWN}/corral"))
        .is_dir());
    assert!(h.p("sys/fs/cgroup/pids/corral").is_dir());
    assert!(h.p("sys/fs/cgroup/cpuacct/corral").is_dir());
    // Nothing in hierarchies we do not use.
    assert!(!h.p("sys/fs/cgroup/cpu/corral").exists());
    assert!(!h.p("sys/fs/cgroup/unified/corral").exists());
    let d = m.describe();
    assert!(d.iter().any(|(k, v)| k == "cgroup version" && v == "v1"));
    assert!(d
        .iter()
        .any(|(k, v)| k == "memory base" && v.ends_with(&format!("{THIS_HOST_MEM_OWN}/corral"))));
}

#[test]
fn forcing_v2_on_this_host_fails_clearly() {
    let h = this_host(true);
    let opts = Options {
        version: Some(Version::V2),
        parent: None,
    };
    let e = detect_with(THIS_HOST_MOUNTINFO, THIS_HOST_CGROUP, h.root(), &opts)
        .err()
        .unwrap();
    let msg = e.to_string();
    assert!(matches!(e, Error::Unsupported(_)), "{msg}");
    assert!(msg.contains("CORRAL_CGROUP_VERSION=v2"), "{msg}");
    assert!(msg.contains("memory, pids"), "{msg}");
    assert!(msg.contains("unified"), "{msg}");
    assert!(msg.contains("hugetlb"), "{msg}");
}

#[test]
fn no_cgroups_at_all_says_what_is_missing() {
    let tmp = tempfile::tempdir().unwrap();
    let mi = "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n";
    let e = detect_with(mi, "", tmp.path(), &no_env()).err().unwrap();
    let msg = e.to_string();
    assert!(msg.contains("cgroup v2 is not mounted"), "{msg}");
    assert!(msg.contains("memory, pids, cpuacct"), "{msg}");

    let p = probe_from(mi, "", tmp.path(), &no_env()).unwrap();
    assert_eq!(p.selected, None);
    assert!(p.problem.unwrap().contains("cpuacct"));
}

#[test]
fn forcing_v1_on_a_pure_v2_host_fails() {
    let h = systemd_host();
    let opts = Options {
        version: Some(Version::V1),
        parent: None,
    };
    let e = detect_with(SYSTEMD_V2_MOUNTINFO, SYSTEMD_V2_CGROUP, h.root(), &opts)
        .err()
        .unwrap();
    assert!(e.to_string().contains("CORRAL_CGROUP_VERSION=v1"), "{e}");
}

// ---------------------------------------------------------------- v1

#[test]
fn v1_create_writes_limits_to_each_hierarchy() {
    let (h, m, cg, mem) = v1_leaf(true, "run-1", &limits(64 * MIB, 16));
    assert_eq!(h.read(&format!("{mem}/memory.limit_in_bytes")), "67108864");
    assert_eq!(
        h.read(&format!("{mem}/memory.memsw.limit_in_bytes")),
        "67108864"
    );
    assert_eq!(h.read(&format!("{mem}/memory.swappiness")), "0");
    // TCP buffers charged (v1 charges them only once this is written), up to the same limit;
    // written again when the limit changes.
    let tcp = format!("{mem}/memory.kmem.tcp.limit_in_bytes");
    assert_eq!(h.read(&tcp), "67108864");
    cg.set_limits(&limits(32 * MIB, 16)).unwrap();
    assert_eq!(h.read(&tcp), "33554432");
    cg.set_limits(&limits(64 * MIB, 16)).unwrap();
    assert_eq!(h.read(&tcp), "67108864");
    assert!(m
        .describe()
        .iter()
        .any(|(k, v)| k == "socket buffers" && v.starts_with("charged")));
    assert_eq!(h.read("sys/fs/cgroup/pids/corral/run-1/pids.max"), "16");
    assert!(h.p("sys/fs/cgroup/cpuacct/corral/run-1").is_dir());

    let paths = cg.paths();
    assert_eq!(paths.len(), 3);
    assert_eq!(paths[0], h.p(&mem));
    assert_eq!(cg.procs_files().unwrap().len(), 3);
    // v1 has nothing for CLONE_INTO_CGROUP: its init joins through `tasks`.
    assert!(cg.fork_target().unwrap().is_none());
    assert_eq!(cg.pids().unwrap(), Vec::<i32>::new());

    // Unique names: a second create with the same name is refused and changes nothing.
    let e = m.create("run-1", &Limits::default()).err().unwrap();
    assert!(matches!(e, Error::Exists(_)), "{e}");
    assert_eq!(h.read(&format!("{mem}/memory.limit_in_bytes")), "67108864");

    cg.destroy().unwrap();
    for p in &paths {
        assert!(!p.exists(), "{} left behind", p.display());
    }
    // The manager removes its (now empty) base directories when dropped, so our own memory
    // cgroup can be removed by whoever owns it.
    drop(m);
    assert!(!h
        .p(&format!("sys/fs/cgroup/memory/{THIS_HOST_MEM_OWN}/corral"))
        .exists());
    assert!(h
        .p(&format!("sys/fs/cgroup/memory/{THIS_HOST_MEM_OWN}"))
        .is_dir());
    assert!(!h.p("sys/fs/cgroup/pids/corral").exists());
}

#[test]
fn v1_unlimited_and_no_swap_accounting() {
    let (h, m, cg, mem) = v1_leaf(false, "free", &Limits::default());
    assert_eq!(h.read(&format!("{mem}/memory.limit_in_bytes")), "-1");
    assert!(!h.p(&format!("{mem}/memory.memsw.limit_in_bytes")).exists());
    assert_eq!(h.read("sys/fs/cgroup/pids/corral/free/pids.max"), "max");
    assert!(m
        .describe()
        .iter()
        .any(|(k, v)| k == "swap limit" && v.starts_with("unavailable")));
    cg.destroy().unwrap();
}

#[test]
fn v1_usage_parsing() {
    let (h, m, cg, mem) = v1_leaf(true, "u", &limits(64 * MIB, 16));

    let u = cg.usage().unwrap();
    assert_eq!(u.cpu_time, Duration::ZERO);
    assert!(!u.oom_killed && !u.memory_limit_hit && !u.pids_limit_hit);
    // Recent kernels (6.18) have pids.peak on v1 too.
    assert_eq!(u.pids_peak, Some(0));

    h.set(
        "sys/fs/cgroup/cpuacct/corral/u/cpuacct.usage",
        "1234567890\n",
    );
    h.set(&format!("{mem}/memory.max_usage_in_bytes"), "67108864\n");
    h.set(&format!("{mem}/memory.failcnt"), "12\n");
    h.set(
        &format!("{mem}/memory.oom_control"),
        "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n",
    );
    h.set("sys/fs/cgroup/pids/corral/u/pids.events", "max 3\n");
    h.set("sys/fs/cgroup/pids/corral/u/pids.peak", "16\n");
    assert_eq!(cg.cpu_time().unwrap(), Duration::from_nanos(1_234_567_890));
    let u = cg.usage().unwrap();
    assert_eq!(u.memory_peak_bytes, 64 * MIB);
    assert!(u.oom_killed && u.memory_limit_hit && u.pids_limit_hit);
    assert_eq!(u.pids_peak, Some(16));
    // Older kernels have no pids.peak on v1 (from the start: control files stay open, and a
    // kernel never removes one from a live cgroup).
    let old = m.create("old", &limits(64 * MIB, 16)).unwrap();
    std::fs::remove_file(h.p("sys/fs/cgroup/pids/corral/old/pids.peak")).unwrap();
    assert_eq!(old.usage().unwrap().pids_peak, None);
    old.destroy().unwrap();

    // Pre-4.13 kernels: no oom_kill counter; failures plus an ongoing OOM count as a kill.
    h.set(
        &format!("{mem}/memory.oom_control"),
        "oom_kill_disable 0\nunder_oom 1\n",
    );
    assert!(cg.usage().unwrap().oom_killed);
    h.set(&format!("{mem}/memory.failcnt"), "0\n");
    assert!(!cg.usage().unwrap().oom_killed);
    // A peak at or just under the limit counts as hitting it: with memsw limited too, recent
    // kernels record no failures at all.
    assert!(cg.usage().unwrap().memory_limit_hit);
    h.set(
        &format!("{mem}/memory.max_usage_in_bytes"),
        &(64 * MIB - 276 * 1024).to_string(),
    );
    assert!(cg.usage().unwrap().memory_limit_hit);
    h.set(
        &format!("{mem}/memory.max_usage_in_bytes"),
        &(32 * MIB).to_string(),
    );
    assert!(!cg.usage().unwrap().memory_limit_hit);
    h.set(
        &format!("{mem}/memory.memsw.max_usage_in_bytes"),
        &(64 * MIB).to_string(),
    );
    assert!(cg.usage().unwrap().memory_limit_hit);
    h.set(&format!("{mem}/memory.memsw.max_usage_in_bytes"), "0\n");
    assert!(!cg.usage().unwrap().memory_limit_hit);
    // The memsw counter alone also means the limit was hit.
    h.set(&format!("{mem}/memory.memsw.failcnt"), "2\n");
    assert!(cg.usage().unwrap().memory_limit_hit);

    h.set("sys/fs/cgroup/cpuacct/corral/u/cpuacct.usage", "lots\n");
    let e = cg.cpu_time().unwrap_err();
    assert!(matches!(e, Error::Parse { .. }));
    assert!(e.to_string().contains("corral/u/cpuacct.usage"), "{e}");
    cg.destroy().unwrap();
}

#[test]
fn v1_set_limits_keeps_memsw_at_or_above_memory() {
    let (h, _m, cg, mem) = v1_leaf(true, "live", &limits(64 * MIB, 16));
    let both = || memory_and_memsw(&h, &mem);
    // The fake kernel refuses (EINVAL) any step that leaves memsw below memory, like the real
    // one, so a wrong order fails here.
    cg.set_limits(&limits(128 * MIB, 32)).unwrap();
    assert_eq!(both(), ("134217728".into(), "134217728".into()));
    assert_eq!(h.read("sys/fs/cgroup/pids/corral/live/pids.max"), "32");
    cg.set_limits(&limits(32 * MIB, 4)).unwrap();
    assert_eq!(both(), ("33554432".into(), "33554432".into()));
    assert_eq!(h.read("sys/fs/cgroup/pids/corral/live/pids.max"), "4");
    cg.set_limits(&Limits::default()).unwrap();
    assert_eq!(both(), ("-1".into(), "-1".into()));
    assert_eq!(h.read("sys/fs/cgroup/pids/corral/live/pids.max"), "max");
    // From unlimited (shown as "-1" by the fake, a huge number by the kernel) down again.
    cg.set_limits(&limits(16 * MIB, 8)).unwrap();
    assert_eq!(both(), ("16777216".into(), "16777216".into()));
    h.set(
        &format!("{mem}/memory.limit_in_bytes"),
        "9223372036854771712\n",
    );
    h.set(
        &format!("{mem}/memory.memsw.limit_in_bytes"),
        "9223372036854771712\n",
    );
    cg.set_limits(&limits(MIB, 8)).unwrap();
    assert_eq!(both(), ("1048576".into(), "1048576".into()));
    cg.destroy().unwrap();
}

/// The limit pair this handle wrote is what it judges a peak against and orders its next writes
/// by: nothing is read back per run. Unreadable limit files (here: garbage) show it.
#[test]
fn v1_limits_are_remembered_not_read_back() {
    let (h, _m, cg, mem) = v1_leaf(true, "remember", &limits(64 * MIB, 16));
    cg.set_limits(&limits(32 * MIB, 16)).unwrap();
    for f in ["memory.limit_in_bytes", "memory.memsw.limit_in_bytes"] {
        h.set(&format!("{mem}/{f}"), "garbage\n");
    }
    h.set(
        &format!("{mem}/memory.max_usage_in_bytes"),
        &(32 * MIB - 100 * 1024).to_string(),
    );
    let base = cg.begin_run().unwrap();
    h.set(
        &format!("{mem}/memory.max_usage_in_bytes"),
        &(32 * MIB - 100 * 1024).to_string(),
    );
    assert!(cg.usage_since(&base).unwrap().memory_limit_hit);
    h.set(
        &format!("{mem}/memory.max_usage_in_bytes"),
        &(16 * MIB).to_string(),
    );
    assert!(!cg.usage_since(&base).unwrap().memory_limit_hit);
    // The next write is ordered by the remembered pair (shrinking: memory first).
    cg.set_limits(&limits(24 * MIB, 16)).unwrap();
    assert_eq!(
        memory_and_memsw(&h, &mem),
        ("25165824".into(), "25165824".into())
    );
    cg.destroy().unwrap();
}

/// A pair changed behind the handle's back makes its remembered order wrong; the kernel refuses
/// that order (memsw below memory), and the handle tries again from the files.
#[test]
fn v1_a_stale_remembered_limit_is_read_again() {
    let (h, _m, cg, mem) = v1_leaf(true, "stale", &limits(64 * MIB, 16));
    cg.set_limits(&limits(16 * MIB, 16)).unwrap();
    for f in ["memory.memsw.limit_in_bytes", "memory.limit_in_bytes"] {
        h.set(&format!("{mem}/{f}"), &(8 * MIB).to_string());
    }
    // Remembered 16 MiB: 12 looks like shrinking (memory first), which the fake refuses while
    // memsw is 8; from the files (8 MiB) it is growing, memsw first.
    cg.set_limits(&limits(12 * MIB, 16)).unwrap();
    assert_eq!(
        memory_and_memsw(&h, &mem),
        ("12582912".into(), "12582912".into())
    );
    cg.destroy().unwrap();
}

#[test]
fn v1_set_limits_without_swap_accounting() {
    let (h, _m, cg, mem) = v1_leaf(false, "noswap", &limits(64 * MIB, 16));
    cg.set_limits(&limits(128 * MIB, 16)).unwrap();
    assert_eq!(h.read(&format!("{mem}/memory.limit_in_bytes")), "134217728");
    cg.set_limits(&limits(8 * MIB, 16)).unwrap();
    assert_eq!(h.read(&format!("{mem}/memory.limit_in_bytes")), "8388608");
    assert!(!h.p(&format!("{mem}/memory.memsw.limit_in_bytes")).exists());
    cg.destroy().unwrap();
}

#[test]
fn v1_set_limits_below_usage_is_refused_and_changes_nothing() {
    let (h, _m, cg, mem) = v1_leaf(true, "busy", &limits(64 * MIB, 16));
    let limit_file = h.p(&format!("{mem}/memory.limit_in_bytes"));
    h.set(&format!("{mem}/memory.usage_in_bytes"), "52428800\n");
    // The kernel cannot reclaim enough: EBUSY on memory.limit_in_bytes (written first when
    // shrinking), so memsw was never touched.
    testfs::fail_writes_to(&limit_file, libc::EBUSY);
    let e = cg.set_limits(&limits(32 * MIB, 16)).unwrap_err();
    assert!(
        matches!(
            e,
            Error::MemoryLimitBelowUsage { limit, usage, .. }
                if limit == 32 * MIB && usage == 50 * MIB
        ),
        "{e}"
    );
    assert_eq!(e.raw_os_error(), Some(libc::EBUSY));
    let msg = e.to_string();
    assert!(msg.contains(&limit_file.display().to_string()), "{msg}");
    assert!(msg.contains("52428800 bytes are in use"), "{msg}");
    assert_eq!(h.read(&format!("{mem}/memory.limit_in_bytes")), "67108864");
    assert_eq!(
        h.read(&format!("{mem}/memory.memsw.limit_in_bytes")),
        "67108864"
    );
    cg.destroy().unwrap();
}

#[test]
fn v1_set_limits_undoes_the_first_write_when_the_second_fails() {
    let (h, _m, cg, mem) = v1_leaf(true, "undo", &limits(64 * MIB, 16));
    let both = || memory_and_memsw(&h, &mem);
    let old = ("67108864".to_owned(), "67108864".to_owned());
    // Shrinking: memory goes first and succeeds, memsw is refused (swap in use).
    h.set(&format!("{mem}/memory.memsw.usage_in_bytes"), "50331648\n");
    testfs::fail_writes_to(
        &h.p(&format!("{mem}/memory.memsw.limit_in_bytes")),
        libc::EBUSY,
    );
    testfs::fail_only_if_contains("33554432");
    let e = cg.set_limits(&limits(32 * MIB, 16)).unwrap_err();
    assert!(
        matches!(e, Error::MemoryLimitBelowUsage { usage, .. } if usage == 48 * MIB),
        "{e}"
    );
    assert_eq!(both(), old);
    // Growing: memsw goes first, memory fails for some other reason.
    testfs::fail_writes_to(&h.p(&format!("{mem}/memory.limit_in_bytes")), libc::EIO);
    let e = cg.set_limits(&limits(128 * MIB, 16)).unwrap_err();
    assert!(matches!(e, Error::Write { .. }), "{e}");
    assert_eq!(e.raw_os_error(), Some(libc::EIO));
    assert_eq!(both(), old);
    cg.destroy().unwrap();
}

fn assert_send<T: Send>() {}

#[test]
fn v1_begin_run_resets_counters_and_usage_since_is_per_run() {
    assert_send::<Baseline>();
    let (h, _m, cg, mem) = v1_leaf(true, "sbx", &limits(64 * MIB, 16));
    let set_mem = |file: &str, v: &str| h.set(&format!("{mem}/{file}"), v);
    let cpuacct = "sys/fs/cgroup/cpuacct/corral/sbx/cpuacct.usage";
    let pids = "sys/fs/cgroup/pids/corral/sbx";
    // What an earlier run left behind.
    h.set(cpuacct, "5000000000\n");
    set_mem("memory.max_usage_in_bytes", "67108864\n");
    set_mem("memory.memsw.max_usage_in_bytes", "67108864\n");
    set_mem("memory.failcnt", "7\n");
    set_mem("memory.memsw.failcnt", "3\n");
    set_mem(
        "memory.oom_control",
        "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n",
    );
    set_mem("memory.usage_in_bytes", "10485760\n");
    h.set(&format!("{pids}/pids.events"), "max 2\n");
    h.set(&format!("{pids}/pids.peak"), "16\n");
    h.set(&format!("{pids}/pids.current"), "1\n");
    let before = cg.usage().unwrap();
    assert!(before.oom_killed && before.memory_limit_hit && before.pids_limit_hit);

    let b = cg.begin_run().unwrap();
    assert_eq!(b.resident_bytes, 10 * MIB);
    assert!(!b.peak_is_lifetime);
    // Peaks are reset (they cannot be diffed); counters are left alone and diffed.
    for file in [
        "memory.max_usage_in_bytes",
        "memory.memsw.max_usage_in_bytes",
    ] {
        assert_eq!(h.read(&format!("{mem}/{file}")), "0", "{file}");
    }
    assert_eq!(h.read(&format!("{mem}/memory.failcnt")), "7");
    assert_eq!(h.read(cpuacct), "5000000000");
    let u = cg.usage_since(&b).unwrap();
    assert_eq!(u.cpu_time, Duration::ZERO);
    assert!(
        !u.oom_killed && !u.memory_limit_hit && !u.pids_limit_hit,
        "{u:?}"
    );
    assert_eq!(u.pids_peak, Some(16), "lifetime");

    // The run: 300 ms CPU, a 20 MiB peak, two more tasks.
    h.set(cpuacct, "5300000000\n");
    set_mem("memory.max_usage_in_bytes", "20971520\n");
    h.set(&format!("{pids}/pids.current"), "3\n");
    assert_eq!(cg.cpu_time_since(&b).unwrap(), Duration::from_millis(300));
    assert_eq!(cg.memory_current().unwrap(), 10 * MIB);
    assert_eq!(cg.pids_current().unwrap(), 3);
    let u = cg.usage_since(&b).unwrap();
    assert_eq!(u.cpu_time, Duration::from_millis(300));
    assert_eq!(u.memory_peak_bytes, 20 * MIB);
    assert!(
        !u.oom_killed && !u.memory_limit_hit && !u.pids_limit_hit,
        "{u:?}"
    );

    // Counters that cannot be reset count when they grow.
    set_mem(
        "memory.oom_control",
        "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
    );
    h.set(&format!("{pids}/pids.events"), "max 5\n");
    let u = cg.usage_since(&b).unwrap();
    assert!(
        u.oom_killed && u.memory_limit_hit && u.pids_limit_hit,
        "{u:?}"
    );
    // A failure counted after the reset alone is a limit hit; a peak at the limit too.
    set_mem(
        "memory.oom_control",
        "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n",
    );
    set_mem("memory.failcnt", "8\n");
    let u = cg.usage_since(&b).unwrap();
    assert!(!u.oom_killed && u.memory_limit_hit, "{u:?}");
    set_mem("memory.failcnt", "7\n");
    set_mem("memory.max_usage_in_bytes", "67000000\n");
    assert!(cg.usage_since(&b).unwrap().memory_limit_hit);

    // The next run starts from scratch again.
    let b2 = cg.begin_run().unwrap();
    let u = cg.usage_since(&b2).unwrap();
    assert_eq!(u.cpu_time, Duration::ZERO);
    assert_eq!(u.memory_peak_bytes, 0);
    assert!(
        !u.oom_killed && !u.memory_limit_hit && !u.pids_limit_hit,
        "{u:?}"
    );
    cg.destroy().unwrap();
}

#[test]
fn v1_begin_run_without_swap_accounting_or_pids_peak() {
    let (h, _m, cg, _) = v1_leaf(false, "plain", &limits(64 * MIB, 16));
    std::fs::remove_file(h.p("sys/fs/cgroup/pids/corral/plain/pids.peak")).unwrap();
    let b = cg.begin_run().unwrap();
    let mem = format!("sys/fs/cgroup/memory/{THIS_HOST_MEM_OWN}/corral/plain");
    assert!(!h.p(&format!("{mem}/memory.memsw.failcnt")).exists());
    let u = cg.usage_since(&b).unwrap();
    assert_eq!(u.pids_peak, None);
    assert!(!u.memory_limit_hit);
    cg.destroy().unwrap();
}

#[test]
fn v1_pids_are_merged_across_hierarchies() {
    let (h, _m, cg, mem) = v1_leaf(true, "p", &Limits::default());
    // Pids above PID_MAX_LIMIT (4194304) cannot exist, so nothing real is ever signalled.
    h.set(&format!("{mem}/cgroup.procs"), "5000003\n5000001\n");
    h.set(
        "sys/fs/cgroup/pids/corral/p/cgroup.procs",
        "5000001\n5000002\n",
    );
    assert_eq!(cg.pids().unwrap(), [5000001, 5000002, 5000003]);
    h.set(&format!("{mem}/cgroup.procs"), "");
    h.set("sys/fs/cgroup/pids/corral/p/cgroup.procs", "");
    cg.destroy().unwrap();
}

#[test]
fn kill_all_gives_up_after_bounded_rounds() {
    let (h, _m, cg, _) = v1_leaf(true, "stuck", &Limits::default());
    // A pid that can never exist, so never disappears from this fake file.
    h.set("sys/fs/cgroup/pids/corral/stuck/cgroup.procs", "5000001\n");
    let t = std::time::Instant::now();
    let e = cg.kill_all().unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(5));
    assert!(
        matches!(e, Error::KillFailed { ref pids, .. } if pids == &[5000001]),
        "{e}"
    );
    h.set("sys/fs/cgroup/pids/corral/stuck/cgroup.procs", "");
    cg.destroy().unwrap();
}

#[test]
fn dropping_a_cgroup_removes_it() {
    let (_h, _m, cg, _) = v1_leaf(true, "dropped", &Limits::default());
    let paths = cg.paths();
    drop(cg);
    assert!(paths.iter().all(|p| !p.exists()));
}

#[test]
fn destroy_removes_nested_cgroups() {
    let (h, _m, cg, _) = v1_leaf(true, "nest", &Limits::default());
    h.mkcg("sys/fs/cgroup/pids/corral/nest/a/b");
    cg.destroy().unwrap();
    assert!(!h.p("sys/fs/cgroup/pids/corral/nest").exists());
}

#[test]
fn v1_comounted_cpu_cpuacct() {
    let h = Host::new(|root| {
        let cg = root.join("sys/fs/cgroup");
        FakeKernel {
            v1: vec![
                (cg.join("systemd"), vec!["name=systemd".to_owned()]),
                (
                    cg.join("cpu,cpuacct"),
                    vec!["cpu".to_owned(), "cpuacct".to_owned()],
                ),
                (cg.join("memory"), vec!["memory".to_owned()]),
                (cg.join("pids"), vec!["pids".to_owned()]),
            ],
            v2: None,
            v2_root_controllers: vec![],
            swap: true,
            cgroup_kill: false,
        }
    });
    for c in ["cpu,cpuacct", "memory", "pids"] {
        h.mkcg(&format!("sys/fs/cgroup/{c}/system.slice/corral.service"));
    }
    let m = detect_with(COMOUNT_V1_MOUNTINFO, COMOUNT_V1_CGROUP, h.root(), &no_env()).unwrap();
    assert_eq!(m.version(), Version::V1);
    let cg = m.create("r", &limits(MIB, 4)).unwrap();
    let base = "system.slice/corral.service/corral/r";
    assert_eq!(
        cg.paths(),
        [
            h.p(&format!("sys/fs/cgroup/memory/{base}")),
            h.p(&format!("sys/fs/cgroup/pids/{base}")),
            h.p(&format!("sys/fs/cgroup/cpu,cpuacct/{base}")),
        ]
    );
    h.set(
        &format!("sys/fs/cgroup/cpu,cpuacct/{base}/cpuacct.usage"),
        "5000000\n",
    );
    assert_eq!(cg.cpu_time().unwrap(), Duration::from_millis(5));
    cg.destroy().unwrap();
}

#[test]
fn v1_cpuset_comounted_leaf_inherits_cpus_and_mems() {
    let h = Host::new(|root| {
        let cg = root.join("cg");
        FakeKernel {
            v1: vec![
                (
                    cg.join("cpuset,cpuacct"),
                    vec!["cpuset".to_owned(), "cpuacct".to_owned()],
                ),
                (
                    cg.join("memory,pids"),
                    vec!["memory".to_owned(), "pids".to_owned()],
                ),
            ],
            v2: None,
            v2_root_controllers: vec![],
            swap: false,
            cgroup_kill: false,
        }
    });
    let mi = "1 0 0:1 / /cg/cpuset,cpuacct rw - cgroup cgroup rw,cpuset,cpuacct\n\
              2 0 0:2 / /cg/memory,pids rw - cgroup cgroup rw,memory,pids\n";
    let m = detect_with(
        mi,
        "2:cpuset,cpuacct:/\n1:memory,pids:/\n",
        h.root(),
        &no_env(),
    )
    .unwrap();
    let cg = m.create("r", &limits(MIB, 4)).unwrap();
    // memory and pids share a hierarchy: one directory, one fd.
    assert_eq!(cg.paths().len(), 2);
    assert_eq!(cg.procs_files().unwrap().len(), 2);
    assert_eq!(h.read("cg/memory,pids/corral/r/pids.max"), "4");
    assert_eq!(h.read("cg/cpuset,cpuacct/corral/cpuset.cpus"), "0-1");
    assert_eq!(h.read("cg/cpuset,cpuacct/corral/r/cpuset.cpus"), "0-1");
    assert_eq!(h.read("cg/cpuset,cpuacct/corral/r/cpuset.mems"), "0");
    cg.destroy().unwrap();
}

#[test]
fn v1_parent_override_is_used_for_every_hierarchy_and_kept() {
    let h = this_host(true);
    let opts = Options {
        version: None,
        parent: Some("/sandboxes/corral".to_owned()),
    };
    let m = detect_with(THIS_HOST_MOUNTINFO, THIS_HOST_CGROUP, h.root(), &opts).unwrap();
    let cg = m.create("x", &Limits::default()).unwrap();
    assert_eq!(
        cg.paths()[0],
        h.p("sys/fs/cgroup/memory/sandboxes/corral/x")
    );
    assert_eq!(cg.paths()[1], h.p("sys/fs/cgroup/pids/sandboxes/corral/x"));
    cg.destroy().unwrap();
    drop(m);
    // The administrator's cgroup is not removed.
    assert!(h.p("sys/fs/cgroup/pids/sandboxes/corral").is_dir());
}

#[test]
fn invalid_names_are_refused() {
    let h = this_host(true);
    let m = detect_with(THIS_HOST_MOUNTINFO, THIS_HOST_CGROUP, h.root(), &no_env()).unwrap();
    let long = "a".repeat(129);
    for bad in ["", "..", "a/b", "a b", "run.1", long.as_str()] {
        let e = m.create(bad, &Limits::default()).err().unwrap();
        assert!(matches!(e, Error::InvalidName(_)), "{bad:?}: {e}");
    }
}

// ---------------------------------------------------------------- v2

#[test]
fn v2_systemd_session_moves_itself_and_delegates() {
    let h = systemd_host();
    let m = detect_with(SYSTEMD_V2_MOUNTINFO, SYSTEMD_V2_CGROUP, h.root(), &no_env()).unwrap();
    assert_eq!(m.version(), Version::V2);
    // We moved into <own>/corral-supervisor so <own> can delegate controllers.
    assert_eq!(
        h.read(&format!("{SESSION}/corral-supervisor/cgroup.procs")),
        std::process::id().to_string()
    );
    assert_eq!(
        h.read(&format!("{SESSION}/cgroup.subtree_control")),
        "+cpu +memory +pids"
    );
    assert_eq!(
        h.read(&format!("{SESSION}/corral/cgroup.subtree_control")),
        "+cpu +memory +pids"
    );
    // Nothing above our own cgroup was touched.
    assert_eq!(
        h.read("sys/fs/cgroup/user.slice/user-1000.slice/cgroup.subtree_control"),
        "cpu memory pids"
    );

    let cg = m.create("job_7", &limits(64 * MIB, 16)).unwrap();
    let leaf = format!("{SESSION}/corral/job_7");
    assert_eq!(cg.paths(), [h.p(&leaf)]);
    assert_eq!(h.read(&format!("{leaf}/memory.max")), "67108864");
    assert_eq!(h.read(&format!("{leaf}/memory.swap.max")), "0");
    assert_eq!(h.read(&format!("{leaf}/memory.oom.group")), "0");
    assert_eq!(h.read(&format!("{leaf}/pids.max")), "16");
    assert_eq!(cg.procs_files().unwrap().len(), 1);
    // The fork target is the leaf's own directory (what CLONE_INTO_CGROUP places a child in).
    let target = cg.fork_target().unwrap().expect("v2 has a fork target");
    assert_eq!(
        std::fs::read_link(format!("/proc/self/fd/{}", target.as_raw_fd())).unwrap(),
        h.p(&leaf)
    );

    let d = m.describe();
    let get = |k: &str| d.iter().find(|(key, _)| key == k).unwrap().1.clone();
    assert_eq!(
        get("base"),
        h.p(&format!("{SESSION}/corral")).display().to_string()
    );
    assert!(get("supervisor cgroup").ends_with("session-2.scope/corral-supervisor"));
    assert_eq!(get("cgroup.kill"), "yes");

    // kill_all on an empty cgroup with cgroup.kill: one check, nothing to do.
    cg.kill_all().unwrap();
    cg.destroy().unwrap();
    assert!(!h.p(&leaf).exists());

    // A second detect in the same process sees itself in corral-supervisor and reuses the base.
    let again = "0::/user.slice/user-1000.slice/session-2.scope/corral-supervisor\n";
    let m2 = detect_with(SYSTEMD_V2_MOUNTINFO, again, h.root(), &no_env()).unwrap();
    assert!(!h
        .p(&format!("{SESSION}/corral-supervisor/corral-supervisor"))
        .exists());
    let d = m2.describe();
    let sup = &d.iter().find(|(k, _)| k == "supervisor cgroup").unwrap().1;
    assert!(sup.ends_with("session-2.scope/corral-supervisor"), "{sup}");
    let cg = m2.create("job_8", &Limits::default()).unwrap();
    assert_eq!(cg.paths(), [h.p(&format!("{SESSION}/corral/job_8"))]);
    assert_eq!(h.read(&format!("{SESSION}/corral/job_8/memory.max")), "max");
    assert_eq!(h.read(&format!("{SESSION}/corral/job_8/pids.max")), "max");
    cg.destroy().unwrap();
}

#[test]
fn v2_base_removed_by_another_process_during_setup_is_made_again() {
    let h = pure_v2(true, true);
    crate::testfs::vanish_after_next_mkdir(&h.p("sys/fs/cgroup/corral"));
    let m = detect_with(
        CONTAINER_V2_MOUNTINFO,
        CONTAINER_V2_CGROUP,
        h.root(),
        &no_env(),
    )
    .unwrap();
    assert_eq!(
        h.read("sys/fs/cgroup/corral/cgroup.subtree_control"),
        "+cpu +memory +pids"
    );
    let cg = m.create("a", &limits(MIB, 1)).unwrap();
    cg.destroy().unwrap();
}

#[test]
fn v2_base_being_removed_by_another_process_during_setup_is_retried() {
    // Another corral process's rmdir of the empty base lands between our mkdir -p and the read
    // of its controllers: the kernel answers ENODEV for the dying cgroup's file.
    let h = pure_v2(true, true);
    let base = h.p("sys/fs/cgroup/corral");
    crate::testfs::fail_next_read_of(&base.join("cgroup.controllers"), libc::ENODEV);
    let m = detect_with(
        CONTAINER_V2_MOUNTINFO,
        CONTAINER_V2_CGROUP,
        h.root(),
        &no_env(),
    )
    .unwrap();
    let cg = m.create("a", &limits(MIB, 1)).unwrap();
    cg.destroy().unwrap();
    // Any other read error is not retried.
    crate::testfs::fail_next_read_of(&base.join("cgroup.controllers"), libc::EIO);
    let e = detect_with(
        CONTAINER_V2_MOUNTINFO,
        CONTAINER_V2_CGROUP,
        h.root(),
        &no_env(),
    )
    .err()
    .expect("EIO is an error");
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
}

#[test]
fn v2_container_at_root_uses_slash_corral() {
    let h = pure_v2(true, true);
    let m = detect_with(
        CONTAINER_V2_MOUNTINFO,
        CONTAINER_V2_CGROUP,
        h.root(),
        &no_env(),
    )
    .unwrap();
    assert_eq!(m.version(), Version::V2);
    assert_eq!(
        h.read("sys/fs/cgroup/cgroup.subtree_control"),
        "+cpu +memory +pids"
    );
    assert_eq!(
        h.read("sys/fs/cgroup/corral/cgroup.subtree_control"),
        "+cpu +memory +pids"
    );
    // The root may hold processes and delegate at once: no need to move.
    assert!(!h.p("sys/fs/cgroup/corral-supervisor").exists());
    let cg = m.create("a", &limits(MIB, 1)).unwrap();
    assert_eq!(cg.paths(), [h.p("sys/fs/cgroup/corral/a")]);
    assert_eq!(h.read("sys/fs/cgroup/corral/a/memory.max"), "1048576");
    cg.destroy().unwrap();
    drop(m);
    assert!(!h.p("sys/fs/cgroup/corral").exists());
}

#[test]
fn v2_without_swap_accounting_or_cgroup_kill() {
    let h = pure_v2(false, false);
    let m = detect_with(
        CONTAINER_V2_MOUNTINFO,
        CONTAINER_V2_CGROUP,
        h.root(),
        &no_env(),
    )
    .unwrap();
    let cg = m.create("a", &limits(MIB, 1)).unwrap();
    assert!(!h.p("sys/fs/cgroup/corral/a/memory.swap.max").exists());
    let d = m.describe();
    assert!(d
        .iter()
        .any(|(k, v)| k == "cgroup.kill" && v.starts_with("no")));
    cg.kill_all().unwrap();
    cg.destroy().unwrap();
}

#[test]
fn v2_not_delegated_explains_what_to_do() {
    let h = pure_v2(true, true);
    // systemd enabled only cpu for the session's parent: memory and pids never reach us.
    h.set("sys/fs/cgroup/cgroup.subtree_control", "cpu");
    h.mkcg("sys/fs/cgroup/user.slice");
    h.set("sys/fs/cgroup/user.slice/cgroup.subtree_control", "cpu");
    h.mkcg("sys/fs/cgroup/user.slice/user-1000.slice");
    h.set(
        "sys/fs/cgroup/user.slice/user-1000.slice/cgroup.subtree_control",
        "cpu",
    );
    h.mkcg(SESSION);
    let e = detect_with(SYSTEMD_V2_MOUNTINFO, SYSTEMD_V2_CGROUP, h.root(), &no_env())
        .err()
        .unwrap();
    let msg = e.to_string();
    assert!(matches!(e, Error::NotDelegated { .. }), "{msg}");
    assert!(msg.contains("memory, pids"), "{msg}");
    assert!(msg.contains("session-2.scope"), "{msg}");
    assert!(msg.contains("Delegate=yes"), "{msg}");
    assert!(msg.contains("CORRAL_CGROUP_PARENT"), "{msg}");
}

#[test]
fn v2_refused_subtree_control_names_the_file() {
    let h = systemd_host();
    // Another process still in our own cgroup: the kernel answers EBUSY.
    let sc = h.p(&format!("{SESSION}/cgroup.subtree_control"));
    testfs::fail_writes_to(&sc, libc::EBUSY);
    let e = detect_with(SYSTEMD_V2_MOUNTINFO, SYSTEMD_V2_CGROUP, h.root(), &no_env())
        .err()
        .unwrap();
    let msg = e.to_string();
    assert!(matches!(e, Error::Delegation { .. }), "{msg}");
    assert_eq!(e.raw_os_error(), Some(libc::EBUSY));
    assert!(msg.contains(&sc.display().to_string()), "{msg}");
    assert!(msg.contains("+memory +pids"), "{msg}");
    assert!(msg.contains("Delegate=yes"), "{msg}");
    assert!(msg.contains("CORRAL_CGROUP_PARENT"), "{msg}");
}

#[test]
fn v2_cpu_is_optional() {
    let h = systemd_host();
    // cpu refused (e.g. realtime threads around): memory and pids are still enabled.
    let sc = h.p(&format!("{SESSION}/cgroup.subtree_control"));
    testfs::fail_writes_to(&sc, libc::EINVAL);
    testfs::fail_only_if_contains("+cpu");
    let m = detect_with(SYSTEMD_V2_MOUNTINFO, SYSTEMD_V2_CGROUP, h.root(), &no_env()).unwrap();
    assert_eq!(
        h.read(&format!("{SESSION}/cgroup.subtree_control")),
        "+memory +pids"
    );
    assert_eq!(
        h.read(&format!("{SESSION}/corral/cgroup.subtree_control")),
        "+memory +pids"
    );
    drop(m);
}

#[test]
fn v2_parent_override() {
    let h = systemd_host();
    let opts = Options {
        version: None,
        parent: Some("/corral.slice/runs".to_owned()),
    };
    let m = detect_with(SYSTEMD_V2_MOUNTINFO, SYSTEMD_V2_CGROUP, h.root(), &opts).unwrap();
    // Root already delegates to its children, so enabling starts at /corral.slice; our own
    // cgroup is not involved, so we stay where we are.
    assert_eq!(
        h.read("sys/fs/cgroup/cgroup.subtree_control"),
        "cpu memory pids"
    );
    assert_eq!(
        h.read("sys/fs/cgroup/corral.slice/cgroup.subtree_control"),
        "+cpu +memory +pids"
    );
    assert_eq!(
        h.read("sys/fs/cgroup/corral.slice/runs/cgroup.subtree_control"),
        "+cpu +memory +pids"
    );
    assert!(!h.p(&format!("{SESSION}/corral-supervisor")).exists());
    let cg = m.create("r1", &Limits::default()).unwrap();
    assert_eq!(cg.paths(), [h.p("sys/fs/cgroup/corral.slice/runs/r1")]);
    cg.destroy().unwrap();
    drop(m);
    assert!(h.p("sys/fs/cgroup/corral.slice/runs").is_dir());
}

#[test]
fn v2_usage_parsing() {
    let h = pure_v2(true, true);
    let m = detect_with(
        CONTAINER_V2_MOUNTINFO,
        CONTAINER_V2_CGROUP,
        h.root(),
        &no_env(),
    )
    .unwrap();
    let cg = m.create("u", &limits(64 * MIB, 16)).unwrap();
    let leaf = "sys/fs/cgroup/corral/u";
    let u = cg.usage().unwrap();
    assert!(!u.oom_killed && !u.memory_limit_hit && !u.pids_limit_hit);
    assert_eq!(u.pids_peak, Some(0));

    h.set(
        &format!("{leaf}/cpu.stat"),
        "usage_usec 250123\nuser_usec 200000\nsystem_usec 50123\nnr_periods 0\n\
         nr_throttled 0\nthrottled_usec 0\nnr_bursts 0\nburst_usec 0\n",
    );
    h.set(&format!("{leaf}/memory.peak"), "67108864\n");
    h.set(
        &format!("{leaf}/memory.events"),
        "low 0\nhigh 0\nmax 41\noom 1\noom_kill 1\noom_group_kill 1\n",
    );
    h.set(&format!("{leaf}/pids.peak"), "16\n");
    h.set(&format!("{leaf}/pids.events"), "max 24\n");
    assert_eq!(cg.cpu_time().unwrap(), Duration::from_micros(250_123));
    let u = cg.usage().unwrap();
    assert_eq!(u.cpu_time, Duration::from_micros(250_123));
    assert_eq!(u.memory_peak_bytes, 64 * MIB);
    assert!(u.oom_killed && u.memory_limit_hit && u.pids_limit_hit);
    assert_eq!(u.pids_peak, Some(16));

    // Limit hit and reclaimed without a kill.
    h.set(
        &format!("{leaf}/memory.events"),
        "low 0\nhigh 0\nmax 3\noom 0\noom_kill 0\n",
    );
    let u = cg.usage().unwrap();
    assert!(!u.oom_killed && u.memory_limit_hit);

    // Pre-5.19 kernels: no memory.peak, fall back to memory.current (a cgroup of such a kernel
    // lacks the files from the start; control files stay open once read).
    let old = m.create("old", &limits(64 * MIB, 16)).unwrap();
    let old_leaf = "sys/fs/cgroup/corral/old";
    std::fs::remove_file(h.p(&format!("{old_leaf}/memory.peak"))).unwrap();
    std::fs::remove_file(h.p(&format!("{old_leaf}/pids.peak"))).unwrap();
    h.set(&format!("{old_leaf}/memory.current"), "4096\n");
    let u = old.usage().unwrap();
    assert_eq!(u.memory_peak_bytes, 4096);
    assert_eq!(u.pids_peak, None);
    old.destroy().unwrap();

    h.set(&format!("{leaf}/cpu.stat"), "user_usec 1\n");
    let e = cg.cpu_time().unwrap_err();
    assert!(e.to_string().contains("corral/u/cpu.stat"), "{e}");
    cg.destroy().unwrap();
}

fn container_cgroup(h: &Host, name: &str) -> (Box<dyn Manager>, Box<dyn Cgroup>) {
    let m = detect_with(
        CONTAINER_V2_MOUNTINFO,
        CONTAINER_V2_CGROUP,
        h.root(),
        &no_env(),
    )
    .unwrap();
    let cg = m.create(name, &limits(64 * MIB, 16)).unwrap();
    (m, cg)
}

#[test]
fn v2_begin_run_uses_an_fd_local_peak_and_snapshots() {
    let h = pure_v2(true, true);
    let (_m, cg) = container_cgroup(&h, "sbx");
    let leaf = "sys/fs/cgroup/corral/sbx";
    let f = |file: &str| format!("{leaf}/{file}");
    // What the init and an earlier run left behind.
    h.set(
        &f("cpu.stat"),
        "usage_usec 5000000\nuser_usec 0\nsystem_usec 0\n",
    );
    h.set(&f("memory.current"), "8388608\n");
    h.set(&f("memory.peak"), "104857600\n");
    h.set(
        &f("memory.events"),
        "low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\noom_group_kill 1\n",
    );
    h.set(&f("pids.events"), "max 2\n");
    h.set(&f("pids.peak"), "12\n");
    h.set(&f("pids.current"), "1\n");

    let b = cg.begin_run().unwrap();
    assert!(!b.peak_is_lifetime);
    assert_eq!(b.resident_bytes, 8 * MIB);
    // The fd-local peak starts at the current usage; the path still shows the lifetime peak.
    assert_eq!(h.read(&f(testfs::FD_LOCAL_PEAK)), "8388608");
    assert_eq!(h.read(&f("memory.peak")), "104857600");
    let u = cg.usage_since(&b).unwrap();
    assert_eq!(u.cpu_time, Duration::ZERO);
    assert_eq!(u.memory_peak_bytes, 8 * MIB);
    assert!(
        !u.oom_killed && !u.memory_limit_hit && !u.pids_limit_hit,
        "{u:?}"
    );
    assert_eq!(u.pids_peak, Some(12), "lifetime");

    // The run.
    h.set(
        &f("cpu.stat"),
        "usage_usec 5300000\nuser_usec 0\nsystem_usec 0\n",
    );
    h.set(&f(testfs::FD_LOCAL_PEAK), "20971520\n");
    h.set(&f("pids.current"), "4\n");
    assert_eq!(cg.cpu_time_since(&b).unwrap(), Duration::from_millis(300));
    assert_eq!(cg.memory_current().unwrap(), 8 * MIB);
    assert_eq!(cg.pids_current().unwrap(), 4);
    let u = cg.usage_since(&b).unwrap();
    assert_eq!(u.cpu_time, Duration::from_millis(300));
    assert_eq!(u.memory_peak_bytes, 20 * MIB);
    assert!(
        !u.oom_killed && !u.memory_limit_hit && !u.pids_limit_hit,
        "{u:?}"
    );
    // usage() is still over the cgroup's life.
    let life = cg.usage().unwrap();
    assert_eq!(life.memory_peak_bytes, 100 * MIB);
    assert_eq!(life.cpu_time, Duration::from_millis(5300));
    assert!(life.oom_killed && life.memory_limit_hit && life.pids_limit_hit);

    h.set(
        &f("memory.events"),
        "low 0\nhigh 0\nmax 4\noom 2\noom_kill 2\noom_group_kill 2\n",
    );
    assert!(cg.usage_since(&b).unwrap().oom_killed);
    assert!(!cg.usage_since(&b).unwrap().memory_limit_hit);
    h.set(
        &f("memory.events"),
        "low 0\nhigh 0\nmax 9\noom 2\noom_kill 2\noom_group_kill 2\n",
    );
    h.set(&f("pids.events"), "max 3\n");
    let u = cg.usage_since(&b).unwrap();
    assert!(
        u.oom_killed && u.memory_limit_hit && u.pids_limit_hit,
        "{u:?}"
    );

    // A second run gets its own fd; the first baseline keeps reading its own.
    let b2 = cg.begin_run().unwrap();
    h.set(&f(testfs::FD_LOCAL_PEAK), "12582912\n");
    assert_eq!(cg.usage_since(&b2).unwrap().memory_peak_bytes, 12 * MIB);
    assert_eq!(cg.usage_since(&b).unwrap().memory_peak_bytes, 20 * MIB);
    let u = cg.usage_since(&b2).unwrap();
    assert!(
        !u.oom_killed && !u.memory_limit_hit && !u.pids_limit_hit,
        "{u:?}"
    );
    drop(b);
    drop(b2);
    cg.destroy().unwrap();
}

#[test]
fn v2_begin_run_falls_back_to_the_lifetime_peak() {
    let h = pure_v2(true, true);
    let (_m, cg) = container_cgroup(&h, "old");
    let leaf = "sys/fs/cgroup/corral/old";
    let f = |file: &str| format!("{leaf}/{file}");
    h.set(&f("memory.peak"), "104857600\n");
    // Before 6.12 memory.peak cannot be written.
    testfs::fail_writes_to(&h.p(&f("memory.peak")), libc::EINVAL);
    let b = cg.begin_run().unwrap();
    assert!(b.peak_is_lifetime);
    assert_eq!(cg.usage_since(&b).unwrap().memory_peak_bytes, 100 * MIB);
    assert_eq!(h.read(&f("memory.peak")), "104857600");
    cg.destroy().unwrap();
    // Before 5.19 there is no memory.peak at all: memory.current is all there is.
    let (_m, cg) = container_cgroup(&h, "older");
    let f = |file: &str| format!("sys/fs/cgroup/corral/older/{file}");
    std::fs::remove_file(h.p(&f("memory.peak"))).unwrap();
    std::fs::remove_file(h.p(&f("pids.peak"))).unwrap();
    h.set(&f("memory.current"), "4096\n");
    let b = cg.begin_run().unwrap();
    assert!(b.peak_is_lifetime);
    let u = cg.usage_since(&b).unwrap();
    assert_eq!(u.memory_peak_bytes, 4096);
    assert_eq!(u.pids_peak, None);
    cg.destroy().unwrap();
}

#[test]
fn v2_set_limits_reclaims_before_lowering() {
    let h = pure_v2(true, true);
    let (_m, cg) = container_cgroup(&h, "live");
    let leaf = "sys/fs/cgroup/corral/live";
    let f = |file: &str| format!("{leaf}/{file}");
    cg.set_limits(&limits(128 * MIB, 32)).unwrap();
    assert_eq!(h.read(&f("memory.max")), "134217728");
    assert_eq!(h.read(&f("pids.max")), "32");
    assert_eq!(h.read(&f("memory.reclaim")), "", "nothing to reclaim");
    cg.set_limits(&Limits::default()).unwrap();
    assert_eq!(h.read(&f("memory.max")), "max");
    assert_eq!(h.read(&f("pids.max")), "max");
    assert_eq!(h.read(&f("memory.swap.max")), "0");

    // 50 MiB in use, 32 MiB wanted: ask the kernel to reclaim the 18 MiB first.
    h.set(&f("memory.current"), "52428800\n");
    cg.set_limits(&limits(32 * MIB, 16)).unwrap();
    assert_eq!(h.read(&f("memory.reclaim")), (18 * MIB).to_string());
    assert_eq!(h.read(&f("memory.max")), "33554432");

    // It cannot (anonymous memory, no swap): refused, limit unchanged, nothing OOM-killed.
    testfs::fail_writes_to(&h.p(&f("memory.reclaim")), libc::EAGAIN);
    let e = cg.set_limits(&limits(16 * MIB, 16)).unwrap_err();
    assert!(
        matches!(
            e,
            Error::MemoryLimitBelowUsage { limit, usage, .. }
                if limit == 16 * MIB && usage == 50 * MIB
        ),
        "{e}"
    );
    assert_eq!(e.raw_os_error(), Some(libc::EAGAIN));
    assert!(e.to_string().contains("corral/live/memory.max"), "{e}");
    assert_eq!(h.read(&f("memory.max")), "33554432");

    // Before 5.19 (no memory.reclaim): the plain write, as at creation.
    testfs::clear_write_fault();
    std::fs::remove_file(h.p(&f("memory.reclaim"))).unwrap();
    cg.set_limits(&limits(16 * MIB, 16)).unwrap();
    assert_eq!(h.read(&f("memory.max")), "16777216");
    cg.destroy().unwrap();
}
