//! The rules for the names of stored files (uploads and revisions).

use std::path::{Component, Path};

use crate::error::{Result, StoreError};

/// Limits on the names of uploaded files.
pub const MAX_COMPONENT: usize = 255;
pub const MAX_PATH: usize = 1024;

/// Checks that `path` is a plain relative path (`a/b/c.txt`) at most `max_depth` components deep:
/// no `..` or `.`, not absolute, no empty component, no NUL, no backslash, no control characters.
/// Returns the normalised form.
pub fn validate_path(path: &str, max_depth: usize) -> Result<String> {
    // Names are untrusted and may be huge: an error quotes at most SHOWN characters of one.
    const SHOWN: usize = 200;
    let mut shown: String = path.chars().take(SHOWN).collect();
    if shown.len() < path.len() {
        shown.push('…');
    }
    let bad = |why: &str| Err(StoreError::Invalid(format!("file name {shown:?}: {why}")));
    if path.is_empty() {
        return bad("empty name");
    }
    if path.len() > MAX_PATH {
        return bad("name too long");
    }
    if path.contains('\0') {
        return bad("contains a NUL byte");
    }
    if path.contains('\\') {
        return bad("contains a backslash; use '/' between folders");
    }
    if path.chars().any(|c| c.is_control()) {
        return bad("contains a control character");
    }
    if path.starts_with('/') {
        return bad("absolute paths are not allowed");
    }
    let mut parts = Vec::new();
    for c in path.split('/') {
        match c {
            "" => return bad("empty folder name (double or trailing '/')"),
            "." | ".." => return bad("'.' and '..' are not allowed"),
            c if c.len() > MAX_COMPONENT => return bad("a name is longer than 255 bytes"),
            c => parts.push(c),
        }
    }
    if parts.len() > max_depth {
        return bad(&format!("nested deeper than {max_depth} levels"));
    }
    // Belt and braces: what the OS would make of it.
    if Path::new(path)
        .components()
        .any(|c| !matches!(c, Component::Normal(_)))
    {
        return bad("not a plain relative path");
    }
    Ok(parts.join("/"))
}

/// Checks that no file of the set is also a folder of another (`a` and `a/b`) and that names are
/// unique.
pub fn check_tree(paths: &[&str]) -> Result<()> {
    let mut files = std::collections::BTreeSet::new();
    let mut dirs = std::collections::BTreeSet::new();
    for p in paths {
        if !files.insert(*p) {
            return Err(StoreError::Invalid(format!("file name {p:?} given twice")));
        }
        let mut acc = String::new();
        let parts: Vec<&str> = p.split('/').collect();
        for part in &parts[..parts.len() - 1] {
            if !acc.is_empty() {
                acc.push('/');
            }
            acc.push_str(part);
            dirs.insert(acc.clone());
        }
    }
    if let Some(clash) = files.iter().find(|f| dirs.contains(**f)) {
        return Err(StoreError::Invalid(format!(
            "{clash:?} is both a file and a folder"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_plain_and_relative() {
        assert_eq!(validate_path("hello.c", 8).unwrap(), "hello.c");
        assert_eq!(validate_path("src/a/b.c", 8).unwrap(), "src/a/b.c");
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../b",
            "a/./b",
            "a//b",
            "a/",
            "a\\b",
            "a\0b",
            "a\nb",
            ".",
        ] {
            assert!(validate_path(bad, 8).is_err(), "{bad:?} accepted");
        }
        assert!(validate_path("a/b/c", 2).is_err());
        assert!(validate_path(&"x".repeat(300), 8).is_err());
    }

    #[test]
    fn trees_have_no_clashes() {
        assert!(check_tree(&["a/b", "a/c", "d"]).is_ok());
        assert!(check_tree(&["a", "a/b"]).is_err());
        assert!(check_tree(&["a", "a"]).is_err());
    }
}
