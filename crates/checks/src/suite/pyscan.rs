//! A small scanner of the *assignment's own* Python files (pytest test files, check50 problem
//! checks): which test functions, classes and `@check50.check` functions they define, with
//! their docstrings and decorator arguments.
//!
//! This reads trusted files written by course staff, at suite load time, so that a suite's rubric
//! is validated (and its maximum score known) before anything runs. It is not a Python parser: it
//! splits the source into logical lines (strings, comments, brackets and continuations are
//! understood) and reads `def` / `class` statements at the top level and one class level down.
//! Submissions are never read by this module: untrusted Python is only ever parsed inside a
//! sandbox (see [`crate::safety_scan`]).

/// A logical line: where it starts, its indentation, its text (comments removed), and when the
/// whole line is one string literal, that string's contents.
#[derive(Debug, Clone)]
struct Logical {
    line: usize,
    indent: usize,
    text: String,
    string_only: Option<String>,
    /// The line's string literals in order; each is `""` in `text`.
    strings: Vec<String>,
}

/// A function or class found at the top level (or a method of a top-level class).
#[derive(Debug, Clone, PartialEq)]
pub struct Def {
    pub name: String,
    pub is_class: bool,
    /// 1-based line of the `def` / `class`.
    pub line: usize,
    /// Decorators as written, without the `@`.
    pub decorators: Vec<String>,
    /// A class's bases as written (between the parentheses).
    pub bases: String,
    /// First line of the docstring.
    pub doc: Option<String>,
    /// The whole docstring, as written.
    pub docstring: Option<String>,
    /// Methods (and nested classes) of a class.
    pub body: Vec<Def>,
}

fn logical_lines(src: &str) -> Vec<Logical> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let mut line = 1;
    while i < chars.len() {
        // Start of a physical line: measure the indentation.
        let start_line = line;
        let mut indent = 0;
        while i < chars.len() && (chars[i] == ' ' || chars[i] == '\t') {
            indent += if chars[i] == '\t' { 8 - indent % 8 } else { 1 };
            i += 1;
        }
        let mut text = String::new();
        let mut depth = 0i32;
        let mut strings: Vec<String> = Vec::new();
        let mut only_string = true;
        loop {
            if i >= chars.len() {
                break;
            }
            let c = chars[i];
            if c == '#' {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
                continue;
            }
            if c == '\\' && chars.get(i + 1) == Some(&'\n') {
                i += 2;
                line += 1;
                text.push(' ');
                continue;
            }
            if c == '\n' {
                i += 1;
                line += 1;
                if depth > 0 {
                    text.push(' ');
                    continue;
                }
                break;
            }
            if c == '"' || c == '\'' {
                // A string literal (the prefix letters, if any, are already in `text`).
                let triple = chars.get(i + 1) == Some(&c) && chars.get(i + 2) == Some(&c);
                let q = if triple { 3 } else { 1 };
                let raw = text
                    .chars()
                    .rev()
                    .take_while(|ch| ch.is_ascii_alphabetic())
                    .any(|ch| ch == 'r' || ch == 'R');
                i += q;
                let mut s = String::new();
                while i < chars.len() {
                    let d = chars[i];
                    if d == '\\' && !raw && i + 1 < chars.len() {
                        let e = chars[i + 1];
                        if e == '\n' {
                            line += 1;
                        }
                        s.push(match e {
                            'n' => '\n',
                            't' => '\t',
                            other => other,
                        });
                        i += 2;
                        continue;
                    }
                    if d == '\n' {
                        line += 1;
                        if !triple {
                            break; // unterminated: stop at the line's end
                        }
                    }
                    if d == c
                        && (!triple
                            || (chars.get(i + 1) == Some(&c) && chars.get(i + 2) == Some(&c)))
                    {
                        i += q;
                        break;
                    }
                    s.push(d);
                    i += 1;
                }
                text.push_str("\"\"");
                strings.push(s);
                continue;
            }
            match c {
                '(' | '[' | '{' => depth += 1,
                ')' | ']' | '}' => depth -= 1,
                _ => {}
            }
            if !c.is_whitespace() {
                only_string = false;
            }
            text.push(c);
            i += 1;
        }
        let trimmed = text.trim().to_string();
        if trimmed.is_empty() {
            continue;
        }
        let string_only = (only_string && strings.len() == 1).then(|| strings[0].clone());
        out.push(Logical {
            line: start_line,
            indent,
            text: trimmed,
            string_only,
            strings,
        });
    }
    out
}

/// The name after `def` / `async def` / `class`, and whether it is a class.
fn def_name(text: &str) -> Option<(String, bool)> {
    let rest = text
        .strip_prefix("async ")
        .map(str::trim_start)
        .unwrap_or(text);
    let (rest, is_class) = if let Some(r) = rest.strip_prefix("def ") {
        (r, false)
    } else if let Some(r) = rest.strip_prefix("class ") {
        (r, true)
    } else {
        return None;
    };
    let name: String = rest
        .trim_start()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty()).then_some((name, is_class))
}

fn bases_of(text: &str) -> String {
    match (text.find('('), text.rfind(')')) {
        (Some(a), Some(b)) if b > a => text[a + 1..b].trim().to_string(),
        _ => String::new(),
    }
}

/// Where definitions are looked for: also inside the module's own `if` / `try` / `with` blocks
/// (a module attribute still: check50 registers a check defined under
/// `if sys.version_info >= (3, 8):`), or at the top level only.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Blocks {
    Entered,
    Skipped,
}

/// A statement that opens a block whose definitions are the module's (not a loop: a `def` in a
/// loop is made once per turn, under one name).
fn opens_module_block(text: &str) -> bool {
    let word: String = text
        .chars()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect();
    matches!(
        word.as_str(),
        "if" | "elif" | "else" | "try" | "except" | "finally" | "with"
    ) && text.trim_end().ends_with(':')
}

/// Definitions in `lines[from..to]` at exactly `indent`.
fn defs_at(
    lines: &[Logical],
    from: usize,
    to: usize,
    indent: usize,
    depth: usize,
    blocks: Blocks,
) -> Vec<Def> {
    let mut out = Vec::new();
    let mut decorators = Vec::new();
    let mut i = from;
    while i < to {
        let l = &lines[i];
        if l.indent != indent {
            i += 1;
            continue;
        }
        if let Some(d) = l.text.strip_prefix('@') {
            decorators.push(d.trim().to_string());
            i += 1;
            continue;
        }
        if blocks == Blocks::Entered && depth == 0 && opens_module_block(&l.text) {
            let mut end = i + 1;
            while end < to && lines[end].indent > indent {
                end += 1;
            }
            if end > i + 1 {
                out.extend(defs_at(
                    lines,
                    i + 1,
                    end,
                    lines[i + 1].indent,
                    depth,
                    blocks,
                ));
            }
            decorators.clear();
            i = end;
            continue;
        }
        let Some((name, is_class)) = def_name(&l.text) else {
            decorators.clear();
            i += 1;
            continue;
        };
        // The body: the following lines indented deeper.
        let mut end = i + 1;
        while end < to && lines[end].indent > indent {
            end += 1;
        }
        let docstring = lines
            .get(i + 1)
            .filter(|n| i + 1 < end && n.indent > indent)
            .and_then(|n| n.string_only.clone());
        let doc = docstring
            .as_deref()
            .and_then(|s| s.lines().map(str::trim).find(|x| !x.is_empty()))
            .map(str::to_string);
        let body = if is_class && depth < 2 && end > i + 1 {
            defs_at(lines, i + 1, end, lines[i + 1].indent, depth + 1, blocks)
        } else {
            Vec::new()
        };
        out.push(Def {
            name,
            is_class,
            line: l.line,
            decorators: std::mem::take(&mut decorators),
            bases: if is_class {
                bases_of(&l.text)
            } else {
                String::new()
            },
            doc,
            docstring,
            body,
        });
        i = end;
    }
    out
}

/// The top-level definitions of a Python source file.
pub fn scan(src: &str) -> Vec<Def> {
    let lines = logical_lines(src);
    defs_at(&lines, 0, lines.len(), 0, 0, Blocks::Skipped)
}

/// A test pytest collects with its default settings (`python_functions = test*`,
/// `python_classes = Test*`, `unittest.TestCase` subclasses).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestFn {
    /// `test_add` or `TestMath::test_add` (the node id without the file and parameters).
    pub name: String,
    pub doc: Option<String>,
    pub line: usize,
}

/// The tests pytest would collect from this file by default.
pub fn pytest_tests(src: &str) -> Vec<TestFn> {
    let mut out = Vec::new();
    for d in scan(src) {
        if !d.is_class && d.name.starts_with("test") {
            out.push(TestFn {
                name: d.name,
                doc: d.doc,
                line: d.line,
            });
        } else if d.is_class {
            let unittest = d.bases.contains("TestCase");
            if !(unittest || d.name.starts_with("Test")) {
                continue;
            }
            if d.body.iter().any(|m| m.name == "__init__" && !m.is_class) {
                continue; // pytest does not collect classes with a constructor
            }
            for m in &d.body {
                if !m.is_class && m.name.starts_with("test") {
                    out.push(TestFn {
                        name: format!("{}::{}", d.name, m.name),
                        doc: m.doc.clone(),
                        line: m.line,
                    });
                }
            }
        }
    }
    out
}

/// A check of a check50 problem: a function of the module (at its top level, or in its own
/// `if` / `try` / `with` blocks) decorated with `@check50.check(...)`, under any name check50 or
/// its `check` is imported as (`import check50 as c5` → `@c5.check()`, `from check50 import
/// check as chk` → `@chk()`; `@check(...)` always).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check50Fn {
    pub name: String,
    pub dependency: Option<String>,
    /// Its description, as check50 gives it: the docstring (its lines joined by single spaces),
    /// else the name with `_` as spaces.
    pub description: String,
    /// 1-based line of the `def`.
    pub line: usize,
}

/// The names `check50.check` goes by in a module: `check50.check`, `check`, and the aliases its
/// imports give.
fn check50_decorators(lines: &[Logical]) -> Vec<String> {
    let mut names = vec!["check50.check".to_string(), "check".to_string()];
    for l in lines {
        let text = l.text.trim();
        if let Some(list) = text.strip_prefix("import ") {
            for item in list.split(',') {
                let words: Vec<&str> = item.split_whitespace().collect();
                if let ["check50", "as", alias] = words[..] {
                    names.push(format!("{alias}.check"));
                }
            }
        } else if let Some(rest) = text.strip_prefix("from ") {
            let Some(list) = rest.trim_start().strip_prefix("check50 import ") else {
                continue;
            };
            let list = list.trim().trim_start_matches('(').trim_end_matches(')');
            for item in list.split(',') {
                let words: Vec<&str> = item.split_whitespace().collect();
                if let ["check", "as", alias] = words[..] {
                    names.push(alias.to_string());
                }
            }
        }
    }
    names
}

/// A description as check50 shows it, on one line: a docstring's lines joined by single spaces.
pub fn one_line(description: &str) -> String {
    description.split_whitespace().collect::<Vec<_>>().join(" ")
}

pub fn check50_checks(src: &str) -> Vec<Check50Fn> {
    let lines = logical_lines(src);
    let decorators = check50_decorators(&lines);
    let mut out = Vec::new();
    for d in defs_at(&lines, 0, lines.len(), 0, 0, Blocks::Entered) {
        if d.is_class {
            continue;
        }
        let Some(args) = d.decorators.iter().find_map(|dec| {
            let dec = dec.trim();
            let rest = decorators.iter().find_map(|name| {
                let rest = dec.strip_prefix(name.as_str())?.trim();
                (rest.is_empty() || rest.starts_with('(')).then_some(rest)
            })?;
            if rest.is_empty() {
                return Some(String::new());
            }
            rest.strip_prefix('(')
                .and_then(|r| r.strip_suffix(')'))
                .map(str::to_string)
        }) else {
            continue;
        };
        let mut dependency = None;
        for (k, a) in args.split(',').map(str::trim).enumerate() {
            let v = if let Some(v) = a.strip_prefix("dependency") {
                v.trim_start().strip_prefix('=').map(str::trim)
            } else if k == 0 && !a.contains('=') {
                Some(a)
            } else {
                None
            };
            if let Some(v) = v.filter(|v| !v.is_empty() && *v != "None") {
                dependency = Some(v.to_string());
            }
        }
        let description = d
            .docstring
            .as_deref()
            .map(one_line)
            .filter(|d| !d.is_empty())
            .unwrap_or_else(|| d.name.replace('_', " "));
        out.push(Check50Fn {
            name: d.name,
            dependency,
            description,
            line: d.line,
        });
    }
    out
}

/// The problems a check50 checks file imports checks from, at the top level, with their lines:
/// `check50.import_checks("../less")` (also as `__import__("check50").import_checks(...)`), as
/// CS50's "more comfortable" problems do (`from less import *` then brings them in). check50
/// registers the imported checks when that line runs, so they come in at its place.
pub fn check50_imports(src: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for l in logical_lines(src).into_iter().filter(|l| l.indent == 0) {
        let mut rest = l.text.as_str();
        let mut seen = 0;
        while let Some(at) = rest.find("import_checks(") {
            seen += rest[..at].matches("\"\"").count();
            let after = rest[at + "import_checks(".len()..].trim_start();
            if after.starts_with("\"\"") {
                if let Some(path) = l.strings.get(seen) {
                    out.push((l.line, path.clone()));
                }
            }
            rest = &rest[at + "import_checks(".len()..];
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_tests_like_pytest() {
        let src = r#"
import pytest
from solution import add  # a comment with def test_fake():

HELP = """
def test_in_a_string():
    pass
"""

def helper():
    pass

def test_add():
    """adds two numbers
    more text"""
    assert add(1, 2) == 3

@pytest.mark.parametrize("a,b", [
    (1, 2),
    (3, 4),
])
def test_params(a, b):
    assert add(a, b) == a + b

async def test_async(): pass

class TestMath:
    '''not a test's docstring'''
    def test_mul(self):
        'multiplies'
        x = 1 \
            + 2
    def helper(self): pass

class TestWithInit:
    def __init__(self): pass
    def test_never(self): pass

class Other(unittest.TestCase):
    def test_case(self): pass

if True:
    def test_nested(): pass
"#;
        let names: Vec<String> = pytest_tests(src).into_iter().map(|t| t.name).collect();
        assert_eq!(
            names,
            [
                "test_add",
                "test_params",
                "test_async",
                "TestMath::test_mul",
                "Other::test_case"
            ]
        );
        let t = pytest_tests(src);
        assert_eq!(t[0].doc.as_deref(), Some("adds two numbers"));
        assert_eq!(t[3].doc.as_deref(), Some("multiplies"));
        assert_eq!(t[0].line, 13);
    }

    #[test]
    fn finds_check50_checks() {
        let src = r#"
import check50
import check50.c

@check50.check()
def exists():
    """hello.c exists"""
    check50.exists("hello.c")

@check50.check(exists)
def compiles():
    """hello.c compiles"""

@check50.check(dependency=compiles, timeout=5)
def greets():
    """greets"""

def not_a_check(): pass
"#;
        let c = check50_checks(src);
        assert_eq!(c.len(), 3);
        assert_eq!(c[0].dependency, None);
        assert_eq!(c[1].dependency.as_deref(), Some("exists"));
        assert_eq!(c[2].dependency.as_deref(), Some("compiles"));
        assert_eq!(c[0].description, "hello.c exists");
        assert_eq!((c[0].line, c[2].line), (6, 15));
    }

    /// The problems a course writes itself: check50 imported under another name, checks in
    /// the module's own blocks, a docstring of several lines, a check without one.
    #[test]
    fn finds_check50_checks_under_aliases_and_in_module_blocks() {
        let src = r#"
import sys, check50 as c5
from check50 import (exists as ex, check as chk)

@c5.check()
def exists():
    """first line
    and a second"""

@chk(exists)
def no_docstring():
    pass

if sys.version_info >= (3, 8):
    @check50.check(exists)
    def in_if():
        "in an if"
else:
    @check50.check(exists)
    def in_else(): pass

try:
    @c5.check(exists)
    def in_try(): pass
except ImportError:
    pass

for n in ["a", "b"]:
    @check50.check()
    def in_a_loop(): pass

def helper():
    @check50.check()
    def in_a_function(): pass

@checker()
def not_a_check(): pass
"#;
        let c = check50_checks(src);
        let names: Vec<&str> = c.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            ["exists", "no_docstring", "in_if", "in_else", "in_try"]
        );
        assert_eq!(c[0].description, "first line and a second");
        assert_eq!(c[1].description, "no docstring");
        assert_eq!(c[1].dependency.as_deref(), Some("exists"));
        assert_eq!(c[2].description, "in an if");
        assert_eq!(c[4].line, 24);
    }

    #[test]
    fn finds_check50_imports() {
        // CS50's mario/more, and the form check50's documentation shows.
        let src = r#"less = __import__("check50").import_checks("../less")
from less import *
import check50
base = check50.import_checks(
    '../base'  # a comment
)
def later():
    inner = check50.import_checks("not/top/level")
HELP = "import_checks('in a string')"
"#;
        assert_eq!(
            check50_imports(src),
            [(1, "../less".to_string()), (4, "../base".to_string())]
        );
    }
}
