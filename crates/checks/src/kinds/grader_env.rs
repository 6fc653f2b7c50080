//! A Gradescope autograder's environment: its `setup.sh` run once, as root of a build sandbox
//! (corral's image sandbox in build mode: the base image's layers under a writable upper folder,
//! root of its own user namespace, network on, as Gradescope runs it), the upper folder kept as
//! a layer on top of the base. Cached by the autograder's digest and the base's digest: the
//! second submission starts at once, a changed autograder or base builds again.
//!
//! The cache is a folder per key under the data folder (`graders/gradescope/KEY/layer`), made
//! under an exclusive lock (concurrent graders of one autograder build once) in a temporary
//! folder renamed into place only when `setup.sh` succeeded, so a failed or interrupted build
//! is never used.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use corral_sandbox::{ImageRoot, Millis, Mount, NoSink, Root, RunSpec, Size, Status};
use sha2::{Digest, Sha256};

use crate::contracts::bundle::Bundle;

/// The environment an autograder runs in.
#[derive(Debug, Clone)]
pub struct Environment {
    pub root: ImageRoot,
    /// Whether this call ran `setup.sh` (false: the cached layer was used).
    pub built_now: bool,
    /// `sha256:…` of (autograder digest, base digest).
    pub key: String,
}

/// How Gradescope's image build runs setup.sh (`gradescope/autograder_samples`'
/// `manual_docker/Dockerfile`: `RUN apt-get update && bash /autograder/source/setup.sh &&
/// apt-get clean && rm -rf /var/lib/apt/lists/*`), from `/`, where published autograders
/// expect it (one makes its `venv` there by a relative path and sources `/venv`): the package
/// lists first, so a setup.sh may `apt-get install` straight away (Gradescope's own samples
/// do); the lists go again afterwards. Where the base has no apt-get, setup.sh alone; where
/// the update fails (no mirror in reach), setup.sh still runs and says why it may fail.
const SETUP_COMMAND: &str = "if command -v apt-get >/dev/null 2>&1; then \
    apt-get update || echo 'corral: apt-get update failed; setup.sh runs without fresh package lists' >&2; \
  fi; \
  cd / && bash /autograder/source/setup.sh || exit $?; \
  if command -v apt-get >/dev/null 2>&1; then apt-get clean; rm -rf /var/lib/apt/lists/*; fi";

/// The key of an autograder on a base.
pub fn key(bundle: &Bundle, base: &ImageRoot) -> String {
    let mut h = Sha256::new();
    h.update(b"corral gradescope environment v1\0");
    h.update(bundle.digest.as_bytes());
    h.update(b"\0");
    h.update(base.digest.as_bytes());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The environment's name and digest, as results record the image a check ran in: the digest
/// is the key, so it changes with the autograder and with the base's digest (a base name moved
/// to another image records another environment, and `corral grade` grades again).
pub fn recorded(bundle: &Bundle, base: &ImageRoot) -> crate::image_root::UsedImage {
    crate::image_root::UsedImage {
        name: format!("{}+autograder", base.name),
        digest: format!("sha256:{}", key(bundle, base)),
    }
}

/// An exclusive `flock`, held while the returned file lives.
fn lock(path: &Path) -> std::io::Result<std::fs::File> {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)?;
    // SAFETY: flock on a descriptor this function owns; no memory is involved.
    let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(f)
}

/// Clears what would make a file of the layer run with privileges on the host: setuid and
/// setgid bits and file capabilities (`security.capability`). `setup.sh` is root in its
/// sandbox and may leave a setuid-root shell; the layer lives on the host's disk, where a local
/// user could otherwise run it. (Inside sandboxes every mount is `nosuid` anyway; the images
/// store never keeps these bits either.) Links are never followed.
fn defuse(dir: &Path, depth: usize) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;
    if depth > 256 {
        return Err(std::io::Error::other("folders nested too deep"));
    }
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let ft = e.file_type()?;
        if ft.is_dir() {
            defuse(&e.path(), depth + 1)?;
        } else if ft.is_file() {
            let path = e.path();
            let mode = std::fs::symlink_metadata(&path)?.permissions().mode();
            if mode & 0o6000 != 0 {
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode & 0o1777))?;
            }
            let c = std::ffi::CString::new(path.as_os_str().as_bytes())
                .map_err(std::io::Error::other)?;
            // SAFETY: lremovexattr with NUL-terminated strings this function owns.
            let rc = unsafe { libc::lremovexattr(c.as_ptr(), c"security.capability".as_ptr()) };
            if rc != 0 {
                let err = std::io::Error::last_os_error();
                if err.raw_os_error() != Some(libc::ENODATA) {
                    return Err(err);
                }
            }
        }
    }
    Ok(())
}

/// The build run of `setup.sh` (in `source`) on `base`, its changes landing in `upper`.
fn setup_spec(base: &ImageRoot, upper: &Path, source: &Path) -> RunSpec {
    let mut spec = RunSpec::new(vec!["/bin/sh".into(), "-c".into(), SETUP_COMMAND.into()]);
    spec.root = Root::Image(ImageRoot {
        upper: Some(upper.to_path_buf()),
        ..base.clone()
    });
    spec.network = true;
    spec.mounts = vec![Mount {
        src: source.to_path_buf(),
        dst: PathBuf::from("/autograder/source"),
        writable: false,
    }];
    spec.env = crate::contracts::gradescope::ENV
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    // Gradescope gives setup.sh minutes; package installs need memory and processes.
    spec.limits.wall_time = Millis(Duration::from_secs(900));
    spec.limits.cpu_time = Millis(Duration::from_secs(600));
    spec.limits.memory = Size(2 << 30);
    spec.limits.pids = 512;
    spec.limits.output = Size(16 << 20);
    spec.limits.disk = Size(1 << 30);
    spec.limits.file_size = Size(1 << 30);
    spec
}

/// The environment of `bundle` on `base`: the cached layer, or `setup.sh` run now (in a fresh
/// build sandbox of `host`) when there is none. `cache` is the folder of every key's layer.
pub fn prepare(
    host: &std::sync::Arc<corral_sandbox::Host>,
    bundle: &Bundle,
    base: &ImageRoot,
    cache: &Path,
) -> Result<Environment, String> {
    let key = key(bundle, base);
    let io = |what: &str, e: std::io::Error| format!("{what}: {e}");
    std::fs::create_dir_all(cache).map_err(|e| io(&format!("creating {}", cache.display()), e))?;
    let done = cache.join(&key);
    let _held = lock(&cache.join(format!("{key}.lock"))).map_err(|e| io("locking the cache", e))?;
    let recorded = recorded(bundle, base);
    let layered = |layer: PathBuf| ImageRoot {
        name: recorded.name.clone(),
        digest: recorded.digest.clone(),
        layers: std::iter::once(layer)
            .chain(base.layers.iter().cloned())
            .collect(),
        env: base.env.clone(),
        working_dir: base.working_dir.clone(),
        upper: None,
        as_root: false,
        claim: base.claim.clone(),
    };
    let failed = cache.join(format!("{key}.failed"));
    if let Some(why) = recent_failure(&failed) {
        return Err(why);
    }
    if done.join("layer").is_dir() {
        tracing::debug!(%key, "gradescope environment cached");
        return Ok(Environment {
            root: layered(done.join("layer")),
            built_now: false,
            key: format!("sha256:{key}"),
        });
    }
    let started = Instant::now();
    let work = tempfile::Builder::new()
        .prefix(&format!("{key}.building-"))
        .tempdir_in(cache)
        .map_err(|e| io("creating the build folder", e))?;
    let upper = work.path().join("layer");
    let source = work.path().join("source");
    std::fs::create_dir(&upper).map_err(|e| io("creating the layer folder", e))?;
    std::fs::create_dir(&source).map_err(|e| io("creating the source folder", e))?;
    bundle
        .write_to(&source)
        .map_err(|e| io("writing the autograder", e))?;
    // Gradescope's build runs `dos2unix` on setup.sh first.
    let setup_sh = source.join("setup.sh");
    if let Ok(script) = std::fs::read(&setup_sh) {
        std::fs::write(
            &setup_sh,
            crate::contracts::gradescope::unix_line_endings(&script),
        )
        .map_err(|e| io("writing setup.sh", e))?;
    }
    // world-readable: the build's root is not the host's root.
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(work.path(), std::fs::Permissions::from_mode(0o755));
        let _ = std::fs::set_permissions(&source, std::fs::Permissions::from_mode(0o755));
    }
    let spec = setup_spec(base, &upper, &source);
    tracing::info!(%key, base = %base.name, "running the autograder's setup.sh");
    let outcome = corral_sandbox::run_fresh(host, &spec, &mut NoSink);
    if outcome.status != Status::Ok {
        let text = outcome.script.text();
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        let tail = lines[lines.len().saturating_sub(20)..].join("\n");
        // Its last line on the first (a gradebook's reason is one line), then the tail.
        let why = format!(
            "setup.sh failed on {} ({}): {}\n{tail}",
            base.name,
            outcome
                .reason()
                .or_else(|| outcome.exit_code.map(|c| format!("exit code {c}")))
                .unwrap_or_else(|| outcome.status.as_str().to_string()),
            lines.last().map_or("", |l| l.trim())
        );
        let _ = std::fs::write(&failed, &why);
        return Err(why);
    }
    defuse(&upper, 0).map_err(|e| io("clearing setuid bits in the layer", e))?;
    let target = work.path().join("ready");
    std::fs::create_dir(&target).map_err(|e| io("finishing the build", e))?;
    std::fs::rename(&upper, target.join("layer")).map_err(|e| io("finishing the build", e))?;
    std::fs::rename(&target, &done).map_err(|e| io("finishing the build", e))?;
    let _ = std::fs::remove_file(&failed);
    tracing::info!(%key, secs = started.elapsed().as_secs_f64(), "gradescope environment built");
    Ok(Environment {
        root: layered(done.join("layer")),
        built_now: true,
        key: format!("sha256:{key}"),
    })
}

/// How long a failed `setup.sh` stands for its autograder on its base: the same build fails
/// the same way for every student of a batch (a package that does not exist), so it is not run
/// again for each; a transient failure (the package index down) is tried again after this.
const FAILURE_STANDS: Duration = Duration::from_secs(600);

/// The failure recorded at `failed` when it is recent (see [`FAILURE_STANDS`]), saying so.
fn recent_failure(failed: &Path) -> Option<String> {
    let age = std::fs::metadata(failed)
        .ok()?
        .modified()
        .ok()?
        .elapsed()
        .ok()?;
    if age >= FAILURE_STANDS {
        return None;
    }
    let why = std::fs::read_to_string(failed).ok()?;
    let (first, rest) = why.split_once('\n').unwrap_or((&why, ""));
    Some(format!(
        "{first} (the build of this autograder on this base failed {} s ago and is tried again \
         {} minutes after it failed, or once {} is removed)\n{rest}",
        age.as_secs(),
        FAILURE_STANDS.as_secs() / 60,
        failed.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A recorded failure stands for a while, saying when it happened; an old one does not.
    #[test]
    fn a_recent_setup_failure_stands_and_an_old_one_is_tried_again() {
        let t = tempfile::tempdir().unwrap();
        let failed = t.path().join("k.failed");
        assert_eq!(recent_failure(&failed), None);
        std::fs::write(
            &failed,
            "setup.sh failed on b (exit code 3): E: no such package\ntail",
        )
        .unwrap();
        let why = recent_failure(&failed).unwrap();
        assert!(
            why.starts_with("setup.sh failed on b (exit code 3): E: no such package (the build of this autograder on this base failed 0 s ago")
                && why.ends_with("is removed)\ntail"),
            "{why}"
        );
        let old = std::time::SystemTime::now() - FAILURE_STANDS - Duration::from_secs(1);
        std::fs::File::options()
            .write(true)
            .open(&failed)
            .unwrap()
            .set_modified(old)
            .unwrap();
        assert_eq!(recent_failure(&failed), None);
    }

    /// An unmodified `setup.sh` that `pip3 install`s works on a Debian base (PEP 668), as on
    /// Gradescope's images: the build run says pip may.
    #[test]
    fn setup_sh_may_pip_install_into_the_system_python() {
        let base = ImageRoot {
            name: "debian:bookworm".into(),
            digest: format!("sha256:{}", "ab".repeat(32)),
            layers: vec![PathBuf::from("/nonexistent/layer")],
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            working_dir: None,
            upper: None,
            as_root: false,
            claim: Default::default(),
        };
        let spec = setup_spec(&base, Path::new("/tmp/upper"), Path::new("/tmp/source"));
        assert!(
            spec.env
                .contains(&("PIP_BREAK_SYSTEM_PACKAGES".to_string(), "1".to_string())),
            "{:?}",
            spec.env
        );
        assert!(spec.network);
    }
}
