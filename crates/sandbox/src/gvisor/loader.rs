//! The init under gVisor is loaded by the host's dynamic loader and libraries, not the image's.
//!
//! runsc executes the container's process inside the container's root, and corral's binary is
//! dynamically linked: started plainly, the *image's* loader, libc and `/etc/ld.so.preload`
//! would run inside PID 1 (root in gVisor's kernel, before any of its confinement), and an
//! image without a glibc as new as the host's, or without libseccomp, could not start the init
//! at all. So the bundle binds a folder holding copies of exactly the loader and libraries this
//! process has loaded, and the container's process is that loader, told to take its libraries
//! from there only (`--library-path`, `--inhibit-cache`); the image's `/etc/ld.so.preload` is
//! whited out of the root (`bundle.rs`), which the loader reads whatever its arguments.
//!
//! Written by hand: the list is what the dynamic linker reports for this process
//! (`dl_iterate_phdr`), which no crate wraps for this.

use std::ffi::CStr;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::error::SandboxError;

/// Where the folder of libraries appears in the container (in `/tmp`, like corral's binary;
/// init unmounts both before anything else runs there).
pub(crate) const LIB_IN_CONTAINER: &str = "/tmp/.corral-lib";

/// The host folder of libraries and the loader's file name in it.
#[derive(Debug, Clone)]
pub(crate) struct InitLibraries {
    pub dir: PathBuf,
    pub loader: String,
}

impl InitLibraries {
    /// The container process's argv: the loader running corral's binary with `init_args`.
    pub(crate) fn argv(&self, init_in_container: &str, init_args: &[&str]) -> Vec<String> {
        let mut argv = vec![
            format!("{LIB_IN_CONTAINER}/{}", self.loader),
            "--inhibit-cache".to_string(),
            "--library-path".to_string(),
            LIB_IN_CONTAINER.to_string(),
            init_in_container.to_string(),
        ];
        argv.extend(init_args.iter().map(|s| s.to_string()));
        argv
    }
}

/// The loader (this binary's `PT_INTERP`) and every shared object this process has loaded.
fn loaded_objects() -> (Option<PathBuf>, Vec<PathBuf>) {
    struct Found {
        interp: Option<PathBuf>,
        objects: Vec<PathBuf>,
    }
    extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: the dynamic linker passes a valid `dl_phdr_info` for the duration of the call
        // and `data` is the `&mut Found` given to `dl_iterate_phdr` below, used by nothing else
        // meanwhile; the program headers and the names it points to are mapped for the
        // process's lifetime (the main program's and the libraries' are never unloaded).
        unsafe {
            let found = &mut *(data as *mut Found);
            let info = &*info;
            let name = if info.dlpi_name.is_null() {
                ""
            } else {
                CStr::from_ptr(info.dlpi_name).to_str().unwrap_or("")
            };
            if name.is_empty() {
                // The main program: its PT_INTERP names the loader.
                for i in 0..info.dlpi_phnum as usize {
                    let ph = &*info.dlpi_phdr.add(i);
                    if ph.p_type == libc::PT_INTERP {
                        let at =
                            (info.dlpi_addr as usize + ph.p_vaddr as usize) as *const libc::c_char;
                        if let Ok(s) = CStr::from_ptr(at).to_str() {
                            found.interp = Some(PathBuf::from(s));
                        }
                    }
                }
            } else if name.starts_with('/') {
                found.objects.push(PathBuf::from(name));
            }
        }
        0
    }
    let mut found = Found {
        interp: None,
        objects: Vec::new(),
    };
    // SAFETY: `each` matches the callback type and only reads what the linker hands it;
    // `found` outlives the call.
    unsafe {
        libc::dl_iterate_phdr(Some(each), &mut found as *mut Found as *mut libc::c_void);
    }
    (found.interp, found.objects)
}

/// The folder of copies, made once per host and set of libraries under `base` (named by a hash of
/// the files' paths, sizes and times, so processes of the same binary share it and a library
/// upgrade makes a new one).
pub(crate) fn init_libraries(base: &Path) -> Result<InitLibraries, SandboxError> {
    static MADE: OnceLock<Result<InitLibraries, String>> = OnceLock::new();
    MADE.get_or_init(|| make(base).map_err(|e| e.to_string()))
        .clone()
        .map_err(|e| SandboxError::Init(format!("preparing the init's libraries for gVisor: {e}")))
}

fn make(base: &Path) -> std::io::Result<InitLibraries> {
    use std::hash::{Hash, Hasher};
    use std::os::unix::fs::MetadataExt;
    let (interp, mut objects) = loaded_objects();
    let interp = interp
        .ok_or_else(|| std::io::Error::other("this binary names no dynamic loader (PT_INTERP)"))?;
    if !objects.contains(&interp) {
        objects.push(interp.clone());
    }
    let mut files: Vec<(String, PathBuf, std::fs::Metadata)> = Vec::new();
    let mut digest = std::hash::DefaultHasher::new();
    for path in objects {
        let Some(name) = path
            .file_name()
            .and_then(|n| n.to_str())
            .map(str::to_string)
        else {
            continue;
        };
        // Followed: the loader looks for the name it was asked for (a SONAME link's name).
        let meta = std::fs::metadata(&path)?;
        if !meta.is_file() || files.iter().any(|(n, _, _)| *n == name) {
            continue;
        }
        (&name, &path, meta.len(), meta.mtime()).hash(&mut digest);
        files.push((name, path, meta));
    }
    let loader = interp
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| std::io::Error::other("the loader's path has no file name"))?
        .to_string();
    let key = format!("{:016x}", digest.finish());
    let dir = base.join(format!("lib-{key}"));
    if !dir.is_dir() {
        std::fs::create_dir_all(base)?;
        let tmp = base.join(format!(".lib-{key}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir(&tmp)?;
        for (name, path, _) in &files {
            std::fs::copy(path, tmp.join(name))?;
        }
        // Another process may have made it meanwhile: theirs is the same.
        if let Err(e) = std::fs::rename(&tmp, &dir) {
            let _ = std::fs::remove_dir_all(&tmp);
            if !dir.is_dir() {
                return Err(e);
            }
        }
    }
    Ok(InitLibraries { dir, loader })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loader_and_libc_are_among_the_copies() {
        let base = tempfile::tempdir().unwrap();
        let libs = make(base.path()).unwrap();
        assert!(libs.loader.starts_with("ld-"), "{}", libs.loader);
        let names: Vec<String> = std::fs::read_dir(&libs.dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.contains(&libs.loader), "{names:?}");
        assert!(names.iter().any(|n| n.starts_with("libc.so")), "{names:?}");
        // Made once: a second call finds the same folder.
        assert_eq!(make(base.path()).unwrap().dir, libs.dir);
        let argv = libs.argv("/tmp/.corral-init", &["__sandbox-init"]);
        assert_eq!(argv[0], format!("{LIB_IN_CONTAINER}/{}", libs.loader));
        assert_eq!(&argv[4..], ["/tmp/.corral-init", "__sandbox-init"]);
    }
}
