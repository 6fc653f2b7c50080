//! Builds the sandbox's minimal root inside its fresh mount namespace, then `pivot_root`s into it.
//!
//! Layout: read-only binds of the host's system folders; a curated `/etc` (a small tmpfs of its own
//! with synthetic passwd, group, hosts and binds of what programs need to start, e.g. the loader
//! cache and `alternatives`, all made read-only in one call); an own `/proc` with `hidepid` and
//! the kernel's sensitive files masked; a minimal `/dev` (its nodes made, or bound); fresh
//! size-limited tmpfs for `/tmp`, `/dev/shm` and the working directory. Nothing else of the host exists.
//! In an image root, the image's layers replace the host's system folders and `/etc` (see
//! [`crate::inside::image_root`]); everything from `/dev` on is the same.
//!
//! A host root is most often prepared ahead by the spawner ([`prepare_host_root`], see
//! [`crate::inside::spares`]) and finished by PID 1 ([`finish_prepared`]): the same mounts with
//! the same flags, made in two halves.

use std::fs;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::mount::{mount, umount2, MntFlags, MsFlags};
use nix::unistd::{chdir, pivot_root};

use crate::error::SandboxError;
use crate::inside::image_root;
use crate::protocol::{Setup, SetupRoot};
use crate::spec::WORKDIR;

/// Host folders bound read-only (when present). Symlinks (merged /usr) are copied as symlinks.
pub(crate) const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// Host `/etc` entries that programs and toolchains read at start-up. Everything else of `/etc`
/// (shadow, ssh keys, the host's own configuration) stays out.
pub(crate) const DEFAULT_ETC: &[&str] = &[
    "alternatives",
    "bash.bashrc",
    "ca-certificates",
    "ca-certificates.conf",
    "fonts",
    "gai.conf",
    "host.conf",
    "inputrc",
    "java-11-openjdk",
    "java-17-openjdk",
    "java-21-openjdk",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "locale.alias",
    "localtime",
    "mime.types",
    "os-release",
    "profile",
    "protocols",
    "python3",
    "python3.11",
    "python3.12",
    "services",
    "ssl",
    "timezone",
    "xdg",
];

/// Masked like runc/Docker do: files that leak host kernel state or allow poking at it.
const PROC_MASKED_FILES: &[&str] = &[
    "kcore",
    "keys",
    "timer_list",
    "sched_debug",
    "sysrq-trigger",
    "key-users",
    "kallsyms",
    // The host's boot arguments (root device, init options, sometimes a cloud's tokens).
    "cmdline",
    "latency_stats",
    "kpagecount",
    "kpageflags",
    "kpagecgroup",
    "config.gz",
];
const PROC_MASKED_DIRS: &[&str] = &["acpi", "scsi", "asound", "firmware", "driver"];
/// Read-only binds over `/proc` folders whose files change the host. `pressure`: its files are
/// world-writable, and a write registers a trigger on the system-wide pressure-stall group (a
/// kernel object no cgroup limit covers, woken by the host's and other sandboxes' stalls).
const PROC_READONLY: &[&str] = &["sys", "irq", "bus", "fs", "pressure"];
/// Ptys a sandbox's devpts may hold at once: check50 runs its checks in parallel, one terminal
/// each (at most one per process the pids limit allows); a hostile program cannot take much of
/// the kernel's pool (see `build_dev`).
pub(crate) const PTYS_PER_SANDBOX: u32 = 64;

fn err(what: String) -> impl FnOnce(nix::Error) -> SandboxError {
    move |e| SandboxError::io(what, e.into())
}

fn ioerr(what: String) -> impl FnOnce(std::io::Error) -> SandboxError {
    move |e| SandboxError::io(what, e)
}

fn tmpfs(target: &Path, flags: MsFlags, opts: &str) -> Result<(), SandboxError> {
    mount(Some("tmpfs"), target, Some("tmpfs"), flags, Some(opts))
        .map_err(err(format!("mounting a tmpfs on {}", target.display())))
}

/// Bind `src` at `dst` (created as a file or folder to match), then remount with `flags` added.
fn bind(src: &Path, dst: &Path, flags: MsFlags) -> Result<(), SandboxError> {
    let meta = fs::metadata(src).map_err(ioerr(format!("bind source {}", src.display())))?;
    let made = if meta.is_dir() {
        fs::create_dir_all(dst)
    } else {
        dst.parent()
            .map(fs::create_dir_all)
            .unwrap_or(Ok(()))
            .and_then(|_| {
                if dst.exists() {
                    Ok(())
                } else {
                    fs::write(dst, b"")
                }
            })
    };
    made.map_err(|e| {
        let inside = dst.strip_prefix("/tmp").map(|p| Path::new("/").join(p)).unwrap_or_else(|_| dst.to_path_buf());
        if e.raw_os_error() == Some(libc::EROFS) {
            SandboxError::Path {
                path: inside,
                why: "cannot create this mount point inside a read-only system folder of the sandbox (/usr, /bin, /sbin, /lib*, /etc); \
                      pick a destination elsewhere, e.g. /mnt/NAME or /srv/NAME"
                    .into(),
            }
        } else {
            SandboxError::io(format!("creating mount point {}", inside.display()), e)
        }
    })?;
    bind_mount(src, dst)?;
    remount_restricted(dst, flags)
}

fn bind_mount(src: &Path, dst: &Path) -> Result<(), SandboxError> {
    mount(
        Some(src),
        dst,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
    .map_err(err(format!(
        "binding {} to {}",
        src.display(),
        dst.display()
    )))
}

/// Adds `flags` to the mount at `dst`. A bind mount takes its flags only from a remount; without
/// it the mount would be writable. Flags the source mount already has are kept: in a user
/// namespace they are locked, and a remount that tried to clear one would fail.
fn remount_restricted(dst: &Path, flags: MsFlags) -> Result<(), SandboxError> {
    let flags = flags | inherited_flags(dst);
    mount(
        None::<&str>,
        dst,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REMOUNT | flags,
        None::<&str>,
    )
    .map_err(err(format!(
        "remounting {} with restrictions",
        dst.display()
    )))
}

/// Binds `src` at `dst`, a mount point made here on a fresh tmpfs (a folder for a folder), with
/// the source mount's flags: the caller restricts the whole tree afterwards ([`restrict_tree`]).
/// One mount and one or two calls to make its point, where [`bind`] also stats the source, looks
/// for the point and remounts.
fn bind_new(src: &Path, dst: &Path, is_dir: bool) -> Result<(), SandboxError> {
    let made = if is_dir {
        fs::create_dir(dst)
    } else {
        fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(dst)
            .map(drop)
    };
    made.map_err(ioerr(format!("creating mount point {}", dst.display())))?;
    bind_mount(src, dst)
}

/// Adds `flags` (read-only, nosuid, nodev, noexec) to the mount at `top` and to every mount
/// beneath it in one `mount_setattr(2)` call (Linux 5.12), instead of a `statfs` and a remount
/// per bind; it only sets flags, so whatever the sources carried (locked in a user namespace)
/// stays. On an older kernel (or where a seccomp profile refuses the call) each of `mounts()` is
/// remounted instead, as [`bind`] does.
fn restrict_tree(
    top: &Path,
    flags: MsFlags,
    mounts: impl FnOnce() -> Vec<PathBuf>,
) -> Result<(), SandboxError> {
    match set_tree_attrs(top, flags) {
        Ok(()) => Ok(()),
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS) | Some(libc::EPERM)) => {
            remount_each(&mounts(), flags)
        }
        Err(e) => Err(SandboxError::io(
            format!("restricting the mounts under {}", top.display()),
            e,
        )),
    }
}

/// Without `mount_setattr`: a remount per mount (only these, not what lies beneath them).
fn remount_each(mounts: &[PathBuf], flags: MsFlags) -> Result<(), SandboxError> {
    mounts.iter().try_for_each(|m| remount_restricted(m, flags))
}

/// `mount_setattr(top, AT_RECURSIVE)` setting `flags`' restrictions.
fn set_tree_attrs(top: &Path, flags: MsFlags) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let mut attr_set = 0;
    for (ms, attr) in [
        (MsFlags::MS_RDONLY, libc::MOUNT_ATTR_RDONLY),
        (MsFlags::MS_NOSUID, libc::MOUNT_ATTR_NOSUID),
        (MsFlags::MS_NODEV, libc::MOUNT_ATTR_NODEV),
        (MsFlags::MS_NOEXEC, libc::MOUNT_ATTR_NOEXEC),
    ] {
        if flags.contains(ms) {
            attr_set |= attr;
        }
    }
    let attr = libc::mount_attr {
        attr_set,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    let path = std::ffi::CString::new(top.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: mount_setattr reads the NUL-terminated path and `size_of::<mount_attr>()` bytes of
    // `attr`, both alive for the call; it writes nothing of ours.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            libc::AT_RECURSIVE | libc::AT_SYMLINK_NOFOLLOW,
            &attr as *const libc::mount_attr,
            std::mem::size_of::<libc::mount_attr>(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The restricting flags a mount already carries (noexec, nosuid, nodev, read-only, atime mode).
fn inherited_flags(path: &Path) -> MsFlags {
    use nix::sys::statvfs::{statvfs, FsFlags};
    let Ok(st) = statvfs(path) else {
        return MsFlags::empty();
    };
    let f = st.flags();
    let mut out = MsFlags::empty();
    for (fs, ms) in [
        (FsFlags::ST_RDONLY, MsFlags::MS_RDONLY),
        (FsFlags::ST_NOSUID, MsFlags::MS_NOSUID),
        (FsFlags::ST_NODEV, MsFlags::MS_NODEV),
        (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
        (FsFlags::ST_NOATIME, MsFlags::MS_NOATIME),
        (FsFlags::ST_NODIRATIME, MsFlags::MS_NODIRATIME),
        (FsFlags::ST_RELATIME, MsFlags::MS_RELATIME),
    ] {
        if f.contains(fs) {
            out |= ms;
        }
    }
    out
}

fn write_file(path: &Path, contents: &str) -> Result<(), SandboxError> {
    fs::write(path, contents).map_err(ioerr(format!("writing {}", path.display())))
}

/// Copies a host symlink (e.g. `/bin -> usr/bin`) into the new root.
fn copy_symlink(src: &Path, dst: &Path) -> Result<(), SandboxError> {
    let target = fs::read_link(src).map_err(ioerr(format!("reading link {}", src.display())))?;
    symlink(&target, dst).map_err(ioerr(format!("creating link {}", dst.display())))
}

/// Builds the root and makes it `/`: the host's system folders on a fresh tmpfs, or an image's
/// layers (see [`crate::inside::image_root`]). Runs as PID 1 of the new PID namespace, in the new
/// mount namespace, before any untrusted code exists. `build_userns` is build mode's user
/// namespace (its layers are idmapped through it).
pub(crate) fn build(setup: &Setup, build_userns: Option<&OwnedFd>) -> Result<(), SandboxError> {
    make_private()?;

    // Bind sources and image layers are opened before anything is mounted: the new root covers
    // the host's /tmp, and a source under it (or a path swapped for a symlink meanwhile) must
    // still be the one asked for.
    let mut sources = Vec::new();
    for m in &setup.mounts {
        let fd = nix::fcntl::open(
            &m.src,
            nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .map_err(err(format!("bind source {}", m.src.display())))?;
        sources.push(fd);
    }
    let layers = image_root::open_layers(setup, build_userns)?;

    // A small tmpfs over the host's /tmp, visible only in this namespace: the new root itself
    // (host root), or the image root's skeleton and mount point.
    let staging = PathBuf::from(STAGING);
    mount_staging(&staging)?;
    let root = match &layers {
        None => {
            host_system_dirs(setup, &staging)?;
            staging.clone()
        }
        Some(layers) => {
            let dir_sources: Vec<bool> = sources
                .iter()
                .map(|fd| {
                    nix::sys::stat::fstat(fd).is_ok_and(|st| {
                        nix::sys::stat::SFlag::from_bits_truncate(st.st_mode)
                            & nix::sys::stat::SFlag::S_IFMT
                            == nix::sys::stat::SFlag::S_IFDIR
                    })
                })
                .collect();
            image_root::mount_root(setup, &staging, layers, &dir_sources)?
        }
    };
    drop(layers);
    let image = setup.image_root();
    let build = setup.build_ids.is_some();
    let r = |p: &str| root.join(p.trim_start_matches('/'));
    // In an image every mount point must be reached without following a link the image planted.
    let target = |p: &str| -> Result<PathBuf, SandboxError> {
        if image {
            image_root::check_mount_point(&root, p)?;
        }
        Ok(r(p))
    };
    if build {
        // The build's own /etc stays; a resolver and its hosts file are bound over it.
        for (name, text) in [
            ("hosts", image_root::hosts(setup)),
            ("resolv.conf", image_root::resolv_conf(setup)),
        ] {
            let staged = staging.join(format!("staged-{name}"));
            write_file(&staged, &text)?;
            bind(
                &staged,
                &target(&format!("/etc/{name}"))?,
                MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            )?;
        }
    }

    build_dev(&target("/dev")?)?;

    // /proc of the new PID namespace; hidepid=invisible hides processes of other users (init).
    let proc_dir = target("/proc")?;
    fs::create_dir_all(&proc_dir).map_err(ioerr("creating /proc".into()))?;
    mount_proc(&proc_dir)?;
    mask_proc(&proc_dir, &r("/dev/null"))?;

    if !image {
        scratch_points(&root)?;
    }
    for p in ["/tmp", WORKDIR] {
        target(p)?;
    }
    let (owner_uid, owner_gid) = setup.fs_owner();
    mount_scratch(&root, owner_uid, owner_gid, setup.disk_bytes, setup.inodes)?;
    if build {
        // Build and root mode: the working directory is root's, and the users root makes may
        // reach what it lets them (as in a container's volume), not only root.
        fs::set_permissions(r(WORKDIR), fs::Permissions::from_mode(0o755))
            .map_err(ioerr(format!("opening {WORKDIR} to the namespace's users")))?;
    }
    if let Some(alias) = &setup.workdir_alias {
        // The same tmpfs at its second path: one folder, two names (a reset never runs here:
        // the pool does not reuse such a sandbox).
        bind(
            &r(WORKDIR),
            &target(alias)?,
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        )?;
    }

    for (m, fd) in setup.mounts.iter().zip(&sources) {
        let src = PathBuf::from(format!(
            "/proc/self/fd/{}",
            std::os::fd::AsRawFd::as_raw_fd(fd)
        ));
        // A destination under a scratch mount is made on that fresh tmpfs (as on the host root);
        // anywhere else in an image it is the skeleton's.
        let dst_str = m.dst.to_string_lossy();
        let dst = if on_scratch(&m.dst) {
            r(&dst_str)
        } else {
            target(&dst_str)?
        };
        let mut flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
        if !m.writable {
            flags |= MsFlags::MS_RDONLY;
        }
        bind(&src, &dst, flags)?;
    }
    drop(sources);

    switch_root(&root)?;
    if !image {
        root_read_only()?;
    }
    // An image root is mounted read-only already (build mode: writable into its upper folder).
    Ok(())
}

/// Where the new root is put together: a small tmpfs over the host's `/tmp`, seen only in the
/// sandbox's mount namespace.
const STAGING: &str = "/tmp";

/// Nothing mounted in this namespace may propagate back to the host.
fn make_private() -> Result<(), SandboxError> {
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(err("making mounts private".into()))
}

/// The tmpfs the host root is made on (or an image root's skeleton and mount point).
fn mount_staging(staging: &Path) -> Result<(), SandboxError> {
    tmpfs(
        staging,
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        "size=4m,nr_inodes=4096,mode=0755",
    )
}

/// `/proc` of the PID namespace of the caller (PID 1); `hidepid=invisible` hides processes of
/// other users (PID 1's own).
pub(crate) fn mount_proc(proc_dir: &Path) -> Result<(), SandboxError> {
    mount(
        Some("proc"),
        proc_dir,
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        Some("hidepid=invisible"),
    )
    .map_err(err("mounting /proc".into()))
}

/// The scratch mounts' points on a host root: `/tmp` (with `/var/tmp` pointing at it) and the
/// working directory (`/dev/shm` is made with `/dev`).
fn scratch_points(root: &Path) -> Result<(), SandboxError> {
    let r = |p: &str| root.join(p.trim_start_matches('/'));
    fs::create_dir_all(r("/tmp")).map_err(ioerr("creating /tmp".into()))?;
    fs::create_dir_all(r("/var")).map_err(ioerr("creating /var".into()))?;
    symlink("/tmp", r("/var/tmp")).map_err(ioerr("creating /var/tmp".into()))?;
    fs::create_dir_all(r(WORKDIR)).map_err(ioerr(format!("creating {WORKDIR}")))
}

/// Switches roots: `pivot_root(".", ".")` stacks the old root under the new one; detaching it
/// leaves no path back to the host.
fn switch_root(root: &Path) -> Result<(), SandboxError> {
    chdir(root).map_err(err("entering the new root".into()))?;
    pivot_root(".", ".").map_err(err("pivot_root".into()))?;
    umount2(".", MntFlags::MNT_DETACH).map_err(err("detaching the host root".into()))?;
    chdir("/").map_err(err("entering /".into()))
}

/// The host root's tmpfs itself becomes read-only; only the scratch mounts stay writable.
fn root_read_only() -> Result<(), SandboxError> {
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        None::<&str>,
    )
    .map_err(err("making / read-only".into()))
}

/// A host root made ahead of need, in a new mount namespace of the spawner's
/// ([`crate::inside::spares`]): everything of [`build`]'s host root that is the same for every
/// sandbox — the system folders, the curated `/etc`'s binds, `/dev`, the mount points, the
/// switch of roots (whose detach of the host's tree waits for an RCU grace period) and `/`
/// read-only. What depends on the sandbox is left to its PID 1 ([`finish_prepared`]): `/proc`
/// (its PID namespace does not exist yet), the synthetic `/etc` files (its uid and hostname),
/// and the scratch mounts (their owner and sizes). The caller is in the new namespace and enters
/// its own again afterwards.
pub(crate) fn prepare_host_root() -> Result<(), SandboxError> {
    make_private()?;
    let root = PathBuf::from(STAGING);
    mount_staging(&root)?;
    system_dirs(&root)?;
    let etc = root.join("etc");
    bind_etc(&default_etc(), &etc)?;
    build_dev(&root.join("dev"))?;
    fs::create_dir(root.join("proc")).map_err(ioerr("creating /proc".into()))?;
    scratch_points(&root)?;
    switch_root(&root)?;
    root_read_only()
}

/// The curated `/etc` of every host root.
pub(crate) fn default_etc() -> Vec<String> {
    DEFAULT_ETC.iter().map(|s| s.to_string()).collect()
}

/// Whether a sandbox of `setup` may start in a root [`prepare_host_root`] made: a native host
/// root with the default `/etc`, no binds of the caller's (their sources are opened in the
/// host's namespace), no network (its `/etc/resolv.conf` is the host's, read where the host's
/// `/etc` is still in sight) and nothing made in a user namespace.
pub(crate) fn fits_prepared(setup: &Setup) -> bool {
    matches!(setup.root, SetupRoot::Host)
        && !setup.network
        && setup.mounts.is_empty()
        && setup.workdir_alias.is_none()
        && setup.build_ids.is_none()
        && setup.userns.is_none()
        && !setup.gvisor
        && setup.etc_entries.iter().eq(DEFAULT_ETC)
}

/// PID 1's part of a prepared root, after it mounted `/proc` ([`mount_proc`]): the synthetic
/// `/etc` files and `/etc` read-only, `/proc`'s masks, the scratch mounts. The same mounts, with
/// the same flags, as [`build`] makes.
pub(crate) fn finish_prepared(setup: &Setup) -> Result<(), SandboxError> {
    let etc = Path::new("/etc");
    finish_etc(setup, etc, || {
        let mut binds = vec![etc.to_path_buf()];
        binds.extend(
            curated(&setup.etc_entries)
                .map(|name| etc.join(name))
                .filter(|p| fs::symlink_metadata(p).is_ok_and(|m| !m.file_type().is_symlink())),
        );
        binds
    })?;
    mask_proc(Path::new("/proc"), Path::new("/dev/null"))?;
    let (owner_uid, owner_gid) = setup.fs_owner();
    mount_scratch(
        Path::new("/"),
        owner_uid,
        owner_gid,
        setup.disk_bytes,
        setup.inodes,
    )
}

/// The host root's layout on `root`: read-only binds of the system folders and the curated `/etc`.
fn host_system_dirs(setup: &Setup, root: &Path) -> Result<(), SandboxError> {
    system_dirs(root)?;
    let etc = root.join("etc");
    let binds = bind_etc(&setup.etc_entries, &etc)?;
    finish_etc(setup, &etc, || binds)
}

/// The host's system folders on `root`, each bound read-only (symlinks copied as symlinks).
fn system_dirs(root: &Path) -> Result<(), SandboxError> {
    let r = |p: &str| root.join(p.trim_start_matches('/'));
    for dir in SYSTEM_DIRS {
        let host = Path::new(dir);
        match fs::symlink_metadata(host) {
            Ok(m) if m.file_type().is_symlink() => copy_symlink(host, &r(dir))?,
            Ok(m) if m.is_dir() => {
                let dst = r(dir);
                bind_new(host, &dst, true)?;
                restrict_tree(&dst, READ_ONLY, || vec![dst.clone()])?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// What the system folders and `/etc` are mounted with.
const READ_ONLY: MsFlags = MsFlags::MS_RDONLY
    .union(MsFlags::MS_NOSUID)
    .union(MsFlags::MS_NODEV);

/// `/etc` is a tmpfs of its own holding the curated entries' binds and the synthetic files, so
/// that one call makes all of it read-only ([`finish_etc`]). (Copying the small files instead
/// of binding them was tried: a copy onto the tmpfs took ~24 us, a bind ~10 us.) Returns the
/// mounts made (the tmpfs first), for the remounts of a kernel without `mount_setattr`.
fn bind_etc(entries: &[String], etc: &Path) -> Result<Vec<PathBuf>, SandboxError> {
    fs::create_dir(etc).map_err(ioerr("creating /etc".into()))?;
    let inodes = entries.len() + 64;
    tmpfs(
        etc,
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        &format!("size=256k,nr_inodes={inodes},mode=0755"),
    )?;
    let mut mounts = vec![etc.to_path_buf()];
    let host_etc = Path::new("/etc");
    for name in curated(entries) {
        let host = host_etc.join(name);
        let dst = etc.join(name);
        match fs::symlink_metadata(&host) {
            Ok(m) if m.file_type().is_symlink() => copy_symlink(&host, &dst)?,
            Ok(m) => {
                bind_new(&host, &dst, m.is_dir())?;
                mounts.push(dst);
            }
            Err(_) => {}
        }
    }
    Ok(mounts)
}

/// The entries of `entries` that name something directly in `/etc`.
fn curated(entries: &[String]) -> impl Iterator<Item = &String> {
    entries
        .iter()
        .filter(|name| !name.contains('/') && !name.starts_with('.'))
}

/// Writes the synthetic files into the curated `/etc` (still writable) and makes it and every
/// bind in it read-only. `binds` lists its mounts, asked for only by a kernel without
/// `mount_setattr`.
fn finish_etc(
    setup: &Setup,
    etc: &Path,
    binds: impl FnOnce() -> Vec<PathBuf>,
) -> Result<(), SandboxError> {
    for (name, contents) in synthetic_etc(setup.uid, setup.gid, &setup.hostname, setup.network) {
        write_file(&etc.join(name), &contents)?;
    }
    restrict_tree(etc, READ_ONLY, binds)
}

/// The files of the curated `/etc` that corral writes rather than binds (also written into a
/// gVisor sandbox's bundle): accounts, names, and the resolver only with network.
pub(crate) fn synthetic_etc(
    uid: u32,
    gid: u32,
    hostname: &str,
    network: bool,
) -> Vec<(&'static str, String)> {
    let mut files = vec![
        ("passwd", format!("root:x:0:0:root:/root:/usr/sbin/nologin\nsandbox:x:{uid}:{gid}:sandbox:{WORKDIR}:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")),
        ("group", format!("root:x:0:\nsandbox:x:{gid}:\nnogroup:x:65534:\n")),
        (
            "hosts",
            format!("127.0.0.1\tlocalhost {hostname}\n::1\tlocalhost ip6-localhost {hostname}\n"),
        ),
        ("hostname", format!("{hostname}\n")),
        (
            "nsswitch.conf",
            "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n".to_string(),
        ),
    ];
    match (network, fs::read_to_string("/etc/resolv.conf")) {
        (true, Ok(conf)) => files.push(("resolv.conf", conf)),
        (true, Err(_)) => {}
        (false, _) => files.push(("resolv.conf", String::new())),
    }
    files
}

/// Makes a character device like the host's `src` at `dst` (same numbers and permissions), as
/// runc does outside a user namespace: one `mknod` where a bind costs a mount. `Ok(false)` where
/// the kernel does not allow it (in a user namespace): the caller binds the host's node instead.
fn make_node(src: &Path, dst: &Path) -> Result<bool, SandboxError> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let meta = fs::metadata(src).map_err(ioerr(format!("device {}", src.display())))?;
    if !meta.file_type().is_char_device() {
        return Ok(false);
    }
    let mode = nix::sys::stat::Mode::from_bits_truncate(meta.mode() & 0o777);
    match nix::sys::stat::mknod(dst, nix::sys::stat::SFlag::S_IFCHR, mode, meta.rdev()) {
        Ok(()) => {}
        Err(nix::Error::EPERM) => return Ok(false),
        Err(e) => return Err(err(format!("creating {}", dst.display()))(e)),
    }
    // mknod applied PID 1's umask; the node gets the host's permissions exactly.
    fs::set_permissions(dst, fs::Permissions::from_mode(meta.mode() & 0o777))
        .map_err(ioerr(format!("permissions of {}", dst.display())))?;
    Ok(true)
}

fn build_dev(dev: &Path) -> Result<(), SandboxError> {
    fs::create_dir_all(dev).map_err(ioerr("creating /dev".into()))?;
    tmpfs(
        dev,
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        "size=64k,nr_inodes=64,mode=0755",
    )?;
    let mut nodes = Vec::new();
    for node in ["null", "zero", "full", "random", "urandom"] {
        let (host, dst) = (Path::new("/dev").join(node), dev.join(node));
        if !make_node(&host, &dst)? {
            bind_new(&host, &dst, false)?;
            nodes.push(dst);
        }
    }
    for (name, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        symlink(target, dev.join(name)).map_err(ioerr(format!("creating /dev/{name}")))?;
    }
    fs::create_dir(dev.join("shm")).map_err(ioerr("creating /dev/shm".into()))?;
    // A private devpts instance, for runs with a terminal and for programs that open ptys of
    // their own: its ptys exist only in this sandbox. `max` bounds how many it may hold at once:
    // every devpts instance but the host's draws on one kernel-wide pool (`kernel.pty.max`,
    // 4096 by default, of which 1024 are reserved for the host's own instance).
    let pts = dev.join("pts");
    fs::create_dir(&pts).map_err(ioerr("creating /dev/pts".into()))?;
    mount(
        Some("devpts"),
        &pts,
        Some("devpts"),
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        Some(format!("newinstance,ptmxmode=0666,mode=0600,max={PTYS_PER_SANDBOX}").as_str()),
    )
    .map_err(err("mounting /dev/pts".into()))?;
    symlink("pts/ptmx", dev.join("ptmx")).map_err(ioerr("creating /dev/ptmx".into()))?;
    // The device nodes (and devpts, which has them already) nosuid and noexec.
    restrict_tree(dev, MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC, || nodes)?;
    // /dev itself stays writable for nobody: the tmpfs is root-owned 0755; remount it read-only.
    mount(
        None::<&str>,
        dev,
        None::<&str>,
        MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        Some("size=64k,nr_inodes=64,mode=0755"),
    )
    .map_err(err("making /dev read-only".into()))?;
    Ok(())
}

/// What the kernel says when a masked `/proc` entry does not exist on this kernel (or is not a
/// folder): nothing to mask. Tried directly rather than looked up first: one call per entry.
fn absent(e: nix::Error) -> bool {
    matches!(e, nix::Error::ENOENT | nix::Error::ENOTDIR)
}

fn mask_proc(proc_dir: &Path, dev_null: &Path) -> Result<(), SandboxError> {
    for f in PROC_MASKED_FILES {
        let p = proc_dir.join(f);
        match mount(
            Some(dev_null),
            &p,
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        ) {
            Err(e) if !absent(e) => return Err(err(format!("masking /proc/{f}"))(e)),
            _ => {}
        }
    }
    for d in PROC_MASKED_DIRS {
        let p = proc_dir.join(d);
        match mount(
            Some("tmpfs"),
            &p,
            Some("tmpfs"),
            MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
            Some("size=0,mode=0555"),
        ) {
            Err(e) if !absent(e) => {
                return Err(err(format!("mounting a tmpfs on {}", p.display()))(e))
            }
            _ => {}
        }
    }
    for d in PROC_READONLY {
        let p = proc_dir.join(d);
        match mount(
            Some(&p),
            &p,
            None::<&str>,
            MsFlags::MS_BIND | MsFlags::MS_REC,
            None::<&str>,
        ) {
            Err(e) if absent(e) => continue,
            Err(e) => return Err(err(format!("binding /proc/{d}"))(e)),
            Ok(()) => {}
        }
        mount(
            None::<&str>,
            &p,
            None::<&str>,
            MsFlags::MS_BIND
                | MsFlags::MS_REMOUNT
                | MsFlags::MS_RDONLY
                | MsFlags::MS_NOSUID
                | MsFlags::MS_NODEV
                | MsFlags::MS_NOEXEC,
            None::<&str>,
        )
        .map_err(err(format!("making /proc/{d} read-only")))?;
    }
    Ok(())
}

/// Whether `dst` lies on one of the scratch mounts.
pub(crate) fn on_scratch(dst: &Path) -> bool {
    ["/tmp", "/dev/shm", WORKDIR]
        .iter()
        .any(|s| dst.starts_with(s))
}

/// Mounts fresh, empty, size-limited tmpfs on `/tmp`, `/dev/shm` and the working directory under
/// `root` (the new root while building, `/` afterwards).
fn mount_scratch(
    root: &Path,
    uid: u32,
    gid: u32,
    disk: u64,
    inodes: u64,
) -> Result<(), SandboxError> {
    let r = |p: &str| root.join(p.trim_start_matches('/'));
    let shared = format!("size={disk},nr_inodes={inodes},mode=1777");
    tmpfs(&r("/tmp"), MsFlags::MS_NOSUID | MsFlags::MS_NODEV, &shared)?;
    tmpfs(
        &r("/dev/shm"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        &shared,
    )?;
    tmpfs(
        &r(WORKDIR),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        &format!("size={disk},nr_inodes={inodes},mode=0700,uid={uid},gid={gid}"),
    )
}

/// Replaces the scratch mounts with fresh ones: whatever a previous program wrote is gone (a
/// fresh tmpfs is provably empty). A reset takes this path when emptying them in place could not
/// prove them as new (see [`crate::inside::scratch`]).
pub(crate) fn reset_scratch(
    uid: u32,
    gid: u32,
    disk: u64,
    inodes: u64,
) -> Result<(), SandboxError> {
    for p in ["/tmp", "/dev/shm", WORKDIR] {
        umount2(p, MntFlags::MNT_DETACH).map_err(err(format!("unmounting {p}")))?;
    }
    mount_scratch(Path::new("/"), uid, gid, disk, inodes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sched::{unshare, CloneFlags};
    use nix::sys::statvfs::{statvfs, FsFlags};

    fn flags_at(p: &Path) -> FsFlags {
        statvfs(p).expect("statvfs").flags()
    }

    /// Both ways of restricting a tree, in a mount namespace of a thread's own (needs root; CI
    /// runs the tests as root): `mount_setattr` reaches every mount beneath the top, binds of
    /// files and folders and mounts nested two deep; the fallback remounts exactly the listed
    /// ones. Each keeps the flags it had (a remount that dropped them would fail when locked).
    #[test]
    fn restricting_a_tree_reaches_every_mount_beneath_it() {
        assert!(
            nix::unistd::geteuid().is_root(),
            "mounting needs root (the test suite runs as root)"
        );
        let dir = tempfile::tempdir().expect("tempdir");
        let top = dir.path().to_path_buf();
        std::thread::spawn(move || {
            unshare(CloneFlags::CLONE_NEWNS).expect("a mount namespace of this thread's own");
            make_private().expect("private");
            let ro = READ_ONLY;
            for (name, use_setattr) in [("setattr", true), ("fallback", false)] {
                let root = top.join(name);
                fs::create_dir(&root).unwrap();
                tmpfs(&root, MsFlags::empty(), "size=64k").unwrap();
                let file = root.join("hostname");
                bind_new(Path::new("/etc/hostname"), &file, false).unwrap();
                let folder = root.join("share");
                bind_new(Path::new("/usr/share"), &folder, true).unwrap();
                let nested = root.join("nested");
                fs::create_dir(&nested).unwrap();
                tmpfs(&nested, MsFlags::MS_NOEXEC, "size=64k").unwrap();
                let deeper = nested.join("deeper");
                fs::create_dir(&deeper).unwrap();
                tmpfs(&deeper, MsFlags::empty(), "size=64k").unwrap();
                for p in [&root, &file, &folder, &deeper] {
                    assert!(!flags_at(p).contains(FsFlags::ST_RDONLY), "{}", p.display());
                }
                let listed = [root.clone(), file.clone(), folder.clone(), nested.clone()];
                if use_setattr {
                    set_tree_attrs(&root, ro).expect("mount_setattr");
                } else {
                    remount_each(&listed, ro).expect("remounts");
                }
                for p in &listed {
                    let f = flags_at(p);
                    assert!(
                        f.contains(FsFlags::ST_RDONLY | FsFlags::ST_NOSUID | FsFlags::ST_NODEV),
                        "{name}: {} is {f:?}",
                        p.display()
                    );
                }
                assert!(
                    flags_at(&nested).contains(FsFlags::ST_NOEXEC),
                    "{name}: noexec kept"
                );
                // Only mount_setattr reaches below what it was told about.
                assert_eq!(
                    flags_at(&deeper).contains(FsFlags::ST_RDONLY),
                    use_setattr,
                    "{name}: the mount two deep"
                );
                assert!(
                    fs::write(root.join("new"), b"x").is_err(),
                    "{name}: the top is writable"
                );
            }
        })
        .join()
        .expect("the test thread");
    }
}
