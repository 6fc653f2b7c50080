//! The OCI bundle `runsc` starts: a root folder holding only mount points, links and the
//! synthetic `/etc` files, the host paths the sandbox needs bound onto them, and corral's init
//! as the container's process.
//!
//! gVisor (2022) cannot build corral's native root from inside (no recursive binds, no read-only
//! bind remounts, no `pivot_root`), so runsc builds the same layout from this bundle: read-only
//! system folders, the curated `/etc`, gVisor's own `/proc` and `/dev`, size-limited tmpfs on
//! `/tmp` and `/dev/shm`, the host's working-directory tmpfs on `/home/sandbox`, the run's binds.
//! gVisor's file server (the Gofer, a host process) reaches nothing else of the host.
//!
//! With an image root, the root folder is instead a read-only overlayfs the supervisor mounts on
//! the host: a skeleton layer of corral's (the same mount points, `/var/tmp`, and the curated
//! `/etc/passwd`, `group`, `hosts`, `resolv.conf`) over the image's shared layer folders, as
//! natively inside the sandbox (`inside::image_root`); the host's system folders are not bound.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use oci_spec::runtime::{
    Capability, LinuxBuilder, LinuxCapabilitiesBuilder, LinuxNamespaceBuilder, LinuxNamespaceType,
    Mount, MountBuilder, PosixRlimitBuilder, PosixRlimitType, ProcessBuilder, RootBuilder, Spec,
    SpecBuilder, UserBuilder,
};

use super::loader::{InitLibraries, LIB_IN_CONTAINER};
use crate::error::SandboxError;
use crate::inside::gvisor::INIT_IN_CONTAINER;
use crate::inside::rootfs::{synthetic_etc, DEFAULT_ETC, SYSTEM_DIRS};
use crate::spec::WORKDIR;

/// Which descriptor of the container's process is the control socket: runsc donates its own
/// standard input, and nothing but stdio crosses into the container.
pub(crate) const CONTROL_FD_IN_CONTAINER: i32 = 0;

fn io(what: String) -> impl FnOnce(std::io::Error) -> SandboxError {
    move |e| SandboxError::io(what, e)
}

fn oci(e: oci_spec::OciSpecError) -> SandboxError {
    SandboxError::Init(format!("writing the gVisor bundle: {e}"))
}

/// A read-only (or writable) bind of `src` at `dst`.
fn bind(src: &Path, dst: &Path, writable: bool) -> Result<Mount, SandboxError> {
    let mode = if writable { "rw" } else { "ro" };
    MountBuilder::default()
        .destination(dst)
        .typ("bind")
        .source(src)
        .options(vec![
            "rbind".to_string(),
            mode.to_string(),
            "nosuid".into(),
            "nodev".into(),
        ])
        .build()
        .map_err(oci)
}

/// Creates in `root` a mount point for `inside` shaped like the host's `src` (folder or file).
fn mount_point(root: &Path, inside: &Path, src: &Path) -> Result<(), SandboxError> {
    let at = root.join(inside.strip_prefix("/").unwrap_or(inside));
    let is_dir = fs::metadata(src)
        .map_err(io(format!("bind source {}", src.display())))?
        .is_dir();
    if is_dir {
        fs::create_dir_all(&at).map_err(io(format!("creating {}", at.display())))
    } else {
        if let Some(parent) = at.parent() {
            fs::create_dir_all(parent).map_err(io(format!("creating {}", parent.display())))?;
        }
        if !at.exists() {
            fs::write(&at, b"").map_err(io(format!("creating {}", at.display())))?;
        }
        Ok(())
    }
}

/// What the bundle is made of.
pub(crate) struct BundlePlan<'a> {
    /// corral's binary and the argument that makes it the sandbox's init.
    pub init: (&'a Path, &'a str),
    /// The host's loader and libraries the init is loaded with (see `loader`).
    pub init_libs: &'a InitLibraries,
    /// The host folder shared as the working directory.
    pub workdir: &'a Path,
    /// The run's own binds (`--ro-bind`, `--bind`).
    pub mounts: &'a [crate::spec::Mount],
    pub hostname: &'a str,
    pub uid: u32,
    pub gid: u32,
    pub network: bool,
    /// Size of `/tmp` and `/dev/shm` (each).
    pub disk_bytes: u64,
    /// An image root's layer folders, topmost first (`None`: the host's system folders).
    pub image_layers: Option<&'a [PathBuf]>,
}

/// The files of corral's curated `/etc` written over an image's own (natively the same four).
const IMAGE_ETC: [&str; 4] = ["passwd", "group", "hosts", "resolv.conf"];

/// Where the bundle's root folder is: its overlay (an image root) is unmounted before the
/// bundle is removed.
pub(crate) fn root_of(bundle: &Path) -> PathBuf {
    bundle.join("root")
}

/// Writes `dir/config.json` and the root folder `dir/root`; returns the bundle folder.
pub(crate) fn write(dir: &Path, plan: &BundlePlan<'_>) -> Result<PathBuf, SandboxError> {
    let root = root_of(dir);
    // Mount points and corral's files go into the root folder itself, or under an image into
    // the skeleton layer the root's overlay puts on top.
    let skel = match plan.image_layers {
        None => root.clone(),
        Some(_) => dir.join("skeleton"),
    };
    let at = |inside: &str| skel.join(inside.trim_start_matches('/'));
    for sub in ["proc", "dev", "tmp", "etc", "var", WORKDIR] {
        fs::create_dir_all(at(sub)).map_err(io(format!("creating {sub}")))?;
    }
    if plan.image_layers.is_some() {
        // An image's root is read-only for runsc too: every mount point must be there already,
        // gVisor's /sys (init unmounts it) and the one of corral's binary (whose bind runsc's
        // file server makes on the host, in the root folder) included.
        fs::create_dir_all(at("sys")).map_err(io("creating sys".into()))?;
        let init = at(INIT_IN_CONTAINER);
        fs::write(&init, b"").map_err(io(format!("creating {}", init.display())))?;
        let libs = at(LIB_IN_CONTAINER);
        fs::create_dir_all(&libs).map_err(io(format!("creating {}", libs.display())))?;
        // The loader reads /etc/ld.so.preload whatever its arguments: a whiteout in corral's
        // top layer hides the image's, so none of the image's code runs in the init (its
        // programs under gVisor run without it too; natively the init is never loaded there).
        whiteout(&at("/etc/ld.so.preload"))?;
    }
    symlink("/tmp", at("/var/tmp")).map_err(io("creating /var/tmp".into()))?;
    let mut mounts = vec![MountBuilder::default()
        .destination("/proc")
        .typ("proc")
        .source("proc")
        .options(vec!["nosuid".into(), "nodev".into(), "noexec".into()])
        .build()
        .map_err(oci)?];
    for scratch in ["/tmp", "/dev/shm"] {
        mounts.push(
            MountBuilder::default()
                .destination(scratch)
                .typ("tmpfs")
                .source("tmpfs")
                .options(vec![
                    "nosuid".into(),
                    "nodev".into(),
                    format!("size={}", plan.disk_bytes),
                    "mode=1777".into(),
                ])
                .build()
                .map_err(oci)?,
        );
    }
    // A host path bound at the same path inside, read-only; a link is copied as a link.
    let mut same_path = |host: &Path| -> Result<(), SandboxError> {
        match fs::symlink_metadata(host) {
            Ok(m) if m.file_type().is_symlink() => {
                let target =
                    fs::read_link(host).map_err(io(format!("reading {}", host.display())))?;
                let link = skel.join(host.strip_prefix("/").unwrap_or(host));
                symlink(&target, &link).map_err(io(format!("creating {}", link.display())))
            }
            Ok(_) => {
                mount_point(&skel, host, host)?;
                mounts.push(bind(host, host, false)?);
                Ok(())
            }
            Err(_) => Ok(()),
        }
    };
    // The host's system folders and curated /etc entries; an image brings its own.
    if plan.image_layers.is_none() {
        for d in SYSTEM_DIRS {
            same_path(Path::new(d))?;
        }
        for name in DEFAULT_ETC {
            same_path(&Path::new("/etc").join(name))?;
        }
    }
    for (name, contents) in synthetic_etc(plan.uid, plan.gid, plan.hostname, plan.network) {
        if plan.image_layers.is_some() && !IMAGE_ETC.contains(&name) {
            continue;
        }
        let f = at("/etc").join(name);
        fs::write(&f, contents).map_err(io(format!("writing {}", f.display())))?;
    }
    for m in plan.mounts {
        mount_point(&skel, &m.dst, &m.src)?;
        mounts.push(bind(&m.src, &m.dst, m.writable)?);
    }
    if let Some(layers) = plan.image_layers {
        mount_image_root(&root, &skel, layers)?;
    }
    mounts.push(bind(plan.init.0, Path::new(INIT_IN_CONTAINER), false)?);
    mounts.push(bind(
        &plan.init_libs.dir,
        Path::new(LIB_IN_CONTAINER),
        false,
    )?);
    mounts.push(bind(plan.workdir, Path::new(WORKDIR), true)?);

    let spec = spec(plan, mounts)?;
    spec.save(dir.join("config.json")).map_err(oci)?;
    Ok(dir.to_path_buf())
}

/// An overlayfs whiteout (a 0/0 character device) at `path`: the path is absent from the root.
fn whiteout(path: &Path) -> Result<(), SandboxError> {
    use nix::sys::stat::{makedev, mknod, Mode, SFlag};
    mknod(path, SFlag::S_IFCHR, Mode::empty(), makedev(0, 0)).map_err(|e| {
        SandboxError::io(
            format!("creating the whiteout {}", path.display()),
            e.into(),
        )
    })
}

/// Mounts the read-only overlay `skel` over `layers` (topmost first) at `root`, naming each
/// folder `/proc/self/fd/N` so dozens of layers fit the one page of mount options.
fn mount_image_root(root: &Path, skel: &Path, layers: &[PathBuf]) -> Result<(), SandboxError> {
    use nix::fcntl::{open, OFlag};
    use nix::mount::{mount, MsFlags};
    use std::os::fd::AsRawFd;
    fs::create_dir_all(root).map_err(io(format!("creating {}", root.display())))?;
    let opened = std::iter::once(skel)
        .chain(layers.iter().map(PathBuf::as_path))
        .map(|p| {
            open(
                p,
                OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
                nix::sys::stat::Mode::empty(),
            )
            .map_err(|e| SandboxError::io(format!("opening image layer {}", p.display()), e.into()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let lower: Vec<String> = opened
        .iter()
        .map(|fd| format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .collect();
    mount(
        Some("overlay"),
        root,
        Some("overlay"),
        MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(format!("lowerdir={}", lower.join(":")).as_str()),
    )
    .map_err(|e| SandboxError::io("mounting the image root for gVisor", e.into()))
}

fn spec(plan: &BundlePlan<'_>, mounts: Vec<Mount>) -> Result<Spec, SandboxError> {
    // Init needs root inside gVisor's kernel to build the sandbox (mounts, namespaces, the uid
    // drop); those are capabilities in gVisor's kernel, not the host's. Programs lose them all.
    let caps: oci_spec::runtime::Capabilities = [
        Capability::Chown,
        Capability::DacOverride,
        Capability::DacReadSearch,
        Capability::Fowner,
        Capability::Fsetid,
        Capability::Kill,
        Capability::Setgid,
        Capability::Setuid,
        Capability::Setpcap,
        Capability::NetAdmin,
        Capability::SysAdmin,
        Capability::SysChroot,
        Capability::SysResource,
        Capability::Mknod,
    ]
    .into_iter()
    .collect();
    let capabilities = LinuxCapabilitiesBuilder::default()
        .bounding(caps.clone())
        .effective(caps.clone())
        .permitted(caps)
        // Nothing inheritable: a program's process keeps no capability set at all.
        .inheritable(oci_spec::runtime::Capabilities::new())
        .build()
        .map_err(oci)?;
    let process = ProcessBuilder::default()
        .terminal(false)
        .user(
            UserBuilder::default()
                .uid(0u32)
                .gid(0u32)
                .build()
                .map_err(oci)?,
        )
        .args(plan.init_libs.argv(INIT_IN_CONTAINER, &[plan.init.1]))
        .env(vec![
            format!("PATH={}", crate::spec::DEFAULT_PATH),
            format!(
                "{}={LIB_IN_CONTAINER}/{}",
                crate::inside::init::LOADER_ENV,
                plan.init_libs.loader
            ),
            format!(
                "{}={CONTROL_FD_IN_CONTAINER}",
                crate::inside::init::CONTROL_FD_ENV
            ),
        ])
        .cwd("/")
        .capabilities(capabilities)
        .rlimits(vec![PosixRlimitBuilder::default()
            .typ(PosixRlimitType::RlimitNofile)
            .hard(65536u64)
            .soft(65536u64)
            .build()
            .map_err(oci)?])
        .no_new_privileges(false)
        .build()
        .map_err(oci)?;
    // With network, runsc's --network=host gives gVisor the host's network; a network namespace
    // in the spec would replace it with an empty one.
    let namespaces = [
        LinuxNamespaceType::Pid,
        LinuxNamespaceType::Ipc,
        LinuxNamespaceType::Uts,
        LinuxNamespaceType::Mount,
    ]
    .into_iter()
    .chain((!plan.network).then_some(LinuxNamespaceType::Network))
    .map(|typ| {
        LinuxNamespaceBuilder::default()
            .typ(typ)
            .build()
            .map_err(oci)
    })
    .collect::<Result<Vec<_>, _>>()?;
    let linux = LinuxBuilder::default()
        .namespaces(namespaces)
        .build()
        .map_err(oci)?;
    SpecBuilder::default()
        .version("1.0.2")
        .root(
            RootBuilder::default()
                .path("root")
                .readonly(true)
                .build()
                .map_err(oci)?,
        )
        .hostname(plan.hostname)
        .process(process)
        .mounts(mounts)
        .linux(linux)
        .build()
        .map_err(oci)
}
