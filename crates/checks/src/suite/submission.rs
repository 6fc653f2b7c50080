//! Which of a submission's files a suite grades (`submission: {include, exclude}`), as check50's
//! `.cs50.yml` `files:` says it: a student's 70 MB video or committed `node_modules` beside a
//! correct `caesar.c` is left out, not copied into every check's folder (where it would take the
//! disk limit and turn the grade into an error).
//!
//! A pattern is a glob (`*`, `?`, `[…]`, `**`): without a `/` it matches a name at any depth
//! (`*.c`), with one the whole path from the submission's top (`src/*.c`); a trailing `/`
//! names a folder and all it holds (`node_modules/`). Without `include` everything is included;
//! `exclude` wins.

use std::path::Path;

use globset::{GlobBuilder, GlobMatcher};
use serde::Deserialize;

/// The suite's `submission` key, as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSubmissionFiles {
    #[serde(default)]
    include: Vec<String>,
    #[serde(default)]
    exclude: Vec<String>,
}

/// One pattern, compiled.
#[derive(Debug, Clone)]
struct Pattern {
    glob: GlobMatcher,
    /// Ends with `/`: a folder and everything it holds.
    folder: bool,
    /// Has a `/` (other than the last character): matched against the whole path.
    anchored: bool,
}

impl Pattern {
    fn parse(text: &str) -> Result<Pattern, String> {
        let folder = text.ends_with('/');
        let body = text.trim_end_matches('/').trim_start_matches("./");
        if body.is_empty() || body.starts_with('/') || body.split('/').any(|c| c == "..") {
            return Err(format!(
                "{text:?} is no pattern of a submission's files (relative, without `..`)"
            ));
        }
        let glob = GlobBuilder::new(body)
            .literal_separator(true)
            .build()
            .map_err(|e| format!("{text:?}: {e}"))?
            .compile_matcher();
        Ok(Pattern {
            glob,
            folder,
            anchored: body.contains('/'),
        })
    }

    fn matches(&self, rel: &Path, is_dir: bool) -> bool {
        if self.folder && !is_dir {
            return false;
        }
        if self.anchored {
            self.glob.is_match(rel)
        } else {
            rel.file_name().is_some_and(|n| self.glob.is_match(n))
        }
    }
}

/// What a submission's files are graded: every one by default.
#[derive(Debug, Clone, Default)]
pub struct SubmissionFiles {
    include: Vec<Pattern>,
    exclude: Vec<Pattern>,
}

/// What becomes of an entry of the submission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Take {
    /// Left out (a folder: with all it holds).
    No,
    /// Taken (a folder: looked into, its entries decided one by one).
    Yes,
    /// A folder an `include` names: taken with all it holds but what `exclude` leaves out.
    All,
}

impl SubmissionFiles {
    /// Compiles the patterns; an error names the key (`include[1]: …`).
    pub fn resolve(raw: RawSubmissionFiles) -> Result<SubmissionFiles, String> {
        let compile = |key: &str, list: &[String]| -> Result<Vec<Pattern>, String> {
            list.iter()
                .enumerate()
                .map(|(i, p)| Pattern::parse(p).map_err(|e| format!("{key}[{i}]: {e}")))
                .collect()
        };
        Ok(SubmissionFiles {
            include: compile("include", &raw.include)?,
            exclude: compile("exclude", &raw.exclude)?,
        })
    }

    /// Whether every file is taken (no pattern at all).
    pub fn is_everything(&self) -> bool {
        self.include.is_empty() && self.exclude.is_empty()
    }

    /// What becomes of the entry at `rel` (relative to the submission) when its folder is taken
    /// as `parent` says.
    pub fn take(&self, rel: &Path, is_dir: bool, parent: Take) -> Take {
        if self.exclude.iter().any(|p| p.matches(rel, is_dir)) {
            return Take::No;
        }
        if parent == Take::All || self.include.is_empty() {
            return Take::All;
        }
        if is_dir {
            if self
                .include
                .iter()
                .any(|p| p.folder && p.matches(rel, true))
            {
                Take::All
            } else {
                // Looked into: a `*.c` may match deeper down.
                Take::Yes
            }
        } else if self
            .include
            .iter()
            .any(|p| !p.folder && p.matches(rel, false))
        {
            Take::Yes
        } else {
            Take::No
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(include: &[&str], exclude: &[&str]) -> SubmissionFiles {
        SubmissionFiles::resolve(RawSubmissionFiles {
            include: include.iter().map(|s| s.to_string()).collect(),
            exclude: exclude.iter().map(|s| s.to_string()).collect(),
        })
        .unwrap()
    }

    /// The files a walk takes, from `entries` (a `/` at the end: a folder).
    fn taken(f: &SubmissionFiles, entries: &[&str]) -> Vec<String> {
        let mut out = Vec::new();
        for e in entries {
            let is_dir = e.ends_with('/');
            let rel = Path::new(e.trim_end_matches('/'));
            // The parents' verdicts, from the top.
            let mut parent = Take::All;
            let mut at = std::path::PathBuf::new();
            let comps: Vec<_> = rel.components().collect();
            let mut left_out = false;
            for (i, c) in comps.iter().enumerate() {
                at.push(c);
                let last = i + 1 == comps.len();
                let t = f.take(
                    &at,
                    !last || is_dir,
                    if i == 0 { Take::Yes } else { parent },
                );
                if t == Take::No {
                    left_out = true;
                    break;
                }
                parent = t;
            }
            if !left_out && !is_dir {
                out.push(e.to_string());
            }
        }
        out
    }

    #[test]
    fn patterns_pick_a_submissions_files_as_check50_does() {
        let entries = [
            "caesar.c",
            "helpers.h",
            "demo.mp4",
            "src/extra.c",
            "node_modules/x/index.js",
            "docs/notes.txt",
            "Makefile",
        ];
        let all = files(&[], &[]);
        assert!(all.is_everything());
        assert_eq!(taken(&all, &entries).len(), entries.len());
        let c = files(&["*.c", "*.h", "Makefile"], &[]);
        assert_eq!(
            taken(&c, &entries),
            ["caesar.c", "helpers.h", "src/extra.c", "Makefile"]
        );
        let anchored = files(&["*.c"], &["src/*.c"]);
        assert_eq!(taken(&anchored, &entries), ["caesar.c"]);
        let junk = files(&[], &["*.mp4", "node_modules/"]);
        assert_eq!(
            taken(&junk, &entries),
            [
                "caesar.c",
                "helpers.h",
                "src/extra.c",
                "docs/notes.txt",
                "Makefile"
            ]
        );
        let folder = files(&["docs/"], &[]);
        assert_eq!(taken(&folder, &entries), ["docs/notes.txt"]);
    }

    #[test]
    fn bad_patterns_name_their_key() {
        let bad = |include: &[&str]| {
            SubmissionFiles::resolve(RawSubmissionFiles {
                include: include.iter().map(|s| s.to_string()).collect(),
                exclude: vec![],
            })
            .unwrap_err()
        };
        assert!(
            bad(&["*.c", "[oops"]).starts_with("include[1]: \"[oops\""),
            "{}",
            bad(&["*.c", "[oops"])
        );
        assert!(bad(&["../x"]).contains("without `..`"));
        assert!(bad(&["/etc/*"]).contains("relative"));
    }
}
