//! The words of a pytest check's rows: a failure's headline, an import error's exception and
//! place, the file size limit a flood of output met, files that shadow pytest's modules.

use corral_sandbox::Size;

pub(super) fn clip(s: &str, max: usize) -> String {
    crate::report::cut_text(s, max, "...")
}

/// pytest's own words for a student's program that reads its input while tested (`input()`
/// in a tested function, or at import), which end "Consider using `-s`", a flag students do
/// not control: said as what their code did.
fn reads_stdin(text: &str) -> Option<String> {
    text.contains("reading from stdin while output is captured")
        .then(|| {
            "the code reads standard input (input()) while it is tested: a tested function, or the \
         module as it is imported, must not wait for what a user types"
                .to_string()
        })
}

/// The first meaningful line of a failure text (pytest's `E   ...` line when there is one).
pub(super) fn headline(text: &str) -> String {
    if let Some(said) = reads_stdin(text) {
        return said;
    }
    let e_line = text
        .lines()
        .find(|l| l.trim_start().starts_with("E "))
        .map(|l| l.trim_start().trim_start_matches('E').trim().to_string());
    let first = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    clip(&e_line.unwrap_or_else(|| first.to_string()), 300)
}

/// The line that says why a test file could not be imported: pytest's report of it ends with
/// the exception (`E   SyntaxError: invalid syntax`), after where it was raised (`E     File
/// "/home/sandbox/stats.py", line 1` for a syntax error, which `headline` would pick): the
/// exception, then the file's name and line when pytest gave them.
pub(super) fn import_headline(text: &str) -> String {
    if let Some(said) = reads_stdin(text) {
        return said;
    }
    let lines: Vec<&str> = text
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("E "))
        .map(str::trim)
        .collect();
    let exception = lines.iter().rev().find(|l| {
        let name = l.split(':').next().unwrap_or("");
        !name.is_empty()
            && name.len() < l.len()
            && name
                .chars()
                .all(|c| c.is_alphanumeric() || c == '_' || c == '.')
            && ["Error", "Exception", "Exit", "Interrupt"]
                .iter()
                .any(|e| name.ends_with(e))
    });
    let Some(exception) = exception else {
        return headline(text);
    };
    let place = lines.iter().find_map(|l| {
        let rest = l.strip_prefix("File \"")?;
        let (file, rest) = rest.split_once('"')?;
        let line = rest.strip_prefix(", line ")?;
        let name = file.rsplit('/').next().unwrap_or(file);
        Some(format!("{name}, line {line}"))
    });
    clip(
        &match place {
            Some(p) => format!("{exception} ({p})"),
            None => exception.to_string(),
        },
        300,
    )
}

/// Python ignores SIGXFSZ, so a write past the file size limit fails with `EFBIG`, and pytest's
/// capture of a test's output is a file: a test that prints a flood fails with an `OSError`
/// that names no limit. Say which one it met.
pub(super) fn name_file_size_limit(headline: String, limit: Size) -> String {
    if headline.contains("[Errno 27]") {
        format!(
            "{headline} (a file, or the test's printed output, reached the file size limit of \
             {limit})"
        )
    } else {
        headline
    }
}

/// corral's words for files (module name, file) that shadow modules pytest imports.
pub(super) fn shadow_message(found: &[(&String, &String)]) -> Option<String> {
    let files: Vec<&str> = found.iter().map(|(_, f)| f.as_str()).collect();
    let mods: Vec<&str> = found.iter().map(|(m, _)| m.as_str()).collect();
    match found.len() {
        0 => None,
        1 => Some(format!(
            "pytest could not start: the submission's {} has the name of the module {}, which \
             pytest imports, and Python finds the submission's file first: rename it",
            files[0], mods[0]
        )),
        _ => Some(format!(
            "pytest could not start: the submission's {} have the names of the modules {}, \
             which pytest imports, and Python finds the submission's files first: rename them",
            files.join(", "),
            mods.join(", ")
        )),
    }
}
