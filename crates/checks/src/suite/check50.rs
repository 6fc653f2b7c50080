//! The `check50` kind's model: a problem folder in check50's own format (`__init__.py` with
//! `@check50.check` functions, `.cs50.yml`), validated at load time (see [`crate::kinds::check50`]
//! for how check50 runs it).
//!
//! ```yaml
//! - id: hello
//!   check50:
//!     problem: problem          # the check50 problem folder (an assignment path)
//!     points: {greets: 2}       # per check50 check (default: default_points, 1)
//!     hidden: [greets_grace]    # check50 checks students see pass/fail of only
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::paths::{relative_in, within, Base};
use super::pyscan;
use crate::python_syntax;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCheck50 {
    problem: String,
    #[serde(default, deserialize_with = "super::values::points_map")]
    points: BTreeMap<String, f64>,
    #[serde(default, deserialize_with = "super::values::opt_points")]
    default_points: Option<f64>,
    #[serde(default)]
    hidden: Vec<String>,
}

/// A check50 problem, resolved: its checks in file order.
#[derive(Debug, Clone)]
pub struct Check50Check {
    /// The problem folder (assignment path).
    pub problem: String,
    /// Every file of the problem folder and of the problems it imports checks from, relative to
    /// the assignment folder.
    pub files: Vec<String>,
    pub items: Vec<Check50Item>,
}

/// One `@check50.check` function of the problem: a rubric item.
#[derive(Debug, Clone, PartialEq)]
pub struct Check50Item {
    /// check50's name of the check (its function name).
    pub name: String,
    /// Result id: `CHECK/NAME`.
    pub id: String,
    pub description: String,
    /// The check50 check this one depends on (its name).
    pub dependency: Option<String>,
    pub points: f64,
    pub hidden: bool,
}

fn list_files(dir: &Path, rel: &Path, out: &mut Vec<String>, depth: usize) -> Result<(), String> {
    if depth > 16 {
        return Err(format!("{}: folders nested too deep", dir.display()));
    }
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name();
        if name == "__pycache__" {
            continue;
        }
        let ft = e.file_type().map_err(|e| e.to_string())?;
        let r = rel.join(&name);
        if ft.is_dir() {
            list_files(&e.path(), &r, out, depth + 1)?;
        } else if ft.is_file() {
            out.push(r.to_string_lossy().into_owned());
        }
    }
    Ok(())
}

/// The checks of the problem folder `rel` (relative to the assignment folder `dir`) in the order
/// check50 registers them, with those of the problems it imports checks from
/// (`check50.import_checks`) at their import's place; every file of those folders goes to
/// `files`, so that the imports resolve where the problem is mounted. `stack` holds the
/// problems being loaded (an import cycle is an error, as it would be for Python). With
/// `python`, each `__init__.py` is compiled (never run) by it first: one that check50 could not
/// import is an error now, with Python's file, line and message, rather than in every run.
fn load_problem(
    dir: &Path,
    rel: &Path,
    python: Option<&Path>,
    stack: &mut Vec<PathBuf>,
    files: &mut Vec<String>,
) -> Result<Vec<pyscan::Check50Fn>, String> {
    let p = rel.display();
    let full = dir.join(rel);
    match std::fs::symlink_metadata(&full) {
        Ok(m) if m.is_dir() => {}
        // Links are not followed: what is mounted must be the assignment's own files.
        Ok(m) if m.is_symlink() => {
            return Err(format!(
                "check50.problem: {p:?} is a symbolic link; copy the problem folder into the \
                 assignment folder {} (links are not followed)",
                dir.display()
            ))
        }
        _ => {
            return Err(format!(
                "check50.problem: {p:?} is not a folder of the assignment folder {}",
                dir.display()
            ))
        }
    }
    let init = rel.join("__init__.py");
    let src = std::fs::read(full.join("__init__.py")).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            format!("check50.problem: {p:?} has no __init__.py (check50's checks file)")
        }
        _ => format!("check50.problem: {}: {e}", init.display()),
    })?;
    if let Some(python) = python {
        // Where check50 finds what the problem imports: its own site, then the interpreter's
        // (not the problem's folder: check50 does not put it on the search path).
        let search = [Path::new(crate::check50_toolchain::SITE)];
        match python_syntax::check(python, &src, &init.to_string_lossy(), Some(&search)) {
            Ok(None) => {}
            Ok(Some(problem)) if problem.kind == "ModuleNotFoundError" => {
                return Err(format!(
                    "check50.problem: {}: {} here lacks it, so every check would fail; install \
                     it for that Python (a Debian python3-… package, or pip install \
                     --break-system-packages), or grade in an image that has it",
                    problem.describe(&init.to_string_lossy()),
                    python.display()
                ))
            }
            Ok(Some(problem)) => {
                return Err(format!(
                    "check50.problem: {}; check50 could not import the problem",
                    problem.describe(&init.to_string_lossy())
                ))
            }
            // No interpreter to ask: the run finds it, as it always did.
            Err(why) => tracing::debug!(%why, file = %init.display(), "not compiled at load"),
        }
    }
    // Python decodes by the file's coding declaration; the scan needs only its ASCII names.
    let src = String::from_utf8_lossy(&src);
    if python.is_some() {
        // On the host root, a tool the problem needs and the host lacks would fail every
        // student's program as if it were theirs.
        if let Some(why) = crate::check50_toolchain::missing_for(&src).first() {
            return Err(format!(
                "check50.problem: {} cannot run on this host: {why}",
                init.display()
            ));
        }
    }
    if !full.join(".cs50.yml").is_file() && !full.join(".cs50.yaml").is_file() {
        return Err(format!(
            "check50.problem: {p:?} has no .cs50.yml (write `check50: true` in it)"
        ));
    }
    if stack.iter().any(|s| s == rel) || stack.len() > 8 {
        return Err(format!(
            "check50.problem: {:?} imports checks in a cycle, or more than 8 deep (through {p:?})",
            stack[0].display()
        ));
    }
    stack.push(rel.to_path_buf());
    list_files(&full, rel, files, 0)?;
    let mut found = pyscan::check50_checks(&src);
    for (line, import) in pyscan::check50_imports(&src).into_iter().rev() {
        let target = within(rel, &import).ok_or_else(|| {
            format!(
                "check50.problem: {p}/__init__.py:{line} imports checks from {import:?}, which is \
                 not a folder of the assignment folder"
            )
        })?;
        let imported = load_problem(dir, &target, python, stack, files)?;
        let at = found
            .iter()
            .position(|c| c.line > line)
            .unwrap_or(found.len());
        found.splice(
            at..at,
            imported
                .into_iter()
                .map(|c| pyscan::Check50Fn { line, ..c }),
        );
    }
    stack.pop();
    // A check defined again (after a star import, say) is one check in check50's namespace:
    // the last definition, at the first one's place.
    let mut unique: Vec<pyscan::Check50Fn> = Vec::new();
    for c in found {
        match unique.iter_mut().find(|u| u.name == c.name) {
            Some(u) => *u = c,
            None => unique.push(c),
        }
    }
    Ok(unique)
}

impl Check50Check {
    /// `python`: the interpreter to compile the problem's `__init__.py` files with (see
    /// [`load_problem`]); `None` leaves them to the run.
    pub(crate) fn resolve(
        raw: RawCheck50,
        check_id: &str,
        dir: &Path,
        python: Option<&Path>,
    ) -> Result<Self, String> {
        let p = &raw.problem;
        relative_in(p, Base::Assignment).map_err(|why| format!("check50.problem: {p:?} {why}"))?;
        let mut files = Vec::new();
        let found = load_problem(dir, Path::new(p), python, &mut Vec::new(), &mut files)?;
        if let Some(why) =
            python.and_then(|py| crate::check50_toolchain::foreign_pyc(py, dir, &files))
        {
            return Err(format!(
                "check50.problem: {p:?} cannot run on this host: {why}"
            ));
        }
        if found.is_empty() {
            return Err(format!(
                "check50.problem: corral found no check in {}: it reads a problem's checks from \
                 its source, functions decorated with @check50.check (under any name check50 is \
                 imported as) at the module's top level or in its if/try/with blocks",
                Path::new(p).join("__init__.py").display()
            ));
        }
        let default_points = raw.default_points.unwrap_or(1.0);
        if !(default_points.is_finite() && default_points >= 0.0) {
            return Err("check50.default_points: must be a number >= 0".into());
        }
        let all: Vec<String> = found.iter().map(|c| c.name.clone()).collect();
        let names: BTreeSet<&str> = all.iter().map(String::as_str).collect();
        for k in raw.points.keys() {
            if !names.contains(k.as_str()) {
                return Err(format!(
                    "check50.points.{k}: not a check of {p}/__init__.py ({})",
                    names.iter().copied().collect::<Vec<_>>().join(", ")
                ));
            }
        }
        for (i, h) in raw.hidden.iter().enumerate() {
            if !names.contains(h.as_str()) {
                return Err(format!(
                    "check50.hidden[{i}]: {h:?} is not a check of {p}/__init__.py"
                ));
            }
        }
        let mut items = Vec::new();
        for c in found {
            let points = raw.points.get(&c.name).copied().unwrap_or(default_points);
            if !(points.is_finite() && points >= 0.0) {
                return Err(format!("check50.points.{}: must be a number >= 0", c.name));
            }
            if let Some(d) = &c.dependency {
                if !names.contains(d.as_str()) {
                    return Err(format!(
                        "check50.problem: check {} depends on {d}, which is not a check",
                        c.name
                    ));
                }
            }
            items.push(Check50Item {
                id: format!("{check_id}/{}", c.name),
                description: c.description.clone(),
                hidden: raw.hidden.contains(&c.name),
                dependency: c.dependency,
                name: c.name,
                points,
            });
        }
        files.sort();
        files.dedup();
        Ok(Check50Check {
            problem: raw.problem,
            files,
            items,
        })
    }

    pub fn max_points(&self) -> f64 {
        self.items.iter().map(|i| i.points).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(root: &Path, rel: &str, init: &str) {
        let d = root.join(rel);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("__init__.py"), init).unwrap();
        std::fs::write(d.join(".cs50.yml"), "check50: true\n").unwrap();
    }

    fn raw(rel: &str) -> RawCheck50 {
        RawCheck50 {
            problem: rel.into(),
            points: BTreeMap::new(),
            default_points: None,
            hidden: vec![],
        }
    }

    fn resolve(root: &Path, rel: &str) -> Result<Check50Check, String> {
        Check50Check::resolve(raw(rel), "c", root, Some(Path::new(python_syntax::PYTHON)))
    }

    /// On the host root, a problem whose C compiles with check50's default compiler loads only
    /// where clang is; one that names its compiler, or runs in an image, loads anyway.
    #[test]
    fn a_problem_needing_a_compiler_the_host_lacks_is_a_load_error() {
        let t = tempfile::tempdir().unwrap();
        let checks = |compile: &str| {
            format!(
                "import check50\nimport check50.c\n\n@check50.check()\ndef compiles():\n    \
                 \"compiles\"\n    {compile}\n"
            )
        };
        problem(t.path(), "clang", &checks("check50.c.compile(\"a.c\")"));
        problem(
            t.path(),
            "gcc",
            &checks("check50.c.compile(\"a.c\", cc=\"gcc\")"),
        );
        match crate::check50_toolchain::clang() {
            None => {
                let e = resolve(t.path(), "clang").unwrap_err();
                assert!(
                    e.starts_with("check50.problem: clang/__init__.py cannot run on this host:")
                        && e.contains("no clang"),
                    "{e}"
                );
            }
            Some(_) => assert!(resolve(t.path(), "clang").is_ok()),
        }
        assert!(resolve(t.path(), "gcc").is_ok());
        assert!(Check50Check::resolve(raw("clang"), "c", t.path(), None).is_ok());
    }

    /// A problem check50 could not import is refused at load with Python's file, line and
    /// message, an imported problem's too; without an interpreter to ask, the run finds it.
    #[test]
    fn a_problem_that_does_not_compile_is_a_load_error() {
        let t = tempfile::tempdir().unwrap();
        problem(t.path(), "less", LESS);
        problem(
            t.path(),
            "more",
            "import check50\n\n@check50.check()\ndef exists():\n    return check50.exists(\"a.c\"\n\n\
             @check50.check(exists)\ndef runs():\n    pass\n",
        );
        let e = resolve(t.path(), "more").unwrap_err();
        assert!(
            e.starts_with("check50.problem: more/__init__.py:5:")
                && e.contains("SyntaxError: '(' was never closed")
                && e.ends_with("check50 could not import the problem"),
            "{e}"
        );
        // Loaded as before when nobody can compile it.
        let c = Check50Check::resolve(raw("more"), "c", t.path(), None).unwrap();
        assert_eq!(c.items[0].name, "exists");
        let nowhere = Path::new("/nonexistent/python3");
        assert!(Check50Check::resolve(raw("more"), "c", t.path(), Some(nowhere)).is_ok());

        problem(
            t.path(),
            "top",
            "import check50\nless = check50.import_checks(\"../less\")\nfrom less import *\n",
        );
        std::fs::write(
            t.path().join("less/__init__.py"),
            "import check50\n\tdef x():\n",
        )
        .unwrap();
        let e = resolve(t.path(), "top").unwrap_err();
        assert!(
            e.starts_with("check50.problem: less/__init__.py:2:") && e.contains("IndentationError"),
            "{e}"
        );
    }

    const LESS: &str = "import check50\n\n@check50.check()\ndef exists():\n    \"\"\"exists\"\"\"\n\n@check50.check(exists)\ndef test1():\n    \"\"\"height 1\"\"\"\n";

    #[test]
    fn imported_checks_come_in_at_the_import_with_their_folders_files() {
        let t = tempfile::tempdir().unwrap();
        problem(t.path(), "mario/less", LESS);
        std::fs::write(t.path().join("mario/less/1.txt"), "#\n").unwrap();
        problem(
            t.path(),
            "mario/more",
            "import check50\n\n@check50.check()\ndef first():\n    pass\n\nless = __import__(\"check50\").import_checks(\"../less\")\nfrom less import *\n\n@check50.check(test1)\ndef last():\n    pass\n",
        );
        let c = resolve(t.path(), "mario/more").unwrap();
        let names: Vec<&str> = c.items.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(names, ["first", "exists", "test1", "last"]);
        assert_eq!(c.items[2].dependency.as_deref(), Some("exists"));
        assert_eq!(c.items[3].dependency.as_deref(), Some("test1"));
        assert_eq!(
            c.files,
            [
                "mario/less/.cs50.yml",
                "mario/less/1.txt",
                "mario/less/__init__.py",
                "mario/more/.cs50.yml",
                "mario/more/__init__.py"
            ]
        );
    }

    #[test]
    fn imports_must_stay_in_the_assignment_folder_and_not_loop() {
        let t = tempfile::tempdir().unwrap();
        problem(
            t.path(),
            "more",
            "less = __import__(\"check50\").import_checks(\"../less\")\nfrom less import *\n",
        );
        let e = resolve(t.path(), "more").unwrap_err();
        assert!(
            e.contains("is not a folder of the assignment folder"),
            "{e}"
        );
        problem(t.path(), "a", "x = check50.import_checks(\"../../etc\")\n");
        let e = resolve(t.path(), "a").unwrap_err();
        assert!(e.contains("not a folder of the assignment folder"), "{e}");
        problem(t.path(), "b", "x = check50.import_checks(\"../c\")\n");
        problem(t.path(), "c", "x = check50.import_checks(\"../b\")\n");
        let e = resolve(t.path(), "b").unwrap_err();
        assert!(e.contains("imports checks in a cycle"), "{e}");
        problem(t.path(), "d", "x = check50.import_checks(\"../e\")\n");
        std::fs::create_dir(t.path().join("e")).unwrap();
        let e = resolve(t.path(), "d").unwrap_err();
        assert!(e.contains("\"e\" has no __init__.py"), "{e}");
    }

    /// A new user's likely first tries get told what to do: an absolute path, the folder
    /// itself, a link to the problem elsewhere.
    #[test]
    fn a_problem_outside_the_assignment_folder_is_refused_with_what_to_do() {
        let t = tempfile::tempdir().unwrap();
        problem(t.path(), "hello", "import check50\n");
        let abs = t.path().join("hello");
        let e = resolve(t.path(), abs.to_str().unwrap()).unwrap_err();
        assert!(
            e.contains("must be relative to the assignment folder (the suite file's folder)"),
            "{e}"
        );
        let e = resolve(t.path(), ".").unwrap_err();
        assert!(
            e.contains("name a folder inside the assignment folder"),
            "{e}"
        );
        std::os::unix::fs::symlink(&abs, t.path().join("link")).unwrap();
        let e = resolve(t.path(), "link").unwrap_err();
        assert!(
            e.contains("is a symbolic link") && e.contains("not followed"),
            "{e}"
        );
    }
}
