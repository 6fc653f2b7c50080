//! The `pytest` kind's model: the assignment's public and hidden test files with a rubric,
//! validated at load time against the tests the files define (see [`crate::kinds::pytest`] for
//! how they run).
//!
//! ```yaml
//! - id: tests
//!   pytest:
//!     tests: [test_public.py]            # public test files (assignment paths)
//!     hidden: [test_hidden.py]           # students see pass/fail only; run in a separate session
//!     points: {test_add: 2}              # per-test weights (default: default_points, 1)
//!     groups: [{id: negatives, tests: [test_neg, test_neg_big], points: 2}]   # all or nothing
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::Deserialize;

use super::paths::assignment_path;
use super::pyscan;

/// A pytest check, resolved against the assignment's test files.
#[derive(Debug, Clone)]
pub struct PytestCheck {
    /// Public test files (assignment paths).
    pub tests: Vec<String>,
    /// Hidden test files.
    pub hidden: Vec<String>,
    /// Other assignment files mounted next to the tests (helpers, data, a `conftest.py`).
    pub support: Vec<String>,
    /// The assignment's pytest configuration, passed with `-c`.
    pub config: Option<String>,
    /// Every test the files define, public first.
    pub cases: Vec<TestCase>,
    /// The rubric: one item per group and per test in no group.
    pub items: Vec<Item>,
    /// A test running longer fails (the session goes on); none by default.
    pub test_timeout: Option<std::time::Duration>,
}

/// A test function (all its parametrized cases together).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestCase {
    /// The test file, relative to the assignment folder.
    pub file: String,
    /// `test_add` or `TestMath::test_add`.
    pub name: String,
    pub doc: Option<String>,
    pub hidden: bool,
}

impl TestCase {
    /// The node id without parameters: `test_public.py::test_add`.
    pub fn node(&self) -> String {
        format!("{}::{}", self.file, self.name)
    }

    /// Whether a node id of pytest's is this test (or one of its parametrized cases).
    pub fn is(&self, nodeid: &str) -> bool {
        let base = nodeid.split('[').next().unwrap_or(nodeid);
        base == self.node()
    }
}

/// A rubric item: points for passing every one of its tests.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    /// The result id: `CHECK/FILE::TEST` or `CHECK/GROUP`.
    pub id: String,
    pub description: String,
    pub points: f64,
    pub hidden: bool,
    /// Indices into [`PytestCheck::cases`].
    pub members: Vec<usize>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPytest {
    #[serde(default)]
    tests: Vec<String>,
    #[serde(default)]
    hidden: Vec<String>,
    #[serde(default)]
    support: Vec<String>,
    #[serde(default)]
    config: Option<String>,
    #[serde(default, deserialize_with = "super::values::points_map")]
    points: BTreeMap<String, f64>,
    #[serde(default, deserialize_with = "super::values::opt_points")]
    default_points: Option<f64>,
    #[serde(default)]
    groups: Vec<RawGroup>,
    #[serde(default)]
    test_timeout: Option<corral_sandbox::Millis>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGroup {
    id: String,
    #[serde(default)]
    description: Option<String>,
    tests: Vec<String>,
    #[serde(default, deserialize_with = "super::values::opt_points")]
    points: Option<f64>,
}

fn points_ok(p: f64) -> bool {
    p.is_finite() && p >= 0.0
}

/// Reads an assignment file (a path already checked to be relative).
fn read_assignment(dir: &Path, p: &str) -> Result<String, String> {
    let full = dir.join(p);
    let meta = std::fs::symlink_metadata(&full).map_err(|_| {
        format!(
            "{p:?} is not in the assignment folder (the suite file's folder and the files \
                 registered with it)"
        )
    })?;
    if !meta.is_file() {
        return Err(format!("{p:?} is not a regular file"));
    }
    std::fs::read_to_string(&full).map_err(|e| format!("{p:?}: {e}"))
}

impl PytestCheck {
    /// Validates a check's `pytest` section: the files exist, the rubric names tests that exist,
    /// no test is counted twice. Errors are `key: message`.
    pub(crate) fn resolve(raw: RawPytest, check_id: &str, dir: &Path) -> Result<Self, String> {
        if raw.tests.is_empty() && raw.hidden.is_empty() {
            return Err("pytest: give at least one test file in `tests` or `hidden`".into());
        }
        let default_points = raw.default_points.unwrap_or(1.0);
        if !points_ok(default_points) {
            return Err("pytest.default_points: must be a number >= 0".into());
        }
        let mut seen = BTreeSet::new();
        let mut cases = Vec::new();
        for (key, files, hidden) in [("tests", &raw.tests, false), ("hidden", &raw.hidden, true)] {
            for (i, f) in files.iter().enumerate() {
                let key = format!("pytest.{key}[{i}]");
                assignment_path(dir, &key, f)?;
                if !f.ends_with(".py") {
                    return Err(format!("{key}: {f:?} is not a .py file"));
                }
                if !seen.insert(f.clone()) {
                    return Err(format!("{key}: {f:?} listed twice"));
                }
                let src = read_assignment(dir, f).map_err(|e| format!("{key}: {e}"))?;
                let found = pyscan::pytest_tests(&src);
                if found.is_empty() {
                    return Err(format!(
                        "{key}: {f:?} defines no test (test_* functions or Test* classes)"
                    ));
                }
                for t in found {
                    cases.push(TestCase {
                        file: f.clone(),
                        name: t.name,
                        doc: t.doc,
                        hidden,
                    });
                }
            }
        }
        for (i, f) in raw.support.iter().enumerate() {
            let key = format!("pytest.support[{i}]");
            assignment_path(dir, &key, f)?;
            if !seen.insert(f.clone()) {
                return Err(format!("{key}: {f:?} listed twice"));
            }
        }
        if let Some(c) = &raw.config {
            assignment_path(dir, "pytest.config", c)?;
            let ext = Path::new(c).extension().and_then(|e| e.to_str());
            if !matches!(ext, Some("ini" | "cfg" | "toml")) {
                return Err(format!(
                    "pytest.config: {c:?} must be a .ini, .cfg or .toml file (pytest reads it by its extension)"
                ));
            }
            if seen.contains(c) {
                return Err(format!(
                    "pytest.config: {c:?} is also a test or support file"
                ));
            }
        }

        // Which cases a rubric key names.
        let resolve_key = |key: &str, what: &str| -> Result<Vec<usize>, String> {
            if key.contains('[') {
                return Err(format!(
                    "{what}: {key:?}: name a test function (name, Class::name or file::name); its parametrized cases count together"
                ));
            }
            let hits: Vec<usize> = cases
                .iter()
                .enumerate()
                .filter(|(_, c)| c.name == key || c.node() == key)
                .map(|(i, _)| i)
                .collect();
            match hits.len() {
                0 => Err(format!(
                    "{what}: {key:?} is not a test of {}",
                    files_list(&cases)
                )),
                1 => Ok(hits),
                _ => Err(format!(
                    "{what}: {key:?} is ambiguous ({}); write FILE::NAME",
                    hits.iter()
                        .map(|&i| cases[i].node())
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            }
        };

        let mut owner: Vec<Option<String>> = vec![None; cases.len()];
        let mut items = Vec::new();
        let mut group_ids = BTreeSet::new();
        for (g_i, g) in raw.groups.iter().enumerate() {
            let key = format!("pytest.groups[{g_i}]");
            if g.id.is_empty()
                || !g
                    .id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
            {
                return Err(format!(
                    "{key}.id: {:?} must be made of letters, digits, '_', '-' and '.'",
                    g.id
                ));
            }
            if !group_ids.insert(g.id.clone()) {
                return Err(format!("{key}.id: {:?} used twice", g.id));
            }
            if g.tests.is_empty() {
                return Err(format!("{key}.tests: must not be empty"));
            }
            let points = g.points.unwrap_or(default_points);
            if !points_ok(points) {
                return Err(format!("{key}.points: must be a number >= 0"));
            }
            let mut members = Vec::new();
            for (t_i, t) in g.tests.iter().enumerate() {
                for m in resolve_key(t, &format!("{key}.tests[{t_i}]"))? {
                    if let Some(o) = &owner[m] {
                        return Err(format!(
                            "{key}.tests[{t_i}]: {} is already in {o}",
                            cases[m].node()
                        ));
                    }
                    owner[m] = Some(format!("group {:?}", g.id));
                    members.push(m);
                }
            }
            items.push(Item {
                id: format!("{check_id}/{}", g.id),
                description: g.description.clone().unwrap_or_else(|| g.id.clone()),
                points,
                hidden: members.iter().any(|&m| cases[m].hidden),
                members,
            });
        }
        let mut weights: Vec<Option<f64>> = vec![None; cases.len()];
        for (k, p) in &raw.points {
            let what = format!("pytest.points.{k}");
            if !points_ok(*p) {
                return Err(format!("{what}: must be a number >= 0"));
            }
            for m in resolve_key(k, &what)? {
                if let Some(o) = &owner[m] {
                    return Err(format!(
                        "{what}: {} is in {o}, which has its own points",
                        cases[m].node()
                    ));
                }
                if weights[m].is_some() {
                    return Err(format!("{what}: {} is given points twice", cases[m].node()));
                }
                weights[m] = Some(*p);
            }
        }
        for (i, c) in cases.iter().enumerate() {
            if owner[i].is_none() {
                items.push(Item {
                    id: format!("{check_id}/{}", c.node()),
                    description: c.doc.clone().unwrap_or_else(|| c.node()),
                    points: weights[i].unwrap_or(default_points),
                    hidden: c.hidden,
                    members: vec![i],
                });
            }
        }
        // Groups first, then the tests in file order; keep the files' order overall.
        items.sort_by_key(|it| it.members.iter().copied().min().unwrap_or(usize::MAX));
        Ok(PytestCheck {
            tests: raw.tests,
            hidden: raw.hidden,
            support: raw.support,
            config: raw.config,
            cases,
            items,
            test_timeout: raw.test_timeout.map(|m| m.duration()),
        })
    }

    /// The rubric's total.
    pub fn max_points(&self) -> f64 {
        self.items.iter().map(|i| i.points).sum()
    }

    /// Whether the assignment ships a `conftest.py` (then pytest may load conftest files, from
    /// the read-only test folder only).
    pub fn has_conftest(&self) -> bool {
        self.support
            .iter()
            .any(|s| Path::new(s).file_name().is_some_and(|n| n == "conftest.py"))
    }
}

fn files_list(cases: &[TestCase]) -> String {
    let files: BTreeSet<&str> = cases.iter().map(|c| c.file.as_str()).collect();
    files.into_iter().collect::<Vec<_>>().join(", ")
}
