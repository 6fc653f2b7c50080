//! The language registry: how to compile and run a program in each language inside a sandbox.
//!
//! The built-in entries live in `data/languages.toml` (embedded in the binary). An operator file of
//! the same shape adds languages or replaces entries by id. A language whose toolchain is missing on
//! this host is *unavailable* — reported, never a crash. A language may instead run in a container
//! image (`image = "python:3.12-slim"`): then its toolchain is the image's, and it is available when
//! the image store has that image (never pulled on demand).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use corral_images::Store as ImageStore;
use corral_sandbox::{
    Limits, LimitsRequest, Mount, NoSink, Pool, Restrictions, Root, RunSpec, SandboxConfig, Status,
    Stdin,
};
use serde::{Deserialize, Serialize};

use crate::error::LanguageError;
use crate::image_root;

/// The built-in registry file.
pub const BUILTIN: &str = include_str!("../data/languages.toml");

/// What a language's `compile`, `run` and `env` may say of the run's memory limit
/// ([`Language::sized`]): `{memory_mib}`, the limit in MiB, and `{memory_mib_half}`, half of it.
pub const SIZE_PLACEHOLDERS: [&str; 2] = ["{memory_mib}", "{memory_mib_half}"];

/// One language as the registry file describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Language {
    /// The table key (`c`, `java`, …).
    #[serde(skip_deserializing, default)]
    pub id: String,
    /// Display name.
    pub name: String,
    /// Conventional source file name of a one-file program.
    pub source: String,
    /// Builds `source` (a `/bin/sh -c` command in the working directory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compile: Option<String>,
    /// Runs the program.
    pub run: String,
    /// Extra read-only host paths, `SRC` or `SRC:DST`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    /// Extra environment variables.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// A command whose first line of output is the toolchain's version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Default limits this toolchain needs (a suite's own limits still win).
    #[serde(default)]
    pub limits: LimitsRequest,
    /// The seccomp profile of the program's runs (`run`, never `compile`): a stricter layer on
    /// top of the default one. A suite or check that names its own replaces it.
    #[serde(default, skip_serializing_if = "Restrictions::is_default")]
    pub seccomp: Restrictions,
    /// Programs or absolute host paths that must exist; default: the first word of `compile`
    /// and `run` unless it starts with `./`. Not looked for on the host when `image` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requires: Option<Vec<String>>,
    /// A container image (REF: name, `name@sha256:…` or digest) whose root filesystem every
    /// program of this language runs in; its toolchain is the image's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The kernel this language's programs run on (`"native"` or `"gvisor"`) when the request
    /// names none; absent: the server's default. A server's `force_gvisor` overrides it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<corral_sandbox::Runtime>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RegistryFile {
    /// Each with where it is in the file, so a language that is refused is named by its line.
    #[serde(default)]
    languages: BTreeMap<String, toml::Spanned<Language>>,
}

/// Whether a language can be used on this host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LanguageStatus {
    pub id: String,
    pub name: String,
    pub available: bool,
    /// Why it is unavailable (or why the version could not be read).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    pub source: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compile: Option<String>,
    pub run: String,
    /// The seccomp profile of the program's runs (`default`, or stricter layers joined by `+`).
    pub seccomp: String,
    /// The image the language runs in, when it names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<LanguageImage>,
}

/// A language's image in its status: the REF it names and, when the store has it, the image
/// manifest's digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LanguageImage {
    pub name: String,
    pub digest: Option<String>,
}

/// A host path a language makes visible to every program in it (read-only), with what an
/// operator should know about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Exposure {
    pub path: String,
    /// Why this path may show student code more than a toolchain: it lies in a home directory,
    /// or holds files named like credentials (listed, at most a few).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// File names that hold secrets by convention (cargo, pip, npm, git, ssh, netrc, PostgreSQL).
const CREDENTIAL_NAMES: [&str; 14] = [
    "credentials",
    "credentials.toml",
    ".credentials.toml",
    ".netrc",
    ".pypirc",
    ".npmrc",
    ".git-credentials",
    ".pgpass",
    ".htpasswd",
    ".env",
    "id_rsa",
    "id_dsa",
    "id_ecdsa",
    "id_ed25519",
];
const CREDENTIAL_EXTENSIONS: [&str; 4] = ["key", "p12", "pfx", "keystore"];
/// Entries looked at per exposed path: a toolchain has tens of thousands; the scan says when it
/// stopped short.
const SCAN_ENTRIES: usize = 200_000;

fn looks_like_credentials(name: &str) -> bool {
    CREDENTIAL_NAMES.contains(&name)
        || Path::new(name)
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| CREDENTIAL_EXTENSIONS.contains(&e))
}

/// Credential-looking files below `root` (never following links), and whether the scan was cut.
fn credential_files(root: &Path) -> (Vec<String>, bool) {
    let mut found = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    let mut seen = 0;
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            seen += 1;
            if seen > SCAN_ENTRIES {
                return (found, true);
            }
            let Ok(ft) = e.file_type() else { continue };
            let name = e.file_name().to_string_lossy().into_owned();
            if ft.is_dir() {
                stack.push(e.path());
            } else if looks_like_credentials(&name) && found.len() < 5 {
                found.push(e.path().display().to_string());
            }
        }
    }
    (found, false)
}

/// All known languages, by id.
#[derive(Debug, Clone, Default)]
pub struct LanguageRegistry {
    languages: BTreeMap<String, Language>,
}

impl LanguageRegistry {
    /// The built-in languages only.
    pub fn builtin() -> Self {
        let mut r = LanguageRegistry::default();
        r.merge_str(BUILTIN, "built-in languages.toml")
            .expect("the built-in registry is valid (tested)");
        r
    }

    /// The built-in languages, then `extra` (an operator file) on top.
    pub fn load(extra: Option<&Path>) -> Result<Self, LanguageError> {
        let mut r = LanguageRegistry::builtin();
        if let Some(path) = extra {
            let text = std::fs::read_to_string(path).map_err(|source| LanguageError::Read {
                path: path.to_path_buf(),
                source,
            })?;
            r.merge_str(&text, &path.display().to_string())?;
        }
        Ok(r)
    }

    /// Adds the languages of a registry file (TOML); an id already known is replaced whole.
    pub fn merge_str(&mut self, text: &str, origin: &str) -> Result<(), LanguageError> {
        let file: RegistryFile = toml::from_str(text).map_err(|e| LanguageError::Parse {
            origin: origin.to_string(),
            message: e.to_string(),
        })?;
        for (id, spanned) in file.languages {
            // The line its table starts on (its first key for an inline table).
            let line = text[..spanned.span().start.min(text.len())]
                .matches('\n')
                .count()
                + 1;
            let mut lang = spanned.into_inner();
            lang.id = id.clone();
            let bad = |message: String| LanguageError::Invalid {
                origin: format!("{origin}:{line}"),
                id: id.clone(),
                message,
            };
            if id.is_empty()
                || !id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '+')
            {
                return Err(bad("ids are letters, digits, '-', '_' and '+'".into()));
            }
            if lang.run.trim().is_empty() {
                return Err(bad("`run` is empty".into()));
            }
            lang.mounts().map_err(bad)?;
            lang.limits
                .resolve(&Limits::default())
                .map_err(|e| bad(e.to_string()))?;
            for (k, v) in &lang.env {
                corral_sandbox::parse_env(&format!("{k}={v}")).map_err(|e| bad(e.to_string()))?;
            }
            if let Some(image) = &lang.image {
                image_root::check_reference(image).map_err(|e| bad(format!("image: {e}")))?;
            }
            self.languages.insert(id, lang);
        }
        Ok(())
    }

    pub fn get(&self, id: &str) -> Result<&Language, LanguageError> {
        self.languages
            .get(id)
            .ok_or_else(|| LanguageError::Unknown(id.to_string()))
    }

    pub fn iter(&self) -> impl Iterator<Item = &Language> {
        self.languages.values()
    }

    /// Every language with its status; versions are read by running each `version` command in a
    /// sandbox from `pool` (without a pool, only the host-side checks are made). Languages in an
    /// image are looked up in `images`.
    pub fn probe(
        &self,
        pool: Option<&Arc<Pool>>,
        images: Option<&ImageStore>,
    ) -> Vec<LanguageStatus> {
        let langs: Vec<&Language> = self.iter().collect();
        std::thread::scope(|s| {
            let handles: Vec<_> = langs
                .iter()
                .map(|l| s.spawn(move || l.probe(pool, images)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("probe thread"))
                .collect()
        })
    }
}

impl Language {
    /// The read-only mounts this language needs.
    pub fn mounts(&self) -> Result<Vec<Mount>, String> {
        self.paths
            .iter()
            .map(|p| Mount::parse(p, false).map_err(|e| e.to_string()))
            .collect()
    }

    /// The host paths this language shows to programs, each with warnings for an operator. Reads
    /// the file tree below each path (bounded), so it is for `corral languages` and `corral doctor`,
    /// not for a request path.
    pub fn exposure(&self) -> Vec<Exposure> {
        let Ok(mounts) = self.mounts() else {
            return Vec::new();
        };
        mounts
            .iter()
            .map(|m| {
                let mut warnings = Vec::new();
                let in_home = m.src.starts_with("/root")
                    || (m.src.starts_with("/home") && m.src.components().count() > 2);
                if in_home {
                    warnings.push(
                        "lies in a home directory: keep nothing but the toolchain below it".into(),
                    );
                }
                let (files, cut) = credential_files(&m.src);
                if !files.is_empty() {
                    warnings.push(format!(
                        "holds files named like credentials, readable by every program: {}",
                        files.join(", ")
                    ));
                }
                if cut {
                    warnings.push(format!(
                        "more than {SCAN_ENTRIES} entries: only part of it was checked for credentials"
                    ));
                }
                Exposure {
                    path: m.src.display().to_string(),
                    warnings,
                }
            })
            .collect()
    }

    /// This language for a run under `limits`: [`SIZE_PLACEHOLDERS`] in its `compile`, `run` and
    /// `env` replaced by that run's memory limit. A runtime that sizes its heap from the
    /// machine's memory (the JVM, V8) cannot see the sandbox's limit (no cgroup file system
    /// inside), so a garbage-collected program would grow towards the host's memory and be
    /// killed at the limit although little of it is live; told the limit, it collects in time and
    /// reports its own out-of-memory error. Callers size the language with the limits the run
    /// will have, after every default, request and clamp.
    pub fn sized(&self, limits: &Limits) -> Language {
        let fill = |text: &str| fill_memory(text, limits);
        Language {
            compile: self.compile.as_deref().map(fill),
            run: fill(&self.run),
            env: self.env.iter().map(|(k, v)| (k.clone(), fill(v))).collect(),
            ..self.clone()
        }
    }

    /// Environment variables as `RunSpec` takes them.
    pub fn env_pairs(&self) -> Vec<(String, String)> {
        self.env
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// The limits of a run in this language: corral's defaults, then the language's.
    pub fn default_limits(&self) -> Limits {
        self.limits.resolve(&Limits::default()).unwrap_or_default()
    }

    /// What must exist on the host for this language to work.
    pub fn required(&self) -> Vec<String> {
        if let Some(r) = &self.requires {
            return r.clone();
        }
        let mut out = Vec::new();
        for cmd in self.compile.iter().chain(std::iter::once(&self.run)) {
            if let Some(first) = cmd.split_whitespace().next() {
                if !first.starts_with("./") && !out.iter().any(|o| o == first) {
                    out.push(first.to_string());
                }
            }
        }
        out
    }

    /// The root this language's programs run in: its image from `images` (which must have it),
    /// or the host's after [`Language::check_host`]. `Err` says why the language is unavailable.
    pub fn root(&self, images: Option<&ImageStore>) -> Result<Root, String> {
        self.check_host()?;
        image_root::root_for(images, self.image.as_deref())
    }

    /// Host-side availability: every mount source and (without an image) every required program
    /// exists. `Err` says why not.
    pub fn check_host(&self) -> Result<(), String> {
        let mounts = self.mounts()?;
        for m in &mounts {
            if !m.src.exists() {
                return Err(format!("{} does not exist on this host", m.src.display()));
            }
        }
        if self.image.is_some() {
            // The toolchain is the image's; whether the store has it is `root`'s question.
            return Ok(());
        }
        let path_var = self
            .env
            .get("PATH")
            .cloned()
            .unwrap_or_else(|| corral_sandbox::DEFAULT_PATH.to_string());
        for req in self.required() {
            if req.contains('/') {
                let host = to_host(Path::new(&req), &mounts);
                if !host.exists() {
                    return Err(format!("{req} not found"));
                }
                continue;
            }
            let found = path_var.split(':').filter(|d| !d.is_empty()).any(|d| {
                let candidate = to_host(&Path::new(d).join(&req), &mounts);
                is_executable(&candidate)
            });
            if !found {
                return Err(format!("{req} not found in PATH ({path_var})"));
            }
        }
        Ok(())
    }

    /// Availability and version. The version command runs in a sandbox (in the language's image,
    /// if it names one), which also proves that the toolchain works there.
    pub fn probe(&self, pool: Option<&Arc<Pool>>, images: Option<&ImageStore>) -> LanguageStatus {
        let mut st = LanguageStatus {
            id: self.id.clone(),
            name: self.name.clone(),
            available: true,
            reason: None,
            version: None,
            source: self.source.clone(),
            compile: self.compile.clone(),
            run: self.run.clone(),
            seccomp: self.seccomp.to_string(),
            image: self.image.as_ref().map(|name| LanguageImage {
                name: name.clone(),
                digest: None,
            }),
        };
        let root = match self.root(images) {
            Ok(root) => root,
            Err(why) => {
                st.available = false;
                st.reason = Some(why);
                return st;
            }
        };
        if let (Some(image), Some(used)) = (&mut st.image, image_root::UsedImage::of(&root)) {
            image.digest = Some(used.digest);
        }
        // In an image the host cannot look for the required programs: the sandbox does, before
        // the version command (`command -v`, the shell's own lookup in the language's PATH).
        let in_image: Vec<String> = if self.image.is_some() {
            self.required()
        } else {
            Vec::new()
        };
        let cmd = match (&self.version, in_image.is_empty()) {
            (None, true) => return st,
            (version, _) => {
                let mut script = String::new();
                for req in &in_image {
                    let q = shell_quote(req);
                    script.push_str(&format!(
                        "command -v {q} >/dev/null || {{ echo {} >&2; exit 127; }}; ",
                        shell_quote(&format!("{req} not found in the image"))
                    ));
                }
                script.push_str(version.as_deref().unwrap_or("true"));
                script
            }
        };
        let Some(pool) = pool else {
            return st;
        };
        let mut spec = RunSpec::new(vec!["/bin/sh".into(), "-c".into(), cmd.clone()]);
        // Where its programs run: under gVisor too when the language says so (a toolchain that
        // works natively may not start there).
        if let Some(runtime) = self.runtime {
            spec.runtime = runtime;
        }
        spec.stdin = Stdin::Empty;
        spec.mounts = self.mounts().unwrap_or_default();
        spec.limits = self.default_limits();
        spec.env = self.sized(&spec.limits).env_pairs();
        spec.root = root;
        let shape = SandboxConfig::for_spec(&spec);
        let outcome = match pool.lease(&shape) {
            Ok(mut lease) => lease.sandbox().run(&spec, &mut NoSink),
            Err(e) => {
                st.reason = Some(format!("version unknown: {e}"));
                return st;
            }
        };
        let text = format!("{}{}", outcome.stdout.text(), outcome.stderr.text());
        let first = text.lines().map(str::trim).find(|l| !l.is_empty());
        match (outcome.status, first) {
            (Status::Ok, Some(line)) if self.version.is_some() => {
                st.version = Some(line.to_string())
            }
            (Status::Ok, _) if self.version.is_none() => {}
            (Status::SandboxError, _) => {
                st.reason = Some(format!(
                    "version unknown: {}",
                    outcome.reason().unwrap_or_default()
                ))
            }
            _ => {
                st.available = false;
                let cmd = self
                    .version
                    .as_deref()
                    .unwrap_or("the required programs' lookup");
                st.reason = Some(format!(
                    "`{cmd}` failed in the sandbox ({}): {}",
                    outcome
                        .reason()
                        .unwrap_or_else(|| format!("exit code {}", outcome.shell_code())),
                    first.unwrap_or("no output")
                ));
            }
        }
        st
    }
}

/// `text` with [`SIZE_PLACEHOLDERS`] replaced by `limits`' memory limit.
pub fn fill_memory(text: &str, limits: &Limits) -> String {
    let mib = limits.memory.bytes() >> 20;
    text.replace("{memory_mib_half}", &(mib / 2).max(1).to_string())
        .replace("{memory_mib}", &mib.max(1).to_string())
}

/// `s` as one word for `/bin/sh`.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Where a path inside the sandbox lives on the host (through the language's mounts; system
/// folders are the host's own).
fn to_host(inside: &Path, mounts: &[Mount]) -> PathBuf {
    for m in mounts {
        if let Ok(rest) = inside.strip_prefix(&m.dst) {
            return m.src.join(rest);
        }
    }
    inside.to_path_buf()
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The built-in Java and JavaScript entries are told the memory limit of the run they are
    /// for, in their commands and environment; other text stays as it is.
    #[test]
    fn sized_tells_java_and_javascript_the_runs_memory_limit() {
        let registry = LanguageRegistry::builtin();
        let limits = Limits {
            memory: corral_sandbox::Size::mib(300),
            ..Limits::default()
        };
        let java = registry.get("java").unwrap().sized(&limits);
        assert_eq!(java.run, "java -XX:MaxRAM=300m -cp . Main");
        assert_eq!(java.compile.as_deref(), Some("javac Main.java"));
        let js = registry.get("javascript").unwrap().sized(&limits);
        assert_eq!(js.env["NODE_OPTIONS"], "--max-old-space-size=150");
        assert_eq!(js.run, "node main.js");
        for lang in registry.iter() {
            let sized = lang.sized(&limits);
            let text = format!("{:?} {} {:?}", sized.compile, sized.run, sized.env);
            for p in SIZE_PLACEHOLDERS {
                assert!(!text.contains(p), "{}: {text}", lang.id);
            }
        }
    }

    #[test]
    fn rust_exposes_its_toolchains_and_nothing_else_of_root() {
        let rust = LanguageRegistry::builtin().get("rust").unwrap().clone();
        let srcs: Vec<PathBuf> = rust.mounts().unwrap().into_iter().map(|m| m.src).collect();
        assert_eq!(srcs, [PathBuf::from("/root/.rustup/toolchains")]);
        for secret in [
            "/root/.cargo/credentials.toml",
            "/root/.rustup/settings.toml",
            "/root/.ssh/id_rsa",
        ] {
            assert!(
                !srcs.iter().any(|s| Path::new(secret).starts_with(s)),
                "{secret} would be visible"
            );
        }
        assert!(!rust.env.contains_key("CARGO_HOME"));
    }

    #[test]
    fn exposure_warns_about_homes_and_credential_files() {
        let dir = tempfile::tempdir().unwrap();
        let tool = dir.path().join("tool");
        std::fs::create_dir_all(tool.join("bin")).unwrap();
        std::fs::write(tool.join("bin/cc"), "").unwrap();
        let lang = |paths: Vec<String>| Language {
            paths,
            ..LanguageRegistry::builtin().get("c").unwrap().clone()
        };
        let clean = lang(vec![tool.display().to_string()]).exposure();
        assert_eq!(clean.len(), 1);
        assert!(clean[0].warnings.is_empty(), "{clean:?}");
        std::fs::create_dir_all(tool.join("registry")).unwrap();
        std::fs::write(tool.join("registry/credentials.toml"), "token = \"x\"").unwrap();
        std::fs::write(tool.join("server.key"), "").unwrap();
        let w = &lang(vec![tool.display().to_string()]).exposure()[0].warnings;
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("credentials.toml") && w[0].contains("server.key"),
            "{w:?}"
        );
        let home = lang(vec![
            "/root/.rustup/toolchains".into(),
            "/home/alice/jdk".into(),
        ])
        .exposure();
        assert!(
            home.iter()
                .all(|e| e.warnings[0].contains("home directory")),
            "{home:?}"
        );
    }

    #[test]
    fn builtin_registry_has_the_promised_languages() {
        let r = LanguageRegistry::builtin();
        for id in ["c", "cpp", "python", "java", "javascript", "rust", "bash"] {
            let l = r.get(id).unwrap();
            assert_eq!(l.id, id);
        }
        let java = r.get("java").unwrap().default_limits();
        assert!(java.pids >= 64 && java.memory.bytes() >= 512 << 20);
        assert_eq!(r.get("c").unwrap().required(), vec!["gcc".to_string()]);
        assert_eq!(
            r.get("python").unwrap().required(),
            vec!["/usr/bin/python3".to_string()]
        );
    }

    #[test]
    fn operator_file_adds_and_replaces() {
        let mut r = LanguageRegistry::builtin();
        r.merge_str(
            "[languages.c]\nname = \"C (clang)\"\nsource = \"a.c\"\ncompile = \"clang a.c\"\nrun = \"./a.out\"\n\
             [languages.ghost]\nname = \"Ghost\"\nsource = \"x.g\"\nrun = \"ghostc-does-not-exist x.g\"\n",
            "ops.toml",
        )
        .unwrap();
        assert_eq!(r.get("c").unwrap().name, "C (clang)");
        let ghost = r.get("ghost").unwrap();
        let st = ghost.probe(None, None);
        assert!(!st.available);
        assert!(st.reason.unwrap().contains("ghostc-does-not-exist"));
        let missing_path = r
            .merge_str(
                "[languages.x]\nname = \"X\"\nsource = \"x\"\nrun = \"true\"\npaths = [\"/definitely/not/here\"]\n",
                "ops.toml",
            )
            .map(|_| r.get("x").unwrap().check_host());
        assert!(missing_path
            .unwrap()
            .unwrap_err()
            .contains("/definitely/not/here"));
    }

    #[test]
    fn a_language_in_an_image_is_available_exactly_when_the_store_has_it() {
        let mut r = LanguageRegistry::builtin();
        r.merge_str(
            "[languages.py312]\nname = \"Python 3.12\"\nsource = \"main.py\"\n\
             run = \"python3.12-only-in-the-image main.py\"\nimage = \"course/py:3.12\"\n",
            "ops.toml",
        )
        .unwrap();
        let lang = r.get("py312").unwrap();
        // Its toolchain is not looked for on the host.
        lang.check_host().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let store = ImageStore::open(&dir.path().join("data")).unwrap();
        let st = lang.probe(None, Some(&store));
        assert!(!st.available);
        assert!(
            st.reason
                .as_deref()
                .unwrap()
                .contains("not in the image store"),
            "{st:?}"
        );
        assert_eq!(st.image.as_ref().unwrap().digest, None);
        assert!(!lang.probe(None, None).available);
        let digest = crate::image_root::test_image(&store, dir.path(), "course/py:3.12");
        let st = lang.probe(None, Some(&store));
        assert!(st.available, "{st:?}");
        assert_eq!(
            st.image,
            Some(LanguageImage {
                name: "course/py:3.12".into(),
                digest: Some(digest.clone())
            })
        );
        let Root::Image(root) = lang.root(Some(&store)).unwrap() else {
            panic!("not an image root")
        };
        assert_eq!(root.digest, digest);
        // A host language keeps the host root.
        assert_eq!(
            r.get("bash").unwrap().root(Some(&store)).unwrap(),
            Root::Host
        );
    }

    #[test]
    fn bad_operator_files_are_errors_naming_the_origin() {
        let mut r = LanguageRegistry::builtin();
        for (extra, says) in [
            ("", "ops.toml"),
            ("run = \"x\"\nbogus = 1\n", "bogus"),
            ("run = \"x\"\npaths = [\"rel\"]\n", "absolute"),
            ("run = \"x\"\nimage = \"Not/A/Ref\"\n", "image"),
        ] {
            let text = format!("[languages.x]\nname = \"X\"\nsource = \"x\"\n{extra}");
            let e = r.merge_str(&text, "ops.toml").unwrap_err();
            assert!(e.to_string().contains(says), "{extra}: {e}");
        }
        assert!(matches!(r.get("nope"), Err(LanguageError::Unknown(_))));
    }

    /// A language the registry refuses is named with the line its table starts on, as a TOML
    /// syntax error is: an operator's file of twenty languages said only which language.
    #[test]
    fn a_refused_language_is_named_by_its_line() {
        let mut r = LanguageRegistry::builtin();
        let text = "# course languages\n\n[languages.ok]\nname = \"OK\"\nsource = \"a\"\nrun = \"true\"\n\n\
                    [languages.broken]\nname = \"B\"\nsource = \"b\"\nrun = \"  \"\n";
        let e = r.merge_str(text, "ops.toml").unwrap_err().to_string();
        assert!(
            e.starts_with("ops.toml:8: language \"broken\": `run` is empty"),
            "{e}"
        );
        let inline = "languages.x = { name = \"X\", source = \"x\", run = \"\" }\n";
        let e = r.merge_str(inline, "ops.toml").unwrap_err().to_string();
        assert!(e.starts_with("ops.toml:1: language \"x\""), "{e}");
    }
}
