//! An image's layers as the sandbox's `/`: one overlayfs mount per sandbox over the unpacked layer
//! folders that every sandbox of the image shares (the store holds each layer once; nothing is
//! copied), plus a small skeleton layer of corral's own.
//!
//! - Read-only runs: `lowerdir=SKELETON:TOP:…:BOTTOM`, no upper folder, `ro,nosuid,nodev`. The
//!   skeleton is the topmost layer: it holds the mount points corral needs (`/proc`, `/dev`,
//!   `/tmp`, `/home/sandbox`, the extra mounts' destinations), `/var/tmp` as a link to `/tmp`, and
//!   the curated `/etc/passwd`, `group`, `hosts`, `resolv.conf` — over the image's own, whatever
//!   the image has at those paths (a folder of an upper layer hides a link or file below it, so
//!   no mount ever follows a link the image planted). The rest of the image's `/etc` stays.
//! - Build mode: `lowerdir=TOP:…:BOTTOM:SKELETON,upperdir=…,workdir=…`, `nosuid,nodev`, every
//!   layer and the upper folder idmapped (see [`crate::inside::idmap`]). The skeleton is the
//!   bottom layer, so where the image has a folder its own attributes win (a copy-up takes them),
//!   and mount points the image lacks never land in the upper folder. The image's own
//!   `/etc/passwd` and `group` stay (package managers add users to them); `hosts` and
//!   `resolv.conf` are bound over read-only (`resolv.conf` is the host's: builds have network).
//!
//! The layer folders are opened before anything is mounted and named as `/proc/self/fd/N`: a
//! layer under the host's `/tmp` (which the staging tmpfs covers) still works, and dozens of
//! layers fit the one page of mount options.

use std::fs;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{open, OFlag};
use nix::mount::MsFlags;
use nix::sys::stat::Mode;

use crate::inside::error::SetupError;
use crate::inside::idmap;
use crate::inside::syscalls::{Kernel, Syscalls};
use crate::protocol::{Setup, SetupRoot};
use crate::spec::WORKDIR;

/// The layers, opened while the host's paths are still reachable.
pub(crate) struct OpenedLayers {
    /// Topmost first; O_PATH folders, or idmapped detached mounts in build mode.
    layers: Vec<OwnedFd>,
    /// Build mode: the idmapped parent of the upper folder, and the upper folder's name in it.
    upper: Option<(OwnedFd, String)>,
    /// Build mode: the ids the user namespace maps.
    build_ids: Option<u32>,
    /// Root mode: the upper layer is a tmpfs PID 1 mounts (see [`scratch_upper`]).
    scratch_upper: bool,
}

/// The overlayfs `workdir` that goes with an upper folder: its sibling `NAME.work`.
pub(crate) fn overlay_workdir(upper: &Path) -> PathBuf {
    let mut name = upper.file_name().unwrap_or_default().to_os_string();
    name.push(".work");
    upper.with_file_name(name)
}

/// Opens the image's layer folders (and, in build mode, idmaps them and the upper folder through
/// `userns`). `None` for a sandbox on the host's root.
pub(crate) fn open_layers(
    setup: &Setup,
    userns: Option<&OwnedFd>,
) -> Result<Option<OpenedLayers>, SetupError> {
    let SetupRoot::Image {
        layers,
        upper,
        scratch_upper,
    } = &setup.root
    else {
        return Ok(None);
    };
    let mut opened = Vec::with_capacity(layers.len());
    for layer in layers {
        let fd = match userns {
            Some(ns) => idmap::idmapped_clone(layer, ns, true)?,
            None => open(
                layer,
                OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
                Mode::empty(),
            )
            .map_err(|errno| SetupError::ImageLayer {
                path: layer.display().to_string(),
                errno,
            })?,
        };
        opened.push(fd);
    }
    let upper = match (upper, userns) {
        (Some(upper), Some(ns)) => {
            let parent = upper.parent().unwrap_or(Path::new("/"));
            let name = upper
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            Some((idmap::idmapped_clone(parent, ns, false)?, name))
        }
        (Some(_), None) => return Err(SetupError::BuildUserns(Errno::EINVAL)),
        (None, _) => None,
    };
    if *scratch_upper && userns.is_none() {
        return Err(SetupError::BuildUserns(Errno::EINVAL));
    }
    Ok(Some(OpenedLayers {
        layers: opened,
        upper,
        build_ids: setup.build_ids,
        scratch_upper: *scratch_upper,
    }))
}

fn skel_err(path: &Path) -> impl FnOnce(std::io::Error) -> SetupError + '_ {
    move |source| SetupError::Skeleton {
        path: path.display().to_string(),
        source,
    }
}

/// Writes the skeleton layer into `skel` (a folder on the staging tmpfs). `dir_sources` tells,
/// for each extra mount, whether its source is a folder (the source may be under the host's
/// `/tmp`, which the staging tmpfs covers by now).
fn write_skeleton(
    setup: &Setup,
    skel: &Path,
    build: bool,
    dir_sources: &[bool],
) -> Result<(), SetupError> {
    let at = |p: &str| skel.join(p.trim_start_matches('/'));
    let dir = |p: &Path| fs::create_dir_all(p).map_err(skel_err(p));
    for d in ["/proc", "/dev", "/tmp", WORKDIR, "/etc"] {
        dir(&at(d))?;
    }
    let file = |p: &Path, text: &str| fs::write(p, text).map_err(skel_err(p));
    if build {
        // Mount points only: the real contents are bound over them.
        file(&at("/etc/hosts"), "")?;
        file(&at("/etc/resolv.conf"), "")?;
    } else {
        let (uid, gid) = (setup.uid, setup.gid);
        file(
            &at("/etc/passwd"),
            &format!("root:x:0:0:root:/root:/usr/sbin/nologin\nsandbox:x:{uid}:{gid}:sandbox:{WORKDIR}:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"),
        )?;
        file(
            &at("/etc/group"),
            &format!("root:x:0:\nsandbox:x:{gid}:\nnogroup:x:65534:\n"),
        )?;
        file(&at("/etc/hosts"), &hosts(setup))?;
        file(&at("/etc/resolv.conf"), &resolv_conf(setup))?;
        dir(&at("/var"))?;
        let var_tmp = at("/var/tmp");
        symlink("/tmp", &var_tmp).map_err(skel_err(&var_tmp))?;
    }
    // Destinations under the scratch mounts are made on those (fresh) tmpfs instead.
    let on_scratch = |p: &Path| {
        ["/tmp", "/dev/shm", WORKDIR]
            .iter()
            .any(|s| p.starts_with(s))
    };
    if let Some(alias) = &setup.workdir_alias {
        dir(&at(alias))?;
    }
    for (m, &is_dir) in setup.mounts.iter().zip(dir_sources) {
        if on_scratch(&m.dst) {
            continue;
        }
        let dst = at(&m.dst.to_string_lossy());
        if is_dir {
            dir(&dst)?;
        } else {
            if let Some(parent) = dst.parent() {
                dir(parent)?;
            }
            file(&dst, "")?;
        }
    }
    if let (true, Some(base)) = (build, setup.build_ids) {
        // The build program's root owns the skeleton, as it owns the image's idmapped files: a
        // copy-up of a skeleton folder then stores uid 0 in the upper folder.
        chown_tree(skel, base)?;
    }
    Ok(())
}

fn chown_tree(path: &Path, id: u32) -> Result<(), SetupError> {
    std::os::unix::fs::lchown(path, Some(id), Some(id)).map_err(skel_err(path))?;
    if fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()) {
        for entry in fs::read_dir(path).map_err(skel_err(path))? {
            chown_tree(&entry.map_err(skel_err(path))?.path(), id)?;
        }
    }
    Ok(())
}

/// The sandbox's `/etc/hosts`: itself and loopback.
pub(crate) fn hosts(setup: &Setup) -> String {
    format!(
        "127.0.0.1\tlocalhost {h}\n::1\tlocalhost ip6-localhost {h}\n",
        h = setup.hostname
    )
}

/// The host's resolver configuration when the sandbox has network, else none.
pub(crate) fn resolv_conf(setup: &Setup) -> String {
    if setup.network {
        fs::read_to_string("/etc/resolv.conf").unwrap_or_default()
    } else {
        String::new()
    }
}

/// The overlayfs options for `layers` (topmost first) with the skeleton on top or at the bottom.
fn overlay_options(
    skel: &Path,
    layers: &[String],
    build: Option<(String, String)>,
    userxattr: bool,
) -> String {
    let skel = skel.display().to_string();
    let lower: Vec<&str> = match build {
        Some(_) => layers
            .iter()
            .map(String::as_str)
            .chain([skel.as_str()])
            .collect(),
        None => [skel.as_str()]
            .into_iter()
            .chain(layers.iter().map(String::as_str))
            .collect(),
    };
    let mut opts = format!("lowerdir={}", lower.join(":"));
    if let Some((upper, work)) = build {
        opts.push_str(&format!(",upperdir={upper},workdir={work}"));
    }
    if userxattr {
        opts.push_str(",userxattr");
    }
    opts
}

/// Writes the skeleton under `staging` and mounts the image root at `staging/root`; returns it.
pub(crate) fn mount_root(
    setup: &Setup,
    staging: &Path,
    opened: &OpenedLayers,
    dir_sources: &[bool],
) -> Result<PathBuf, SetupError> {
    let build = opened.upper.is_some() || opened.scratch_upper;
    let skel = staging.join("skel");
    write_skeleton(setup, &skel, build, dir_sources)?;
    let root = staging.join("root");
    fs::create_dir_all(&root).map_err(skel_err(&root))?;
    let fd_path = |fd: &OwnedFd| format!("/proc/self/fd/{}", fd.as_raw_fd());
    let layers: Vec<String> = opened.layers.iter().map(fd_path).collect();
    let upper_dir = match (&opened.upper, opened.build_ids) {
        (Some((parent, name)), _) => Some(PathBuf::from(fd_path(parent)).join(name)),
        (None, Some(base)) if opened.scratch_upper => {
            Some(scratch_upper(&staging.join("upper"), setup, base)?)
        }
        _ => None,
    };
    let upper = upper_dir.map(|dir| {
        (
            dir.display().to_string(),
            overlay_workdir(&dir).display().to_string(),
        )
    });
    let rootless = setup.userns.is_some();
    let plan = OverlayPlan {
        target: root.clone(),
        layers: layers.len(),
        options: overlay_options(&skel, &layers, upper, rootless),
        build_ids: opened.build_ids.filter(|_| build),
        rootless,
    };
    mount_overlay(&mut Kernel::for_init(), &plan)?;
    Ok(root)
}

/// Root mode's upper layer: a tmpfs of the sandbox's disk size at `at` (on the staging tmpfs,
/// which only this mount namespace sees), holding the upper folder and its overlayfs work
/// folder, both owned by the namespace's root (`base`). Not idmapped: what the programs write
/// is stored with their host ids (the range's), and it goes with the sandbox. Its pages are
/// charged to the writer's memory cgroup, the sandbox's, like the other scratch mounts.
fn scratch_upper(at: &Path, setup: &Setup, base: u32) -> Result<PathBuf, SetupError> {
    fs::create_dir_all(at).map_err(skel_err(at))?;
    nix::mount::mount(
        Some("tmpfs"),
        at,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(
            format!(
                "size={},nr_inodes={},mode=0755",
                setup.disk_bytes, setup.inodes
            )
            .as_str(),
        ),
    )
    .map_err(SetupError::ScratchUpper)?;
    let upper = at.join("up");
    for dir in [upper.clone(), overlay_workdir(&upper)] {
        fs::create_dir(&dir).map_err(skel_err(&dir))?;
        std::os::unix::fs::lchown(&dir, Some(base), Some(base)).map_err(skel_err(&dir))?;
    }
    Ok(upper)
}

/// The one overlayfs mount of an image root.
struct OverlayPlan {
    target: PathBuf,
    layers: usize,
    options: String,
    /// Build mode: mount with these filesystem ids (see [`mount_overlay`]).
    build_ids: Option<u32>,
    rootless: bool,
}

/// Mounts the overlay. In build mode overlayfs records its mounter's credentials and creates its
/// work folder, copy-ups and whiteouts with them; through the idmapped upper folder those must be
/// an id of the range, so PID 1 mounts with the range's first id as filesystem ids (keeping its
/// capabilities: `SECBIT_NO_SETUID_FIXUP`) — and always goes back to root's ids and the default
/// secure bits afterwards, whether the mount worked or not.
fn mount_overlay(sys: &mut impl Syscalls, plan: &OverlayPlan) -> Result<(), SetupError> {
    let mut flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    if plan.build_ids.is_none() {
        flags |= MsFlags::MS_RDONLY;
    }
    if let Some(base) = plan.build_ids {
        sys.set_securebits(libc::SECBIT_NO_SETUID_FIXUP as u32)
            .map_err(SetupError::BuildFsIds)?;
        sys.set_fs_ids(base);
    }
    let mounted = sys.mount_overlay(&plan.target, flags, &plan.options);
    if plan.build_ids.is_some() {
        sys.set_fs_ids(0);
        sys.set_securebits(0).map_err(SetupError::BuildFsIds)?;
    }
    mounted.map_err(|errno| SetupError::Overlay {
        layers: plan.layers,
        mode: if plan.build_ids.is_some() { ", build mode" } else { "" },
        errno,
        hint: if plan.rootless {
            " (rootless: this kernel may not allow overlayfs in a user namespace — Linux 5.11+ — or the layers are not readable by this user; run corral as root)"
        } else {
            ""
        },
    })
}

/// Refuses a mount point inside the image root that is reached through a symlink or is missing:
/// `rel` (absolute inside the sandbox) must resolve beneath `root` without following any link.
pub(crate) fn check_mount_point(root: &Path, rel: &str) -> Result<(), SetupError> {
    use nix::fcntl::{openat2, OpenHow, ResolveFlag};
    let bad = |why: String| SetupError::ImageMountPoint {
        path: rel.to_string(),
        why,
    };
    let root_fd = open(
        root,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| bad(format!("opening the root: {e}")))?;
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC)
        .resolve(
            ResolveFlag::RESOLVE_BENEATH
                | ResolveFlag::RESOLVE_NO_SYMLINKS
                | ResolveFlag::RESOLVE_NO_MAGICLINKS,
        );
    let path = rel.trim_start_matches('/');
    let fd = openat2(&root_fd, if path.is_empty() { "." } else { path }, how).map_err(|e| {
        bad(match e {
            Errno::ELOOP => "it is a symlink, or a folder on the way is".into(),
            Errno::ENOENT => "it does not exist".into(),
            e => e.to_string(),
        })
    })?;
    let st = nix::sys::stat::fstat(&fd).map_err(|e| bad(e.to_string()))?;
    let kind =
        nix::sys::stat::SFlag::from_bits_truncate(st.st_mode) & nix::sys::stat::SFlag::S_IFMT;
    if kind != nix::sys::stat::SFlag::S_IFDIR && kind != nix::sys::stat::SFlag::S_IFREG {
        return Err(bad("it is neither a folder nor a file".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inside::syscalls::recording::Recording;

    fn plan(build_ids: Option<u32>) -> OverlayPlan {
        OverlayPlan {
            target: "/tmp/root".into(),
            layers: 1,
            options: "lowerdir=/tmp/skel:/proc/self/fd/5".into(),
            build_ids,
            rootless: false,
        }
    }

    /// A read-only run: one read-only, nosuid, nodev overlay mount, nothing else.
    #[test]
    fn a_run_mounts_a_read_only_overlay() {
        let mut sys = Recording::default();
        mount_overlay(&mut sys, &plan(None)).unwrap();
        assert_eq!(
            sys.calls,
            ["mount overlay /tmp/root MsFlags(MS_RDONLY | MS_NOSUID | MS_NODEV) lowerdir=/tmp/skel:/proc/self/fd/5"]
        );
    }

    /// Build mode: the range's first id as filesystem ids around the mount, and back to root's —
    /// also when the mount fails (PID 1 must never keep another identity).
    #[test]
    fn build_mode_mounts_with_the_ranges_ids_and_always_restores_them() {
        let expected = [
            "PR_SET_SECUREBITS 0x4",
            "setfsgid+setfsuid(1879048192)",
            "mount overlay /tmp/root MsFlags(MS_NOSUID | MS_NODEV) lowerdir=/tmp/skel:/proc/self/fd/5",
            "setfsgid+setfsuid(0)",
            "PR_SET_SECUREBITS 0x0",
        ];
        let mut sys = Recording::default();
        mount_overlay(&mut sys, &plan(Some(0x7000_0000))).unwrap();
        assert_eq!(sys.calls, expected);
        let mut sys = Recording {
            fail: Some("mount overlay"),
            ..Recording::default()
        };
        let err = mount_overlay(&mut sys, &plan(Some(0x7000_0000))).unwrap_err();
        assert!(matches!(err, SetupError::Overlay { .. }), "{err}");
        assert_eq!(sys.calls, expected);
    }

    #[test]
    fn the_skeleton_is_on_top_for_runs_and_at_the_bottom_for_builds() {
        let layers = vec!["/proc/self/fd/5".to_string(), "/proc/self/fd/6".into()];
        assert_eq!(
            overlay_options(Path::new("/tmp/skel"), &layers, None, false),
            "lowerdir=/tmp/skel:/proc/self/fd/5:/proc/self/fd/6"
        );
        assert_eq!(
            overlay_options(
                Path::new("/tmp/skel"),
                &layers,
                Some(("/proc/self/fd/7/up".into(), "/proc/self/fd/7/up.work".into())),
                false
            ),
            "lowerdir=/proc/self/fd/5:/proc/self/fd/6:/tmp/skel,upperdir=/proc/self/fd/7/up,workdir=/proc/self/fd/7/up.work"
        );
        assert!(overlay_options(Path::new("/s"), &layers, None, true).ends_with(",userxattr"));
        assert_eq!(
            overlay_workdir(Path::new("/data/builds/step3")),
            Path::new("/data/builds/step3.work")
        );
    }
}
