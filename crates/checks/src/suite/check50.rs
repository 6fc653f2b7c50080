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
use std::path::Path;

use serde::Deserialize;

use super::paths::relative;
use super::pyscan;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCheck50 {
    problem: String,
    #[serde(default)]
    points: BTreeMap<String, f64>,
    #[serde(default)]
    default_points: Option<f64>,
    #[serde(default)]
    hidden: Vec<String>,
}

/// A check50 problem, resolved: its checks in file order.
#[derive(Debug, Clone)]
pub struct Check50Check {
    /// The problem folder (assignment path).
    pub problem: String,
    /// Every file of the problem folder, relative to the assignment folder.
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

impl Check50Check {
    pub(crate) fn resolve(raw: RawCheck50, check_id: &str, dir: &Path) -> Result<Self, String> {
        let p = &raw.problem;
        relative(p).map_err(|why| format!("check50.problem: {p:?} {why}"))?;
        let full = dir.join(p);
        if !std::fs::symlink_metadata(&full).is_ok_and(|m| m.is_dir()) {
            return Err(format!(
                "check50.problem: {p:?} is not a folder of the assignment folder {}",
                dir.display()
            ));
        }
        let init = full.join("__init__.py");
        let src = std::fs::read_to_string(&init).map_err(|_| {
            format!("check50.problem: {p:?} has no __init__.py (check50's checks file)")
        })?;
        if !full.join(".cs50.yml").is_file() && !full.join(".cs50.yaml").is_file() {
            return Err(format!(
                "check50.problem: {p:?} has no .cs50.yml (write `check50: true` in it)"
            ));
        }
        let found = pyscan::check50_checks(&src);
        if found.is_empty() {
            return Err(format!(
                "check50.problem: {p:?}/__init__.py defines no @check50.check function"
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
                description: c.doc.clone().unwrap_or_else(|| c.name.clone()),
                hidden: raw.hidden.contains(&c.name),
                dependency: c.dependency,
                name: c.name,
                points,
            });
        }
        let mut files = Vec::new();
        list_files(&full, Path::new(p), &mut files, 0)?;
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
