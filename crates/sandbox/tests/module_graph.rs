//! No module of the sandbox imports its importer, directly or around a loop: the modules' own
//! `crate::…` / `super::…` references (comments aside) form an acyclic graph. A grep-level check,
//! so it runs without building anything and names the loop when one appears.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Module path (`inside::child`) → file, for every `.rs` file under `src`.
fn modules(src: &Path) -> BTreeMap<String, PathBuf> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("readable src") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(src).unwrap().with_extension("");
            let mut parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(parts.last().map(String::as_str), Some("lib" | "mod")) {
                parts.pop();
            }
            out.insert(parts.join("::"), path);
        }
    }
    out
}

/// Every path a file names through `crate::` or `super::` (braced groups expanded one level).
fn referenced_paths(module: &str, code: &str) -> Vec<String> {
    let parent = module.rsplit_once("::").map_or("", |(p, _)| p);
    let mut out = Vec::new();
    for (anchor, base) in [("crate::", ""), ("super::", parent)] {
        for (at, _) in code.match_indices(anchor) {
            let before = code[..at].chars().last();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let rest = &code[at + anchor.len()..];
            let len = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(rest.len());
            let head = rest[..len].trim_end_matches(':');
            let prefix = [base, head]
                .iter()
                .filter(|s| !s.is_empty())
                .copied()
                .collect::<Vec<_>>()
                .join("::");
            match rest[len..].strip_prefix('{') {
                Some(group) => {
                    let group = &group[..group.find('}').unwrap_or(group.len())];
                    for item in group.split(',') {
                        let item = item.split_whitespace().next().unwrap_or("");
                        match item {
                            "" => {}
                            "self" => out.push(prefix.clone()),
                            _ => out.push(format!("{prefix}::{item}")),
                        }
                    }
                }
                None => out.push(prefix),
            }
        }
    }
    out
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mods = modules(&src);
    let resolve = |path: &str| {
        let segs: Vec<&str> = path.split("::").collect();
        (1..=segs.len())
            .rev()
            .map(|n| segs[..n].join("::"))
            .find(|m| mods.contains_key(m))
    };
    let mut edges = BTreeMap::new();
    for (module, file) in &mods {
        // The crate root and a folder's mod.rs only declare and re-export.
        if module.is_empty() || file.ends_with("mod.rs") {
            continue;
        }
        let code: String = std::fs::read_to_string(file)
            .unwrap()
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        let targets: BTreeSet<String> = referenced_paths(module, &code)
            .iter()
            .filter_map(|p| resolve(p))
            .filter(|t| t != module && !t.is_empty() && !mods[t].ends_with("mod.rs"))
            .collect();
        edges.insert(module.clone(), targets);
    }
    edges
}

/// A loop of modules, if there is one.
fn find_cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        m: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == m) {
            let mut cycle = path[i..].to_vec();
            cycle.push(m.to_string());
            return Some(cycle);
        }
        if done.contains(m) {
            return None;
        }
        path.push(m.to_string());
        for t in edges.get(m).into_iter().flatten() {
            if let Some(c) = visit(t, edges, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(m.to_string());
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|m| visit(m, edges, &mut Vec::new(), &mut done))
}

#[test]
fn sandbox_modules_form_no_cycle() {
    let edges = graph();
    let listing: String = edges
        .iter()
        .filter(|(_, t)| !t.is_empty())
        .map(|(m, t)| {
            format!(
                "{m} -> {}\n",
                t.iter().cloned().collect::<Vec<_>>().join(", ")
            )
        })
        .collect();
    if let Some(cycle) = find_cycle(&edges) {
        panic!("module cycle: {}\n\n{listing}", cycle.join(" -> "));
    }
    // The split this check guards: what runs inside the sandbox never reaches back to the
    // supervisor's side, and a running program's handle never reaches its sandbox.
    assert!(edges["inside::child"]
        .iter()
        .all(|t| !t.starts_with("sandbox")));
    assert!(!edges["execution"].contains("sandbox"), "{listing}");
}

#[test]
fn the_check_sees_a_cycle_when_there_is_one() {
    let mut edges = graph();
    edges
        .get_mut("inside::privileges")
        .unwrap()
        .insert("inside::child".into());
    let cycle = find_cycle(&edges).expect("child -> privileges -> child");
    assert!(cycle.contains(&"inside::child".to_string()), "{cycle:?}");
}

#[test]
fn references_are_read_from_use_groups_and_inline_paths() {
    let code = "use crate::inside::{landlock, netns};\nlet x = crate::inside::init::CONTROL_FD;\nuse super::{self, y};";
    let got = referenced_paths("inside::pid1", code);
    assert_eq!(
        got,
        [
            "inside::landlock",
            "inside::netns",
            "inside::init::CONTROL_FD",
            "inside",
            "inside::y"
        ]
    );
}
