//! A report as check50-style text for a person's terminal: a mark per check, why it failed, the
//! end of its log, and every character that could drive the terminal written out.

use super::model::{Report, View};
use super::values::show;

impl Report {
    /// check50-style text: ✓ (green) / ✗ (red) / `:|` (yellow, skipped), the description, and for
    /// failures the reason, "expected X, not Y" and the end of check50's log.
    pub fn render_text(&self, view: View, color: bool) -> String {
        let paint = |code: &str, s: &str| {
            if color {
                format!("\x1b[{code}m{s}\x1b[0m")
            } else {
                s.to_string()
            }
        };
        let mut out = String::new();
        for r in self.results.iter().filter(|r| !r.omitted(view)) {
            let (mark, code) = match r.result {
                Some(true) => ("\u{2713}", "32"),
                Some(false) => ("\u{2717}", "31"),
                None => (":|", "33"),
            };
            let points = if r.max_points > 0.0 {
                format!(" [{}/{}]", fmt_num(r.points), fmt_num(r.max_points))
            } else {
                String::new()
            };
            let hidden = if r.hidden { " (hidden)" } else { "" };
            out.push_str(&paint(
                code,
                &format!("{mark} {}{hidden}{points}", inert(&r.description)),
            ));
            out.push('\n');
            if let Some(m) = r.visible_message(view) {
                if r.result != Some(true) {
                    let mut lines = m.lines();
                    if let Some(first) = lines.next() {
                        out.push_str(&format!("    {}\n", paint(code, &inert(first))));
                    }
                    for l in lines {
                        out.push_str(&format!("      {}\n", inert(l)));
                    }
                }
            }
            if let Some(d) = r.visible_diagnostics(view) {
                for l in d.lines() {
                    out.push_str(&format!("      {}\n", inert(l)));
                }
            }
            if r.result == Some(false) {
                // What check50 logged for a failed check (what it ran, sent and looked for; a
                // compiler's errors; valgrind's findings), as its web page shows: the last lines.
                let log: Vec<&str> = r
                    .visible_script(view)
                    .into_iter()
                    .filter(|e| e.expected.kind == "log")
                    .filter_map(|e| e.expected.value.as_str())
                    .flat_map(str::lines)
                    .collect();
                last_lines(&mut out, "log", &log);
            }
            if view == View::Staff && r.result == Some(true) {
                // A grader's own output when it worked (the check's row says its end when it
                // did not): the first place staff look, as Gradescope's "Autograder Output".
                let output: Vec<&str> = r
                    .script
                    .iter()
                    .filter(|e| {
                        (e.expected.kind.as_str(), e.actual.kind.as_str()) == ("run", "output")
                    })
                    .filter_map(|e| e.actual.value.as_str())
                    .flat_map(str::lines)
                    .collect();
                last_lines(&mut out, "output", &output);
            }
            let said = r
                .visible_message(view)
                // "expected X, not Y", or a file check's "out.txt differs ...: expected X, not Y".
                .is_some_and(|m| m.starts_with("expected") || m.contains(": expected "));
            if r.result == Some(false) && !said {
                if let Some(e) = r.visible_script(view).last() {
                    let (want, got) = (show(&e.expected.value, 200), show(&e.actual.value, 200));
                    // Cut to the same preview, the two would read alike and say nothing.
                    if e.expected.kind == e.actual.kind
                        && e.expected.value != e.actual.value
                        && want != got
                    {
                        out.push_str(&format!("    expected {want}, not {got}\n"));
                    }
                }
            }
        }
        if !self.integrity.ok {
            out.push_str(&paint(
                "31",
                "!! protected assignment files were replaced by the submission (the assignment's copies were used):",
            ));
            out.push('\n');
            for f in &self.integrity.flagged {
                out.push_str(&format!("    {} ({})\n", inert(&f.path), inert(&f.reason)));
            }
        }
        if let Some(s) = self
            .safety
            .as_ref()
            .filter(|s| !s.ok || s.failure.is_some())
        {
            let head = if s.enforced {
                "!! the static safety check found (the checks were not run):"
            } else {
                "!! the static safety check found:"
            };
            out.push_str(&paint("31", head));
            out.push('\n');
            for l in s.describe() {
                out.push_str(&format!("    {}\n", inert(&l)));
            }
        }
        for i in self.used_images() {
            out.push_str(&format!("image: {} ({})\n", inert(&i.name), i.digest));
        }
        let gvisor = self.gvisor_rows();
        if gvisor.len() == self.results.len() {
            out.push_str("runtime: gvisor\n");
        } else if !gvisor.is_empty() {
            out.push_str(&format!(
                "runtime: gvisor for {}; native for the rest\n",
                gvisor.join(", ")
            ));
        }
        out.push_str(&format!(
            "score: {}/{}\n",
            fmt_num(self.score()),
            fmt_num(self.max_score())
        ));
        out
    }
}

/// The most lines of a failed check's log the text report shows (its last ones).
const LOG_LINES: usize = 12;

/// `name:` and `lines` under it, indented, or their last [`LOG_LINES`] (`name (its end):`);
/// nothing when there are none.
fn last_lines(out: &mut String, name: &str, lines: &[&str]) {
    if lines.is_empty() {
        return;
    }
    let skip = lines.len().saturating_sub(LOG_LINES);
    let end = if skip > 0 { " (its end)" } else { "" };
    out.push_str(&format!("    {name}{end}:\n"));
    for l in &lines[skip..] {
        out.push_str(&format!("      {}\n", inert(l)));
    }
}

/// `s` with its control characters (C0 but the tab, DEL, C1) written out as `\u{1b}`: the text
/// report goes to a person's terminal, and a submission's output, a grader's test names or a
/// file's name could otherwise move the cursor, repaint a failed check as passed, set the
/// window's title or write the clipboard (OSC 52). Newlines are the caller's to split on.
pub fn inert(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(|c| c.is_control() && c != '\t') {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c.is_control() && c != '\t' {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

fn fmt_num(x: f64) -> String {
    if x.fract() == 0.0 {
        format!("{}", x as i64)
    } else {
        format!("{x:.2}")
    }
}

#[cfg(test)]
mod tests {

    use crate::report::model::*;
    use crate::report::test_rows::report;
    use serde_json::json;

    /// Staff's text shows a grader's own output when it worked (its last lines): the first
    /// place they look, as Gradescope's "Autograder Output". Students never see it there.
    #[test]
    fn staff_text_shows_a_graders_output_that_worked() {
        let mut r = report();
        let lines: String = (1..=20).map(|i| format!("line {i}\n")).collect();
        r.results[0].script = vec![ScriptEntry {
            expected: Observation::new("run", json!(null)),
            actual: Observation::new("output", lines),
        }];
        let staff = r.render_text(View::Staff, false);
        assert!(
            staff.contains("    output (its end):\n      line 9\n"),
            "{staff}"
        );
        assert!(
            staff.contains("      line 20\n") && !staff.contains("line 8\n"),
            "{staff}"
        );
        let student = r.render_text(View::Student, false);
        assert!(!student.contains("line 20"), "{student}");
    }

    /// A failed check's log (check50's) is shown in text, its last lines; never a hidden
    /// check's to students.
    #[test]
    fn a_failed_checks_log_ends_its_text_row() {
        let mut r = report();
        let log = |n: usize| ScriptEntry {
            expected: Observation::new("log", format!("log line {n}")),
            actual: Observation::new("log", format!("log line {n}")),
        };
        r.results[1].script = (1..=14).map(log).collect();
        r.results[0].script = vec![log(99)];
        let staff = r.render_text(View::Staff, false);
        assert!(
            staff.contains("    log (its end):\n      log line 3\n"),
            "{staff}"
        );
        assert!(staff.contains("      log line 14\n"), "{staff}");
        assert!(!staff.contains("log line 2\n"), "{staff}");
        assert!(
            !staff.contains("log line 99"),
            "a passed check's log: {staff}"
        );
        let student = r.render_text(View::Student, false);
        assert!(
            !student.contains("log line"),
            "a hidden check's log: {student}"
        );
        r.results[1].hidden = false;
        r.results[1].script.truncate(2);
        let student = r.render_text(View::Student, false);
        assert!(
            student.contains("    log:\n      log line 1\n      log line 2\n"),
            "{student}"
        );
    }

    /// A submission's text reaches the text report (its output in a message, a grader's test
    /// names, its file names): none of its control characters reaches the terminal, so it
    /// cannot repaint a failed check as passed, retitle the window or write the clipboard.
    #[test]
    fn the_text_report_writes_control_characters_out() {
        let mut r = report();
        let repaint = "\r\x1b[2K\x1b[1A\x1b[32m\u{2713} b works [2/2]\x1b[0m";
        r.results[1].hidden = false;
        r.results[1].description = format!("b works{repaint}");
        r.results[1].message = Some(format!(
            "exit 3\x1b]0;TITLE\x07\nsaid: \x1b]52;c;ZWNobw==\x07\u{9b}31m{repaint}"
        ));
        r.results[1].diagnostics = Some("\x1b]8;;http://x/\x07link".into());
        r.integrity = Integrity {
            ok: false,
            flagged: vec![IntegrityFlag {
                path: "a\x1b[8m.c".into(),
                reason: "replaced".into(),
            }],
        };
        for (view, color) in [
            (View::Staff, false),
            (View::Staff, true),
            (View::Student, true),
        ] {
            let t = r.render_text(view, color);
            // Only the report's own colours remain.
            let own = t
                .replace("\x1b[0m", "")
                .replace("\x1b[31m", "")
                .replace("\x1b[32m", "")
                .replace("\x1b[33m", "");
            assert!(!own.chars().any(|c| c.is_control() && c != '\n'), "{t:?}");
            assert!(t.contains("b works\\u{d}\\u{1b}[2K"), "{t:?}");
            assert!(t.contains("\\u{9b}31m"), "{t:?}");
        }
        assert!(r
            .render_text(View::Staff, false)
            .contains("a\\u{1b}[8m.c (replaced)"));
    }

    #[test]
    fn text_looks_like_check50() {
        let t = report().render_text(View::Student, false);
        assert!(t.contains("\u{2713} a works [2/2]"), "{t}");
        assert!(t.contains("\u{2717} b works (hidden) [0/2]"), "{t}");
        assert!(t.contains(HIDDEN_FAILED), "{t}");
        assert!(t.contains(":| c works"), "{t}");
        assert!(t.contains("score: 2/6"), "{t}");
    }
}
