//! What check50 problems need from the host when they run on its root, and whether it is there:
//! `clang` (what `check50.c.compile` runs unless told another compiler), CS50's C library
//! (`lcs50=True`) and Python's `cs50` module (what CS50's Python problems' programs import).
//! Without them every student's program fails to compile or to start, which check50 reports as
//! the student's failure; so a problem that needs one refuses to load ([`missing_for`]) and
//! `corral doctor` lists them ([`probe`]). So is a staff `.pyc` another Python compiled
//! ([`foreign_pyc`]).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Where check50 (and what it needs) is installed for `/usr/bin/python3` (`scripts/setup`).
pub const SITE: &str = "/usr/local/lib/corral/python";

/// The folders a sandbox's `PATH` reaches on the host root (its `/usr` is the host's).
const BIN_DIRS: [&str; 3] = ["/usr/local/bin", "/usr/bin", "/bin"];
const INCLUDE_DIRS: [&str; 2] = ["/usr/local/include", "/usr/include"];
const LIB_DIRS: [&str; 4] = [
    "/usr/local/lib",
    "/usr/lib",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
];

/// A tool check50 problems use, found (with what was found) or not.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    pub name: &'static str,
    pub found: Result<String, String>,
    /// What needs it, and how to get it.
    pub needed_by: &'static str,
}

/// `clang`, where a program's `PATH` finds it.
pub fn clang() -> Option<PathBuf> {
    BIN_DIRS
        .iter()
        .map(|d| Path::new(d).join("clang"))
        .find(|p| p.is_file())
}

/// CS50's C library: its header and the library itself.
pub fn libcs50() -> Option<PathBuf> {
    let header = INCLUDE_DIRS
        .iter()
        .any(|d| Path::new(d).join("cs50.h").is_file());
    let lib = LIB_DIRS.iter().find_map(|d| {
        ["libcs50.so", "libcs50.a"]
            .iter()
            .map(|f| Path::new(d).join(f))
            .find(|p| p.exists())
    });
    lib.filter(|_| header)
}

/// Whether `python` can import the module `name` (a question the host's own Python answers).
fn python_module(python: &Path, name: &str) -> Result<String, String> {
    let out = Command::new(python)
        .args(["-I", "-c"])
        .arg(format!(
            "import importlib.util as u; s = u.find_spec({name:?}); print(s.origin if s else '')"
        ))
        .output()
        .map_err(|e| format!("{}: {e}", python.display()))?;
    let origin = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if out.status.success() && !origin.is_empty() {
        Ok(origin)
    } else {
        Err("not importable".into())
    }
}

/// The version of check50 installed in `site` (corral's own copy, `scripts/setup`).
fn check50_version(site: &Path) -> Result<String, String> {
    let dist = std::fs::read_dir(site)
        .map_err(|e| format!("{}: {e}", site.display()))?
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .find(|n| n.starts_with("check50-") && n.ends_with(".dist-info"));
    match dist {
        Some(d) => Ok(format!(
            "{} ({})",
            &d["check50-".len()..d.len() - ".dist-info".len()],
            site.display()
        )),
        None => Err(format!("not installed under {}", site.display())),
    }
}

/// What check50 problems on the host root may need, each found or not.
pub fn probe(site: &Path, python: &Path) -> Vec<Tool> {
    let path = |p: Option<PathBuf>, what: &str| {
        p.map(|p| p.display().to_string())
            .ok_or_else(|| format!("missing: no {what}"))
    };
    vec![
        Tool {
            name: "check50",
            found: check50_version(site),
            needed_by: "every check50 check (scripts/setup installs it)",
        },
        Tool {
            name: "clang",
            found: path(clang(), "clang under /usr/local/bin, /usr/bin or /bin"),
            needed_by: "check50.c.compile without cc= (apt-get install clang)",
        },
        Tool {
            name: "libcs50",
            found: path(libcs50(), "cs50.h and libcs50 under /usr/local or /usr"),
            needed_by: "check50.c.compile(..., lcs50=True) (build CS50's libcs50, make install)",
        },
        Tool {
            name: "python cs50",
            found: python_module(python, "cs50"),
            needed_by: "Python programs that `import cs50` (pip install cs50 for /usr/bin/python3)",
        },
    ]
}

/// What a problem's checks file `src` needs that this host lacks, as one sentence per tool.
/// A problem that names its own compiler (`cc=`, or `check50.c.CC = ...`) needs no clang.
pub fn missing_for(src: &str) -> Vec<String> {
    let compiles = src.contains("c.compile(");
    let own_compiler =
        src.contains("cc=") || src.contains("cc =") || src.contains("CC =") || src.contains("CC=");
    let lcs50 = src.contains("lcs50=True") || src.contains("lcs50 = True");
    let mut missing = Vec::new();
    if compiles && !own_compiler && clang().is_none() {
        missing.push(
            "it compiles C with check50.c.compile, which runs clang, and this host has no clang \
             (apt-get install clang; or give check50.c.compile a compiler this host has, \
             cc=\"gcc\"; or name an image that has clang)"
                .to_string(),
        );
    }
    if compiles && lcs50 && libcs50().is_none() {
        missing.push(
            "it links with CS50's library (lcs50=True), and this host has no libcs50 (cs50.h \
             and libcs50 under /usr/local or /usr: build and install CS50's libcs50; or name an \
             image that has it)"
                .to_string(),
        );
    }
    missing
}

/// The bytecode magic of `python` (what starts every `.pyc` it writes and can load), asked once.
fn pyc_magic(python: &Path) -> Option<[u8; 4]> {
    static MAGIC: std::sync::OnceLock<Option<[u8; 4]>> = std::sync::OnceLock::new();
    *MAGIC.get_or_init(|| {
        let out = Command::new(python)
            .args(["-I", "-c"])
            .arg("import importlib.util, sys; sys.stdout.buffer.write(importlib.util.MAGIC_NUMBER)")
            .output()
            .ok()?;
        out.stdout.get(..4)?.try_into().ok()
    })
}

/// A `.pyc` among `files` (paths under `dir`) that `python` cannot load: compiled by another
/// Python version (CS50P's `tests/` problems ship staff `.pyc` files), which on the host root
/// fails every student's check as a crash of their own program. `None` when all load, or when
/// `python` cannot be asked.
pub fn foreign_pyc(python: &Path, dir: &Path, files: &[String]) -> Option<String> {
    let magic = pyc_magic(python)?;
    files.iter().filter(|f| f.ends_with(".pyc")).find_map(|f| {
        let mut head = [0u8; 4];
        let mut file = std::fs::File::open(dir.join(f)).ok()?;
        std::io::Read::read_exact(&mut file, &mut head).ok()?;
        (head != magic).then(|| {
            format!(
                "{f} was compiled by another Python version than {} (its bytecode magic is \
                 {:02x}{:02x}{:02x}{:02x}, that Python's {:02x}{:02x}{:02x}{:02x}): every \
                 student's run would fail; compile it with that Python, or name an image whose \
                 Python wrote it",
                python.display(),
                head[0],
                head[1],
                head[2],
                head[3],
                magic[0],
                magic[1],
                magic[2],
                magic[3]
            )
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_problem_needs_clang_only_when_it_compiles_with_checks_default_compiler() {
        let needs_clang = |src: &str| {
            // What this host has decides whether anything is missing; the rule is what is tested.
            missing_for(src).iter().any(|m| m.contains("no clang")) == clang().is_none()
        };
        assert!(needs_clang("check50.c.compile(\"hello.c\")\n"));
        assert!(needs_clang("check50.c.compile(\"hello.c\", lcs50=True)\n"));
        assert!(missing_for("check50.c.compile(\"hello.c\", cc=\"gcc\")\n").is_empty());
        assert!(missing_for("check50.c.CC = \"gcc\"\ncheck50.c.compile(\"a.c\")\n").is_empty());
        assert!(missing_for("check50.run(\"python3 a.py\")\n").is_empty());
        let lib = missing_for("check50.c.compile(\"a.c\", cc=\"gcc\", lcs50=True)\n");
        assert_eq!(lib.len(), usize::from(libcs50().is_none()), "{lib:?}");
    }

    /// A `.pyc` of another Python is named; one this Python wrote is fine.
    #[test]
    fn a_pyc_of_another_python_is_named() {
        let python = Path::new("/usr/bin/python3");
        let Some(magic) = pyc_magic(python) else {
            panic!("{} cannot be asked its bytecode magic", python.display());
        };
        let t = std::env::temp_dir().join(format!("corral-pyc-{}", std::process::id()));
        std::fs::create_dir_all(&t).unwrap();
        std::fs::write(t.join("ours.pyc"), [&magic[..], b"rest"].concat()).unwrap();
        std::fs::write(t.join("other.pyc"), b"\xcb\x0d\x0d\x0arest").unwrap();
        let files = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        assert_eq!(foreign_pyc(python, &t, &files(&["ours.pyc", "a.py"])), None);
        let e = foreign_pyc(python, &t, &files(&["ours.pyc", "other.pyc"])).unwrap();
        assert!(
            e.starts_with("other.pyc was compiled by another Python version"),
            "{e}"
        );
        assert!(e.contains("magic is cb0d0d0a"), "{e}");
        std::fs::remove_dir_all(&t).unwrap();
    }

    #[test]
    fn the_probe_names_each_tool_and_what_needs_it() {
        let tools = probe(Path::new("/nonexistent"), Path::new("/nonexistent/python3"));
        let names: Vec<&str> = tools.iter().map(|t| t.name).collect();
        assert_eq!(names, ["check50", "clang", "libcs50", "python cs50"]);
        assert!(tools[0]
            .found
            .as_ref()
            .unwrap_err()
            .contains("/nonexistent"));
        assert!(tools[3].found.is_err());
    }
}
